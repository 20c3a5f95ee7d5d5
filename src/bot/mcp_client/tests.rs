//! Tests of the MCP client host against real servers: the Python stdio fixture in
//! `tests/fixtures/stdio_mcp_server.py` and small Streamable HTTP servers (one modern,
//! one legacy-only) served with axum on 127.0.0.1 inside the tests.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{McpHost, McpServerStatus};
use crate::bot::tools::{ExecContext, ToolError, ToolRunner};
use crate::model::ToolSource;
use crate::test_support::{EVERYTHING_SERVER, has_everything_server, has_python};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/stdio_mcp_server.py"
);

/// Returns from the test when python3 is missing (a failure under
/// `PORTHOLE_REQUIRE_SERVICES=1`, see [`crate::test_support`]).
macro_rules! require_python {
    () => {
        if !has_python() {
            return;
        }
    };
}

/// The fixture server's config entry, with extra keys merged in.
fn fixture(extra: Value) -> Value {
    let mut entry = json!({"command": "python3", "args": [FIXTURE], "timeoutMs": 5000});
    if let (Some(entry), Some(extra)) = (entry.as_object_mut(), extra.as_object()) {
        entry.extend(extra.clone());
    }
    entry
}

struct Setup {
    host: Arc<McpHost>,
    runner: Arc<ToolRunner>,
    _dir: tempfile::TempDir,
}

/// The host of the servers `path` lists, connecting as the bot does with nothing saved.
fn start_host(path: &std::path::Path, runner: &Arc<ToolRunner>) -> Arc<McpHost> {
    let host = McpHost::load(path, runner.clone(), Duration::from_secs(5));
    host.connect(&std::collections::HashMap::new());
    host
}

fn start(servers: Value) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("mcp.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    let runner = Arc::new(ToolRunner::new(Duration::from_secs(20)));
    let host = start_host(&path, &runner);
    Setup {
        host,
        runner,
        _dir: dir,
    }
}

impl Setup {
    /// Calls `tool` through the runner as an ordinary user.
    async fn call(&self, tool: &str, arguments: Value) -> Result<Value, ToolError> {
        self.runner.call(tool, arguments, &user()).await
    }
}

fn status(host: &McpHost, name: &str) -> McpServerStatus {
    host.servers()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no server {name}"))
}

