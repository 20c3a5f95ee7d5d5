//! Heap allocations (and bytes allocated) per `/mcp` `tools/call`: a figure that, unlike time, is the same on
//! every machine, held to a ceiling so that a change which allocates more per request
//! fails here instead of showing up later as a slower benchmark.
//!
//! The request goes through the bot's real `/mcp` router in process (guards, parsing,
//! era routing, dispatch, the tool, the reply's serialisation), as `benches/dispatch.rs`
//! drives it; hyper and the socket are left out. A counting global allocator counts the
//! allocations made on this test's thread while a request is served: the runtime is
//! single-threaded, so that is the whole request, and background work of the bot (the
//! log journal's writer, the store's threads) is not counted.
//!
//! When a change lowers a figure for good, lower its ceiling here (and say so in
//! docs/performance.md); raising one needs a reason written next to it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common;
use common::{MODERN, TOKEN, start_bot};

/// The most allocations and bytes allocated one `tools/call list_agents` may make, per
/// era: (era, allocations, bytes). Set from the figures this test printed: on
/// 2026-11-27 (`Intel Xeon`), modern 19 allocations and 8,465 bytes, legacy 22 and
/// 10,009, with about 10 % room (the bytes also depend on the machine: the reply names
/// its host). That is the request itself (40 / 40 on the morning of 2026-11-26: the
/// guard a call in the handlers instead of a layer, legacy sessions without id and key
/// strings, no channel for a call that can send nothing first, `tools/call` read into
/// typed fields instead of a `params` map and the tool's name shared with the tool set,
/// a body that came in one piece taken as it is), with the trace span every `/mcp` tool
/// call records at no allocation of its own: its record holds its ids as numbers and
/// waits in a ring made to size at start-up (`src/bot/trace/call.rs`; it was 4
/// allocations, the ids as text and a box, until that day).
///
/// Real clients' shapes (2026-12-07, `AMD EPYC`), on the same path as the plain call
/// (the general path took about 40 allocations a call), with what each adds: Claude
/// Code's `progressToken` gives a modern call the channel a call that may send progress
/// needs (+2 allocations, +1.6 kB); VS Code's `traceparent` is parsed into the caller's
/// ids (+4); and what a caller says about itself goes on the call's span (a modern
/// call's `clientInfo` +4, its own ids for the call +1 each, the tag that holds them +2;
/// a legacy session's `clientInfo` is read once, at `initialize`).
const CEILINGS: [(&str, &str, u64, u64); 8] = [
    ("modern", "plain", 21, 9_400),
    ("modern", "claude-code", 28, 11_700),
    ("modern", "vscode", 32, 10_100),
    ("modern", "codex", 25, 9_900),
    ("legacy", "plain", 24, 11_100),
    ("legacy", "claude-code", 29, 11_700),
    ("legacy", "vscode", 35, 11_800),
    ("legacy", "codex", 24, 11_100),
];

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread's allocations are being counted (const-initialised, so
    /// reading it never allocates).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn count(size: usize) {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The `_meta` members real clients add to every `tools/call` (beside the protocol's
/// own): the call must take the same path, at the same cost, as the plain one.
fn client_meta(client: &str) -> Value {
    match client {
        "plain" => json!({}),
        // Claude Code 2.1.337.
        "claude-code" => json!({
            "claudecode/toolUseId": "toolu_01AbCdEfGhIjKlMnOpQrStUv",
            "progressToken": 3,
        }),
        "vscode" => json!({
            "vscode.conversationId": "6f1c2d3e-aaaa-bbbb-cccc-0123456789ab",
            "vscode.requestId": "req-42",
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "tracestate": "vendor=value",
        }),
        "codex" => json!({"x-codex-turn-metadata": {"turn_id": "t-1", "sandbox": "none"}}),
        other => panic!("no client {other}"),
    }
}

