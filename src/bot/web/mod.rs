//! The bot's web surface: the chat page at `/`, the REST API under `/api`, and the
//! WebSocket at `/ws`. CORS and the JSON error shape apply to `/api` only.
//!
//! The web surface has no token: it may do what a chat user may, never more. So every
//! request must name this machine in `Host`, every response forbids framing by other
//! sites, and every answer is redacted like `/mcp`'s (see `api.rs` and `ws.rs`).

mod api;
mod assets;
mod replay;
mod ws;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::header;

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
        .merge(ws::router(bot.clone()))
        .layer(axum::middleware::from_fn_with_state(
            allowed_hosts,
            local_host_only,
        ))
        // The refusals above quote the caller's Host or Origin: redacted like answers.
        .layer(axum::middleware::map_response_with_state(
            bot.redactor.clone(),
            crate::redact::redact_error_body,
        ))
        .layer(axum::middleware::map_response(no_framing))
}

/// What the page may load and run: its own files only, so text that reached the page
/// from a model or a tool could not run as script even if some code path rendered it
/// as HTML (none does: the page writes text nodes). No other site may frame it
/// (clickjacking the chat or the task buttons).
const PAGE_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

async fn no_framing(mut response: axum::response::Response) -> axum::response::Response {
    use axum::http::{HeaderValue, header};
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(PAGE_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Whether a browser request comes from a page of this bot (same origin) or from an
/// origin the user allowed. Requests without `Origin` (curl, scripts) pass.
pub(crate) fn origin_is_ours(
    headers: &axum::http::HeaderMap,
    allowed: &[String],
) -> Result<(), String> {
    use axum::http::header;
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &axum::http::HeaderValue| v.to_str().ok())
    };
    let host = text(header::HOST).unwrap_or_default();
    if let Some(origin) = crate::net::single_header(headers, header::ORIGIN)? {
        let same_origin = origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host));
        if !same_origin && !crate::net::origin_is_allowed(origin, allowed) {
            return Err(format!(
                "Origin `{origin}` is another site; add it to WEB_ALLOWED_ORIGINS if it is yours"
            ));
        }
    } else if text(header::HeaderName::from_static("sec-fetch-site")) == Some("cross-site") {
        return Err("a cross-site request may not change the bot's state".into());
    }
    Ok(())
}

async fn local_host_only(
    axum::extract::State(allowed): axum::extract::State<Arc<Vec<String>>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let host = match crate::net::single_header(request.headers(), header::HOST) {
        Ok(host) => host.unwrap_or_default(),
        Err(reason) => {
            let body = axum::Json(serde_json::json!({"error": reason}));
            return (axum::http::StatusCode::BAD_REQUEST, body).into_response();
        }
    };
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
