//! Every diagnostics tool over real HTTP against a bot with a real store and services:
//! happy paths, bad arguments, truncation, redaction, notifications, timeouts.

use crate::common;
use crate::fake_llm;

use std::time::Duration;

use common::*;
use fake_llm::Turn;
use futures::StreamExt;
use porthole::bot::schedule::RunAs;
use serde_json::{Value, json};

fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

#[tokio::test]
async fn every_tool_is_listed_with_schemas_and_honest_annotations() {
    let app = start_bot(&[]).await;
    let reply = modern(&app, 1, "tools/list", json!({})).await;
    let tools = reply.result()["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for expected in [
        "server_log",
        "web_log",
        "health",
        "db_query",
        "list_conversations",
        "list_messages",
        "list_tools",
        "get_tool_schema",
        "run_tool",
        "list_agents",
        "get_agent_state",
        "list_mcp_servers",
        "toggle_mcp_server",
        "toggle_tool",
        "list_tasks",
        "run_task",
        "list_skills",
        "get_config",
        "send_message",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        assert!(!tool["description"].as_str().unwrap().is_empty(), "{name}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        input_schema_is_closed_and_its_defaults_valid(name, &tool["inputSchema"]);
        assert!(
            tool["outputSchema"].is_object(),
            "{name} has an output schema"
        );
        let destructive = tool["annotations"]["destructiveHint"] == true;
        let read_only = tool["annotations"]["readOnlyHint"] == true;
        let should_be_destructive = matches!(
            name,
            "db_query"
                | "run_tool"
                | "toggle_mcp_server"
                | "toggle_tool"
                | "run_task"
                | "send_message"
                | "delete_replay_set"
        );
        assert_eq!(destructive, should_be_destructive, "{name}");
        // set_log_level changes state but destroys nothing; replays spend tokens.
        let changes_something = matches!(
            name,
            "set_log_level"
                | "replay_llm_call"
                | "replay_llm_calls"
                | "replay_turn"
                | "save_replay_set"
        );
        assert_eq!(
            read_only,
            !should_be_destructive && !changes_something,
            "{name}"
        );
        // Tools whose answer can be large say how large, from their own byte budget
        // (max_bytes at most 1 MiB), so a client does not cut what was asked for.
        let declared = &tool["_meta"]["anthropic/maxResultSizeChars"];
        if matches!(
            name,
            "get_trace"
                | "get_llm_call"
                | "db_query"
                | "server_log"
                | "web_log"
                | "replay_llm_call"
                | "replay_llm_calls"
                | "replay_turn"
        ) {
            assert_eq!(declared, 1024 * 1024, "{name}");
        } else {
            assert!(declared.is_null(), "{name}: {declared}");
        }
    }
    app.shutdown().await;
}

#[tokio::test]
async fn bad_arguments_name_the_field() {
    let app = start_bot(&[]).await;
    let r = call_tool(&app, "server_log", json!({"limit": 5000})).await;
    assert!(is_error(&r));
    assert!(error_text(&r).contains("limit"), "{}", error_text(&r));
    let r = call_tool(&app, "server_log", json!({"level": "loud"})).await;
    assert!(error_text(&r).contains("level"), "{}", error_text(&r));
    let r = call_tool(&app, "server_log", json!({"since": "yesterday"})).await;
    assert!(error_text(&r).contains("ISO 8601"), "{}", error_text(&r));
    let r = call_tool(&app, "db_query", json!({})).await;
    assert!(
        error_text(&r).contains("\"query\" is a required property"),
        "{}",
        error_text(&r)
    );
    let r = call_tool(&app, "list_messages", json!({"conversationId": "nope"})).await;
    assert!(error_text(&r).contains("list_conversations"));
    let r = call_tool(&app, "run_tool", json!({"name": "calculater"})).await;
    assert!(
        error_text(&r).contains("did you mean calculator"),
        "{}",
        error_text(&r)
    );
    let r = call_tool(&app, "get_tool_schema", json!({"name": "recal"})).await;
    assert!(error_text(&r).contains("recall"));
    // A huge argument is not echoed back whole; the rule it broke still shows.
    let huge = "y".repeat(150_000);
    let r = call_tool(&app, "send_message", json!({"content": huge})).await;
    assert!(
        error_text(&r).len() < 1_000,
        "{} bytes",
        error_text(&r).len()
    );
    assert!(
        error_text(&r).contains("longer than 100000"),
        "{}",
        error_text(&r)
    );
    let r = call_tool(&app, "run_task", json!({"id": 42})).await;
    assert!(error_text(&r).contains("no task with id 42"));
    let r = call_tool(
        &app,
        "toggle_mcp_server",
        json!({"name": "ghost", "enabled": true}),
    )
    .await;
    assert!(is_error(&r));
    app.shutdown().await;
}

#[tokio::test]
async fn logs_filter_page_and_keep_mcp_lines_apart() {
    let app = start_bot(&[]).await;
    // The bot's own log is not captured in tests (no global layer); web lines are.
    app.bot.web.log_sink.record(porthole::bot::WebLogLine {
        level: "warn".into(),
        message: "probe-alpha from the page".into(),
        timestamp: None,
    });
    app.bot.web.log_sink.record(porthole::bot::WebLogLine {
        level: "log".into(),
        message: "just chatter".into(),
        timestamp: None,
    });
    let r = call_tool(&app, "web_log", json!({"level": "warn"})).await;
    let lines = structured(&r)["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["message"], "probe-alpha from the page");
    assert_eq!(lines[0]["source"], "web");
    let cursor = structured(&r)["cursor"].as_u64().unwrap();
    let again = call_tool(&app, "web_log", json!({"since": cursor})).await;
    assert!(
        structured(&again)["lines"].as_array().unwrap().is_empty(),
        "nothing new since the cursor"
    );
    let grep = call_tool(
        &app,
        "web_log",
        json!({"grep": "PROBE", "case_insensitive": true}),
    )
    .await;
    assert_eq!(structured(&grep)["lines"].as_array().unwrap().len(), 1);
    let limited = call_tool(&app, "web_log", json!({"limit": 1})).await;
    assert_eq!(structured(&limited)["truncated"], true);
    assert!(
        structured(&limited)["note"]
            .as_str()
            .unwrap()
            .contains("limit")
    );
    // Server lines never include web lines.
    let server = call_tool(&app, "server_log", json!({"grep": "probe-alpha"})).await;
    assert!(structured(&server)["lines"].as_array().unwrap().is_empty());
    app.shutdown().await;
}

#[tokio::test]
async fn health_reports_live_figures() {
    let app = start_bot(&[]).await;
    let _session = legacy_session(&app, "2025-11-25", json!({})).await;
    let r = call_tool(&app, "health", json!({})).await;
    let h = structured(&r);
    assert!(h["uptime_secs"].is_u64());
    assert!(h["memory_rss_bytes"].as_u64().unwrap() > 1_000_000);
    assert_eq!(h["llm"]["provider"], "offline");
    assert_eq!(h["mcp"]["live_sessions"], 1);
    assert_eq!(h["agents"]["active"], 1, "the supervisor");
    assert_eq!(h["log_buffer"]["capacity"], 1000);
    assert_eq!(h["websocket_clients"], 0);
    assert!(
        h["memory_heap_bytes"].is_null(),
        "the test harness's allocator is not mimalloc, so no heap figure: {h}"
    );
    app.shutdown().await;
}

/// The binary's allocator is mimalloc: `health` gives its heap (committed bytes), which
/// the resident memory contains.
#[tokio::test]
async fn health_reports_the_binarys_heap() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bot, lines) = spawn_porthole(dir.path(), &[("MCP_SERVER_SECRET", TOKEN)]);
    let url = format!("http://127.0.0.1:{}", listening_port(lines).await);
    let r = call_tool(&url, "health", json!({})).await;
    let h = structured(&r);
    let heap = h["memory_heap_bytes"].as_u64().unwrap_or_default();
    let rss = h["memory_rss_bytes"].as_u64().unwrap_or_default();
    assert!(heap > 100_000, "{h}");
    assert!(heap < rss * 4, "committed heap in line with RSS: {h}");
    let _ = bot.kill().await;
}