/// One `tools/call list_agents` request as `client` sends it in `era`.
fn request(era: &str, client: &str, session: Option<&str>) -> Request<Body> {
    let mut params = json!({"name": "list_agents", "arguments": {}, "_meta": client_meta(client)});
    let mut builder = Request::post("/mcp")
        .header("host", "127.0.0.1:3000")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if era == "modern" {
        let meta = params["_meta"].as_object_mut().unwrap();
        meta.insert(
            "io.modelcontextprotocol/protocolVersion".into(),
            MODERN.into(),
        );
        meta.insert(
            "io.modelcontextprotocol/clientCapabilities".into(),
            json!({}),
        );
        if client != "plain" {
            meta.insert(
                "io.modelcontextprotocol/clientInfo".into(),
                json!({"name": client, "version": "1.0.0"}),
            );
        }
        builder = builder
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "tools/call")
            .header("mcp-name", "list_agents");
    } else {
        builder = builder.header("mcp-protocol-version", "2025-11-25").header(
            "mcp-session-id",
            session.expect("a legacy call has a session"),
        );
    }
    if params["_meta"].as_object().is_some_and(|m| m.is_empty()) {
        params.as_object_mut().unwrap().remove("_meta");
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    let mut request = builder.body(Body::from(body.to_string())).unwrap();
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 50_000))));
    request
}

/// Serves `request` and reads the whole reply, counting what this thread allocates.
async fn counted(router: &axum::Router, request: Request<Body>) -> (u64, u64, Value) {
    let (allocations, bytes) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    COUNTING.with(|c| c.set(true));
    let response = router.clone().oneshot(request).await.unwrap();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    COUNTING.with(|c| c.set(false));
    let used = (
        ALLOCATIONS.load(Ordering::Relaxed) - allocations,
        BYTES.load(Ordering::Relaxed) - bytes,
    );
    let reply = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (used.0, used.1, reply)
}

#[tokio::test(flavor = "current_thread")]
async fn a_tools_call_allocates_no_more_than_its_ceiling() {
    let app = start_bot(&[]).await;
    let router = app.mcp.as_ref().expect("MCP is on").router();
    let session = common::legacy_session(&app, "2025-11-25", json!({})).await;

    const WARM_UP: usize = 50;
    const MEASURED: u64 = 200;
    let mut report = Vec::new();
    let mut over = Vec::new();
    // Every client's shape within the same ceiling: a shape the one reader turned away
    // would take a slower path that allocates several times more.
    for (era, client, most, most_bytes) in CEILINGS {
        let session = (era == "legacy").then_some(session.as_str());
        // The calls' spans wait in a ring made to size for 1,024 until the trace writer
        // takes them; a flood past that between two takes grows the ring once (on
        // whichever call finds it full). Taken here, so what is counted is the calls.
        app.bot.tracer.flush().await;
        for _ in 0..WARM_UP {
            counted(&router, request(era, client, session)).await;
        }
        let (mut allocations, mut bytes) = (0, 0);
        for _ in 0..MEASURED {
            // The request itself is built outside the count, as hyper would build it.
            let request = request(era, client, session);
            let (a, b, reply) = counted(&router, request).await;
            assert!(
                reply["result"]["structuredContent"].is_object(),
                "{era} {client}: {reply}"
            );
            allocations += a;
            bytes += b;
        }
        let (per_call, bytes_per_call) = (allocations / MEASURED, bytes / MEASURED);
        report.push(format!(
            "{era} {client}: {per_call} allocations, {bytes_per_call} bytes per tools/call"
        ));
        if per_call > most || bytes_per_call > most_bytes {
            over.push(format!(
                "{era} {client}: {per_call} allocations and {bytes_per_call} bytes, the ceilings are {most} and {most_bytes}"
            ));
        }
    }
    println!("{}", report.join("\n"));
    assert!(
        over.is_empty(),
        "a tools/call allocates more than it did:\n{}\n(all: {})",
        over.join("\n"),
        report.join("; ")
    );
    app.shutdown().await;
}
