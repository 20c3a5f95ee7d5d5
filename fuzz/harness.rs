//! The `/mcp` router harness of the `mcp_request` and `headers` fuzz targets (listed
//! with the others in `targets.rs`), shared by `fuzz_targets/` (libFuzzer, nightly) and
//! `examples/fuzz_stable.rs` (a seeded mutation loop on the stable toolchain).
//!
//! `mcp_request`: one input becomes one HTTP request sent to the real `/mcp` router of an
//! [`porthole::mcp::McpServer`] (all guards on, bearer auth) with
//! `tower::ServiceExt::oneshot`, so it runs message parsing, header validation (version,
//! `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`, the Base64 sentinel), era routing, sessions,
//! dispatch, argument validation, MRTR sealed state and both reply shapes (JSON, SSE).
//!
//! Input layout: `flags` byte, then the body. With `RAW_HEADERS`, the bytes before the
//! first and second NUL are raw `Mcp-Name` and `Mcp-Method` values, the rest the body.
//! Otherwise those headers are derived from the body (when it parses), so the fuzzer
//! gets past header checks and into dispatch.
//!
//! `headers`: the input is the values of the headers in [`FUZZED_HEADERS`], in that
//! order, separated by NUL bytes (an empty value leaves the header out; `$SESSION`
//! stands for the harness's live session id), then the body; the first byte picks the
//! method (POST, GET, DELETE) and, when the body is empty, one of the [`seeds`] bodies.
//! On top of the invariants below: no 2xx without the token in `Authorization`, a
//! loopback `Host`, and a loopback `Origin` when one is sent.
//!
//! Invariants (a violation panics, which libFuzzer records as a crash):
//! - no panic escapes, no JSON reply takes longer than 2 s (a hang); an SSE reply is
//!   read until it goes quiet (see [`ready_frames`]);
//! - the status is one `/mcp` documents (2xx, 400, 401, 403, 404, 405, 406, 413, 415),
//!   never a 5xx;
//! - every JSON body is JSON-RPC 2.0 (an object with `"jsonrpc":"2.0"`, or an array of them);
//! - no reply says a handler crashed (a panic inside a handler task);
//! - a request without the token gets 401.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request};
use porthole::mcp::{
    Annotations, Auth, CallToolResult, McpServer, Outcome, RequestContext, RpcError, SessionConfig,
    Tool, ToolSpec,
};
use serde_json::{Value, json};
use tower::ServiceExt;

pub const TOKEN: &str = "fuzz-secret-0123456789abcdef0123456789";
pub const MODERN: &str = "2026-07-28";
pub const LEGACY: &str = "2025-11-25";

/// Flag bits of the first input byte.
pub mod flags {
    /// Legacy era: 2025-11-25 version header and the harness's session id.
    pub const LEGACY: u8 = 1;
    pub const NO_VERSION_HEADER: u8 = 2;
    /// Modern: leave out `Mcp-Method`/`Mcp-Name`. Legacy: leave out the session id.
    pub const NO_ROUTING_HEADERS: u8 = 4;
    pub const RAW_HEADERS: u8 = 8;
    pub const ACCEPT_JSON_ONLY: u8 = 16;
    pub const WRONG_CONTENT_TYPE: u8 = 32;
    pub const GET: u8 = 64;
    pub const NO_TOKEN: u8 = 128;
}

/// `echo`: a typed schema with an `x-mcp-header` parameter; with `steps` > 0 it sends
/// progress and log messages first, so the reply becomes an SSE stream.
struct Echo;

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "echo".into(),
            title: None,
            description: "Echoes text back.".into(),
            input_schema: json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "text": {"type": "string", "maxLength": 4096, "x-mcp-header": "Text"},
                    "steps": {"type": "integer", "minimum": 0, "maximum": 3}
                },
                "required": ["text"]
            }),
            output_schema: None,
            annotations: Annotations::READ_ONLY,
            max_result_chars: None,
        }
    }

    async fn call(
        &self,
        args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let steps = args["steps"].as_u64().unwrap_or(0);
        for step in 0..steps {
            ctx.progress(step as f64, Some(steps as f64), Some("working"));
            ctx.log("info", "echo", json!({"step": step}));
        }
        Ok(Outcome::Complete(CallToolResult::structured(
            json!({"text": args["text"]}),
        )))
    }
}

