//! `GET /mcp` opens (or resumes, with `Last-Event-ID`) a legacy session's notification
//! stream; `DELETE /mcp` ends a session.

use super::*;

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
    let access = match admit(&inner.guard, &headers, &extensions) {
        Ok(access) => access,
        Err(refusal) => return refusal,
    };
    if let Some(refusal) =
        repeated_mcp_header(&headers).or_else(|| version_refused(&headers, "GET"))
    {
        return refusal;
    }
    if !accepts(&headers).sse {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            jsonrpc::INVALID_REQUEST,
            "Not Acceptable: GET /mcp opens an SSE stream; send `Accept: text/event-stream`",
        );
    }
    let Some(session_id) = header(&headers, protocol::HEADER_SESSION_ID) else {
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
    if let Some(last) = header(&headers, protocol::HEADER_LAST_EVENT_ID)
        && let Some(rx) = session.resume(last)
    {
        return sse_response(&inner, rx, None);
    }
    let (stream, rx) = session.open_stream(true);
    let mut changes = inner.notifier.subscribe();
    let forward_session = session.clone();
    let forwarder = tokio::spawn(async move {
        let _cleanup = StreamCleanup {
            session: forward_session.clone(),
            stream,
        };
        loop {
            match changes.recv().await {
                Ok(crate::subscriptions::Change::Task(task)) => {
                    // 2025-11-25: a session hears about its own tasks only.
                    if task.session.as_deref() == Some(forward_session.id.as_str()) {
                        let status =
                            jsonrpc::notification("notifications/tasks/status", task.legacy());
                        forward_session.push_if_current(stream, &status);
                    }
                }
                Ok(change) => {
                    let wanted = match &change {
                        crate::subscriptions::Change::ResourceUpdated(uri) => {
                            forward_session.is_subscribed(uri)
                        }
                        _ => true,
                    };
                    if wanted {
                        forward_session.push_if_current(stream, &change.to_notification(None));
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
    });
    sse_response(&inner, rx, Some(forwarder.abort_handle()))
}

/// `GET` and `DELETE` belong to 2025 sessions: a 2026-07-28 request gets the 405 that
/// revision prescribes for them, an unknown version the 400 every revision does.
fn version_refused(headers: &HeaderMap, method: &str) -> Option<Response> {
    let version = header(headers, protocol::HEADER_PROTOCOL_VERSION)?;
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

/// Removes a GET stream from its session when its connection ends.
pub(super) struct StreamCleanup {
    session: Arc<Session>,
    stream: u64,
}

impl Drop for StreamCleanup {
    fn drop(&mut self) {
        self.session.close_notification_stream(self.stream);
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
    let access = match admit(&inner.guard, &headers, &extensions) {
        Ok(access) => access,
        Err(refusal) => return refusal,
    };
    if let Some(refusal) =
        repeated_mcp_header(&headers).or_else(|| version_refused(&headers, "DELETE"))
    {
        return refusal;
    }
    let Some(session_id) = header(&headers, protocol::HEADER_SESSION_ID) else {
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
