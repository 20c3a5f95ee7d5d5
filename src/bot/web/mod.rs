//! The bot's web surface: the chat page at `/`, the REST API under `/api`, and the
//! WebSocket at `/ws`. CORS and the JSON error shape apply to `/api` only.

mod api;
mod assets;
mod ws;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;

use super::{Bot, WebLogSink};

/// State the web surface shares with other services (health reads the client count).
pub struct WebState {
    pub log_sink: Arc<dyn WebLogSink>,
    clients: Arc<AtomicUsize>,
    /// Whether the page forwards its console without `?debug=1`.
    pub console_forwarding: bool,
}

impl WebState {
    pub fn new(log_sink: Arc<dyn WebLogSink>, console_forwarding: bool) -> Self {
        WebState {
            log_sink,
            clients: Arc::new(AtomicUsize::new(0)),
            console_forwarding,
        }
    }

    /// WebSocket clients connected right now.
    pub fn connected_clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }
}

/// `/`, `/api/*` and `/ws`, answering only to this machine's host names (plus
/// `WEB_ALLOWED_HOSTS`), so a page on another site cannot reach them by DNS rebinding.
pub fn router(bot: Arc<Bot>) -> Router {
    let allowed_hosts = Arc::new(bot.config.web_allowed_hosts.clone());
    Router::new()
        .merge(assets::router())
        .nest("/api", api::router(bot.clone()))
        .merge(ws::router(bot))
        .layer(axum::middleware::from_fn_with_state(
            allowed_hosts,
            local_host_only,
        ))
}

async fn local_host_only(
    axum::extract::State(allowed): axum::extract::State<Arc<Vec<String>>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let host = request
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    // `*` in WEB_ALLOWED_HOSTS serves the page to any host name (a LAN address, say).
    if allowed.iter().any(|h| h == "*") || crate::net::host_is_allowed(host, &allowed) {
        return next.run(request).await;
    }
    (
        axum::http::StatusCode::FORBIDDEN,
        axum::Json(serde_json::json!({"error": format!(
            "Host `{host}` is not this machine; open the page at 127.0.0.1 or localhost, or add the name to WEB_ALLOWED_HOSTS"
        )})),
    )
        .into_response()
}