#[tokio::test]
async fn db_query_reads_writes_maps_types_and_truncates() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("d.db").display().to_string();
    let app = start_bot(&[("DATABASE_PATH", &db)]).await;
    let r = call_tool(
        &app,
        "db_query",
        json!({"sql": "CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n)"}),
    )
    .await;
    assert!(!is_error(&r), "{r}");
    let r = call_tool(
        &app,
        "db_query",
        json!({"sql": "INSERT INTO t VALUES (?1, ?2, ?3, x'00ff', NULL)", "params": [7, 2.5, "seven"]}),
    )
    .await;
    assert_eq!(structured(&r)["rows_affected"], 1);
    for _ in 0..4 {
        call_tool(
            &app,
            "db_query",
            json!({"sql": "INSERT INTO t SELECT * FROM t LIMIT 1"}),
        )
        .await;
    }
    let r = call_tool(
        &app,
        "db_query",
        json!({"sql": "SELECT * FROM t", "limit": 3}),
    )
    .await;
    let s = structured(&r);
    assert_eq!(s["columns"], json!(["i", "r", "s", "b", "n"]));
    assert_eq!(
        s["rows"][0],
        json!([7, 2.5, "seven", {"base64": "AP8="}, null])
    );
    assert_eq!(s["row_count"], 3);
    assert_eq!(s["truncated"], true);
    // Rows beyond the answer's byte budget (the size tools/list declares) are cut.
    let r = call_tool(
        &app,
        "db_query",
        json!({"sql": "WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < 20) \
                       SELECT hex(randomblob(60000)) FROM n"}),
    )
    .await;
    let s = structured(&r);
    let kept = s["row_count"].as_u64().unwrap();
    assert!((1..20).contains(&kept), "{kept} rows of 120 kB kept");
    assert_eq!(s["truncated"], true);
    assert!(s["rows"].to_string().len() <= 1024 * 1024);
    let r = call_tool(&app, "db_query", json!({"sql": "SELEC nonsense"})).await;
    assert!(is_error(&r));
    assert!(
        error_text(&r).contains("syntax error"),
        "{}",
        error_text(&r)
    );
    app.shutdown().await;

    // Read-only mode: SQLite itself refuses the write.
    let app = start_bot(&[("DATABASE_PATH", &db), ("DB_QUERY_READONLY", "true")]).await;
    let r = call_tool(&app, "db_query", json!({"sql": "DELETE FROM t"})).await;
    assert!(is_error(&r));
    assert!(
        error_text(&r).contains("DB_QUERY_READONLY"),
        "{}",
        error_text(&r)
    );
    let r = call_tool(
        &app,
        "db_query",
        json!({"sql": "SELECT COUNT(*) AS c FROM t"}),
    )
    .await;
    assert_eq!(structured(&r)["rows"][0][0], 5, "nothing was deleted");
    // Writes by the bot itself still work afterwards.
    app.bot
        .store
        .create_conversation("still writable")
        .await
        .unwrap();
    app.shutdown().await;
}

