//! rmcp, the official Rust MCP SDK, as a peer for `scripts/bench.sh --peers`.
//!
//! One tool, `list_agents`, answering a structured result like the bench's ceiling
//! (`examples/bare_axum.rs`), with JSON replies, behind the same constant-time bearer
//! check, with `TCP_NODELAY`, mimalloc and the same build profile as Porthole's figures
//! (`bench-release`: fat LTO, one codegen unit).
//! Whatever it costs beyond the ceiling is what the SDK costs.
//!
//! `RMCP_SESSIONS=1` turns on its session mode (2025 `initialize` mints a session, later
//! requests carry `Mcp-Session-Id`); otherwise it serves every request statelessly.
//!
//! ```sh
//! PORT=0 BENCH_TOKEN=secret cargo run --release
//! # prints: rmcp_peer listening on 127.0.0.1:<port>
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use rmcp::model::CallToolResult;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_router};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Serves `list_agents` with the result in `BENCH_RESULT_FILE` (what the bot answered,
/// saved by `scripts/bench.sh`), so the bot, the ceiling and rmcp send the same result.
#[derive(Clone)]
struct Peer {
    result: Arc<CallToolResult>,
}

#[tool_router(server_handler)]
impl Peer {
    #[tool(description = "The agents that exist right now (a fixed answer for benchmarks)")]
    fn list_agents(&self) -> CallToolResult {
        (*self.result).clone()
    }
}

fn saved_result() -> CallToolResult {
    let path = std::env::var("BENCH_RESULT_FILE").expect("BENCH_RESULT_FILE names the saved reply");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read BENCH_RESULT_FILE {path}: {e}"));
    let reply: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"));
    serde_json::from_value(reply["result"].clone())
        .unwrap_or_else(|e| panic!("{path} holds no tools/call result: {e}"))
}

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
        (StatusCode::UNAUTHORIZED, "unauthorized").into_response()
    }
}

#[tokio::main]
async fn main() {
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let token = std::env::var("BENCH_TOKEN").unwrap_or_else(|_| "secret".into());
    let digest: Arc<[u8; 32]> = Arc::new(Sha256::digest(token.as_bytes()).into());
    let sessions = std::env::var("RMCP_SESSIONS").is_ok_and(|v| v == "1");
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(sessions)
        .with_json_response(true)
        .with_sse_keep_alive(None);
    let peer = Peer {
        result: Arc::new(saved_result()),
    };
    let service = StreamableHttpService::new(
        move || Ok(peer.clone()),
        LocalSessionManager::default().into(),
        config,
    );
    let app = Router::new()
        .nest_service("/mcp", service)
        .layer(from_fn_with_state(digest, bearer));
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("bind 127.0.0.1");
    println!(
        "rmcp_peer listening on {}",
        listener.local_addr().expect("local addr")
    );
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await.expect("serve");
}
