//! Seed 004: the bot as an MCP client of a server that speaks the older HTTP+SSE
//! transport (`"type": "sse"` in `mcp.json`), here the reference "everything" server
//! started in its SSE mode, as a real subprocess on a free port, driven through the
//! bot's own `/mcp` over real HTTP: namespacing, routing, stats and toggling.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

/// Starts the everything server in SSE mode on a free port; returns it with its port.
async fn start_everything_sse() -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new("node")
        .arg(EVERYTHING_SERVER)
        .arg("sse")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("running on port") {
                return;
            }
        }
        panic!("the everything server exited before listening");
    })
    .await
    .expect("the everything server starts");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

async fn server_status(app: &impl BotUrl) -> Value {
    let r = call_tool(app, "list_mcp_servers", json!({})).await;
    structured(&r)["servers"][0].clone()
}

#[tokio::test]
async fn an_http_sse_server_is_namespaced_routed_counted_and_toggled() {
    if !has_everything_server() {
        return;
    }
    let (mut everything, port) = start_everything_sse().await;
    let dir = tempfile::tempdir().unwrap();
    let mcp_json = dir.path().join("mcp.json");
    std::fs::write(
        &mcp_json,
        json!({"mcpServers": {"legacy": {
            "type": "sse",
            "url": format!("http://127.0.0.1:{port}/sse"),
            "headers": {"X-Probe": "sse-client-test"},
            "timeoutMs": 15000
        }}})
        .to_string(),
    )
    .unwrap();
    let mcp_json = mcp_json.display().to_string();
    let app = start_bot(&[("MCP_SERVERS_CONFIG", &mcp_json)]).await;
    wait_for_tool(&app, "mcp.legacy__echo", true).await;

    let server = server_status(&app).await;
    assert_eq!(server["name"], "legacy");
    assert_eq!(server["transport"], "sse");
    assert_eq!(server["state"], "connected", "{server}");
    assert!(server["protocol_version"].is_string(), "{server}");
    assert!(server["tool_count"].as_u64().unwrap() > 3, "{server}");

    // Routing: the namespaced call reaches the server and its answer comes back.
    let r = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "mcp.legacy__echo", "parameters": {"message": "over the old transport"}}),
    )
    .await;
    assert!(!is_error(&r), "{r}");
    assert_eq!(structured(&r)["source"], "mcp");
    assert!(r.to_string().contains("over the old transport"), "{r}");
    // Concurrent calls are matched to their own answers.
    let calls = (0..5).map(|n| {
        let url = app.url();
        tokio::spawn(async move {
            let r = call_tool(
                &url,
                "run_tool",
                json!({"tool_name": "mcp.legacy__echo", "parameters": {"message": format!("call {n}")}}),
            )
            .await;
            (n, r)
        })
    });
    for call in calls {
        let (n, r) = call.await.unwrap();
        assert!(r.to_string().contains(&format!("call {n}")), "{r}");
    }

    // Stats per server and per tool.
    let server = server_status(&app).await;
    assert_eq!(server["stats"]["invocations"], 6, "{server}");
    assert_eq!(server["stats"]["errors"], 0);
    let echo = server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .cloned()
        .expect("echo has stats");
    assert_eq!(echo["invocations"], 6);

    // One tool toggled off and on, then the whole server.
    let r = call_tool(
        &app,
        "toggle_tool",
        json!({"name": "mcp.legacy__echo", "enabled": false}),
    )
    .await;
    assert!(!is_error(&r), "{r}");
    let refused = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "mcp.legacy__echo", "parameters": {"message": "x"}}),
    )
    .await;
    assert!(error_text(&refused).contains("disabled"), "{refused}");
    call_tool(
        &app,
        "toggle_tool",
        json!({"name": "mcp.legacy__echo", "enabled": true}),
    )
    .await;
    let r = call_tool(
        &app,
        "toggle_mcp_server",
        json!({"name": "legacy", "enabled": false}),
    )
    .await;
    assert_eq!(structured(&r)["server"]["state"], "disabled", "{r}");
    wait_for_tool(&app, "mcp.legacy__echo", false).await;
    let r = call_tool(
        &app,
        "toggle_mcp_server",
        json!({"name": "legacy", "enabled": true}),
    )
    .await;
    assert!(!is_error(&r), "{r}");
    wait_for_tool(&app, "mcp.legacy__echo", true).await;
    let r = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "mcp.legacy__echo", "parameters": {"message": "after reconnect"}}),
    )
    .await;
    assert!(r.to_string().contains("after reconnect"), "{r}");

    // The server going away is noticed: calls fail with a clear message, not a hang.
    let _ = everything.kill().await;
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let state = server_status(&app).await["state"].clone();
            if state != "connected" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the lost stream is noticed");
    app.shutdown().await;
}

/// A stream that never names its endpoint (here: a Streamable HTTP server, the bot
/// itself, configured as `"type": "sse"` by mistake) fails with a message saying so.
#[tokio::test]
async fn a_server_without_an_endpoint_event_fails_with_a_hint() {
    let target = start_bot(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let mcp_json = dir.path().join("mcp.json");
    std::fs::write(
        &mcp_json,
        json!({"mcpServers": {"wrong": {
            "type": "sse",
            "url": format!("{}/", target.url()),
            "timeoutMs": 1000
        }}})
        .to_string(),
    )
    .unwrap();
    let mcp_json = mcp_json.display().to_string();
    let app = start_bot(&[("MCP_SERVERS_CONFIG", &mcp_json)]).await;
    let error = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(error) = server_status(&app).await["last_error"].as_str() {
                return error.to_string();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the failure is reported");
    assert!(
        error.contains("event stream") || error.contains("endpoint"),
        "{error}"
    );
    app.shutdown().await;
    target.shutdown().await;
}
