//! The chat page, embedded in the binary so running the bot needs no front-end build.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX_HTML: &str = include_str!("static/index.html");
const APP_JS: &str = include_str!("static/app.js");
const TRACE_PANEL_JS: &str = include_str!("static/trace-panel.js");
const REPLAY_FORM_JS: &str = include_str!("static/replay-form.js");
const STYLE_CSS: &str = include_str!("static/style.css");

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

pub fn router() -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/trace-panel.js",
            get(|| async { asset("text/javascript; charset=utf-8", TRACE_PANEL_JS) }),
        )
        .route(
            "/replay-form.js",
            get(|| async { asset("text/javascript; charset=utf-8", REPLAY_FORM_JS) }),
        )
        .route(
            "/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }),
        )
}