#[tokio::test]
async fn conversations_messages_and_send_message_with_the_offline_provider() {
    let app = start_bot(&[]).await;
    let r = call_tool(
        &app,
        "send_message",
        json!({"content": "/run calculator {\"expression\": \"1+2\"}"}),
    )
    .await;
    let s = structured(&r).clone();
    assert!(s["response"].as_str().unwrap().contains('3'), "{s}");
    let id = s["conversation_id"].as_str().unwrap().to_string();
    let r = call_tool(
        &app,
        "send_message",
        json!({"content": "/help", "conversation_id": id}),
    )
    .await;
    assert_eq!(structured(&r)["conversation_id"], id.as_str());

    let r = call_tool(&app, "list_conversations", json!({"limit": 5})).await;
    let conversations = structured(&r)["conversations"].as_array().unwrap();
    assert_eq!(conversations.len(), 1);
    assert_eq!(conversations[0]["message_count"], 6);

    let r = call_tool(
        &app,
        "list_messages",
        json!({"conversationId": id, "limit": 2}),
    )
    .await;
    let page = structured(&r);
    assert_eq!(page["messages"].as_array().unwrap().len(), 2);
    assert_eq!(page["has_more"], true);
    let first_id = page["messages"][0]["id"].as_i64().unwrap();
    let r = call_tool(
        &app,
        "list_messages",
        json!({"conversationId": id, "before": first_id, "limit": 10}),
    )
    .await;
    let older = structured(&r)["messages"].as_array().unwrap();
    assert_eq!(older.len(), 4);
    assert_eq!(older[0]["role"], "user");
    assert!(
        older
            .windows(2)
            .all(|w| w[0]["id"].as_i64() < w[1]["id"].as_i64()),
        "stable order"
    );

    let r = call_tool(
        &app,
        "send_message",
        json!({"content": "x", "conversation_id": "missing"}),
    )
    .await;
    assert!(error_text(&r).contains("list_conversations"));
    app.shutdown().await;
}