/// `confirm`: asks the client for input (MRTR in 2026) and checks sealed state.
struct Confirm;

#[async_trait]
impl Tool for Confirm {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "confirm".into(),
            title: None,
            description: "Asks the client to confirm.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
            output_schema: None,
            annotations: Annotations::READ_ONLY,
            max_result_chars: None,
        }
    }

    async fn call(
        &self,
        _args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let state = ctx.request_state()?;
        match (state, ctx.input_response("ok")) {
            (Some(_), Some(answer)) => {
                Ok(Outcome::Complete(CallToolResult::text(answer.to_string())))
            }
            _ => Ok(Outcome::InputRequired(porthole::mcp::InputRequired::ask(
                "ok",
                porthole::mcp::input_request(
                    "elicitation/create",
                    json!({"message": "ok?", "requestedSchema": {"type": "object"}}),
                ),
                Some(ctx.seal_state(&json!({"step": 1}))),
            ))),
        }
    }
}

pub struct Harness {
    rt: tokio::runtime::Runtime,
    router: Router,
    session: String,
}

static HARNESS: OnceLock<Harness> = OnceLock::new();

impl Harness {
    pub fn get() -> &'static Harness {
        HARNESS.get_or_init(Harness::new)
    }

    fn new() -> Harness {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let server = McpServer::builder("fuzz", "0")
            .auth(Auth::bearer(TOKEN))
            .signing_secret(Some(TOKEN.into()))
            .max_body_bytes(64 * 1024)
            .sessions(SessionConfig {
                max_sessions: 1_000_000,
                idle_timeout: Duration::from_secs(24 * 3600),
                ..SessionConfig::default()
            })
            .tools(vec![Arc::new(Echo), Arc::new(Confirm)])
            .build()
            .expect("server builds");
        let router = server.router();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}});
        let session = rt.block_on(async {
            let request = base(Request::post("/mcp"), true)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(Body::from(init.to_string()))
                .unwrap();
            let response = router.clone().oneshot(with_peer(request)).await.unwrap();
            response.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_string()
        });
        Harness {
            rt,
            router,
            session,
        }
    }

    /// Builds the request an input stands for.
    pub fn request(&self, data: &[u8]) -> (Request<Body>, bool) {
        let (flag, rest) = data.split_first().map_or((0, data), |(f, r)| (*f, r));
        let has = |bit: u8| flag & bit != 0;
        let (raw_name, raw_method, body) = if has(flags::RAW_HEADERS) {
            let mut parts = rest.splitn(3, |b| *b == 0);
            (parts.next(), parts.next(), parts.next().unwrap_or_default())
        } else {
            (None, None, rest)
        };
        let builder = if has(flags::GET) {
            Request::get("/mcp")
        } else {
            Request::post("/mcp")
        };
        let mut builder = base(builder, !has(flags::NO_TOKEN));
        if has(flags::ACCEPT_JSON_ONLY) {
            builder = builder.header("accept", "application/json");
        } else {
            builder = builder.header("accept", "application/json, text/event-stream");
        }
        builder = builder.header(
            "content-type",
            if has(flags::WRONG_CONTENT_TYPE) {
                "text/plain"
            } else {
                "application/json"
            },
        );
        let legacy = has(flags::LEGACY);
        if !has(flags::NO_VERSION_HEADER) {
            builder = builder.header("mcp-protocol-version", if legacy { LEGACY } else { MODERN });
        }
        if legacy && !has(flags::NO_ROUTING_HEADERS) {
            builder = builder.header("mcp-session-id", self.session.as_str());
        }
        if !legacy && !has(flags::NO_ROUTING_HEADERS) {
            let parsed: Option<Value> = serde_json::from_slice(body).ok();
            let method = parsed.as_ref().and_then(|v| v["method"].as_str());
            let name = parsed.as_ref().and_then(|v| {
                v["params"]["name"]
                    .as_str()
                    .or_else(|| v["params"]["uri"].as_str())
            });
            let text = parsed
                .as_ref()
                .and_then(|v| v["params"]["arguments"]["text"].as_str());
            let header = |raw: Option<&[u8]>, derived: Option<&str>| match raw {
                Some(bytes) => HeaderValue::from_bytes(bytes).ok(),
                None => derived.and_then(|d| HeaderValue::from_str(d).ok()),
            };
            if let Some(v) = header(raw_method, method) {
                builder = builder.header("mcp-method", v);
            }
            if let Some(v) = header(raw_name, name) {
                builder = builder.header("mcp-name", v);
            }
            if let Some(v) = text.and_then(|t| HeaderValue::from_str(t).ok()) {
                builder = builder.header("mcp-param-text", v);
            }
        }
        let request = builder.body(Body::from(body.to_vec())).unwrap();
        (with_peer(request), has(flags::NO_TOKEN))
    }

    /// Sends one `mcp_request` input and checks the invariants; panics on a violation.
    /// Returns the HTTP status.
    pub fn run(&self, data: &[u8]) -> u16 {
        let (request, no_token) = self.request(data);
        self.send(request, no_token).0
    }

    /// [`Harness::run`], returning the outcome class (see [`class`]).
    pub fn run_class(&self, data: &[u8]) -> String {
        let (request, no_token) = self.request(data);
        let (status, body) = self.send(request, no_token);
        class(status, &body)
    }

    /// Sends one `headers` input (layout in the module docs) and checks the invariants;
    /// returns its outcome class: the status and the start of the error message.
    pub fn run_headers(&self, data: &[u8]) -> String {
        let (selector, rest) = data.split_first().map_or((0, data), |(f, r)| (*f, r));
        let mut fields = rest.splitn(FUZZED_HEADERS.len() + 1, |b| *b == 0);
        let mut builder = Request::builder()
            .uri("/mcp")
            .method(["POST", "GET", "DELETE"][selector as usize % 3]);
        let mut sent: Vec<(&str, Vec<u8>)> = Vec::new();
        for name in FUZZED_HEADERS {
            let value = fields.next().unwrap_or_default();
            if value.is_empty() {
                continue;
            }
            let value = if value == b"$SESSION" {
                self.session.as_bytes().to_vec()
            } else {
                value.to_vec()
            };
            if let Ok(header) = HeaderValue::from_bytes(&value) {
                builder = builder.header(*name, header);
                sent.push((name, value));
            }
        }
        let body = match fields.next().unwrap_or_default() {
            [] => {
                let bodies = seeds();
                let seed = &bodies[(selector as usize / 3) % bodies.len()];
                seed[1..].to_vec()
            }
            body => body.to_vec(),
        };
        let request = with_peer(builder.body(Body::from(body)).unwrap());
        let value = |name: &str| {
            sent.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| String::from_utf8_lossy(v).to_ascii_lowercase())
        };
        let loopback = |v: &str| {
            ["localhost", "127.0.0.1", "::1"]
                .iter()
                .any(|n| v.contains(n))
        };
        let token_sent =
            value("authorization").is_some_and(|v| v.contains(&TOKEN.to_ascii_lowercase()));
        let host_ok = value("host").is_some_and(|v| loopback(&v));
        let origin_ok = value("origin").is_none_or(|v| loopback(&v));
        let (status, body) = self.send(request, false);
        if (200..300).contains(&status) {
            assert!(token_sent, "{status} without the token");
            assert!(host_ok, "{status} for a Host that is not a loopback name");
            assert!(
                origin_ok,
                "{status} for an Origin that is not a loopback origin"
            );
        }
        class(status, &body)
    }

    /// Sends a request and checks the invariants shared by both targets; panics on a
    /// violation. Returns the status and the body (empty for a stream still open).
    fn send(&self, request: Request<Body>, no_token: bool) -> (u16, String) {
        let router = self.router.clone();
        self.rt.block_on(async move {
            let response = tokio::time::timeout(Duration::from_secs(2), router.oneshot(request))
                .await
                .expect("no reply head within 2 s (hang)")
                .expect("the router is infallible");
            let status = response.status().as_u16();
            if no_token {
                assert_eq!(status, 401, "a request without the token must get 401");
            }
            assert!(
                matches!(
                    status,
                    200..=299 | 400 | 401 | 403 | 404 | 405 | 406 | 413 | 415
                ),
                "unexpected status {status}"
            );
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let body = if content_type.starts_with("text/event-stream") {
                ready_frames(response.into_body()).await
            } else {
                tokio::time::timeout(
                    Duration::from_secs(2),
                    axum::body::to_bytes(response.into_body(), 1 << 24),
                )
                .await
                .expect("JSON body not complete within 2 s (hang)")
                .expect("body reads")
                .to_vec()
            };
            let text = String::from_utf8_lossy(&body).into_owned();
            assert!(
                !text.contains("handler crashed"),
                "a handler panicked: {text}"
            );
            if content_type.starts_with("application/json") {
                let value: Value = serde_json::from_slice(&body)
                    .unwrap_or_else(|e| panic!("JSON reply does not parse ({e}): {text}"));
                let rpc = |v: &Value| v["jsonrpc"] == "2.0";
                let ok = match &value {
                    Value::Array(items) => !items.is_empty() && items.iter().all(rpc),
                    other => rpc(other),
                };
                assert!(ok, "JSON reply is not JSON-RPC 2.0: {text}");
            }
            (status, text)
        })
    }
}