/// Polls `check` every 50 ms until it holds; panics with `what` after `limit`.
async fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        if started.elapsed() > limit {
            panic!("timed out after {limit:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn connected(setup: &Setup, name: &str) {
    wait_until(
        &format!("{name} is connected"),
        Duration::from_secs(15),
        || status(&setup.host, name).state == "connected",
    )
    .await;
}

fn user() -> ExecContext {
    ExecContext::new(&["user"])
}

fn mcp_tools(runner: &ToolRunner, server: &str) -> Vec<String> {
    let prefix = format!("mcp.{server}__");
    runner
        .all()
        .into_iter()
        .map(|t| t.def.name)
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

fn failure_text(error: ToolError) -> String {
    match error {
        ToolError::Failed { message, .. } => message,
        other => panic!("expected a tool failure, got {other:?}"),
    }
}

#[tokio::test]
async fn stdio_tools_are_registered_with_namespaces_and_schemas() {
    require_python!();
    let setup = start(json!({"fixture": fixture(json!({}))}));
    connected(&setup, "fixture").await;

    let names = mcp_tools(&setup.runner, "fixture");
    for tool in ["echo", "add", "sleep", "fail", "pid", "crash", "grow"] {
        assert!(
            names.contains(&format!("mcp.fixture__{tool}")),
            "{tool} missing from {names:?} (both pages must be read)"
        );
    }
    assert!(
        !names.contains(&"mcp.fixture__broken".to_string()),
        "a tool whose schema does not compile is skipped"
    );
    let echo = setup.runner.get("mcp.fixture__echo").unwrap();
    assert_eq!(echo.def.source, ToolSource::Mcp);
    assert_eq!(
        echo.def.description,
        "[fixture] Returns the text it is given."
    );
    assert_eq!(
        echo.def.input_schema["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(echo.def.input_schema["required"], json!(["text"]));

    let server = status(&setup.host, "fixture");
    assert_eq!(server.transport, "stdio");
    assert!(server.enabled);
    assert_eq!(server.protocol_version.as_deref(), Some("2025-11-25"));
    assert_eq!(server.tool_count, names.len());
    let serialized = serde_json::to_value(setup.host.servers()).unwrap();
    assert_eq!(serialized[0]["name"], "fixture");
    assert_eq!(serialized[0]["stats"]["invocations"], 0);

    // The runner validates against the server's schema before the call goes out.
    let invalid = setup.call("mcp.fixture__add", json!({"a": 1})).await;
    assert!(matches!(invalid, Err(ToolError::InvalidArguments { .. })));
    setup.host.shutdown().await;
}

#[tokio::test]
async fn stdio_calls_are_routed_and_counted() {
    require_python!();
    let setup = start(json!({"fixture": fixture(json!({}))}));
    connected(&setup, "fixture").await;

    let echoed = setup
        .call("mcp.fixture__echo", json!({"text": "hello"}))
        .await
        .unwrap();
    assert_eq!(
        echoed["content"],
        json!([{"type": "text", "text": "hello"}])
    );
    assert_eq!(echoed["isError"], false);
    assert_eq!(echoed["structuredContent"], json!({"text": "hello"}));
    assert_eq!(echoed["text"], "hello");

    let failed = setup
        .call("mcp.fixture__fail", json!({"message": "no luck"}))
        .await
        .unwrap_err();
    assert_eq!(
        failure_text(failed),
        "no luck",
        "the isError text is the message"
    );

    let server = status(&setup.host, "fixture");
    assert_eq!(server.stats.invocations, 2);
    assert_eq!(server.stats.errors, 1);
    assert_eq!(server.stats.last_error.as_deref(), Some("no luck"));
    assert!(server.stats.mean_ms > 0.0 && server.stats.p95_ms >= server.stats.mean_ms / 2.0);
    let tool = |name: &str| {
        server
            .tools
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        (tool("echo").stats.invocations, tool("echo").stats.errors),
        (1, 0)
    );
    assert_eq!(
        (tool("fail").stats.invocations, tool("fail").stats.errors),
        (1, 1)
    );
    assert_eq!(tool("add").stats.invocations, 0);

    let sum = setup
        .call("mcp.fixture__add", json!({"a": 2, "b": 3.5}))
        .await
        .unwrap();
    assert_eq!(sum["structuredContent"]["sum"], 5.5);
    setup.host.shutdown().await;
}

#[tokio::test]
async fn allowed_and_excluded_tools_filter_registration() {
    require_python!();
    let setup = start(json!({"fixture": fixture(json!({
        "allowedTools": ["echo", "add", "sleep"],
        "excludedTools": ["sleep"]
    }))}));
    connected(&setup, "fixture").await;
    assert_eq!(
        mcp_tools(&setup.runner, "fixture"),
        vec!["mcp.fixture__add", "mcp.fixture__echo"]
    );
    assert_eq!(status(&setup.host, "fixture").tool_count, 2);
    setup.host.shutdown().await;
}

/// `requiredRoles` holds a server's tools back from chat users (the page, `/api`, user
/// tasks): they are not offered to them and a call is refused, while an admin calls them.
#[tokio::test]
async fn required_roles_keep_a_servers_tools_from_chat_users() {
    require_python!();
    let setup = start(json!({
        "fixture": fixture(json!({"requiredRoles": ["admin"]})),
        "open": fixture(json!({}))
    }));
    connected(&setup, "fixture").await;
    connected(&setup, "open").await;
    let offered: Vec<String> = setup
        .runner
        .available_to(&user())
        .into_iter()
        .map(|t| t.def.name)
        .collect();
    assert!(
        offered.contains(&"mcp.open__echo".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|name| name.starts_with("mcp.fixture__")),
        "{offered:?}"
    );
    let refused = setup
        .call("mcp.fixture__echo", json!({"text": "hi"}))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ToolError::Forbidden { .. }),
        "{refused:?}"
    );
    let admin = ExecContext::new(&["admin"]);
    let answered = setup
        .runner
        .call("mcp.fixture__echo", json!({"text": "hi"}), &admin)
        .await
        .unwrap();
    assert!(answered.to_string().contains("hi"), "{answered}");
    setup.host.shutdown().await;
}

#[tokio::test]
async fn a_broken_config_entry_is_skipped_while_another_loads() {
    require_python!();
    let setup = start(json!({
        "bad name!": fixture(json!({})),
        "nothing": {"args": ["x"]},
        "fixture": fixture(json!({}))
    }));
    let names: Vec<String> = setup.host.servers().into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["fixture"]);
    connected(&setup, "fixture").await;
    assert!(setup.runner.get("mcp.fixture__echo").is_some());
    setup.host.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_crash_mid_call_is_reported_and_the_server_comes_back() {
    require_python!();
    let setup = start(json!({"fixture": fixture(json!({}))}));
    connected(&setup, "fixture").await;

    let crashed = setup
        .call("mcp.fixture__crash", json!({}))
        .await
        .unwrap_err();
    let text = failure_text(crashed);
    assert!(
        text.contains("was lost during `crash`") && text.contains("exit status: 3"),
        "{text}"
    );

    // While it is down, its tools stay registered and fail fast.
    assert!(setup.runner.get("mcp.fixture__echo").is_some());
    let started = Instant::now();
    let down = setup
        .call("mcp.fixture__echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    let text = failure_text(down);
    assert!(
        text.contains("fixture") && text.contains("reconnecting"),
        "{text}"
    );

    connected(&setup, "fixture").await;
    let server = status(&setup.host, "fixture");
    assert!(
        server
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("exited"),
        "{:?}",
        server.last_error
    );
    let back = setup
        .call("mcp.fixture__echo", json!({"text": "again"}))
        .await
        .unwrap();
    assert_eq!(back["text"], "again");

    // Killing the process while a call waits on it gives the same clear error.
    let pid = setup.call("mcp.fixture__pid", json!({})).await.unwrap()["structuredContent"]["pid"]
        .as_i64()
        .unwrap();
    let runner = setup.runner.clone();
    let slow = tokio::spawn(async move {
        runner
            .call("mcp.fixture__sleep", json!({"seconds": 10}), &user())
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // SAFETY: sends SIGKILL to the fixture's pid, a child of this test process that is
    // alive (it is serving the sleep call) and not yet reaped.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let text = failure_text(slow.await.unwrap().unwrap_err());
    assert!(text.contains("was lost during `sleep`"), "{text}");
    connected(&setup, "fixture").await;
    setup.host.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_server_that_never_answers_initialize_blocks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    let servers =
        json!({"mcpServers": {"mute": {"command": "sleep", "args": ["30"], "timeoutMs": 300}}});
    std::fs::write(&path, servers.to_string()).unwrap();
    let runner = Arc::new(ToolRunner::new(Duration::from_secs(5)));

    let started = Instant::now();
    let host = start_host(&path, &runner);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "start must not wait"
    );
    assert_eq!(status(&host, "mute").state, "connecting");

    wait_until(
        "the handshake timeout is reported",
        Duration::from_secs(5),
        || {
            status(&host, "mute")
                .last_error
                .is_some_and(|e| e.contains("did not answer `initialize` within 300 ms"))
        },
    )
    .await;
    let state = status(&host, "mute").state;
    assert!(matches!(state, "connecting" | "failed"), "{state}");
    assert!(mcp_tools(&runner, "mute").is_empty());

    let stopping = Instant::now();
    host.shutdown().await;
    assert!(stopping.elapsed() < Duration::from_secs(5));
    assert_eq!(status(&host, "mute").state, "disconnected");
}

#[cfg(unix)]
#[tokio::test]
async fn set_enabled_removes_and_restores_tools_and_shutdown_leaves_no_process() {
    require_python!();
    let setup =
        start(json!({"fixture": fixture(json!({})), "off": fixture(json!({"enabled": false}))}));
    connected(&setup, "fixture").await;
    assert_eq!(status(&setup.host, "off").state, "disabled");
    assert!(mcp_tools(&setup.runner, "off").is_empty());

    let unknown = setup.host.set_enabled("nope", true).await.unwrap_err();
    assert!(
        unknown.contains("fixture") && unknown.contains("off"),
        "{unknown}"
    );

    let pid = setup.call("mcp.fixture__pid", json!({})).await.unwrap()["structuredContent"]["pid"]
        .as_i64()
        .unwrap() as i32;
    let disabled = setup.host.set_enabled("fixture", false).await.unwrap();
    assert_eq!(
        (disabled.state, disabled.enabled, disabled.tool_count),
        ("disabled", false, 0)
    );
    assert!(mcp_tools(&setup.runner, "fixture").is_empty());
    // SAFETY: signal 0 only checks whether the process exists.
    assert_ne!(
        unsafe { libc::kill(pid, 0) },
        0,
        "the child process is gone"
    );
    assert!(matches!(
        setup.call("mcp.fixture__echo", json!({"text": "x"})).await,
        Err(ToolError::Unknown { .. })
    ));

    let enabled = setup.host.set_enabled("fixture", true).await.unwrap();
    assert!(enabled.enabled);
    connected(&setup, "fixture").await;
    assert!(setup.runner.get("mcp.fixture__echo").is_some());
    setup.host.set_enabled("off", true).await.unwrap();
    connected(&setup, "off").await;
    assert!(setup.runner.get("mcp.off__echo").is_some());

    let pid = setup.call("mcp.off__pid", json!({})).await.unwrap()["structuredContent"]["pid"]
        .as_i64()
        .unwrap() as i32;
    setup.host.shutdown().await;
    // SAFETY: signal 0 only checks whether the process exists.
    assert_ne!(
        unsafe { libc::kill(pid, 0) },
        0,
        "shutdown stopped the child"
    );
    let text = failure_text(
        setup
            .call("mcp.off__echo", json!({"text": "x"}))
            .await
            .unwrap_err(),
    );
    assert!(text.contains("not running"), "{text}");
}

/// Whether process `pid` has ended (gone, or a zombie waiting for its parent).
#[cfg(target_os = "linux")]
fn ended(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| stat.rsplit(") ").next().is_some_and(|s| s.starts_with('Z')))
        .unwrap_or(true)
}

/// Turning a server off stops its whole process group: a launcher (`sh -c` here) that
/// outlives the server, waiting on a child that does not read stdin, leaves nothing
/// behind when it dies of the signal.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn turning_a_server_off_stops_what_its_launcher_started() {
    require_python!();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("leftover.pid");
    let script = format!(
        "sleep 1000 & echo $! > {}; python3 {FIXTURE}; wait; true",
        pid_file.display()
    );
    let setup =
        start(json!({"launched": {"command": "sh", "args": ["-c", script], "timeoutMs": 5000}}));
    connected(&setup, "launched").await;
    setup.host.set_enabled("launched", false).await.unwrap();
    let leftover: i32 = std::fs::read_to_string(&pid_file)
        .expect("the launcher started its leftover before it was stopped")
        .trim()
        .parse()
        .unwrap();
    wait_until(
        "the launcher's leftover ended",
        Duration::from_secs(5),
        || ended(leftover),
    )
    .await;
    setup.host.shutdown().await;
}

#[tokio::test]
async fn list_changed_re_registers_tools() {
    require_python!();
    let setup = start(json!({"fixture": fixture(json!({}))}));
    connected(&setup, "fixture").await;
    assert!(setup.runner.get("mcp.fixture__extra").is_none());
    setup
        .call("mcp.fixture__echo", json!({"text": "before"}))
        .await
        .unwrap();

    setup.call("mcp.fixture__grow", json!({})).await.unwrap();
    wait_until("`extra` is registered", Duration::from_secs(5), || {
        setup.runner.get("mcp.fixture__extra").is_some()
    })
    .await;
    let extra = setup.call("mcp.fixture__extra", json!({})).await.unwrap();
    assert_eq!(extra["text"], "extra says hi");
    // Unchanged tools were left alone, so the runner kept their stats.
    assert_eq!(
        setup
            .runner
            .get("mcp.fixture__echo")
            .unwrap()
            .stats
            .invocations,
        1
    );
    setup.host.shutdown().await;
}

#[tokio::test]
async fn each_call_has_the_server_timeout() {
    require_python!();
    let setup = start(json!({"fixture": fixture(json!({"timeoutMs": 700}))}));
    connected(&setup, "fixture").await;
    let started = Instant::now();
    let text = failure_text(
        setup
            .call("mcp.fixture__sleep", json!({"seconds": 3}))
            .await
            .unwrap_err(),
    );
    assert!(
        text.contains("did not answer `sleep` within 700 ms"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    setup.host.shutdown().await;
}

// ---------------------------------------------------------------------------------
// Streamable HTTP

/// What a test HTTP server saw.
#[derive(Default)]
struct Seen {
    methods: Vec<String>,
    /// Requests that broke the transport rules; must stay empty.
    problems: Vec<String>,
    sessions: HashSet<String>,
    initializes: u32,
}

impl Seen {
    /// Reads one request (the whole body, its method, its id) and records its method.
    fn receive(&mut self, body: &str) -> (Value, String, Value) {
        let request: Value = serde_json::from_str(body).unwrap_or_default();
        let method = request["method"].as_str().unwrap_or_default().to_string();
        let id = request["id"].clone();
        self.methods.push(method.clone());
        (request, method, id)
    }
}

/// What every fake endpoint is handed: the server's record of what it saw.
type Fake = State<FakeServer>;

#[derive(Clone)]
struct FakeServer {
    seen: Arc<Mutex<Seen>>,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn json_reply(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn sse_reply(messages: &[Value]) -> Response {
    let mut body = String::from(": opening\n\n");
    for message in messages {
        body.push_str(&format!("event: message\ndata: {message}\n\n"));
    }
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        body,
    )
        .into_response()
}

fn text_content(text: &str) -> Value {
    json!([{"type": "text", "text": text}])
}

/// A modern-only server (2026-07-28): checks the headers and `_meta` of every request.
async fn modern_endpoint(State(server): Fake, headers: HeaderMap, body: String) -> Response {
    let mut seen = server.seen.lock().unwrap();
    let (request, method, id) = seen.receive(&body);
    if id.is_null() {
        return StatusCode::ACCEPTED.into_response();
    }
    let meta = &request["params"]["_meta"];
    let mut problems = Vec::new();
    if meta["io.modelcontextprotocol/protocolVersion"] != "2026-07-28"
        || !meta["io.modelcontextprotocol/clientCapabilities"].is_object()
        || meta["io.modelcontextprotocol/clientInfo"]["name"] != "porthole"
    {
        problems.push(format!("{method}: bad _meta {meta}"));
    }
    if header(&headers, "mcp-protocol-version") != Some("2026-07-28") {
        problems.push(format!("{method}: bad MCP-Protocol-Version"));
    }
    if header(&headers, "mcp-method") != Some(method.as_str()) {
        problems.push(format!("{method}: bad Mcp-Method"));
    }
    if method == "tools/call" && header(&headers, "mcp-name") != request["params"]["name"].as_str()
    {
        problems.push(format!("{method}: bad Mcp-Name"));
    }
    if !problems.is_empty() {
        seen.problems.extend(problems);
        return json_reply(
            StatusCode::BAD_REQUEST,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32020, "message": "Header mismatch"}}),
        );
    }
    let complete = |mut result: Value| {
        result["resultType"] = json!("complete");
        json!({"jsonrpc": "2.0", "id": id, "result": result})
    };
    match method.as_str() {
        "server/discover" => json_reply(
            StatusCode::OK,
            complete(
                json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": true}},
                "ttlMs": 0, "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "1"}}}),
            ),
        ),
        // A short listen stream: the acknowledgment, one change, then the end.
        "subscriptions/listen" => {
            if request["params"]["notifications"]["toolsListChanged"] != true {
                seen.problems
                    .push("listen: toolsListChanged not requested".into());
            }
            let tag = json!({"io.modelcontextprotocol/subscriptionId": id});
            sse_reply(&[
                json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                    "params": {"_meta": tag, "notifications": {"toolsListChanged": true}}}),
                json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                    "params": {"_meta": tag}}),
            ])
        }
        "tools/list" => {
            let page = match request["params"]["cursor"].as_str() {
                None => json!({"tools": [{"name": "hello", "description": "Greets.",
                    "inputSchema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}}],
                    "nextCursor": "2"}),
                Some(_) => {
                    json!({"tools": [{"name": "weather", "description": "Weather of a region.",
                    "inputSchema": {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                    "required": ["region"]}}]})
                }
            };
            let mut page = page;
            page["ttlMs"] = json!(0);
            page["cacheScope"] = json!("public");
            json_reply(StatusCode::OK, complete(page))
        }
        "tools/call" => {
            let args = &request["params"]["arguments"];
            match request["params"]["name"].as_str() {
                Some("hello") => sse_reply(&[
                    json!({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "data": "saying hello"}}),
                    complete(
                        json!({"content": text_content(&format!("hello {}", args["who"].as_str().unwrap_or("?")))}),
                    ),
                ]),
                Some("weather") => {
                    if header(&headers, "mcp-param-region") != args["region"].as_str() {
                        seen.problems.push("weather: bad Mcp-Param-Region".into());
                    }
                    json_reply(
                        StatusCode::OK,
                        complete(json!({"content": text_content("sunny"), "isError": false})),
                    )
                }
                _ => json_reply(
                    StatusCode::OK,
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "Unknown tool"}}),
                ),
            }
        }
        _ => json_reply(
            StatusCode::NOT_FOUND,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Method not found: {method}")}}),
        ),
    }
}