#[tokio::test]
async fn send_message_with_a_model_times_out_cleanly() {
    let llm = fake_llm::start(vec![
        Turn::Text(vec!["Hello ", "from the fake model."]),
        Turn::Hang,
    ])
    .await;
    let app = start_bot_on_llm(&llm.url(), &[("MCP_SEND_MESSAGE_TIMEOUT_SECS", "1")]).await;
    let r = call_tool(&app, "send_message", json!({"content": "hi"})).await;
    assert_eq!(structured(&r)["response"], "Hello from the fake model.");
    let id = structured(&r)["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();

    let r = call_tool(
        &app,
        "send_message",
        json!({"content": "and now?", "conversation_id": id}),
    )
    .await;
    assert!(is_error(&r));
    assert!(
        error_text(&r).contains("MCP_SEND_MESSAGE_TIMEOUT_SECS"),
        "{}",
        error_text(&r)
    );
    assert!(error_text(&r).contains(&id));
    // The agent stopped and the conversation is consistent: idle, user message kept.
    let state = call_tool(&app, "get_agent_state", json!({})).await;
    assert_eq!(structured(&state)["status"], "idle");
    let history = app.bot.store.conversation_history(&id).await.unwrap();
    assert_eq!(history.len(), 3);
    app.shutdown().await;
}

#[tokio::test]
async fn closing_the_stream_cancels_send_message() {
    let llm = fake_llm::start(vec![Turn::Hang]).await;
    let base = format!("{}/v1", llm.url());
    let app = start_bot(&[("LLM_PROVIDER", "openai"), ("LLM_BASE_URL", &base)]).await;
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_message",
        "arguments":{"content":"think hard"},"_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": "t"}}});
    let response = client()
        .post(format!("{}/mcp", app.url()))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "send_message")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    // Progress arrives (the turn started), the agent is busy...
    let mut stream = response.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    assert!(first.is_some());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(app.bot.supervisor.state().status, "processing");
    // ...and closing the stream stops it.
    drop(stream);
    let idle = tokio::time::timeout(Duration::from_secs(5), async {
        while app.bot.supervisor.state().status != "idle" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(idle.is_ok(), "the agent's work was cancelled");
    app.shutdown().await;
}

#[tokio::test]
async fn tool_agent_task_and_skill_tools_reach_real_services() {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    std::fs::create_dir_all(skills.join("triage")).unwrap();
    std::fs::write(
        skills.join("triage/SKILL.md"),
        "---\nname: triage\ndescription: Sort incoming issues\n---\n",
    )
    .unwrap();
    let skills = skills.display().to_string();
    let app = start_bot(&[("SKILLS_DIR", &skills)]).await;

    // With name, description and input schema, as the design lists them.
    let r = call_tool(&app, "list_tools", json!({"source": "native"})).await;
    let native = structured(&r)["native"].as_array().unwrap();
    let status = native
        .iter()
        .find(|t| t["name"] == "get_bot_status")
        .unwrap();
    assert_eq!(status["internal"], false);
    assert!(native.iter().all(|t| t["input_schema"].is_object()));
    let short = call_tool(&app, "list_tools", json!({"include_schemas": false})).await;
    let short = structured(&short)["native"].as_array().unwrap();
    assert!(short.iter().all(|t| t.get("input_schema").is_none()));
    let r = call_tool(&app, "get_tool_schema", json!({"name": "calculator"})).await;
    assert_eq!(
        structured(&r)["input_schema"]["required"],
        json!(["expression"])
    );

    // run_tool runs as admin: internal tools are allowed; results are raw.
    let r = call_tool(
        &app,
        "run_tool",
        json!({"name": "calculator", "arguments": {"expression": "3*3"}}),
    )
    .await;
    assert_eq!(structured(&r)["result"]["result"], 9.0);
    let r = call_tool(&app, "run_tool", json!({"name": "get_bot_status"})).await;
    assert!(structured(&r)["result"]["tools"]["total"].as_u64().unwrap() >= 9);
    let r = call_tool(
        &app,
        "run_tool",
        json!({"name": "calculator", "arguments": {"expression": 5}}),
    )
    .await;
    assert!(error_text(&r).contains("/expression"), "{}", error_text(&r));
    let r = call_tool(&app, "list_tools", json!({})).await;
    let calc = structured(&r)["native"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "calculator")
        .unwrap()
        .clone();
    assert_eq!(calc["stats"]["invocations"], 1);

    let r = call_tool(&app, "list_agents", json!({})).await;
    assert_eq!(structured(&r)["agents"][0]["role"], "supervisor");
    let r = call_tool(&app, "get_agent_state", json!({})).await;
    assert_eq!(structured(&r)["status"], "idle");

    let task = app
        .bot
        .schedule
        .create(
            "clock",
            "",
            "0 0 * * *",
            json!({"tool": "current_time"}),
            RunAs::User,
        )
        .await
        .unwrap();
    let r = call_tool(&app, "list_tasks", json!({})).await;
    assert_eq!(structured(&r)["tasks"][0]["name"], "clock");
    let r = call_tool(&app, "run_task", json!({"id": task.id})).await;
    assert_eq!(structured(&r)["status"], "ok");
    let r = call_tool(&app, "list_tasks", json!({})).await;
    assert!(structured(&r)["tasks"][0]["last_run"].is_string());

    let r = call_tool(&app, "list_skills", json!({})).await;
    assert_eq!(structured(&r)["skills"][0]["name"], "triage");
    app.shutdown().await;
}

/// Secrets planted everywhere a secret can come from never appear in any tool output.
#[tokio::test]
async fn no_secret_leaves_through_any_tool() {
    const PROVIDER_KEY: &str = "sk-provider-0123456789abcdefghij";
    const HEADER_TOKEN: &str = "remote-header-token-9876543210";
    const ENV_SECRET: &str = "planted-env-secret-value-5555";
    // SAFETY: tests in this binary do not read this variable concurrently in a way that matters.
    unsafe { std::env::set_var("PLANTED_SERVICE_PASSWORD", ENV_SECRET) };
    let dir = tempfile::tempdir().unwrap();
    let mcp_json = dir.path().join("mcp.json");
    std::fs::write(
        &mcp_json,
        json!({"mcpServers": {"remote": {"url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": format!("Bearer {HEADER_TOKEN}")}}}})
        .to_string(),
    )
    .unwrap();
    let mcp_json = mcp_json.display().to_string();
    let app = start_bot(&[
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", "http://127.0.0.1:9/v1"),
        ("LLM_API_KEY", PROVIDER_KEY),
        ("MCP_SERVERS_CONFIG", &mcp_json),
    ])
    .await;
    // Put secrets into the data and logs too.
    let c = app
        .bot
        .store
        .create_conversation(&format!("key is {PROVIDER_KEY}"))
        .await
        .unwrap();
    app.bot.web.log_sink.record(porthole::bot::WebLogLine {
        level: "error".into(),
        message: format!("leaked {ENV_SECRET} and Authorization: Bearer {HEADER_TOKEN}"),
        timestamp: None,
    });
    let mut outputs = Vec::new();
    for (tool, args) in [
        ("get_config", json!({})),
        ("health", json!({})),
        ("list_mcp_servers", json!({})),
        ("web_log", json!({})),
        ("server_log", json!({"include_mcp": true})),
        ("list_conversations", json!({})),
        ("list_messages", json!({"conversationId": c.id})),
        (
            "db_query",
            json!({"sql": "SELECT title FROM conversations"}),
        ),
        ("run_tool", json!({"name": "get_bot_status"})),
        ("list_tools", json!({"include_schemas": true})),
    ] {
        outputs.push(call_tool(&app, tool, args).await.to_string());
    }
    for uri in [
        "porthole://config",
        "porthole://logs/web",
        &format!("porthole://conversations/{}", c.id),
    ] {
        outputs.push(
            modern(&app, 3, "resources/read", json!({"uri": uri}))
                .await
                .raw,
        );
    }
    for output in &outputs {
        for secret in [PROVIDER_KEY, HEADER_TOKEN, ENV_SECRET, TOKEN] {
            assert!(!output.contains(secret), "{secret} leaked in {output}");
        }
    }
    assert!(outputs[0].contains("[REDACTED]"));
    app.shutdown().await;
}

