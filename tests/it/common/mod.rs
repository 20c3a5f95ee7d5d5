//! Shared helpers for integration tests: start the real bot on 127.0.0.1:0 and talk to
//! it over real HTTP, including SSE parsing.

#![allow(dead_code)]

use std::collections::HashMap;

use porthole::app::{RunningApp, start};
use porthole::config::Config;
use serde_json::{Value, json};

/// The skip-or-fail rule for missing services, shared with the unit tests.
#[path = "../../../src/test_support.rs"]
mod test_support;
pub use test_support::*;

/// The test PostgreSQL server as the tests share it: every test that uses it holds a
/// share while it runs, and the test that restarts the server (`postgres_restart.rs`)
/// holds it alone, so a restart never cuts another test's work (the integration tests
/// are one binary, run two at a time).
static POSTGRES: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A share of the test PostgreSQL server for one test: hold it until the test ends.
pub async fn postgres_share() -> tokio::sync::RwLockReadGuard<'static, ()> {
    POSTGRES.read().await
}

/// The test PostgreSQL server for one test alone (it restarts the server).
pub async fn postgres_alone() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    POSTGRES.write().await
}

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

/// Sends raw bytes over TCP and returns the status line and the rest: for requests an
/// HTTP client would not send as written (repeated headers, broken framing).
pub async fn raw_http(addr: std::net::SocketAddr, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut buffer = Vec::new();
    let wait = std::time::Duration::from_secs(10);
    let _ = tokio::time::timeout(wait, stream.read_to_end(&mut buffer)).await;
    String::from_utf8_lossy(&buffer).into_owned()
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

/// Ends a legacy session with `DELETE /mcp`; returns the HTTP status.
pub async fn end_session(app: &impl BotUrl, session: &str) -> u16 {
    client()
        .delete(format!("{}/mcp", app.bot_url()))
        .bearer_auth(TOKEN)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Opens a 2026 `subscriptions/listen` stream with request id `id` and this filter.
pub async fn listen(app: &RunningApp, id: Value, notifications: Value) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(), "notifications": notifications}});
    listen_request(app, &body).await
}

/// Sends a `subscriptions/listen` request of the caller's own making (2026 headers).
pub async fn listen_request(app: &RunningApp, body: &Value) -> reqwest::Response {
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

/// Opens a `subscriptions/listen` stream for `task_ids` as a client that declared the
/// Tasks extension, read (into `seen`) up to its acknowledgment: the stream, and the ids
/// the server agreed to report on.
pub async fn listen_to_tasks(
    app: &RunningApp,
    task_ids: Value,
    seen: &mut String,
) -> (impl SseStream + use<>, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities":
                {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
            "notifications": {"taskIds": task_ids}}});
    let mut stream = listen_request(app, &body).await.bytes_stream();
    let ack = read_sse_until(&mut stream, seen, |messages| {
        messages
            .iter()
            .find(|m| m["method"] == "notifications/subscriptions/acknowledged")
            .cloned()
    })
    .await
    .expect("an acknowledgment");
    (stream, ack["params"]["notifications"]["taskIds"].clone())
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

/// The stdio MCP fixture (`tests/fixtures/stdio_mcp_server.py`) as the bot's one MCP
/// server `fixture`, its entry merged with `extra` (for example `{"env": {…}}`): writes
/// `mcp.json` into `dir` and returns its path; `None` when python3 is missing (see
/// [`has_python`]).
pub fn stdio_fixture_config(dir: &std::path::Path, extra: Value) -> Option<String> {
    if !has_python() {
        return None;
    }
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/stdio_mcp_server.py"
    );
    let mut entry = json!({"command": "python3", "args": [fixture]});
    if let (Some(entry), Some(extra)) = (entry.as_object_mut(), extra.as_object()) {
        entry.extend(extra.clone());
    }
    let path = dir.join("mcp.json");
    std::fs::write(&path, json!({"mcpServers": {"fixture": entry}}).to_string()).unwrap();
    Some(path.display().to_string())
}

/// A bot (with `extra` settings) whose stdio fixture server has connected, its
/// `mcp.fixture__echo` registered; `None` when python3 is missing.
pub async fn start_fixture_bot(extra: &[(&str, &str)]) -> Option<RunningApp> {
    let dir = tempfile::tempdir().unwrap().keep();
    let mcp_json = stdio_fixture_config(&dir, json!({}))?;
    let mut vars = vec![("MCP_SERVERS_CONFIG", mcp_json.as_str())];
    vars.extend_from_slice(extra);
    let app = start_bot(&vars).await;
    wait_for_tool(&app, "mcp.fixture__echo", true).await;
    Some(app)
}