/// A legacy-only server (2025-11-25): rejects `server/discover` the way session-based
/// servers do, and needs `initialize`, a session id and the negotiated version header.
async fn legacy_endpoint(State(server): Fake, headers: HeaderMap, body: String) -> Response {
    let mut seen = server.seen.lock().unwrap();
    let (request, method, id) = seen.receive(&body);
    if method == "initialize" {
        seen.initializes += 1;
        let session = format!("session-{}", seen.initializes);
        seen.sessions.insert(session.clone());
        if request["params"]["protocolVersion"] != "2025-11-25" {
            seen.problems
                .push("initialize: wrong protocolVersion".into());
        }
        let result = json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "legacy", "version": "1"}}});
        return (
            StatusCode::OK,
            [
                (
                    axum::http::header::CONTENT_TYPE.as_str(),
                    "application/json",
                ),
                ("mcp-session-id", session.as_str()),
            ],
            result.to_string(),
        )
            .into_response();
    }
    let no_session = json!({"jsonrpc": "2.0", "error": {"code": -32000,
        "message": "Bad Request: No valid session ID provided"}, "id": null});
    let Some(session) = header(&headers, "mcp-session-id") else {
        if method != "server/discover" {
            seen.problems.push(format!("{method}: no session id"));
        }
        return json_reply(StatusCode::BAD_REQUEST, no_session);
    };
    if !seen.sessions.contains(session) {
        return json_reply(
            StatusCode::NOT_FOUND,
            json!({"jsonrpc": "2.0", "error": {"code": -32001, "message": "Session not found"}, "id": null}),
        );
    }
    if header(&headers, "mcp-protocol-version") != Some("2025-11-25") {
        seen.problems
            .push(format!("{method}: bad MCP-Protocol-Version"));
    }
    if id.is_null() {
        return StatusCode::ACCEPTED.into_response();
    }
    match method.as_str() {
        "tools/list" => sse_reply(&[json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
            {"name": "hello", "description": "Greets.", "inputSchema": {"type": "object",
                "properties": {"who": {"type": "string"}}}}]}})]),
        "tools/call" => json_reply(
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": text_content("hello from the past")}}),
        ),
        _ => json_reply(
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
        ),
    }
}