/// Toggling one of the bot's MCP servers changes its tools and tells clients, in both eras.
#[tokio::test]
async fn toggle_mcp_server_notifies_both_eras() {
    let Some(app) = start_fixture_bot(&[]).await else {
        return;
    };
    let r = call_tool(&app, "list_mcp_servers", json!({})).await;
    assert_eq!(structured(&r)["servers"][0]["state"], "connected");
    // The design's `id` field and argument name the server too.
    assert_eq!(structured(&r)["servers"][0]["id"], "fixture", "{r}");
    let r = call_tool(
        &app,
        "toggle_mcp_server",
        json!({"id": "fixture", "enabled": true}),
    )
    .await;
    assert_eq!(structured(&r)["server"]["state"], "connected", "{r}");
    let r = call_tool(
        &app,
        "run_tool",
        json!({"name": "mcp.fixture__echo", "arguments": {"text": "hi"}}),
    )
    .await;
    assert!(r.to_string().contains("hi"), "{r}");

    // A legacy session with its GET stream, and a modern listen stream.
    let (mut get_stream, mut listen_stream) = open_change_streams(&app, 77).await;

    let r = call_tool(
        &app,
        "toggle_mcp_server",
        json!({"name": "fixture", "enabled": false}),
    )
    .await;
    assert_eq!(structured(&r)["server"]["state"], "disabled", "{r}");
    assert!(
        app.bot.tools.get("mcp.fixture__echo").is_none(),
        "its tools are gone"
    );

    assert!(
        stream_announces(&mut get_stream, "notifications/tools/list_changed").await,
        "legacy GET stream"
    );
    assert!(
        stream_announces(&mut listen_stream, "notifications/tools/list_changed").await,
        "modern listen stream"
    );

    let r = call_tool(
        &app,
        "toggle_mcp_server",
        json!({"name": "fixture", "enabled": true}),
    )
    .await;
    assert!(!is_error(&r));
    wait_for_tool(&app, "mcp.fixture__echo", true).await;
    drop(get_stream);
    drop(listen_stream);
    app.shutdown().await;
}

