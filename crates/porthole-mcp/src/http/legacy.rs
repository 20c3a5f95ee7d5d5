//! The legacy era (2025-03-26 … 2025-11-25): `initialize` mints a session, later
//! requests carry `Mcp-Session-Id`, batches are answered item by item, and a handler's
//! events are kept on the session's stream so a `GET` can resume them.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value};

use super::headers::{Accepts, PROTOCOL_VERSION, apply_headers, header};
use super::reply::{
    accepted, final_message, final_reply, json_body, raw_reply, rpc_error, session_not_found,
};
use super::sse_response::sse_response;
use crate::ServerInner;
use crate::call::{Call, Lifetime, Progress};
use crate::context::{RequestContext, StreamEvent};
use crate::guard::{Access, refuse};
use crate::jsonrpc::{self, Incoming, RpcError};
use crate::methods::{self, Method, MethodResult, Work};
use crate::protocol::{self, Era};
use crate::session::{Lookup, Session};
use porthole_core::trace_context::CallerTag;

/// The 400 a request of a session (`POST`, `GET` or `DELETE`) gets when its
/// `MCP-Protocol-Version` header names no 2025 version: the spec's transport page says a
/// server MUST refuse an invalid or unsupported version, whatever the method.
pub(super) fn unsupported_version(headers: &HeaderMap) -> Option<Response> {
    let v = header(headers, &PROTOCOL_VERSION)?;
    if protocol::legacy_version(v).is_some() {
        return None;
    }
    let sessions_speak = protocol::LEGACY_VERSIONS.join(", ");
    let message = if protocol::modern_version(v).is_some() {
        format!(
            "Bad Request: MCP-Protocol-Version `{v}` has no sessions; a request with an \
             Mcp-Session-Id (or an initialize) speaks {sessions_speak}. Send a 2026 request \
             with `_meta` and without Mcp-Session-Id instead"
        )
    } else {
        format!(
            "Bad Request: unsupported MCP-Protocol-Version `{v}`; a session speaks \
             {sessions_speak}, and requests without one {}",
            protocol::MODERN_VERSIONS.join(", ")
        )
    };
    Some(refuse(
        StatusCode::BAD_REQUEST,
        jsonrpc::INVALID_REQUEST,
        message,
    ))
}

pub(super) async fn legacy_post(
    inner: Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    session_id: Option<&str>,
    message: Incoming,
    accept: Accepts,
) -> Response {
    if let Some(refusal) = unsupported_version(headers) {
        return refusal;
    }
    if let Incoming::Request {
        id, method, params, ..
    } = &message
        && method == "initialize"
    {
        return initialize(&inner, access, session_id, id, params).await;
    }
    let Some(session_id) = session_id else {
        return refuse(
            StatusCode::BAD_REQUEST,
            jsonrpc::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required; call initialize first (or use protocol 2026-07-28 with _meta)",
        );
    };
    let session = match inner.sessions.get_for(session_id, access) {
        Lookup::Found(s) => s,
        Lookup::Unknown | Lookup::Ended => return session_not_found(),
    };
    match message {
        Incoming::Notification { method, params } => {
            if method == "notifications/cancelled"
                && let Some(request_id) = params.get("requestId")
                && session.cancel(request_id)
            {
                tracing::debug!(target: "porthole::mcp::session", ?request_id, "request cancelled by the client");
            }
            accepted()
        }
        Incoming::Response { id, outcome } => {
            if !session.resolve_client_request(&id, outcome) {
                tracing::debug!(target: "porthole::mcp::session", ?id, "response to no pending request");
            }
            accepted()
        }
        Incoming::Request {
            id, method, params, ..
        } => {
            let Some(parsed) = methods::served(&inner, &method, false) else {
                return rpc_error(
                    StatusCode::OK,
                    Some(&id),
                    &RpcError::method_not_found(&method).redacted(&inner.redactor),
                );
            };
            let ctx = session_context(&inner, headers, access, &session, &id, Some(&params));
            if let Some(known) = methods::remembered(&inner, parsed, &params, &ctx) {
                return raw_reply(&id, known, accept);
            }
            run_legacy(inner, session, Work::Method(parsed, params), ctx, accept).await
        }
    }
}

/// `initialize` mints a session and answers with its id in `Mcp-Session-Id`.
async fn initialize(
    inner: &Arc<ServerInner>,
    access: Access,
    session_id: Option<&str>,
    id: &Value,
    params: &Map<String, Value>,
) -> Response {
    if let Some(session_id) = session_id {
        // An ended or unknown session is 404, as for any other request that names it.
        if !matches!(inner.sessions.get_for(session_id, access), Lookup::Found(_)) {
            return session_not_found();
        }
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Some(id),
            &RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "Bad Request: this session is already initialized; send initialize without Mcp-Session-Id to start a new one",
            ),
        );
    }
    let hello = match methods::check_initialize(params) {
        Ok(hello) => hello,
        Err(error) => return rpc_error(StatusCode::BAD_REQUEST, Some(id), &error),
    };
    let version = protocol::negotiate_legacy(Some(&hello.protocol_version));
    let session = match inner
        .sessions
        .create(version, Value::Object(hello.capabilities), access)
    {
        Ok(session) => session,
        Err(full) => {
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                Some(id),
                &RpcError::internal(full.to_string()),
            );
        }
    };
    let client = &hello.client_info;
    if let Some(tag) = CallerTag::new(Some(&client.name), Some(&client.version), []) {
        let _ = session.client_tag.set(Arc::new(tag));
    }
    let client = client.name.as_str();
    tracing::info!(
        target: "porthole::mcp::session",
        session = %crate::session::short(&session.id),
        version,
        client,
        "MCP session started"
    );
    let result = MethodResult::Value(methods::initialize(inner, version));
    // The answer to `initialize` is JSON whatever the client accepts, as it has been.
    let json = Accepts {
        json: true,
        sse: false,
    };
    let mut response = final_reply(id, Ok(Ok(result)), false, json);
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response
            .headers_mut()
            .insert(protocol::HEADER_SESSION_ID, value);
    }
    response
}