/// Serves `endpoint` on 127.0.0.1 at `/mcp`; returns the URL and what the server saw.
async fn serve<H, T>(endpoint: H) -> (String, Arc<Mutex<Seen>>)
where
    H: axum::handler::Handler<T, FakeServer>,
    T: 'static,
{
    let seen = Arc::new(Mutex::new(Seen::default()));
    let app = axum::Router::new()
        .route("/mcp", axum::routing::post(endpoint))
        .with_state(FakeServer { seen: seen.clone() });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/mcp"), seen)
}

#[tokio::test]
async fn http_modern_server_is_used_in_the_modern_era() {
    let (url, seen) = serve(modern_endpoint).await;
    let setup =
        start(json!({"modern": {"url": url, "headers": {"X-Test": "1"}, "timeoutMs": 5000}}));
    connected(&setup, "modern").await;
    let server = status(&setup.host, "modern");
    assert_eq!(server.transport, "http");
    assert_eq!(server.protocol_version.as_deref(), Some("2026-07-28"));
    assert_eq!(
        mcp_tools(&setup.runner, "modern"),
        vec!["mcp.modern__hello", "mcp.modern__weather"]
    );

    let hello = setup
        .call("mcp.modern__hello", json!({"who": "there"}))
        .await
        .unwrap();
    assert_eq!(
        hello["text"], "hello there",
        "answer taken from the SSE stream"
    );
    let weather = setup
        .call("mcp.modern__weather", json!({"region": "Nord-Ost"}))
        .await
        .unwrap();
    assert_eq!(weather["text"], "sunny");

    // The change announced on the listen stream made the client list the tools again.
    wait_until("the tools are listed again", Duration::from_secs(5), || {
        let seen = seen.lock().unwrap();
        seen.methods.contains(&"subscriptions/listen".to_string())
            && seen.methods.iter().filter(|m| *m == "tools/list").count() >= 4
    })
    .await;

    {
        let seen = seen.lock().unwrap();
        assert!(seen.problems.is_empty(), "{:?}", seen.problems);
        assert!(
            !seen.methods.contains(&"initialize".to_string()),
            "{:?}",
            seen.methods
        );
        assert_eq!(seen.methods[0], "server/discover");
    }
    setup.host.shutdown().await;
}

