//! The design's own interfaces, word for word, over real HTTP: `run_tool {tool_name,
//! parameters}` (our `name`/`arguments` stay as aliases), the seed's `server_log` levels,
//! one conversation-id spelling rule, and the design's bare curl request.

use crate::common;

use common::*;
use serde_json::{Value, json};

fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

/// A tool's entry in `tools/list`.
async fn listed_tool(app: &impl BotUrl, name: &str) -> Value {
    let reply = modern(app, 1, "tools/list", json!({})).await;
    reply.result()["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is listed"))
}

#[tokio::test]
async fn run_tool_takes_the_seeds_tool_name_and_parameters() {
    let app = start_bot(&[]).await;
    let listed = listed_tool(&app, "run_tool").await;
    let schema = &listed["inputSchema"];
    assert_eq!(schema["required"], json!(["tool_name"]), "{schema}");
    assert_eq!(
        schema["properties"]["tool_name"]["x-aliases"],
        json!(["name"])
    );
    assert_eq!(
        schema["properties"]["parameters"]["x-aliases"],
        json!(["arguments"])
    );

    let seed = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "calculator", "parameters": {"expression": "6*7"}}),
    )
    .await;
    assert!(!is_error(&seed), "{seed}");
    assert_eq!(structured(&seed)["tool"], "calculator");
    assert!(
        structured(&seed)["result"].to_string().contains("42"),
        "{seed}"
    );

    let alias = call_tool(
        &app,
        "run_tool",
        json!({"name": "calculator", "arguments": {"expression": "2+3"}}),
    )
    .await;
    assert!(
        structured(&alias)["result"].to_string().contains('5'),
        "{alias}"
    );

    let mixed = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "calculator", "arguments": {"expression": "1+1"}}),
    )
    .await;
    assert!(
        structured(&mixed)["result"].to_string().contains('2'),
        "{mixed}"
    );

    let both = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "calculator", "name": "calculator"}),
    )
    .await;
    assert!(is_error(&both));
    assert!(
        error_text(&both).contains("`name` is another spelling of `tool_name`"),
        "{both}"
    );

    let missing = call_tool(&app, "run_tool", json!({"parameters": {}})).await;
    assert!(is_error(&missing));
    assert!(error_text(&missing).contains("tool_name"), "{missing}");
    app.shutdown().await;
}

/// The seed's form also reaches a namespaced tool of a connected MCP server.
#[tokio::test]
async fn run_tool_seed_form_reaches_a_namespaced_mcp_tool() {
    let Some(app) = start_fixture_bot(&[]).await else {
        return;
    };
    let r = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "mcp.fixture__echo", "parameters": {"text": "seed spelling"}}),
    )
    .await;
    assert!(!is_error(&r), "{r}");
    assert_eq!(structured(&r)["tool"], "mcp.fixture__echo");
    assert!(r.to_string().contains("seed spelling"), "{r}");
    app.shutdown().await;
}