/// The context of a request inside a session: its version, log level and caller, and
/// the `_meta` of its `params` (progress token, trace parent) when given.
pub(super) fn session_context(
    inner: &Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    session: &Arc<Session>,
    id: &Value,
    params: Option<&Map<String, Value>>,
) -> RequestContext {
    let mut ctx = inner.context(
        access,
        Era::Legacy(session.version),
        Some(session.clone()),
        id.clone(),
        params,
        Some(session.log_threshold()),
    );
    apply_headers(&mut ctx, headers);
    ctx
}

pub(super) async fn run_legacy(
    inner: Arc<ServerInner>,
    session: Arc<Session>,
    work: Work,
    ctx: RequestContext,
    accept: Accepts,
) -> Response {
    let id = ctx.request_id.clone();
    let lifetime = Lifetime::in_session(&session, &id);
    let call = Call::new(inner.clone(), work, ctx, accept.sse, lifetime);
    let streaming = match call.run().await {
        Progress::Done(result) => return final_reply(&id, result, false, accept),
        Progress::Streaming(streaming) => streaming,
    };
    // The handler is talking to the client: answer as an SSE stream of this session.
    let (stream, rx) = session.open_stream(false);
    let pump_session = session.clone();
    tokio::spawn(async move {
        let result = streaming
            .pump(|event| match event {
                StreamEvent::Message(message) => pump_session.push(stream, &message),
                StreamEvent::Disconnect => pump_session.detach(stream),
            })
            .await;
        if let Some(message) = final_message(&id, result) {
            pump_session.push(stream, &message);
        }
        pump_session.finish(stream);
    });
    sse_response(&inner, rx, None)
}

/// 2025-03-26 batches: every message handled in turn, responses returned as an array.
/// The most messages one 2025-03-26 batch may carry.
const MAX_BATCH_ITEMS: usize = 32;

pub(super) async fn legacy_batch(
    inner: &Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    session_id: Option<&str>,
    items: Vec<Value>,
) -> Response {
    let batch_error = |message: &str| {
        rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            &RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!("Invalid Request: {message}"),
            ),
        )
    };
    let session = match session_id.map(|id| inner.sessions.get_for(id, access)) {
        Some(Lookup::Found(s)) => s,
        Some(_) => return session_not_found(),
        None => {
            return batch_error(
                "JSON-RPC batches are only allowed inside a 2025-03-26 session (and never for initialize)",
            );
        }
    };
    let version = header(headers, &PROTOCOL_VERSION).unwrap_or(session.version);
    if version != "2025-03-26" || session.version != "2025-03-26" {
        return batch_error(
            "JSON-RPC batches were removed after protocol 2025-03-26; send one message per request",
        );
    }
    if items.is_empty() {
        return batch_error("an empty batch has nothing to do");
    }
    // Every answer of a batch is held until the last is ready: a bound on their number
    // is a bound on what one small request can make the server hold.
    if items.len() > MAX_BATCH_ITEMS {
        return batch_error(&format!(
            "a batch holds at most {MAX_BATCH_ITEMS} messages, this one {}; send the rest in another",
            items.len()
        ));
    }
    let mut responses = Vec::new();
    for item in items {
        if let Some(response) = batch_item(inner, headers, access, &session, item).await {
            responses.push(response);
        }
    }
    if responses.is_empty() {
        accepted()
    } else {
        json_body(StatusCode::OK, &Value::Array(responses))
    }
}

/// One message of a batch, handled like a lone one; the response to add, if any.
async fn batch_item(
    inner: &Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    session: &Arc<Session>,
    item: Value,
) -> Option<Value> {
    match jsonrpc::parse_message(item) {
        Err(rejected) => Some(jsonrpc::error_response(
            rejected.id.as_ref(),
            &rejected.error,
        )),
        Ok(Incoming::Notification { method, params }) => {
            if method == "notifications/cancelled"
                && let Some(request_id) = params.get("requestId")
            {
                session.cancel(request_id);
            }
            None
        }
        Ok(Incoming::Response { id, outcome }) => {
            session.resolve_client_request(&id, outcome);
            None
        }
        Ok(Incoming::Request {
            id, method, params, ..
        }) => {
            let Some(parsed) =
                methods::served(inner, &method, false).filter(|m| *m != Method::Initialize)
            else {
                return Some(jsonrpc::error_response(
                    Some(&id),
                    &RpcError::method_not_found(&method).redacted(&inner.redactor),
                ));
            };
            let ctx = session_context(inner, headers, access, session, &id, None);
            let lifetime = Lifetime::in_session(session, &id);
            let work = Work::Method(parsed, params);
            let call = Call::new(inner.clone(), work, ctx, false, lifetime);
            let Progress::Done(result) = call.run().await else {
                unreachable!("a call that cannot stream answers with its result")
            };
            final_message(&id, result)
        }
    }
}
