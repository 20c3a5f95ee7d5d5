//! Seed 000: the bot reports on itself. A fake OpenAI-compatible provider (a real HTTP
//! server) makes the model call `list_available_tools` and `get_bot_status`, once for a
//! user (the web API, role `user`) and once for an admin (`/mcp` `send_message`), and
//! the test reads what each tool answered from the requests the provider received.

use crate::common;
use crate::fake_llm;

use common::*;
use fake_llm::Turn;
use serde_json::{Value, json};

const LLM_KEY: &str = "sk-self-report-key-0123456789abcdef";

/// The tool results the bot sent back to the model, in order.
fn tool_results(requests: &[Value]) -> Vec<Value> {
    requests
        .iter()
        .filter_map(|r| {
            let last = r["messages"].as_array()?.last()?;
            (last["role"] == "tool").then(|| {
                let content = last["content"].as_str().unwrap_or_default();
                serde_json::from_str(content).unwrap_or_else(|_| json!(content))
            })
        })
        .collect()
}

fn names(listing: &Value) -> Vec<String> {
    listing["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {listing}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn the_model_reports_status_and_tools_per_role() {
    let turn = |tool: &'static str| {
        [
            Turn::ToolCall(tool, json!({})),
            Turn::Text(vec!["Here is what I found."]),
        ]
    };
    let mut script = Vec::new();
    for _role in ["user", "admin"] {
        script.extend(turn("list_available_tools"));
        script.extend(turn("get_bot_status"));
    }
    let llm = fake_llm::start(script).await;

    // An admin-only user tool, and (when python3 is there) an MCP server with traffic.
    let dir = tempfile::tempdir().unwrap();
    let tools_dir = dir.path().join("user-tools");
    std::fs::create_dir_all(&tools_dir).unwrap();
    std::fs::write(
        tools_dir.join("admin_probe.json"),
        json!({"name": "admin_probe", "description": "Only admins may run this.",
               "command": ["true"], "required_roles": ["admin"]})
        .to_string(),
    )
    .unwrap();
    let mcp_json = stdio_fixture_config(
        dir.path(),
        json!({"env": {"FIXTURE_SECRET": "do-not-show-this-value"}, "requiredRoles": ["admin"]}),
    );
    let has_python = mcp_json.is_some();
    let no_servers = dir.path().join("no-mcp.json").display().to_string();
    let app = start_bot_on_llm(
        &llm.url(),
        &[
            ("LLM_API_KEY", LLM_KEY),
            ("AGENT_MAX_STEPS", "5"),
            ("USER_TOOLS_DIR", &tools_dir.display().to_string()),
            (
                "MCP_SERVERS_CONFIG",
                mcp_json.as_deref().unwrap_or(&no_servers),
            ),
        ],
    )
    .await;
    if has_python {
        wait_for_tool(&app, "mcp.fixture__echo", true).await;
        let r = call_tool(
            &app,
            "run_tool",
            json!({"tool_name": "mcp.fixture__echo", "parameters": {"text": "x"}}),
        )
        .await;
        assert!(!is_error(&r), "{r}");
        let r = call_tool(
            &app,
            "run_tool",
            json!({"tool_name": "mcp.fixture__fail", "parameters": {"message": "boom"}}),
        )
        .await;
        assert!(is_error(&r) || r.to_string().contains("boom"), "{r}");
    }

    // An admin runs the admin-only tool, so it has usage a chat user must not see.
    let r = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "admin_probe", "parameters": {}}),
    )
    .await;
    assert!(!is_error(&r), "{r}");

    // A user asks over the web API (role `user`), twice.
    for question in ["what can you do?", "what is your status?"] {
        let reply = client()
            .post(format!("{}/api/messages", app.url()))
            .json(&json!({"content": question}))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    }
    // An admin asks through /mcp send_message (role `admin`), twice.
    for question in ["what can you do?", "what is your status?"] {
        let r = call_tool(&app, "send_message", json!({"content": question})).await;
        assert!(!is_error(&r), "{r}");
    }

    let requests = llm.requests();
    assert_eq!(requests.len(), 8, "two model rounds per question");
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"get_bot_status"), "{offered:?}");
    assert!(offered.contains(&"list_available_tools"), "{offered:?}");

    let results = tool_results(&requests);
    assert_eq!(results.len(), 4, "{results:?}");
    let (user_tools, user_status, admin_tools, admin_status) =
        (&results[0], &results[1], &results[2], &results[3]);

    assert_eq!(user_tools["roles"], json!(["user"]));
    let user_names = names(user_tools);
    assert!(
        user_names.contains(&"calculator".to_string()),
        "{user_names:?}"
    );
    assert!(
        !user_names.contains(&"admin_probe".to_string()),
        "a user is not shown an admin-only tool: {user_names:?}"
    );
    assert_eq!(admin_tools["roles"], json!(["admin"]));
    let admin_names = names(admin_tools);
    assert!(
        admin_names.contains(&"admin_probe".to_string()),
        "{admin_names:?}"
    );
    assert!(admin_names.len() > user_names.len());
    if has_python {
        assert!(admin_names.contains(&"mcp.fixture__echo".to_string()));
    }

    for status in [user_status, admin_status] {
        assert_eq!(status["llm"]["model"], "fake-model", "{status}");
        assert_eq!(status["llm"]["provider"], "openai");
        assert!(status["uptime_secs"].is_u64());
        assert!(status["memory"]["resident_bytes"].is_u64(), "{status}");
        assert_eq!(status["settings"]["agent_max_steps"], 5);
        assert!(status["settings"]["tool_timeout_secs"].is_u64());
        assert!(status["settings"]["llm_timeout_secs"].is_u64());
        assert!(status["tools"]["total"].as_u64().unwrap() >= 10);
        if has_python {
            let server = &status["mcp_servers"][0];
            assert_eq!(server["name"], "fixture", "{status}");
            assert_eq!(server["state"], "connected");
            assert!(server["stats"]["invocations"].as_u64().unwrap() >= 2);
            assert!(server["stats"]["errors"].as_u64().unwrap() >= 1);
            assert!(server["stats"]["mean_ms"].is_number());
            let tools = server["tools"].as_array().unwrap();
            if status == admin_status {
                let echo = tools
                    .iter()
                    .find(|t| t["name"] == "echo")
                    .expect("per-tool stats");
                assert_eq!(echo["invocations"], 1);
                assert!(echo["p95_ms"].is_number());
            } else {
                // The server is the admins' (`requiredRoles`): a chat user's turn gets
                // its counts, not its tools' names.
                assert!(tools.is_empty(), "{status}");
            }
        }
        let text = status.to_string();
        for secret in [LLM_KEY, TOKEN, "do-not-show-this-value"] {
            assert!(!text.contains(secret), "a secret leaked: {text}");
        }
    }
    let used = |status: &Value| -> Vec<String> {
        status["tools"]["usage"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect()
    };
    assert!(
        used(admin_status).contains(&"admin_probe".to_string()),
        "{admin_status}"
    );
    assert!(
        !used(user_status).contains(&"admin_probe".to_string()),
        "a chat user's status names no admin-only tool: {user_status}"
    );
    if has_python {
        // The failed call was an admin's `run_tool`: its error text is shown to admins,
        // and a chat user's turn gets the counts only.
        let servers = |status: &Value| status["mcp_servers"].to_string();
        assert!(servers(admin_status).contains("boom"), "{admin_status}");
        assert!(!servers(user_status).contains("boom"), "{user_status}");
    }
    app.shutdown().await;
}
