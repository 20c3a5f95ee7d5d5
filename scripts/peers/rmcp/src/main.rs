//! rmcp, the official Rust MCP SDK, as a peer for `scripts/bench.sh --peers`.
//!
//! One tool, `list_agents`, answering the same fixed structured result as the bench's
//! ceiling (`examples/bare_axum.rs`), stateless with JSON replies, behind the same
//! constant-time bearer check and with `TCP_NODELAY` like Porthole. Whatever it costs
//! beyond the ceiling is what the SDK costs.
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
use rmcp::handler::server::wrapper::Json;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_router};
use serde::Serialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

#[derive(Serialize, schemars::JsonSchema)]
struct Agent {
    id: String,
    name: String,
    status: String,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Agents {
    count: u32,
    agents: Vec<Agent>,
}

#[derive(Clone)]
struct Peer;

#[tool_router(server_handler)]
impl Peer {
    #[tool(description = "The agents that exist right now (a fixed answer for benchmarks)")]
    fn list_agents(&self) -> Json<Agents> {
        Json(Agents {
            count: 1,
            agents: vec![Agent {
                id: "supervisor".into(),
                name: "Supervisor".into(),
                status: "idle".into(),
            }],
        })
    }
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
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None);
    let service =
        StreamableHttpService::new(|| Ok(Peer), LocalSessionManager::default().into(), config);
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