#[tokio::test]
async fn http_legacy_server_gets_initialize_and_a_session() {
    let (url, seen) = serve(legacy_endpoint).await;
    let setup = start(json!({"legacy": {"url": url}}));
    connected(&setup, "legacy").await;
    assert_eq!(
        status(&setup.host, "legacy").protocol_version.as_deref(),
        Some("2025-11-25")
    );
    assert_eq!(
        mcp_tools(&setup.runner, "legacy"),
        vec!["mcp.legacy__hello"]
    );
    let hello = setup
        .call("mcp.legacy__hello", json!({"who": "x"}))
        .await
        .unwrap();
    assert_eq!(hello["text"], "hello from the past");

    // The server forgets the session: the client starts a new one and retries.
    seen.lock().unwrap().sessions.clear();
    let again = setup.call("mcp.legacy__hello", json!({})).await.unwrap();
    assert_eq!(again["text"], "hello from the past");

    {
        let seen = seen.lock().unwrap();
        assert!(seen.problems.is_empty(), "{:?}", seen.problems);
        assert_eq!(seen.initializes, 2);
        assert_eq!(
            &seen.methods[..4],
            [
                "server/discover",
                "initialize",
                "notifications/initialized",
                "tools/list"
            ]
        );
    }
    setup.host.shutdown().await;
}

