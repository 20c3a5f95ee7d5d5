//! The Streamable HTTP transport: `POST`, `GET` and `DELETE` on `/mcp`, for both eras.
//!
//! A `POST` is first checked for its media types and size, parsed, then routed by era:
//! - **legacy** when it carries `Mcp-Session-Id`, is an `initialize` without 2026
//!   `_meta`, or has a 2025 `MCP-Protocol-Version` header and no `_meta`;
//! - **modern** otherwise: `_meta` and the `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name`
//!   headers are validated in the order the spec's tests expect.
//!
//! Handlers run inline (see `call`). The reply is plain JSON unless the handler sends a
//! message first (progress, a log line, a server→client request): then the reply becomes
//! an SSE stream carrying those messages and, last, the response. In the modern era
//! the client closing that stream cancels the work; in the legacy era the events are
//! kept so a `GET` with `Last-Event-ID` can pick them up.
//!
//! Files: this one takes the `POST` and routes it; `legacy.rs` and `modern.rs` serve
//! each era, `listen.rs` the `subscriptions/listen` stream, `streams.rs` `GET` and
//! `DELETE`, `headers.rs` the header checks, `reply.rs` and `sse_response.rs` the answers.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

use super::ServerInner;
use super::guard::{Access, admit, refuse};
use super::jsonrpc::{self, Incoming, RpcError, Unreadable};
use super::methods::{self, Method, Work};
use super::protocol::{self, Era};

mod headers;
mod legacy;
mod listen;
mod modern;
mod reply;
mod sse_response;
mod streams;
mod tool_call;

use headers::{
    Accepts, METHOD, PROTOCOL_VERSION, SESSION_ID, accepts, apply_headers, header,
    repeated_mcp_header,
};
use legacy::{legacy_batch, legacy_post};
use modern::{modern_post, run_stateless};
use reply::{accepted, raw_reply, rpc_error};
pub(crate) use streams::{handle_delete, handle_get};

/// What the transport allows a request, and how it keeps idle streams alive.
pub(crate) struct Limits {
    pub(crate) max_body_bytes: usize,
    /// How long a request body may take to arrive in full.
    pub(crate) body_timeout: Duration,
    /// How often an idle SSE stream gets a keep-alive comment.
    pub(crate) keepalive: Duration,
}

/// A POST to `/mcp`: one JSON-RPC message (or a 2025-03-26 batch), in either era. Its
/// error answers are redacted ([`porthole_core::redact::redact_error`]).
pub(crate) async fn handle_post(
    State(inner): State<Arc<ServerInner>>,
    request: axum::extract::Request,
) -> Response {
    let redactor = inner.redactor.clone();
    let response = answer_post(State(inner), request).await;
    porthole_core::redact::redact_error(&redactor, response).await
}

async fn answer_post(
    State(inner): State<Arc<ServerInner>>,
    request: axum::extract::Request,
) -> Response {
    // The request taken whole: a `HeaderMap` extractor would copy every header.
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let access = match admit(&inner.guard, headers, &parts.extensions) {
        Ok(access) => access,
        Err(refusal) => return refusal,
    };
    if let Some(refusal) = repeated_mcp_header(headers) {
        return refusal;
    }
    let accept = match check_media_types(headers) {
        Ok(accept) => accept,
        Err(refusal) => return refusal,
    };
    let body = match read_body(&inner, headers, body).await {
        Ok(body) => body,
        Err(refusal) => return refusal,
    };
    let session_id = header(headers, &SESSION_ID);
    if let Some(response) =
        tool_call::serve(&inner, headers, access, session_id, &body, accept).await
    {
        return response;
    }
    let message = match jsonrpc::read_body(&body) {
        Ok(jsonrpc::Body::One(message)) => message,
        Ok(jsonrpc::Body::Batch(items)) => {
            return legacy_batch(&inner, headers, access, session_id, items).await;
        }
        Err(Unreadable::NotJson(error)) => return rpc_error(StatusCode::BAD_REQUEST, None, &error),
        Err(Unreadable::Rejected(rejected)) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                rejected.id.as_ref(),
                &rejected.error,
            );
        }
    };
    let routing = Routing::of(&message);
    if is_bare(headers, session_id, &routing) {
        bare_post(inner, headers, access, message, accept).await
    } else if is_legacy(headers, session_id, &routing) {
        legacy_post(inner, headers, access, session_id, message, accept).await
    } else {
        modern_post(inner, headers, access, message, accept).await
    }
}

