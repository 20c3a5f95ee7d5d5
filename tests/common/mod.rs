//! Shared helpers for integration tests: start the real bot on 127.0.0.1:0 and talk to
//! it over real HTTP, including SSE parsing.

#![allow(dead_code)]

use std::collections::HashMap;

use porthole::app::{RunningApp, start};
use porthole::config::Config;
use serde_json::{Value, json};

pub const TOKEN: &str = "test-secret-0123456789abcdef0123456789abcdef";
pub const MODERN: &str = "2026-07-28";

/// Starts a bot with MCP enabled (plus `extra` settings) on an ephemeral port.
pub async fn start_bot(extra: &[(&str, &str)]) -> RunningApp {
    start_bot_with(extra, porthole::app::Logging::default()).await
}

/// Like [`start_bot`], with the logging setup a binary would pass.
pub async fn start_bot_with(extra: &[(&str, &str)], logging: porthole::app::Logging) -> RunningApp {
    let dir = tempfile::tempdir().unwrap().keep();
    let mut vars: HashMap<String, String> = [
        ("HOST", "127.0.0.1"),
        ("PORT", "0"),
        ("DATABASE_PATH", ":memory:"),
        ("MCP_SERVER_ENABLED", "true"),
        ("MCP_SERVER_SECRET", TOKEN),
        ("SCHEDULER_ENABLED", "false"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for folder in ["WORKSPACE_DIR", "USER_TOOLS_DIR", "SKILLS_DIR"] {
        vars.insert(
            folder.into(),
            dir.join(folder.to_lowercase()).display().to_string(),
        );
    }
    vars.insert(
        "MCP_SERVERS_CONFIG".into(),
        dir.join("mcp.json").display().to_string(),
    );
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    let config = Config::from_map(&vars).expect("test config is valid");
    start(config, logging).await.expect("bot starts")
}

/// The test database's URL, or `None` after saying why the test skips.
pub fn test_database_url(test: &str) -> Option<String> {
    match std::env::var("PORTHOLE_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "{test}: skipped, PORTHOLE_TEST_DATABASE_URL is unset (scripts/replicas.sh sets it)"
            );
            None
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().build().unwrap()
}

/// A parsed HTTP answer from /mcp: status, headers, and every JSON-RPC message in the
/// body (one for JSON, all events for SSE).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub messages: Vec<Value>,
    pub raw: String,
}

impl Reply {
    /// The last message: the response, when the body had one.
    pub fn body(&self) -> &Value {
        self.messages.last().unwrap_or(&Value::Null)
    }

    pub fn result(&self) -> &Value {
        &self.body()["result"]
    }

    pub fn error_code(&self) -> Option<i64> {
        self.body()["error"]["code"].as_i64()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn is_sse(&self) -> bool {
        self.header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
    }
}

/// The JSON payloads of every `data:` line group in an SSE body.
pub fn parse_sse(body: &str) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut data = String::new();
    for line in body.lines() {
        if line.is_empty() {
            if !data.trim().is_empty()
                && let Ok(v) = serde_json::from_str(&data)
            {
                messages.push(v);
            }
            data.clear();
        } else if let Some(rest) = line.strip_prefix("data:") {
            data.push_str(rest.trim_start());
        }
    }
    if !data.trim().is_empty()
        && let Ok(v) = serde_json::from_str(&data)
    {
        messages.push(v);
    }
    messages
}

pub async fn into_reply(response: reqwest::Response) -> Reply {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let raw = response.text().await.unwrap_or_default();
    let is_sse = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    let messages = if is_sse {
        parse_sse(&raw)
    } else {
        serde_json::from_str(&raw)
            .map(|v| vec![v])
            .unwrap_or_default()
    };
    Reply {
        status,
        headers,
        messages,
        raw,
    }
}

/// Where a bot listens: a running app, or its base URL (for spawned tasks, which
/// cannot borrow the app).
pub trait BotUrl {
    fn bot_url(&self) -> String;
}

impl BotUrl for RunningApp {
    fn bot_url(&self) -> String {
        self.url()
    }
}

impl BotUrl for String {
    fn bot_url(&self) -> String {
        self.clone()
    }
}

/// A POST to /mcp with the usual headers plus `extra`.
pub async fn post(app: &impl BotUrl, body: &Value, extra: &[(&str, &str)]) -> Reply {
    let mut request = client()
        .post(format!("{}/mcp", app.bot_url()))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (k, v) in extra {
        request = request.header(*k, *v);
    }
    into_reply(request.send().await.unwrap()).await
}

pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "porthole-tests", "version": "1"}
    })
}

/// A stateless 2026 request with matching headers.
pub async fn modern(app: &impl BotUrl, id: u64, method: &str, mut params: Value) -> Reply {
    let mut meta = modern_meta();
    if let Some(extra) = params.get("_meta").cloned()
        && let Some(m) = extra.as_object()
    {
        for (k, v) in m {
            meta[k] = v.clone();
        }
    }
    params["_meta"] = meta;
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(name) = name.as_deref()
        && matches!(
            method,
            "tools/call"
                | "prompts/get"
                | "resources/read"
                | "tasks/get"
                | "tasks/update"
                | "tasks/cancel"
        )
    {
        headers.push(("mcp-name", name));
    }
    post(app, &body, &headers).await
}

/// Calls a tool statelessly and returns its result.
pub async fn call_tool(app: &impl BotUrl, name: &str, arguments: Value) -> Value {
    let reply = modern(
        app,
        7,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await;
    assert_eq!(reply.status, 200, "{name}: {}", reply.raw);
    reply.result().clone()
}

/// Whether a tool result is a tool-level error (`isError`).
pub fn is_error(result: &Value) -> bool {
    result["isError"] == true
}

/// The text of a tool result's first content block (an error's message).
pub fn error_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A legacy session: initialize + initialized; returns the session id.
pub async fn legacy_session(app: &RunningApp, version: &str, capabilities: Value) -> String {
    let reply = post(
        app,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "porthole-tests", "version": "1"}}}),
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let session = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_string();
    let ack = post(
        app,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &[
            ("mcp-session-id", &session),
            ("mcp-protocol-version", version),
        ],
    )
    .await;
    assert_eq!(ack.status, 202);
    session
}

pub async fn legacy(
    app: &RunningApp,
    session: &str,
    id: u64,
    method: &str,
    params: Value,
) -> Reply {
    post(
        app,
        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        &[
            ("mcp-session-id", session),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .await
}

/// Opens a 2026 `subscriptions/listen` stream with request id `id` and this filter.
pub async fn listen(app: &RunningApp, id: Value, notifications: Value) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(), "notifications": notifications}});
    client()
        .post(format!("{}/mcp", app.url()))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// Reads an SSE byte stream into `seen` until `done` finds what it waits for in the
/// messages so far; `None` after 5 s or at the end of the stream.
pub async fn read_sse_until<T>(
    stream: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    seen: &mut String,
    mut done: impl FnMut(&[Value]) -> Option<T>,
) -> Option<T> {
    use futures::StreamExt;
    tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            if let Some(found) = done(&parse_sse(seen)) {
                return Some(found);
            }
            match stream.next().await {
                Some(Ok(chunk)) => seen.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    })
    .await
    .ok()
    .flatten()
}