#[tokio::test]
async fn http_server_that_is_down_is_failed_and_retried() {
    // Bind and drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let setup =
        start(json!({"down": {"url": format!("http://127.0.0.1:{port}/mcp?token=secret")}}));
    wait_until("the failure is reported", Duration::from_secs(5), || {
        status(&setup.host, "down").last_error.is_some()
    })
    .await;
    let server = status(&setup.host, "down");
    let error = server.last_error.unwrap();
    assert!(error.contains("cannot reach"), "{error}");
    assert!(
        !error.contains("secret"),
        "the query string is not shown: {error}"
    );
    assert!(matches!(server.state, "failed" | "connecting"));
    setup.host.shutdown().await;
}

#[tokio::test]
async fn the_reference_everything_server_works_as_an_external_server() {
    if !has_everything_server() {
        return;
    }
    let setup = start(
        json!({"everything": {"command": "node", "args": [EVERYTHING_SERVER, "stdio"], "timeoutMs": 15000}}),
    );
    connected(&setup, "everything").await;
    let tools = mcp_tools(&setup.runner, "everything");
    assert!(
        tools.contains(&"mcp.everything__echo".to_string()),
        "{tools:?}"
    );
    let echoed = setup
        .call("mcp.everything__echo", json!({"message": "porthole"}))
        .await
        .unwrap();
    assert!(echoed.to_string().contains("porthole"), "{echoed}");
    let stats = status(&setup.host, "everything").stats;
    assert_eq!((stats.invocations, stats.errors), (1, 0));
    setup.host.shutdown().await;
}