/// Waits (20 s at most) until the bot has the tool `name` (`present`) or has not: an MCP
/// server's tools come and go as it connects and disconnects.
pub async fn wait_for_tool(app: &RunningApp, name: &str, present: bool) {
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while app.bot.tools.get(name).is_some() != present {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{name} present={present}"));
}

/// The bot's model settings for the fake OpenAI-compatible server at `llm_url`
/// (`tests/it/fake_llm`), then `extra` (which may override them).
pub async fn start_bot_on_llm(llm_url: &str, extra: &[(&str, &str)]) -> RunningApp {
    let base = format!("{llm_url}/v1");
    let mut vars = vec![
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", base.as_str()),
        ("LLM_API_KEY", "sk-test-key-0123456789abcdef"),
        ("LLM_MODEL", "fake-model"),
    ];
    vars.extend_from_slice(extra);
    start_bot(&vars).await
}

/// A byte stream of server-sent events, as `reqwest` reads it.
pub trait SseStream: futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin {}
impl<S: futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin> SseStream for S {}

/// Posts `body` to the page's API at `path`, as the page does (no token), and returns
/// the JSON answer, whose status must be `status`.
async fn post_to_page_api(app: &impl BotUrl, path: &str, body: &Value, status: u16) -> Value {
    let answer = client()
        .post(format!("{}{path}", app.bot_url()))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), status, "POST {path} {body}");
    answer.json().await.unwrap()
}

/// Creates a scheduled task through the page's API (`POST /api/tasks`) and returns it.
pub async fn create_task_through_api(app: &RunningApp, task: Value) -> Value {
    post_to_page_api(app, "/api/tasks", &task, 201).await
}

/// Sends a chat message as the page does (`POST /api/messages`, no token) and returns
/// the answer (`response`, `conversation_id`, `trace_id`).
pub async fn page_message(app: &impl BotUrl, body: Value) -> Value {
    post_to_page_api(app, "/api/messages", &body, 200).await
}

/// The address of a server on 127.0.0.1 that accepts connections, holds them and never
/// answers (a peer that is stuck).
pub async fn server_that_never_answers() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    addr
}

/// An OpenAI-compatible base URL whose server accepts connections and never answers:
/// every turn waits on the model until it is cancelled.
pub async fn llm_that_never_answers() -> String {
    format!("http://{}/v1", server_that_never_answers().await)
}

/// Opens a legacy (2025-11-25) session's GET stream.
pub async fn legacy_get_stream(app: &RunningApp, session: &str) -> reqwest::Response {
    client()
        .get(format!("{}/mcp", app.url()))
        .bearer_auth(TOKEN)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap()
}

/// A new legacy session's GET stream, open (status 200).
pub async fn open_legacy_stream(app: &RunningApp) -> impl SseStream + use<> {
    let session = legacy_session(app, "2025-11-25", json!({})).await;
    let stream = legacy_get_stream(app, &session).await;
    assert_eq!(stream.status(), 200);
    stream.bytes_stream()
}

/// Both streams a tools-list change is announced on, open and past their first event:
/// a new legacy session's GET stream and a modern `subscriptions/listen` stream (request
/// id `listen_id`) for `toolsListChanged`.
pub async fn open_change_streams(
    app: &RunningApp,
    listen_id: u64,
) -> (impl SseStream, impl SseStream) {
    let session = legacy_session(app, "2025-11-25", json!({})).await;
    let get = legacy_get_stream(app, &session).await;
    let listen = listen(app, json!(listen_id), json!({"toolsListChanged": true})).await;
    let mut get_stream = get.bytes_stream();
    let mut listen_stream = listen.bytes_stream();
    let first_event = std::time::Duration::from_secs(2);
    let _ = tokio::time::timeout(first_event, futures::StreamExt::next(&mut get_stream)).await;
    let _ = tokio::time::timeout(first_event, futures::StreamExt::next(&mut listen_stream)).await;
    (get_stream, listen_stream)
}

/// Whether a notification with this `method` arrives on the stream within 5 s.
pub async fn stream_announces(stream: &mut impl SseStream, method: &str) -> bool {
    let mut seen = String::new();
    read_sse_until(stream, &mut seen, |messages| {
        messages.iter().any(|m| m["method"] == method).then_some(())
    })
    .await
    .is_some()
}

/// The real `porthole` binary started in `dir` (which holds no `.env`) on a minimal
/// environment: 127.0.0.1 on a free port, SQLite in memory, no scheduler, `/mcp` on,
/// info logs, then `env`. Its standard output comes back as lines; its standard error
/// is dropped; it is killed when dropped.
pub fn spawn_porthole(
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (
    tokio::process::Child,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::AsyncBufReadExt;
    let mut bot = tokio::process::Command::new(env!("CARGO_BIN_EXE_porthole"))
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs([
            ("HOST", "127.0.0.1"),
            ("PORT", "0"),
            ("DATABASE_PATH", ":memory:"),
            ("SCHEDULER_ENABLED", "false"),
            ("MCP_SERVER_ENABLED", "true"),
            ("RUST_LOG", "info"),
        ])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the porthole binary runs");
    let lines = tokio::io::BufReader::new(bot.stdout.take().unwrap()).lines();
    (bot, lines)
}

/// The port a [`spawn_porthole`] bot says it listens on (20 s at most); afterwards its
/// output is drained in the background, so logging never blocks on a full pipe.
pub async fn listening_port(
    mut lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> u16 {
    let port = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("listening on http://127.0.0.1:").nth(1) {
                return rest.trim().parse().unwrap();
            }
        }
        panic!("the bot exited before listening");
    })
    .await
    .expect("the bot starts listening");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    port
}

/// `count` connections to `addr`, each stuck in the middle of its request's headers.
pub async fn slow_header_clients(
    addr: std::net::SocketAddr,
    count: usize,
) -> Vec<tokio::net::TcpStream> {
    use tokio::io::AsyncWriteExt;
    let mut slow = Vec::new();
    for _ in 0..count {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
        slow.push(tcp);
    }
    slow
}