/// A server switched off at runtime stays off across a restart: the next start never
/// spawns it (not even to stop it at once), and switching it on again does.
#[tokio::test]
async fn a_server_switched_off_is_not_started_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("starts.log");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/stdio_mcp_server.py"
    );
    let script = format!(
        "echo started >> '{}'; exec python3 '{fixture}'",
        marker.display()
    );
    let Some(mcp_json) =
        stdio_fixture_config(dir.path(), json!({"command": "sh", "args": ["-c", script]}))
    else {
        return;
    };
    let database = dir.path().join("bot.db");
    let vars = [
        ("MCP_SERVERS_CONFIG", mcp_json.as_str()),
        ("DATABASE_PATH", database.to_str().unwrap()),
    ];
    let starts = || {
        std::fs::read_to_string(&marker)
            .unwrap_or_default()
            .lines()
            .count()
    };

    let app = start_bot(&vars).await;
    wait_for_tool(&app, "mcp.fixture__echo", true).await;
    let r = call_tool(
        &app,
        "toggle_mcp_server",
        json!({"name": "fixture", "enabled": false}),
    )
    .await;
    assert!(!is_error(&r), "{r}");
    app.shutdown().await;
    assert_eq!(starts(), 1);

    let app = start_bot(&vars).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let r = call_tool(&app, "list_mcp_servers", json!({})).await;
    assert_eq!(structured(&r)["servers"][0]["state"], "disabled", "{r}");
    assert_eq!(
        starts(),
        1,
        "the switched-off server was spawned at start-up"
    );
    let r = call_tool(
        &app,
        "toggle_mcp_server",
        json!({"name": "fixture", "enabled": true}),
    )
    .await;
    assert!(!is_error(&r), "{r}");
    wait_for_tool(&app, "mcp.fixture__echo", true).await;
    assert_eq!(starts(), 2);
    app.shutdown().await;
}

