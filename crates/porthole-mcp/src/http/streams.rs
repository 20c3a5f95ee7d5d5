//! `GET /mcp` opens (or resumes, with `Last-Event-ID`) a legacy session's notification
//! stream; `DELETE /mcp` ends a session.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::headers::{
    LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID, accepts, header, repeated_mcp_header,
};
use super::legacy;
use super::reply::session_not_found;
use super::sse_response::sse_response;
use crate::ServerInner;
use crate::guard::{Access, admit, refuse};
use crate::jsonrpc;
use crate::protocol;
use crate::session::{Lookup, Session};

/// `GET /mcp`; its error answers are redacted ([`porthole_core::redact::redact_error`]).
pub(crate) async fn handle_get(
    State(inner): State<Arc<ServerInner>>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Response {
    let redactor = inner.redactor.clone();
    let response = answer_get(State(inner), extensions, headers).await;
    porthole_core::redact::redact_error(&redactor, response).await
}

async fn answer_get(
    State(inner): State<Arc<ServerInner>>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Response {
    let access = match admitted(&inner, &headers, &extensions, "GET") {
        Ok(access) => access,
        Err(refusal) => return refusal,
    };
    if !accepts(&headers).sse {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            jsonrpc::INVALID_REQUEST,
            "Not Acceptable: GET /mcp opens an SSE stream; send `Accept: text/event-stream`",
        );
    }
    let Some(session_id) = header(&headers, &SESSION_ID) else {
        let mut response = refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            jsonrpc::INVALID_REQUEST,
            "Method Not Allowed: GET /mcp needs an Mcp-Session-Id (2025 protocol); with 2026-07-28 use subscriptions/listen",
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
        return response;
    };
    let session = match inner.sessions.get_for(session_id, access) {
        Lookup::Found(s) => s,
        _ => return session_not_found(),
    };
    let last_event_id = header(&headers, &LAST_EVENT_ID);
    if let Some(rx) = last_event_id.and_then(|last| session.resume(last)) {
        return sse_response(&inner, rx, None);
    }
    if last_event_id.is_some() {
        tracing::info!(
            target: "porthole::mcp::session",
            session = %crate::session::short(&session.id),
            "a GET asked to resume a stream this session no longer holds; opened a new one"
        );
    }
    let (stream, rx) = session.open_notification_stream(last_event_id.is_some());
    // Not tied to the connection: while the client is away (up to the resume window),
    // what it misses waits in the stream's backlog for its `Last-Event-ID`.
    tokio::spawn(forward_notifications(
        inner.notifier.subscribe(),
        session,
        stream,
    ));
    sse_response(&inner, rx, None)
}

/// How often a `GET` stream's forwarder checks whether its client is still there (or
/// came back) while no notification arrives.
const PRESENCE_CHECK: Duration = Duration::from_secs(5);

/// Feeds a session's `GET` stream with the notifications it should hear, until the
/// stream is dropped: another `GET` took its place, the session ended, or its client
/// stayed away longer than the resume window.
async fn forward_notifications(
    mut changes: tokio::sync::broadcast::Receiver<crate::subscriptions::Change>,
    session: Arc<Session>,
    stream: u64,
) {
    let mut presence = tokio::time::interval(PRESENCE_CHECK);
    loop {
        let change = tokio::select! {
            change = changes.recv() => change,
            _ = presence.tick() => {
                if session.keep_notification_stream(stream) {
                    continue;
                }
                return;
            }
        };
        match change {
            Ok(crate::subscriptions::Change::Task(task)) => {
                // 2025-11-25: a session hears about its own tasks only.
                if task.session.as_deref() == Some(session.id.as_str()) {
                    let status = jsonrpc::notification("notifications/tasks/status", task.legacy());
                    session.push_if_current(stream, &status);
                }
            }
            Ok(change) => {
                let wanted = match &change {
                    crate::subscriptions::Change::ResourceUpdated(uri) => {
                        session.is_subscribed(uri)
                    }
                    _ => true,
                };
                if wanted {
                    session.push_if_current(stream, &change.to_notification(None));
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(_) => return,
        }
    }
}

/// `GET` and `DELETE` belong to 2025 sessions: a 2026-07-28 request gets the 405 that
/// revision prescribes for them, an unknown version the 400 every revision does.
fn version_refused(headers: &HeaderMap, method: &str) -> Option<Response> {
    let version = header(headers, &PROTOCOL_VERSION)?;
    if protocol::modern_version(version).is_none() {
        return legacy::unsupported_version(headers);
    }
    let mut response = refuse(
        StatusCode::METHOD_NOT_ALLOWED,
        jsonrpc::INVALID_REQUEST,
        format!(
            "Method Not Allowed: {method} /mcp belongs to 2025 sessions; with \
             MCP-Protocol-Version {version} send POST (subscriptions/listen for notifications)"
        ),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    Some(response)
}

/// What a `GET` or `DELETE` (`method`) may do: the guard's answer, then a refusal for a
/// repeated `Mcp-*` header or a protocol version that has no such request.
// As `admit`: the error is the refusal itself, built only on that path.
#[allow(clippy::result_large_err)]
fn admitted(
    inner: &ServerInner,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
    method: &str,
) -> Result<Access, Response> {
    let access = admit(&inner.guard, headers, extensions)?;
    match repeated_mcp_header(headers).or_else(|| version_refused(headers, method)) {
        Some(refusal) => Err(refusal),
        None => Ok(access),
    }
}

/// `DELETE /mcp`; its error answers are redacted ([`porthole_core::redact::redact_error`]).
pub(crate) async fn handle_delete(
    State(inner): State<Arc<ServerInner>>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Response {
    let redactor = inner.redactor.clone();
    let response = answer_delete(State(inner), extensions, headers).await;
    porthole_core::redact::redact_error(&redactor, response).await
}

async fn answer_delete(
    State(inner): State<Arc<ServerInner>>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Response {
    let access = match admitted(&inner, &headers, &extensions, "DELETE") {
        Ok(access) => access,
        Err(refusal) => return refusal,
    };
    let Some(session_id) = header(&headers, &SESSION_ID) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            jsonrpc::INVALID_REQUEST,
            "Bad Request: DELETE /mcp ends a session; send its Mcp-Session-Id",
        );
    };
    if matches!(inner.sessions.get_for(session_id, access), Lookup::Found(_))
        && inner.sessions.end(session_id)
    {
        tracing::info!(target: "porthole::mcp::session", session = %crate::session::short(session_id), "MCP session ended by the client");
        inner.notifier.announce(crate::Changed::SessionEnded {
            id: session_id.to_string(),
        });
        StatusCode::NO_CONTENT.into_response()
    } else {
        session_not_found()
    }
}
