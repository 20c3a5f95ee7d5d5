//! One MCP request through the real `/mcp` router, in process: guards (loopback,
//! misconfiguration, Host/Origin, bearer token), media-type checks, JSON parsing, era
//! routing, header validation, dispatch, the handler task, and serialising the reply.
//! Only hyper and the socket are left out (`scripts/bench.sh` has those).
//!
//! The dispatcher itself (`mcp::methods::dispatch`) is crate-private, so the smallest
//! public unit is `McpServer::router()` driven with `tower::ServiceExt::oneshot`: these
//! figures are an upper bound on dispatch alone. The router is the one `app::start`
//! builds for the bot, with its 28 diagnostics tools.
//!
//! Groups:
//! - `mcp/tools_list`: `tools/list`, modern (stateless) and legacy (in a session);
//! - `mcp/tools_call`: `tools/call list_agents`, both eras;
//! - `mcp/server_log`: `tools/call server_log` with a grep over a full 10,000-line buffer;
//! - `mcp_disabled/api_info`: `GET /api/info` on the web router of a bot with MCP off
//!   (exactly the router `app::start` serves then) vs the web router merged with `/mcp`
//!   as with MCP on.
//!
//! Each iteration builds the request (headers and body) and reads the whole reply body.
//! Run: `cargo bench --bench dispatch`.

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tower::ServiceExt;

mod common;
use common::{TOKEN, full_buffer, start_bot};

const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// The body and headers of one request, prepared once; each iteration builds the
/// `http::Request` from them (as hyper would from the wire).
#[derive(Clone)]
struct Prepared {
    body: String,
    headers: Vec<(&'static str, String)>,
}

impl Prepared {
    fn modern(method: &'static str, name: Option<&str>, mut params: Value) -> Self {
        params["_meta"] = meta();
        let mut headers = vec![
            ("mcp-protocol-version", MODERN.to_string()),
            ("mcp-method", method.to_string()),
        ];
        if let Some(name) = name {
            headers.push(("mcp-name", name.to_string()));
        }
        Prepared {
            body: json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
                .to_string(),
            headers,
        }
    }

    fn legacy(session: &str, method: &str, params: Value) -> Self {
        Prepared {
            body: json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
                .to_string(),
            headers: vec![
                ("mcp-protocol-version", LEGACY.to_string()),
                ("mcp-session-id", session.to_string()),
            ],
        }
    }

    fn request(&self) -> Request<Body> {
        let mut builder = Request::post("/mcp")
            .header("host", "127.0.0.1:3000")
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        for (k, v) in &self.headers {
            builder = builder.header(*k, v.as_str());
        }
        with_peer(builder.body(Body::from(self.body.clone())).unwrap())
    }
}

fn with_peer(mut request: Request<Body>) -> Request<Body> {
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 50_000))));
    request
}

fn get_info() -> Request<Body> {
    with_peer(
        Request::get("/api/info")
            .header("host", "127.0.0.1:3000")
            .body(Body::empty())
            .unwrap(),
    )
}

async fn send(router: &Router, request: Request<Body>) -> (StatusCode, axum::body::Bytes) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, body)
}

/// Times `iters` requests made by `make`, sequentially, on the bench runtime.
fn time_requests(
    rt: &tokio::runtime::Runtime,
    router: &Router,
    make: &dyn Fn() -> Request<Body>,
    iters: u64,
) -> Duration {
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(send(router, make()).await);
        }
        start.elapsed()
    })
}

/// Sends one request and insists on a good answer before anything is timed.
fn check(rt: &tokio::runtime::Runtime, router: &Router, request: Request<Body>, expect: &str) {
    let (status, body) = rt.block_on(send(router, request));
    let text = String::from_utf8_lossy(&body);
    assert_eq!(status, StatusCode::OK, "{text}");
    let value: Value = serde_json::from_slice(&body).expect("JSON reply");
    assert!(
        text.contains(expect) && value.get("error").is_none(),
        "expected `{expect}` in {text}"
    );
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let on = rt.block_on(start_bot(true, Some(full_buffer())));
    let off = rt.block_on(start_bot(false, None));
    let mcp = on.mcp.as_ref().expect("MCP enabled").router();

    // A legacy session, initialized as a client would.
    let init = Prepared {
        body: json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}})
        .to_string(),
        headers: Vec::new(),
    };
    let session = rt.block_on(async {
        let response = mcp.clone().oneshot(init.request()).await.unwrap();
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let initialized = Prepared {
            body: json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
            headers: vec![
                ("mcp-protocol-version", LEGACY.to_string()),
                ("mcp-session-id", id.clone()),
            ],
        };
        let (status, _) = send(&mcp, initialized.request()).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        id
    });

    let cases: Vec<(&str, &str, Prepared, &str)> = vec![
        (
            "mcp/tools_list",
            "modern",
            Prepared::modern("tools/list", None, json!({})),
            "\"tools\"",
        ),
        (
            "mcp/tools_list",
            "legacy",
            Prepared::legacy(&session, "tools/list", json!({})),
            "\"tools\"",
        ),
        (
            "mcp/tools_call",
            "modern_list_agents",
            Prepared::modern(
                "tools/call",
                Some("list_agents"),
                json!({"name": "list_agents", "arguments": {}}),
            ),
            "structuredContent",
        ),
        (
            "mcp/tools_call",
            "legacy_list_agents",
            Prepared::legacy(
                &session,
                "tools/call",
                json!({"name": "list_agents", "arguments": {}}),
            ),
            "structuredContent",
        ),
        (
            "mcp/server_log",
            "modern_grep_rare_full_buffer",
            Prepared::modern(
                "tools/call",
                Some("server_log"),
                json!({"name": "server_log", "arguments": {"grep": "connection reset"}}),
            ),
            "connection reset",
        ),
        (
            "mcp/server_log",
            "modern_grep_absent_full_buffer",
            Prepared::modern(
                "tools/call",
                Some("server_log"),
                json!({"name": "server_log", "arguments": {"grep": "disk quota exceeded"}}),
            ),
            "structuredContent",
        ),
    ];
    for (group, name, prepared, expect) in &cases {
        check(&rt, &mcp, prepared.request(), expect);
        let mut g = c.benchmark_group(*group);
        g.bench_function(*name, |b| {
            b.iter_custom(|iters| time_requests(&rt, &mcp, &|| prepared.request(), iters))
        });
        g.finish();
    }

    // MCP off: the web router is all `app::start` serves. MCP on: /mcp merged in.
    let web_off = porthole::bot::web::router(off.bot.clone());
    let web_on = porthole::bot::web::router(on.bot.clone()).merge(mcp.clone());
    check(&rt, &web_off, get_info(), "porthole");
    check(&rt, &web_on, get_info(), "porthole");
    let mut g = c.benchmark_group("mcp_disabled/api_info");
    g.bench_function("mcp_off", |b| {
        b.iter_custom(|iters| time_requests(&rt, &web_off, &get_info, iters))
    });
    g.bench_function("mcp_on", |b| {
        b.iter_custom(|iters| time_requests(&rt, &web_on, &get_info, iters))
    });
    g.finish();

    let sessions = on.mcp.as_ref().map(|m| m.live_sessions()).unwrap_or(0);
    eprintln!("live sessions at the end: {sessions}");
    rt.block_on(async {
        on.shutdown().await;
        off.shutdown().await;
    });
}

criterion_group!(dispatch, benches);
criterion_main!(dispatch);