/// An outcome class: the status and the shape of the JSON-RPC error message, if any.
fn class(status: u16, body: &str) -> String {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(crate::targets::shape))
        .unwrap_or_default();
    format!("{status}:{message}")
}

/// The headers the `headers` target sets, in input order.
pub const FUZZED_HEADERS: &[&str] = &[
    "host",
    "origin",
    "authorization",
    "accept",
    "content-type",
    "mcp-protocol-version",
    "mcp-session-id",
    "mcp-method",
    "mcp-name",
    "mcp-param-text",
    "last-event-id",
];

/// `headers` seeds: each of the [`seeds`] bodies with the headers a client sends,
/// and a few refusals.
pub fn header_seeds() -> Vec<Vec<u8>> {
    let bearer = format!("Bearer {TOKEN}");
    let accept = "application/json, text/event-stream";
    let json = "application/json";
    let modern = |method: &str, name: &str| {
        [
            "127.0.0.1:3000",
            "",
            &bearer,
            accept,
            json,
            MODERN,
            "",
            method,
            name,
            "",
            "",
        ]
        .join("\0")
    };
    let legacy = [
        "localhost",
        "http://localhost:5173",
        &bearer,
        accept,
        json,
        LEGACY,
        "$SESSION",
        "",
        "",
        "",
        "",
    ]
    .join("\0");
    let inputs = [
        (0u8, modern("tools/list", "")),
        (3, modern("tools/call", "echo")),
        (6, modern("tools/call", "confirm")),
        (24, legacy.clone()),
        (1, legacy.replace(accept, "text/event-stream")),
        (2, legacy.clone()),
        (0, legacy.replace("localhost\0", "evil.example\0")),
        (
            0,
            legacy.replace("http://localhost:5173", "http://evil.example"),
        ),
        (0, legacy.replace(&bearer, "Basic x")),
        (0, legacy.replace(json, "text/plain")),
        (0, legacy.replace(accept, "text/html")),
        (0, legacy.replace(LEGACY, "1999-01-01")),
    ];
    inputs
        .into_iter()
        .map(|(selector, fields)| {
            let mut input = vec![selector];
            input.extend(fields.into_bytes());
            input.push(0);
            input
        })
        .collect()
}