#[tokio::test]
async fn prompts_and_completion() {
    let app = start_bot(&[]).await;
    let c = app
        .bot
        .store
        .create_conversation("about prompts")
        .await
        .unwrap();
    let r = modern(&app, 1, "prompts/list", json!({})).await;
    let names: Vec<&str> = r.result()["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "diagnose_recent_errors",
            "explain_conversation",
            "explain_failed_turn"
        ]
    );
    let prefix = &c.id[..4];
    let r = modern(
        &app,
        2,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "explain_conversation"}, "argument": {"name": "conversation_id", "value": prefix}}),
    )
    .await;
    assert_eq!(r.result()["completion"]["values"], json!([c.id]));
    for argument in [json!({}), json!("x"), json!({"name": "conversation_id"})] {
        let r = modern(
            &app,
            2,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "explain_conversation"}, "argument": argument}),
        )
        .await;
        assert_eq!(r.error_code(), Some(-32602), "{argument}: {}", r.raw);
    }
    let r = modern(
        &app,
        3,
        "prompts/get",
        json!({"name": "explain_conversation", "arguments": {"conversation_id": c.id}}),
    )
    .await;
    assert!(r.raw.contains("about prompts"), "{}", r.raw);
    let r = modern(
        &app,
        4,
        "prompts/get",
        json!({"name": "explain_conversation", "arguments": {}}),
    )
    .await;
    assert_eq!(r.error_code(), Some(-32602));
    let r = modern(
        &app,
        5,
        "prompts/get",
        json!({"name": "diagnose_recent_errors"}),
    )
    .await;
    assert_eq!(r.result()["messages"][0]["role"], "user");
    app.shutdown().await;
}

