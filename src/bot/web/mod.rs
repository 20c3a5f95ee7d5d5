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

/// `/`, `/api/*` and `/ws`.
pub fn router(bot: Arc<Bot>) -> Router {
    Router::new()
        .merge(assets::router())
        .nest("/api", api::router(bot.clone()))
        .merge(ws::router(bot))
}