/// What an SSE body sends until it goes quiet: frames are read while the server's tasks
/// keep producing them, and reading stops once 16 turns of the (single-threaded)
/// runtime in a row bring nothing, so a stream held open (`subscriptions/listen`, GET)
/// costs microseconds rather than a wall-clock wait.
async fn ready_frames(body: Body) -> Vec<u8> {
    use futures::{FutureExt, StreamExt};
    let mut stream = body.into_data_stream();
    let (mut out, mut idle) = (Vec::new(), 0);
    while idle < 16 {
        match stream.next().now_or_never() {
            Some(Some(Ok(chunk))) => {
                out.extend_from_slice(&chunk);
                idle = 0;
            }
            Some(_) => break,
            None => {
                idle += 1;
                tokio::task::yield_now().await;
            }
        }
    }
    out
}

fn base(builder: axum::http::request::Builder, token: bool) -> axum::http::request::Builder {
    let builder = builder.header("host", "127.0.0.1:3000");
    if token {
        builder.header("authorization", format!("Bearer {TOKEN}"))
    } else {
        builder
    }
}

fn with_peer(mut request: Request<Body>) -> Request<Body> {
    request
        .extensions_mut()
        .insert(ConnectInfo(std::net::SocketAddr::from((
            [127, 0, 0, 1],
            40_000,
        ))));
    request
}