#[tokio::test]
async fn log_tools_take_the_seeds_levels() {
    use tracing_subscriber::layer::SubscriberExt;
    let buffer = porthole::logs::buffer::LogBuffer::new(100);
    let subscriber = tracing_subscriber::registry().with(buffer.layer().skipping("web_console"));
    tracing::subscriber::with_default(subscriber, || {
        tracing::debug!(target: "porthole::seed_test", "seed-level debug line");
        tracing::info!(target: "porthole::seed_test", "seed-level info line");
        tracing::warn!(target: "porthole::seed_test", "seed-level warn line");
        tracing::error!(target: "porthole::seed_test", "seed-level error line");
    });
    let logging = porthole::app::Logging {
        buffer: Some(buffer),
        ..Default::default()
    };
    let app = start_bot_with(&[], logging).await;
    let listed = listed_tool(&app, "server_log").await;
    let levels = &listed["inputSchema"]["properties"]["level"]["enum"];
    assert_eq!(levels[0], "log", "the seed's levels come first: {levels}");
    assert_eq!(levels[1], "warn");
    assert_eq!(levels[2], "error");
    let messages = |r: &Value| -> Vec<String> {
        structured(r)["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["message"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    for (level, expected) in [
        ("log", vec!["info", "warn", "error"]),
        ("warn", vec!["warn", "error"]),
        ("error", vec!["error"]),
        ("debug", vec!["debug", "info", "warn", "error"]),
    ] {
        let r = call_tool(
            &app,
            "server_log",
            json!({"level": level, "grep": "seed-level"}),
        )
        .await;
        assert!(!is_error(&r), "{level}: {r}");
        let seen = messages(&r);
        let wanted: Vec<String> = expected
            .iter()
            .map(|l| format!("seed-level {l} line"))
            .collect();
        assert_eq!(seen, wanted, "level {level}");
    }
    let web = call_tool(&app, "web_log", json!({"level": "log"})).await;
    assert!(!is_error(&web), "web_log takes `log` too: {web}");
    // `since` is "ISO 8601": without an offset (UTC), or a date alone.
    for (since, count) in [("2000-01-01T00:00:00", 3), ("2999-01-01", 0)] {
        let r = call_tool(
            &app,
            "server_log",
            json!({"level": "log", "grep": "seed-level", "since": since}),
        )
        .await;
        assert_eq!(messages(&r).len(), count, "since {since}: {r}");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn send_message_and_list_messages_take_both_conversation_id_spellings() {
    let app = start_bot(&[]).await;
    let first = call_tool(&app, "send_message", json!({"content": "/help"})).await;
    let id = structured(&first)["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let camel = call_tool(
        &app,
        "send_message",
        json!({"content": "/tools", "conversationId": id}),
    )
    .await;
    assert!(!is_error(&camel), "{camel}");
    assert_eq!(structured(&camel)["conversation_id"], id.as_str());
    for spelling in ["conversation_id", "conversationId"] {
        let r = call_tool(&app, "list_messages", json!({spelling: id})).await;
        assert!(!is_error(&r), "{spelling}: {r}");
        assert_eq!(
            structured(&r)["messages"].as_array().unwrap().len(),
            4,
            "{spelling}"
        );
    }
    let both = call_tool(
        &app,
        "list_messages",
        json!({"conversation_id": id, "conversationId": id}),
    )
    .await;
    assert!(error_text(&both).contains("give only one"), "{both}");
    for tool in ["send_message", "list_messages"] {
        let listed = listed_tool(&app, tool).await;
        assert_eq!(
            listed["inputSchema"]["properties"]["conversation_id"]["x-aliases"],
            json!(["conversationId"]),
            "{tool}"
        );
    }
    app.shutdown().await;
}

/// The design's curl example, exactly: only Content-Type and Authorization, no
/// initialize, no `_meta`, no version header.
#[tokio::test]
async fn the_seeds_bare_curl_request_lists_the_tools() {
    let app = start_bot(&[]).await;
    let response = client()
        .post(format!("{}/mcp", app.url()))
        .header("Content-Type", "application/json")
        .header("Authorization", format!("Bearer {TOKEN}"))
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    let reply = into_reply(response).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert!(
        reply.header("mcp-session-id").is_none(),
        "served statelessly"
    );
    assert_eq!(reply.body()["id"], 1);
    let tools = reply.result()["tools"].as_array().expect("a tool list");
    assert!(
        tools.iter().any(|t| t["name"] == "server_log"),
        "{}",
        reply.raw
    );

    // A bare tools/call works the same way.
    let call = client()
        .post(format!("{}/mcp", app.url()))
        .header("Content-Type", "application/json")
        .header("Authorization", format!("Bearer {TOKEN}"))
        .body(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"health","arguments":{}}}"#)
        .send()
        .await
        .unwrap();
    let call = into_reply(call).await;
    assert_eq!(call.status, 200, "{}", call.raw);
    assert!(call.result()["structuredContent"]["uptime_secs"].is_u64());

    // Still guarded: no token, no list.
    let anonymous = client()
        .post(format!("{}/mcp", app.url()))
        .header("Content-Type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    // The other eras' rules stand: a 2026 request without _meta is still refused, and
    // a legacy request naming its version still needs a session.
    let modern_without_meta = post(
        &app,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/list"),
        ],
    )
    .await;
    assert_eq!(
        modern_without_meta.status, 400,
        "{}",
        modern_without_meta.raw
    );
    let legacy_without_session = post(
        &app,
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        &[("mcp-protocol-version", "2025-11-25")],
    )
    .await;
    assert_eq!(legacy_without_session.status, 400);
    app.shutdown().await;
}

/// Seed 002's example queries for `db_query`, typed exactly as the design shows them.
#[tokio::test]
async fn the_seeds_example_queries_run_as_written() {
    let app = start_bot(&[]).await;
    let sent = call_tool(
        &app,
        "send_message",
        json!({"content": "/help this is a test"}),
    )
    .await;
    let conversation = structured(&sent)["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    for query in [
        "SELECT * FROM messages ORDER BY createdAt DESC LIMIT 10",
        "SELECT * FROM messages WHERE conversationId NOT IN (SELECT id FROM conversations)",
        "UPDATE conversations SET title = NULL WHERE id = 'some-id'",
        "DELETE FROM messages WHERE content LIKE '%test%'",
    ] {
        let r = call_tool(&app, "db_query", json!({"query": query})).await;
        assert!(!is_error(&r), "{query}: {r}");
    }
    let r = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT conversationId, createdAt FROM messages", "limit": 5}),
    )
    .await;
    let rows = structured(&r)["rows"].as_array().unwrap().clone();
    assert!(!rows.is_empty(), "the assistant's reply is left: {r}");
    assert_eq!(rows[0][0], conversation.as_str());
    app.shutdown().await;
}

/// The seed's "simulate corrupted state" example on a real conversation: the title
/// becomes NULL, and every reader of conversations copes and shows it as null.
#[tokio::test]
async fn a_title_set_to_null_as_the_seed_shows_is_read_everywhere() {
    let app = start_bot(&[]).await;
    // Started on the page, so both /mcp and the page's /api read it.
    let sent = page_message(&app, json!({"content": "hello"})).await;
    let id = sent["conversation_id"].as_str().unwrap().to_string();
    let query = format!("UPDATE conversations SET title = NULL WHERE id = '{id}'");
    let updated = call_tool(&app, "db_query", json!({"query": query})).await;
    assert!(!is_error(&updated), "{updated}");
    assert_eq!(structured(&updated)["rows_affected"], 1, "{updated}");

    let listed = call_tool(&app, "list_conversations", json!({})).await;
    assert!(!is_error(&listed), "{listed}");
    let entry = structured(&listed)["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("the conversation is listed: {listed}"));
    assert!(entry["title"].is_null(), "{entry}");

    let again = call_tool(
        &app,
        "send_message",
        json!({"content": "still there?", "conversation_id": id}),
    )
    .await;
    assert!(!is_error(&again), "{again}");
    let read = modern(
        &app,
        2,
        "resources/read",
        json!({"uri": format!("porthole://conversations/{id}")}),
    )
    .await;
    assert!(read.error_code().is_none(), "{}", read.raw);
    let prompt = modern(
        &app,
        3,
        "prompts/get",
        json!({"name": "explain_conversation", "arguments": {"conversation_id": id}}),
    )
    .await;
    assert!(prompt.raw.contains("(title NULL)"), "{}", prompt.raw);
    let api = reqwest::get(format!("{}/api/conversations", app.bot_url()))
        .await
        .unwrap();
    assert_eq!(api.status(), 200);
    let api: Value = api.json().await.unwrap();
    assert!(api.to_string().contains(&id), "{api}");
    app.shutdown().await;
}

/// The design's full name of a user tool, `user.my_tool`, reaches the user tool
/// `my_tool` in `run_tool`, `get_tool_schema` (also by the design's `tool_name`) and
/// `toggle_tool`.
#[tokio::test]
async fn a_user_tool_answers_to_its_full_name_as_the_seed_writes_it() {
    let tools = tempfile::tempdir().unwrap();
    std::fs::write(
        tools.path().join("my_tool.json"),
        json!({"name": "my_tool", "description": "Says hello.",
               "command": ["sh", "-c", "echo hello"]})
        .to_string(),
    )
    .unwrap();
    let tools_dir = tools.path().display().to_string();
    let app = start_bot(&[("USER_TOOLS_DIR", &tools_dir)]).await;
    let ran = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "user.my_tool", "parameters": {}}),
    )
    .await;
    assert!(!is_error(&ran), "{ran}");
    assert_eq!(structured(&ran)["tool"], "my_tool", "{ran}");
    assert!(ran.to_string().contains("hello"), "{ran}");
    let schema = call_tool(
        &app,
        "get_tool_schema",
        json!({"tool_name": "user.my_tool"}),
    )
    .await;
    assert_eq!(structured(&schema)["source"], "user", "{schema}");
    let off = call_tool(
        &app,
        "toggle_tool",
        json!({"name": "user.my_tool", "enabled": false}),
    )
    .await;
    assert_eq!(structured(&off)["tool"]["enabled"], false, "{off}");
    // A native tool is not reached through `user.`.
    let native = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "user.calculator", "parameters": {"expression": "1+1"}}),
    )
    .await;
    assert!(is_error(&native), "{native}");
    app.shutdown().await;
}
