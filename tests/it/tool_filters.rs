//! Seed 003 over real HTTP: include/exclude globs for the tools the LLM is offered and
//! for what `/mcp` serves, and `toggle_tool`, which switches one bot tool at runtime,
//! tells MCP clients in both eras, and survives a restart on the same database.

use crate::common;
use crate::fake_llm;

use std::time::Duration;

use common::*;
use fake_llm::Turn;
use porthole::bot::tools::ExecContext;
use serde_json::{Value, json};

fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

async fn listed_names(app: &impl BotUrl) -> Vec<String> {
    let reply = modern(app, 1, "tools/list", json!({})).await;
    reply.result()["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {}", reply.raw))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn llm_tool_globs_trim_what_the_model_is_offered() {
    let llm = fake_llm::start(vec![
        Turn::Text(vec!["fine"]),
        Turn::ToolCall("current_time", json!({})),
        Turn::Text(vec!["could not"]),
    ])
    .await;
    let app = start_bot_on_llm(
        &llm.url(),
        &[
            ("LLM_TOOLS_INCLUDE", "calc*, current_time, get_bot_*"),
            ("LLM_TOOLS_EXCLUDE", "current_*"),
        ],
    )
    .await;
    let r = call_tool(&app, "send_message", json!({"content": "hello"})).await;
    assert!(!is_error(&r), "{r}");
    let offered: Vec<String> = llm.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(offered, ["calculator", "get_bot_status"], "exclude wins");
    // The filter trims the offer, not the bot: every tool is still there.
    assert!(app.bot.tools.get("current_time").is_some());
    // A model that names an excluded tool anyway is refused, and the tool never runs.
    let r = call_tool(&app, "send_message", json!({"content": "what time is it?"})).await;
    assert!(!is_error(&r), "{r}");
    let tool_result = llm.requests()[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        tool_result.contains("not available to the model"),
        "{tool_result}"
    );
    assert_eq!(
        app.bot.tools.get("current_time").unwrap().stats.invocations,
        0
    );
    app.shutdown().await;
}

#[tokio::test]
async fn mcp_tool_globs_trim_what_the_endpoint_serves() {
    let app = start_bot(&[
        ("MCP_TOOLS_INCLUDE", "*_log,health,toggle_*"),
        ("MCP_TOOLS_EXCLUDE", "web_*"),
    ])
    .await;
    assert_eq!(
        listed_names(&app).await,
        ["health", "server_log", "toggle_mcp_server", "toggle_tool"]
    );
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let legacy_list = legacy(&app, &session, 2, "tools/list", json!({})).await;
    assert_eq!(legacy_list.result()["tools"].as_array().unwrap().len(), 4);
    let refused = modern(
        &app,
        3,
        "tools/call",
        json!({"name": "db_query", "arguments": {"sql": "SELECT 1"}}),
    )
    .await;
    assert!(
        refused.raw.contains("Unknown tool: db_query"),
        "a filtered-out tool cannot be called: {}",
        refused.raw
    );
    app.shutdown().await;
}

#[tokio::test]
async fn toggle_tool_announces_in_both_eras_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bot.db").display().to_string();
    let app = start_bot(&[("DATABASE_PATH", &db)]).await;
    let user = ExecContext::new(&["user"]);
    let offered = |app: &porthole::app::RunningApp| -> Vec<String> {
        app.bot
            .tools
            .llm_tools(&user)
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    assert!(offered(&app).contains(&"calculator".to_string()));

    // A legacy session's GET stream and a modern listen stream, both open.
    let (mut get_stream, mut listen_stream) = open_change_streams(&app, 5).await;

    let r = call_tool(
        &app,
        "toggle_tool",
        json!({"name": "calculator", "enabled": false}),
    )
    .await;
    assert!(!is_error(&r), "{r}");
    assert_eq!(structured(&r)["tool"]["enabled"], false);
    assert_eq!(structured(&r)["saved"], true);
    assert!(
        stream_announces(&mut get_stream, "notifications/tools/list_changed").await,
        "legacy GET stream"
    );
    assert!(
        stream_announces(&mut listen_stream, "notifications/tools/list_changed").await,
        "modern listen stream"
    );
    assert!(!offered(&app).contains(&"calculator".to_string()));
    let run = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "calculator", "parameters": {"expression": "1+1"}}),
    )
    .await;
    assert!(error_text(&run).contains("disabled"), "{run}");

    let unknown = call_tool(
        &app,
        "toggle_tool",
        json!({"name": "calculater", "enabled": false}),
    )
    .await;
    assert!(is_error(&unknown));
    assert!(
        error_text(&unknown).contains("did you mean calculator"),
        "{unknown}"
    );
    drop(get_stream);
    drop(listen_stream);
    app.shutdown().await;

    // A new process on the same database: still disabled, until enabled again.
    let app = start_bot(&[("DATABASE_PATH", &db)]).await;
    let r = call_tool(&app, "get_tool_schema", json!({"name": "calculator"})).await;
    assert_eq!(structured(&r)["enabled"], false, "{r}");
    assert!(!offered(&app).contains(&"calculator".to_string()));
    let r = call_tool(
        &app,
        "toggle_tool",
        json!({"name": "calculator", "enabled": true}),
    )
    .await;
    assert_eq!(structured(&r)["tool"]["enabled"], true);
    app.shutdown().await;
    let app = start_bot(&[("DATABASE_PATH", &db)]).await;
    assert!(offered(&app).contains(&"calculator".to_string()));
    app.shutdown().await;
}

/// A disabled MCP tool stays disabled when its server reconnects, and after a restart
/// once the server's tools appear again.
#[tokio::test]
async fn a_disabled_mcp_tool_stays_disabled_across_reconnects_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bot.db").display().to_string();
    let Some(mcp_json) = stdio_fixture_config(dir.path(), json!({})) else {
        return;
    };
    let settings = [
        ("DATABASE_PATH", db.as_str()),
        ("MCP_SERVERS_CONFIG", mcp_json.as_str()),
    ];
    async fn echo_state(app: &porthole::app::RunningApp) -> bool {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Some(tool) = app.bot.tools.get("mcp.fixture__echo") {
                    return tool.enabled;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("the fixture's tools appear")
    }
    let app = start_bot(&settings).await;
    assert!(echo_state(&app).await);
    let r = call_tool(
        &app,
        "toggle_tool",
        json!({"name": "mcp.fixture__echo", "enabled": false}),
    )
    .await;
    assert!(!is_error(&r), "{r}");
    for enabled in [false, true] {
        let r = call_tool(
            &app,
            "toggle_mcp_server",
            json!({"name": "fixture", "enabled": enabled}),
        )
        .await;
        assert!(!is_error(&r), "{r}");
    }
    assert!(!echo_state(&app).await, "still disabled after a reconnect");
    assert!(app.bot.tools.get("mcp.fixture__add").unwrap().enabled);
    app.shutdown().await;

    let app = start_bot(&settings).await;
    assert!(!echo_state(&app).await, "still disabled after a restart");
    app.shutdown().await;
}