/// Seed inputs: one valid request of each kind, in the input layout above.
pub fn seeds() -> Vec<Vec<u8>> {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    // Plain functions rather than closures building `json!` around a moved `Value`:
    // that shape is miscompiled by rustc 1.95.0 at opt-level 3 (use after free; see
    // docs/performance.md, "A compiler finding").
    fn envelope(flag: u8, id: u64, method: &str, params: Value) -> Vec<u8> {
        let mut message = serde_json::Map::new();
        message.insert("jsonrpc".into(), Value::from("2.0"));
        message.insert("id".into(), Value::from(id));
        message.insert("method".into(), Value::from(method));
        message.insert("params".into(), params);
        let mut input = vec![flag];
        input.extend(serde_json::to_vec(&Value::Object(message)).expect("serialises"));
        input
    }
    let modern = |method: &str, mut params: Value| {
        params["_meta"] = meta.clone();
        envelope(0, 1, method, params)
    };
    let legacy = |method: &str, params: Value| envelope(flags::LEGACY, 2, method, params);
    let mut raw = vec![flags::RAW_HEADERS];
    raw.extend_from_slice(b"=?base64?ZWNobw==?=\0tools/call\0");
    raw.extend(
        json!({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": "hi"}, "_meta": meta.clone()}})
        .to_string()
        .into_bytes(),
    );
    vec![
        modern("tools/list", json!({})),
        modern(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hello", "steps": 2}}),
        ),
        modern("tools/call", json!({"name": "confirm", "arguments": {}})),
        modern(
            "tools/call",
            json!({"name": "confirm", "arguments": {}, "inputResponses": {"ok": {"action": "accept"}},
                   "requestState": "AAAA"}),
        ),
        modern("server/discover", json!({})),
        modern(
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        ),
        modern("resources/list", json!({"cursor": "offset-0"})),
        modern(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "b"}}),
        ),
        legacy("tools/list", json!({})),
        legacy(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "legacy", "steps": 1}}),
        ),
        legacy("ping", json!({})),
        legacy("logging/setLevel", json!({"level": "debug"})),
        legacy(
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {}}),
        ),
        {
            let mut v = vec![flags::LEGACY];
            v.extend_from_slice(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
            v
        },
        {
            let mut v = vec![flags::NO_VERSION_HEADER | flags::NO_ROUTING_HEADERS];
            v.extend_from_slice(
                br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{}}}"#,
            );
            v
        },
        {
            let mut v = vec![flags::LEGACY];
            v.extend_from_slice(
                br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            );
            v
        },
        raw,
    ]
}