/// Any other method on `/mcp`: 405 (axum adds `Allow`), once the guard lets it by.
/// Its error answers are redacted ([`porthole_core::redact::redact_error`]).
pub(crate) async fn handle_other(
    State(inner): State<Arc<ServerInner>>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Response {
    let redactor = inner.redactor.clone();
    let response = answer_other(State(inner), extensions, headers).await;
    porthole_core::redact::redact_error(&redactor, response).await
}

async fn answer_other(
    State(inner): State<Arc<ServerInner>>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Response {
    match admit(&inner.guard, &headers, &extensions) {
        Ok(_) => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        Err(refusal) => refusal,
    }
}

/// The body must be JSON, and the client must take JSON or SSE back.
// The error is the refusal itself, built only on that path: boxing it saves nothing.
#[allow(clippy::result_large_err)]
fn check_media_types(headers: &HeaderMap) -> Result<Accepts, Response> {
    let content_type = header(headers, header::CONTENT_TYPE).unwrap_or("");
    if !content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            jsonrpc::INVALID_REQUEST,
            format!(
                "Unsupported Media Type `{content_type}`: send the JSON-RPC message with `Content-Type: application/json`"
            ),
        ));
    }
    let accept = accepts(headers);
    if !accept.json && !accept.sse {
        return Err(refuse(
            StatusCode::NOT_ACCEPTABLE,
            jsonrpc::INVALID_REQUEST,
            "Not Acceptable: send `Accept: application/json, text/event-stream`",
        ));
    }
    Ok(accept)
}

/// Reads the whole body within the size and time limits.
async fn read_body(
    inner: &ServerInner,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, Response> {
    let too_large = || {
        let mut refusal = refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            jsonrpc::INVALID_REQUEST,
            format!(
                "Payload Too Large: the body is over {} bytes (MCP_MAX_BODY_BYTES)",
                inner.limits.max_body_bytes
            ),
        );
        // The rest of the body is never read: closing the connection tells a client
        // still sending it to stop (else it blocks on a full socket, never reading this).
        refusal
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        refusal
    };
    // A declared length over the limit is refused at once, not after waiting for it.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > inner.limits.max_body_bytes as u64) {
        return Err(too_large());
    }
    // A client that sends its body slowly (or never finishes it) must not hold a task
    // forever: the whole body has to arrive within the body timeout. Most bodies came
    // in with the headers, so the timer is armed only when the first read has to wait.
    let mut read = std::pin::pin!(whole_body(body, inner.limits.max_body_bytes));
    let read = match futures::poll!(read.as_mut()) {
        std::task::Poll::Ready(read) => Ok(read),
        std::task::Poll::Pending => tokio::time::timeout(inner.limits.body_timeout, read).await,
    };
    let bytes = match read {
        Ok(Ok(b)) => b,
        Err(_) => {
            return Err(refuse(
                StatusCode::REQUEST_TIMEOUT,
                jsonrpc::INVALID_REQUEST,
                format!(
                    "Request Timeout: the body did not arrive within {} s (MCP_BODY_TIMEOUT_SECS)",
                    inner.limits.body_timeout.as_secs()
                ),
            ));
        }
        Ok(Err(_)) => return Err(too_large()),
    };
    Ok(bytes)
}

/// The body in full, `Err` past `limit` bytes or on a broken body. A body that arrives
/// as one piece (most do) is taken as it is: `axum::body::to_bytes` would first gather
/// the pieces into a list, an allocation per request.
async fn whole_body(body: Body, limit: usize) -> Result<Bytes, ()> {
    use axum::body::HttpBody;
    use futures::StreamExt;
    let mut pieces = body.into_data_stream();
    let first = match pieces.next().await {
        Some(piece) => piece.map_err(drop)?,
        None => return Ok(Bytes::new()),
    };
    if first.len() > limit {
        return Err(());
    }
    if pieces.is_end_stream() {
        return Ok(first);
    }
    let mut whole = Vec::from(first);
    while let Some(piece) = pieces.next().await {
        let piece = piece.map_err(drop)?;
        if whole.len() + piece.len() > limit {
            return Err(());
        }
        whole.extend_from_slice(&piece);
    }
    Ok(Bytes::from(whole))
}

/// What the era routing reads of a message.
struct Routing<'a> {
    /// `None` for a response.
    method: Option<&'a str>,
    is_request: bool,
    /// Whether `params._meta` holds a protocol version (of any type).
    meta_version: bool,
}

impl Routing<'_> {
    fn of(message: &Incoming) -> Routing<'_> {
        Routing {
            method: message.method(),
            is_request: matches!(message, Incoming::Request { .. }),
            meta_version: message
                .params()
                .and_then(|p| p.get("_meta")?.get(protocol::META_PROTOCOL_VERSION))
                .is_some(),
        }
    }
}

