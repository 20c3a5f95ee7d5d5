//! The ceiling for `scripts/bench.sh`: the least an axum server can do for an MCP
//! `tools/call` and still be honest about it.
//!
//! `POST /mcp` checks a bearer token (constant time), parses the JSON-RPC body into a
//! typed request, and answers a fixed result carrying the request's id. No sessions,
//! no MCP headers, no tools. Whatever Porthole spends beyond this is the cost of being
//! an MCP server; this is the cost of being an axum JSON handler on this machine.
//!
//! Built like the bot, so that a ratio compares servers, not builds: the same release
//! profile (LTO, one codegen unit; see `Cargo.toml`), the same allocator (mimalloc),
//! `TCP_NODELAY` on every connection, tokio's multi-threaded runtime with one worker
//! per CPU it may use. With `BENCH_RESULT_FILE`, the `result` it answers is the one in
//! that file: `scripts/bench.sh` saves there what the bot answered, so both send the
//! same bytes back.
//!
//! ```sh
//! PORT=0 BENCH_TOKEN=secret cargo run --release --example bare_axum
//! # prints: bare_axum listening on 127.0.0.1:<port>
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A JSON-RPC request as the ceiling reads it: every member typed, params kept raw.
#[derive(Deserialize)]
struct RpcRequest {
    #[allow(dead_code)]
    jsonrpc: String,
    #[serde(default)]
    id: Option<Value>,
    method: String,
    #[serde(default)]
    params: Option<ToolCallParams>,
}

#[derive(Deserialize)]
struct ToolCallParams {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    arguments: Option<Value>,
}

/// Token digest, compared in constant time like Porthole's guard.
async fn bearer(State(digest): State<Arc<[u8; 32]>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
    if bool::from(given.ct_eq(&*digest)) {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "unauthorized",
        )
            .into_response()
    }
}

fn json_reply(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

/// The `tools/call` result: the bot's own (from `BENCH_RESULT_FILE`), or a fixed one of
/// about the size of Porthole's `list_agents` result.
fn tool_result() -> Value {
    if let Ok(path) = std::env::var("BENCH_RESULT_FILE") {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read BENCH_RESULT_FILE {path}: {e}"));
        let reply: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("BENCH_RESULT_FILE {path} is not JSON: {e}"));
        return reply.get("result").cloned().unwrap_or(reply);
    }
    json!({
        "content": [{"type": "text", "text": "{\"count\":1,\"agents\":[{\"id\":\"supervisor\",\"name\":\"Supervisor\",\"status\":\"idle\"}]}"}],
        "structuredContent": {"count": 1, "agents": [{"id": "supervisor", "name": "Supervisor", "status": "idle"}]},
        "isError": false,
    })
}

async fn mcp(State(tool_result): State<Arc<Value>>, body: Bytes) -> Response {
    let request: RpcRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return json_reply(
                StatusCode::BAD_REQUEST,
                &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": e.to_string()}}),
            );
        }
    };
    let Some(id) = request.id else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match request.method.as_str() {
        "tools/call" if request.params.and_then(|p| p.name).is_some() => (*tool_result).clone(),
        "initialize" => json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bare-axum", "version": "0"},
        }),
        _ => json!({}),
    };
    json_reply(
        StatusCode::OK,
        &json!({"jsonrpc": "2.0", "id": id, "result": result}),
    )
}

#[tokio::main]
async fn main() {
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let token = std::env::var("BENCH_TOKEN").unwrap_or_else(|_| "secret".into());
    let digest: Arc<[u8; 32]> = Arc::new(Sha256::digest(token.as_bytes()).into());
    let app = Router::new()
        .route("/mcp", post(mcp))
        .with_state(Arc::new(tool_result()))
        .layer(from_fn_with_state(digest, bearer));
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local addr");
    println!("bare_axum listening on {addr}");
    // Same socket option as Porthole: small replies must not wait on Nagle.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await.expect("serve");
}