#[tokio::test]
async fn db_query_writes_ask_clients_that_can_confirm() {
    let app = start_bot(&[]).await;
    let call = |id: u64, extra: Value| {
        let mut params = json!({"name": "db_query", "arguments": {"sql": "DELETE FROM tasks"},
            "_meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}});
        if let Some(map) = extra.as_object() {
            for (k, v) in map {
                params[k] = v.clone();
            }
        }
        modern(&app, id, "tools/call", params)
    };
    // 2026: the first answer asks; the retry with the user's answer runs it.
    let first = call(1, json!({})).await;
    let ask = first.result();
    assert_eq!(ask["resultType"], "input_required", "{}", first.raw);
    assert_eq!(
        ask["inputRequests"]["confirm_write"]["method"],
        "elicitation/create"
    );
    let state = ask["requestState"].as_str().unwrap().to_string();
    let yes = json!({"confirm_write": {"action": "accept", "content": {"confirm": true}}});
    let done = call(2, json!({"inputResponses": yes, "requestState": state})).await;
    assert_eq!(
        done.result()["structuredContent"]["rows_affected"],
        0,
        "{}",
        done.raw
    );
    let no = json!({"confirm_write": {"action": "decline"}});
    let declined = call(3, json!({"inputResponses": no, "requestState": state})).await;
    assert!(declined.raw.contains("declined"), "{}", declined.raw);
    let tampered = call(
        4,
        json!({"inputResponses": yes, "requestState": format!("{state}x")}),
    )
    .await;
    assert_eq!(tampered.error_code(), Some(-32602));
    // Reads never ask; clients without elicitation are not asked.
    let read = modern(
        &app,
        5,
        "tools/call",
        json!({"name": "db_query", "arguments": {"sql": "SELECT 1"},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}),
    )
    .await;
    assert_eq!(read.result()["resultType"], "complete");
    let plain = call_tool(&app, "db_query", json!({"sql": "DELETE FROM tasks"})).await;
    assert_eq!(plain["structuredContent"]["rows_affected"], 0);

    // 2025: the question travels as a server request on the call's SSE stream.
    let session = legacy_session(&app, "2025-11-25", json!({"elicitation": {}})).await;
    let url = format!("{}/mcp", app.url());
    let delete_tasks = |id: u32, accept: &'static str| {
        client()
            .post(&url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .body(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"db_query","arguments":{"sql":"DELETE FROM tasks"}}}).to_string())
            .send()
    };
    let response = delete_tasks(9, "application/json, text/event-stream")
        .await
        .unwrap();
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    let request = read_sse_until(&mut stream, &mut seen, |m| {
        m.iter()
            .find(|m| m["method"] == "elicitation/create")
            .cloned()
    })
    .await
    .expect("an elicitation request");
    let answer = json!({"jsonrpc":"2.0","id":request["id"],"result":{"action":"accept","content":{"confirm":true}}});
    let ack = post(
        &app,
        &answer,
        &[
            ("mcp-session-id", &session),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .await;
    assert_eq!(ack.status, 202);
    let result = read_sse_until(&mut stream, &mut seen, |m| {
        m.iter().find(|m| m["id"] == 9).cloned()
    })
    .await
    .expect("the result after the answer");
    assert_eq!(
        result["result"]["structuredContent"]["rows_affected"], 0,
        "{result}"
    );
    // A call that accepts only JSON has no stream to put the question on: the write
    // runs as it does for a client that cannot ask.
    let json_only = delete_tasks(10, "application/json").await.unwrap();
    let answer: Value = json_only.json().await.unwrap();
    assert_eq!(
        answer["result"]["structuredContent"]["rows_affected"], 0,
        "{answer}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn server_log_reads_older_lines_from_the_log_file() {
    use tracing_subscriber::layer::SubscriberExt;
    let dir = tempfile::tempdir().unwrap();
    let file =
        porthole::logs::file::LogFile::open(&dir.path().join("bot.log"), 1024 * 1024).unwrap();
    let subscriber = tracing_subscriber::registry().with(file.layer("web_console"));
    tracing::subscriber::with_default(subscriber, || {
        tracing::error!(target: "porthole::bot::store", "yesterday's disk full error");
        tracing::info!(target: "porthole::bot", "an ordinary line");
    });
    let logging = porthole::app::Logging {
        file: Some(file),
        ..Default::default()
    };
    let app = start_bot_with(&[], logging).await;
    let r = call_tool(&app, "server_log", json!({"level": "error"})).await;
    let s = structured(&r);
    let lines = s["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "{s}");
    assert_eq!(lines[0]["message"], "yesterday's disk full error");
    assert_eq!(lines[0]["reader"], "log_file");
    assert_eq!(s["readers"][1]["available"], true);
    let r = call_tool(&app, "server_log", json!({"limit": 1})).await;
    assert_eq!(
        structured(&r)["lines"][0]["message"],
        "an ordinary line",
        "newest wins"
    );
    assert_eq!(structured(&r)["truncated"], true);
    app.shutdown().await;

    let app = start_bot(&[]).await;
    let r = call_tool(&app, "server_log", json!({})).await;
    assert_eq!(structured(&r)["readers"][1]["available"], false);
    app.shutdown().await;
}

#[tokio::test]
async fn a_whole_number_written_as_a_float_is_an_integer() {
    let app = start_bot(&[]).await;
    let whole = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT 1 AS one", "limit": 5.0}),
    )
    .await;
    assert!(!is_error(&whole), "{whole}");
    assert_eq!(whole["structuredContent"]["rows"][0][0], 1);
    let fraction = call_tool(&app, "db_query", json!({"query": "SELECT 1", "limit": 2.5})).await;
    assert!(is_error(&fraction), "{fraction}");
    assert!(error_text(&fraction).contains("inputSchema"), "{fraction}");
    app.shutdown().await;
}

/// A tool's input schema (derived from its argument type) names every argument it
/// takes and refuses the others, requires only arguments it names, and lists defaults
/// its own checks accept (a default outside a range would be a schema that contradicts
/// itself).
fn input_schema_is_closed_and_its_defaults_valid(name: &str, schema: &Value) {
    assert_eq!(schema["additionalProperties"], false, "{name}: {schema}");
    let properties = schema["properties"].as_object().expect("properties");
    for required in schema["required"].as_array().expect("required") {
        let required = required.as_str().unwrap();
        assert!(properties.contains_key(required), "{name}: {required}");
    }
    for (argument, property) in properties {
        assert!(
            !property.to_string().contains("\"$ref\""),
            "{name}.{argument}"
        );
        if let Some(default) = property.get("default") {
            let validator = jsonschema::validator_for(property).expect("a valid schema");
            assert!(
                validator.is_valid(default),
                "{name}.{argument}: default {default} against {property}"
            );
        }
    }
}