fn is_legacy(headers: &HeaderMap, session_id: Option<&str>, message: &Routing) -> bool {
    if session_id.is_some() {
        return true;
    }
    if message.meta_version {
        return false;
    }
    match header(headers, &PROTOCOL_VERSION) {
        Some(v) => protocol::legacy_version(v).is_some(),
        None => message.method == Some("initialize"),
    }
}

/// A bare request, as in the curl example of the design: no session, no protocol
/// version (neither header nor `_meta`), no `Mcp-Method` header, and a method that needs
/// no session state. Such a request is answered statelessly in the oldest legacy
/// version, which is what the 2025 transport says a server assumes without a version
/// header. Everything else keeps its era's rules.
fn is_bare(headers: &HeaderMap, session_id: Option<&str>, message: &Routing) -> bool {
    session_id.is_none()
        && !message.meta_version
        && header(headers, &PROTOCOL_VERSION).is_none()
        && header(headers, &METHOD).is_none()
        && message.is_request
        && message
            .method
            .and_then(|m| Method::parse(m, false))
            .is_some_and(Method::is_stateless)
}

async fn bare_post(
    inner: Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    message: Incoming,
    accept: Accepts,
) -> Response {
    let Incoming::Request {
        id, method, params, ..
    } = message
    else {
        return accepted();
    };
    let Some(parsed) = methods::served(&inner, &method, false) else {
        return rpc_error(
            StatusCode::OK,
            Some(&id),
            &RpcError::method_not_found(&method).redacted(&inner.redactor),
        );
    };
    let mut ctx = inner.context(
        access,
        Era::Legacy(protocol::DEFAULT_LEGACY_VERSION),
        None,
        id.clone(),
        None,
        None,
    );
    // A bare request has no progress stream, but may still join the caller's trace.
    ctx.trace_parent = params.get("_meta").and_then(super::context::trace_parent);
    apply_headers(&mut ctx, headers);
    if let Some(known) = methods::remembered(&inner, parsed, &params, &ctx) {
        return raw_reply(&id, known, accept);
    }
    run_stateless(inner, Work::Method(parsed, params), ctx, accept).await
}

/// The `progressToken` of a request's `_meta`, when it is a string or an integer.
pub(super) fn progress_token(meta: &Value) -> Option<Value> {
    meta.get("progressToken")
        .filter(|t| is_progress_token(t))
        .cloned()
}

/// Whether `token` can be a progress token: a string or an integer.
fn is_progress_token(token: &Value) -> bool {
    token.is_string() || token.is_i64() || token.is_u64()
}

#[cfg(test)]
mod tests {
    use super::headers::decode_sentinel;
    use super::*;

    #[test]
    fn sentinel_decoding_is_strict() {
        assert_eq!(decode_sentinel("=?base64?SGVsbG8=?=").unwrap(), "Hello");
        assert!(
            decode_sentinel("=?base64?SGVsbG8?=").is_err(),
            "missing padding"
        );
        assert!(
            decode_sentinel("=?base64?SGVs!!!bG8=?=").is_err(),
            "bad alphabet"
        );
        assert_eq!(
            decode_sentinel("=?base64?SGVsbG8=").unwrap(),
            "=?base64?SGVsbG8=",
            "no suffix: literal"
        );
        assert_eq!(decode_sentinel("SGVsbG8=").unwrap(), "SGVsbG8=");
        assert_eq!(
            decode_sentinel("=?base64?SGVsbG8sIOS4lueVjA==?=").unwrap(),
            "Hello, 世界"
        );
    }

    #[tokio::test]
    async fn a_body_in_pieces_is_joined_within_the_limit() {
        let pieces = |n: usize| {
            let stream = futures::stream::iter(
                (0..n).map(|i| Ok::<_, std::io::Error>(Bytes::from(format!("{i}-")))),
            );
            Body::from_stream(stream)
        };
        assert_eq!(whole_body(pieces(3), 6).await.unwrap(), "0-1-2-");
        assert!(whole_body(pieces(3), 5).await.is_err(), "over the limit");
        assert_eq!(whole_body(Body::from("{}"), 2).await.unwrap(), "{}");
        assert!(whole_body(Body::from("{}"), 1).await.is_err());
        assert_eq!(whole_body(Body::empty(), 0).await.unwrap(), "");
    }

    #[test]
    fn accept_header_parsing() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json"),
        );
        let a = accepts(&h);
        assert!(a.json && a.sse);
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        let a = accepts(&h);
        assert!(!a.json && !a.sse);
    }
}
