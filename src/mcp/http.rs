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

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::Bytes;
use futures::Stream;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::ServerInner;
use super::call::{Call, Finished, Lifetime, Progress, Unfinished, rest_of};
use super::context::{RequestContext, StreamEvent};
use super::dispatch::Method;
use super::guard::{Access, refuse};
use super::jsonrpc::{self, Incoming, RpcError};
use super::protocol::{self, Era};
use super::session::{Lookup, Session};
use super::subscriptions::ListenFilter;

// ---- small helpers ---------------------------------------------------------------------

/// A header's value with surrounding whitespace trimmed (names are case-insensitive).
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches([' ', '\t']))
}

/// What the client's `Accept` header allows.
#[derive(Clone, Copy)]
struct Accepts {
    json: bool,
    sse: bool,
}

fn accepts(headers: &HeaderMap) -> Accepts {
    let Some(accept) = header(headers, header::ACCEPT.as_str()) else {
        return Accepts {
            json: true,
            sse: true,
        };
    };
    let mut allowed = Accepts {
        json: false,
        sse: false,
    };
    for part in accept.split(',') {
        let media = part.split(';').next().unwrap_or("").trim();
        let is = |t: &str| media.eq_ignore_ascii_case(t);
        let any = is("*/*");
        allowed.json |= any || is("application/json") || is("application/*");
        allowed.sse |= any || is("text/event-stream") || is("text/*");
    }
    allowed
}

/// A message serialised straight into a buffer sized for a typical reply (`to_string`
/// would go through `Display`, and a small buffer grows by copying).
fn json_bytes(message: &impl serde::Serialize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1024);
    let _ = serde_json::to_writer(&mut bytes, message);
    bytes
}

fn json_body(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        json_bytes(body),
    )
        .into_response()
}

fn rpc_error(status: StatusCode, id: Option<&Value>, error: &RpcError) -> Response {
    json_body(status, &jsonrpc::error_response(id, error))
}

fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

/// Aborts a task when dropped: ties a handler's life to its HTTP response.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An SSE response body fed by a channel, with keep-alive comments.
struct SseBody {
    rx: mpsc::UnboundedReceiver<Bytes>,
    keepalive: tokio::time::Interval,
    /// Resolves when the server shuts down: the stream ends so shutdown is not held up.
    stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// The task feeding the stream, if any: it stops when the client goes away.
    _feeder: Option<AbortOnDrop>,
}

impl Stream for SseBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(bytes)) => return Poll::Ready(Some(Ok(bytes))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if self.stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        if self.keepalive.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(Bytes::from_static(b": keep-alive\n\n"))));
        }
        Poll::Pending
    }
}

/// An SSE response carrying what arrives on `rx`, with keep-alives, ended by server
/// shutdown; `feeder` is the task that feeds `rx`, aborted when the response is dropped.
fn sse_response(
    inner: &ServerInner,
    rx: mpsc::UnboundedReceiver<Bytes>,
    feeder: Option<tokio::task::AbortHandle>,
) -> Response {
    let mut stopping = inner.shutdown.subscribe();
    let body = SseBody {
        rx,
        keepalive: keepalive(inner.keepalive),
        stop: Box::pin(async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        }),
        _feeder: feeder.map(AbortOnDrop),
    };
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn keepalive(period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

/// One plain (modern) SSE event.
fn sse_event(message: &Value) -> Bytes {
    let mut event = b"event: message\ndata: ".to_vec();
    let _ = serde_json::to_writer(&mut event, message);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

// ---- POST -------------------------------------------------------------------------------

pub(crate) async fn handle_post(
    State(inner): State<Arc<ServerInner>>,
    request: axum::extract::Request,
) -> Response {
    // The request taken whole: a `HeaderMap` extractor would copy every header.
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let content_type = header(headers, header::CONTENT_TYPE.as_str()).unwrap_or("");
    if !content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            jsonrpc::INVALID_REQUEST,
            format!(
                "Unsupported Media Type `{content_type}`: send the JSON-RPC message with `Content-Type: application/json`"
            ),
        );
    }
    let accept = accepts(headers);
    if !accept.json && !accept.sse {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            jsonrpc::INVALID_REQUEST,
            "Not Acceptable: send `Accept: application/json, text/event-stream`",
        );
    }
    let too_large = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            jsonrpc::INVALID_REQUEST,
            format!(
                "Payload Too Large: the body is over {} bytes (MCP_MAX_BODY_BYTES)",
                inner.max_body_bytes
            ),
        )
    };
    // A declared length over the limit is refused at once, not after waiting for it.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > inner.max_body_bytes as u64) {
        return too_large();
    }
    // A client that sends its body slowly (or never finishes it) must not hold a task
    // forever: the whole body has to arrive within the body timeout.
    let read = tokio::time::timeout(
        inner.body_timeout,
        axum::body::to_bytes(body, inner.max_body_bytes),
    );
    let bytes = match read.await {
        Ok(Ok(b)) => b,
        Err(_) => {
            return refuse(
                StatusCode::REQUEST_TIMEOUT,
                jsonrpc::INVALID_REQUEST,
                format!(
                    "Request Timeout: the body did not arrive within {} s (MCP_BODY_TIMEOUT_SECS)",
                    inner.body_timeout.as_secs()
                ),
            );
        }
        Ok(Err(_)) => return too_large(),
    };
    let value: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                None,
                &RpcError::new(jsonrpc::PARSE_ERROR, format!("Parse error: {e}")),
            );
        }
    };
    let session_id = header(headers, protocol::HEADER_SESSION_ID).map(str::to_string);
    // The guard says what the token allows; without the guard, the least.
    let access = parts
        .extensions
        .get::<Access>()
        .copied()
        .unwrap_or(Access::ReadOnly);
    if let Value::Array(items) = value {
        return legacy_batch(&inner, headers, access, session_id.as_deref(), items).await;
    }
    let message = match jsonrpc::parse_message(value) {
        Ok(m) => m,
        Err(rejected) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                rejected.id.as_ref(),
                &rejected.error,
            );
        }
    };
    if is_bare(headers, session_id.as_deref(), &message) {
        bare_post(inner, access, message, accept).await
    } else if is_legacy(headers, session_id.as_deref(), &message) {
        legacy_post(
            inner,
            headers,
            access,
            session_id.as_deref(),
            message,
            accept,
        )
        .await
    } else {
        modern_post(inner, headers, access, message, accept).await
    }
}

fn meta_version(message: &Incoming) -> Option<&Value> {
    message
        .params()?
        .get("_meta")?
        .get(protocol::META_PROTOCOL_VERSION)
}

fn is_legacy(headers: &HeaderMap, session_id: Option<&str>, message: &Incoming) -> bool {
    if session_id.is_some() {
        return true;
    }
    if meta_version(message).is_some() {
        return false;
    }
    match header(headers, protocol::HEADER_PROTOCOL_VERSION) {
        Some(v) => protocol::legacy_version(v).is_some(),
        None => message.method() == Some("initialize"),
    }
}

/// A bare request, as in the curl example of the design: no session, no protocol
/// version (neither header nor `_meta`), no `Mcp-Method` header, and a method that needs
/// no session state. Such a request is answered statelessly in the oldest legacy
/// version, which is what the 2025 transport says a server assumes without a version
/// header. Everything else keeps its era's rules.
fn is_bare(headers: &HeaderMap, session_id: Option<&str>, message: &Incoming) -> bool {
    session_id.is_none()
        && meta_version(message).is_none()
        && header(headers, protocol::HEADER_PROTOCOL_VERSION).is_none()
        && header(headers, protocol::HEADER_METHOD).is_none()
        && matches!(message, Incoming::Request { .. })
        && message
            .method()
            .and_then(|m| Method::parse(m, false))
            .is_some_and(Method::is_stateless)
}

async fn bare_post(
    inner: Arc<ServerInner>,
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
    let Some(parsed) = Method::parse(&method, false) else {
        return rpc_error(
            StatusCode::OK,
            Some(&id),
            &RpcError::method_not_found(&method),
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
    if let Some(listing) = inner.cached_tools_list(parsed, &params, &ctx) {
        return raw_reply(&id, listing, accept);
    }
    run_stateless(inner, parsed, params, ctx, accept).await
}

/// The `progressToken` of a request's `_meta`, when it is a string or an integer.
pub(super) fn progress_token(meta: &Value) -> Option<Value> {
    meta.get("progressToken")
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned()
}

// ---- legacy era ------------------------------------------------------------------------

async fn legacy_post(
    inner: Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    session_id: Option<&str>,
    message: Incoming,
    accept: Accepts,
) -> Response {
    if let Some(v) = header(headers, protocol::HEADER_PROTOCOL_VERSION)
        && protocol::legacy_version(v).is_none()
    {
        return refuse(
            StatusCode::BAD_REQUEST,
            jsonrpc::INVALID_REQUEST,
            format!(
                "Bad Request: unsupported MCP-Protocol-Version `{v}`; supported: {}",
                protocol::all_versions().join(", ")
            ),
        );
    }
    if let Incoming::Request {
        id, method, params, ..
    } = &message
        && method == "initialize"
    {
        if session_id.is_some() {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Some(id),
                &RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    "Bad Request: this session is already initialized; send initialize without Mcp-Session-Id to start a new one",
                ),
            );
        }
        let version =
            protocol::negotiate_legacy(params.get("protocolVersion").and_then(Value::as_str));
        let caps = params
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let session = inner.sessions.create(version, caps);
        let client = params
            .get("clientInfo")
            .and_then(|c| c.get("name"))
            .and_then(|n| n.as_str())
            .unwrap_or("unknown");
        tracing::info!(
            target: "porthole::mcp::session",
            session = %super::session::short(&session.id),
            version,
            client,
            "MCP session started"
        );
        let ctx = inner.context(
            access,
            Era::Legacy(version),
            Some(session.clone()),
            id.clone(),
            None,
            None,
        );
        let result = inner.dispatch(Method::Initialize, params, &ctx).await;
        let mut response = match result {
            Ok(r) => json_body(StatusCode::OK, &jsonrpc::response(id, r)),
            Err(e) => rpc_error(StatusCode::OK, Some(id), &e),
        };
        if let Ok(value) = HeaderValue::from_str(&session.id) {
            response
                .headers_mut()
                .insert(protocol::HEADER_SESSION_ID, value);
        }
        return response;
    }
    let Some(session_id) = session_id else {
        return refuse(
            StatusCode::BAD_REQUEST,
            jsonrpc::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required; call initialize first (or use protocol 2026-07-28 with _meta)",
        );
    };
    let session = match inner.sessions.get(session_id) {
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
            let Some(parsed) = Method::parse(&method, false) else {
                return rpc_error(
                    StatusCode::OK,
                    Some(&id),
                    &RpcError::method_not_found(&method),
                );
            };
            let log_threshold = Some(session.log_threshold());
            let mut ctx = inner.context(
                access,
                Era::Legacy(session.version),
                Some(session.clone()),
                id.clone(),
                Some(&params),
                log_threshold,
            );
            ctx.caller = caller(&inner, headers);
            if let Some(listing) = inner.cached_tools_list(parsed, &params, &ctx) {
                return raw_reply(&id, listing, accept);
            }
            run_legacy(inner, session, parsed, params, ctx, accept).await
        }
    }
}

fn session_not_found() -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        jsonrpc::INVALID_REQUEST,
        "Not Found: the MCP session has ended or is unknown; initialize again without Mcp-Session-Id",
    )
}

async fn run_legacy(
    inner: Arc<ServerInner>,
    session: Arc<Session>,
    method: Method,
    params: Map<String, Value>,
    ctx: RequestContext,
    accept: Accepts,
) -> Response {
    let id = ctx.request_id.clone();
    let lifetime = Lifetime::in_session(&session, &id);
    let call = Call::new(inner.clone(), method, params, ctx, accept.sse, lifetime);
    let (first, mut events, rest) = match call.run().await {
        Progress::Done(result) => return final_reply(&id, result, false, accept),
        Progress::Streaming {
            first,
            events,
            rest,
        } => (first, events, rest),
    };
    // The handler is talking to the client: answer as an SSE stream of this session.
    let (stream, rx) = session.open_stream(false);
    let pump_session = session.clone();
    tokio::spawn(async move {
        let mut next = Some(first);
        while let Some(event) = next {
            match event {
                StreamEvent::Message(message) => pump_session.push(stream, &message),
                StreamEvent::Disconnect => pump_session.detach(stream),
            }
            next = events.recv().await;
        }
        if let Some(message) = final_message(&id, rest_of(rest).await) {
            pump_session.push(stream, &message);
        }
        pump_session.finish(stream);
    });
    sse_response(&inner, rx, None)
}

/// 2025-03-26 batches: every message handled in turn, responses returned as an array.
async fn legacy_batch(
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
    let session = match session_id.map(|id| inner.sessions.get(id)) {
        Some(Lookup::Found(s)) => s,
        Some(_) => return session_not_found(),
        None => {
            return batch_error(
                "JSON-RPC batches are only allowed inside a 2025-03-26 session (and never for initialize)",
            );
        }
    };
    let version = header(headers, protocol::HEADER_PROTOCOL_VERSION).unwrap_or(session.version);
    if version != "2025-03-26" || session.version != "2025-03-26" {
        return batch_error(
            "JSON-RPC batches were removed after protocol 2025-03-26; send one message per request",
        );
    }
    if items.is_empty() {
        return batch_error("an empty batch has nothing to do");
    }
    let mut responses = Vec::new();
    for item in items {
        match jsonrpc::parse_message(item) {
            Err(rejected) => responses.push(jsonrpc::error_response(
                rejected.id.as_ref(),
                &rejected.error,
            )),
            Ok(Incoming::Notification { method, params }) => {
                if method == "notifications/cancelled"
                    && let Some(request_id) = params.get("requestId")
                {
                    session.cancel(request_id);
                }
            }
            Ok(Incoming::Response { id, outcome }) => {
                session.resolve_client_request(&id, outcome);
            }
            Ok(Incoming::Request {
                id, method, params, ..
            }) => {
                let Some(parsed) =
                    Method::parse(&method, false).filter(|m| *m != Method::Initialize)
                else {
                    responses.push(jsonrpc::error_response(
                        Some(&id),
                        &RpcError::method_not_found(&method),
                    ));
                    continue;
                };
                let mut ctx = inner.context(
                    access,
                    Era::Legacy(session.version),
                    Some(session.clone()),
                    id.clone(),
                    None,
                    Some(session.log_threshold()),
                );
                ctx.caller = caller(inner, headers);
                let lifetime = Lifetime::in_session(&session, &id);
                let call = Call::new(inner.clone(), parsed, params, ctx, false, lifetime);
                let Progress::Done(result) = call.run().await else {
                    unreachable!("a call that cannot stream answers with its result")
                };
                if let Some(message) = final_message(&id, result) {
                    responses.push(message);
                }
            }
        }
    }
    if responses.is_empty() {
        accepted()
    } else {
        json_body(StatusCode::OK, &Value::Array(responses))
    }
}

// ---- modern era ------------------------------------------------------------------------

async fn modern_post(
    inner: Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    message: Incoming,
    accept: Accepts,
) -> Response {
    let (id, method, params, has_params) = match message {
        // No client→server notification needs an answer over HTTP.
        Incoming::Notification { .. } => return accepted(),
        Incoming::Response { id, .. } => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Some(&id),
                &RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    "Invalid Request: protocol 2026-07-28 servers send no requests, so there is nothing to respond to",
                ),
            );
        }
        Incoming::Request {
            id,
            method,
            params,
            has_params,
        } => (id, method, params, has_params),
    };
    let fail = |status: StatusCode, error: RpcError| rpc_error(status, Some(&id), &error);

    // 1. _meta must carry the protocol version and client capabilities.
    let meta = params.get("_meta").and_then(Value::as_object);
    let meta_version = meta
        .and_then(|m| m.get(protocol::META_PROTOCOL_VERSION))
        .and_then(Value::as_str);
    let capabilities = meta.and_then(|m| m.get(protocol::META_CLIENT_CAPABILITIES));
    let (Some(meta_version), Some(capabilities), true) = (meta_version, capabilities, has_params)
    else {
        return fail(
            StatusCode::BAD_REQUEST,
            RpcError::invalid_params(format!(
                "Invalid params: every request needs params._meta with \"{}\" and \"{}\" (or call initialize for the 2025 protocol)",
                protocol::META_PROTOCOL_VERSION,
                protocol::META_CLIENT_CAPABILITIES
            )),
        );
    };
    if !capabilities.is_object() {
        return fail(
            StatusCode::BAD_REQUEST,
            RpcError::invalid_params(format!(
                "`{}` must be an object",
                protocol::META_CLIENT_CAPABILITIES
            )),
        );
    }
    // 2. The version header must match _meta.
    if let Err(error) = header_equals(
        headers,
        protocol::HEADER_PROTOCOL_VERSION,
        "MCP-Protocol-Version",
        meta_version,
        false,
    ) {
        return fail(StatusCode::BAD_REQUEST, error);
    }
    // 3. The version must be one we serve.
    let Some(version) = protocol::modern_version(meta_version) else {
        return fail(
            StatusCode::BAD_REQUEST,
            RpcError::new(
                jsonrpc::UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
            )
            .with_data(json!({"supported": protocol::MODERN_VERSIONS, "requested": meta_version})),
        );
    };
    // 4. Mcp-Method and, where required, Mcp-Name must match the body.
    if let Err(error) = header_equals(
        headers,
        protocol::HEADER_METHOD,
        "Mcp-Method",
        &method,
        false,
    ) {
        return fail(StatusCode::BAD_REQUEST, error);
    }
    let name_member = match method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // The Tasks extension routes by task id.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(member) = name_member {
        let body_value = params
            .get(member)
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Err(error) =
            header_equals(headers, protocol::HEADER_NAME, "Mcp-Name", body_value, true)
        {
            return fail(StatusCode::BAD_REQUEST, error);
        }
    }
    // 5. The method must exist in this era.
    let Some(parsed) = Method::parse(&method, true) else {
        return fail(StatusCode::NOT_FOUND, RpcError::method_not_found(&method));
    };
    if parsed == Method::PromptsList && inner.prompts.is_empty() {
        return fail(StatusCode::NOT_FOUND, RpcError::method_not_found(&method));
    }
    // 6. Tool parameters mirrored in Mcp-Param-* headers.
    if parsed == Method::ToolsCall
        && let Err(reason) = check_param_headers(&inner, headers, &params)
    {
        return fail(StatusCode::BAD_REQUEST, RpcError::header_mismatch(reason));
    }
    // 7. An optional log level.
    let log_threshold = match meta.and_then(|m| m.get(protocol::META_LOG_LEVEL)) {
        None => None,
        Some(level) => match level.as_str().and_then(protocol::log_level_rank) {
            Some(rank) => Some(rank),
            None => {
                return fail(
                    StatusCode::BAD_REQUEST,
                    RpcError::invalid_params(format!(
                        "`{}` must be one of {}",
                        protocol::META_LOG_LEVEL,
                        protocol::LOG_LEVELS.join(", ")
                    )),
                );
            }
        },
    };

    if parsed == Method::SubscriptionsListen {
        let owner = caller(&inner, headers);
        return match listen_filter(&inner, &params, capabilities, owner).await {
            Ok(filter) => listen(&inner, &id, filter),
            Err(error) => fail(modern_status(&error), error),
        };
    }
    let mut ctx = inner.context(
        access,
        Era::Modern(version),
        None,
        id.clone(),
        Some(&params),
        log_threshold,
    );
    ctx.client_capabilities = capabilities.clone();
    ctx.caller = caller(&inner, headers);
    ctx.input_responses = params
        .get("inputResponses")
        .and_then(Value::as_object)
        .cloned();
    ctx.request_state = params
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_string);
    if params
        .get("inputResponses")
        .is_some_and(|v| !v.is_object() && !v.is_null())
    {
        return fail(
            StatusCode::OK,
            RpcError::invalid_params(
                "`inputResponses` must be an object keyed by the server's input request keys",
            ),
        );
    }
    if let Some(listing) = inner.cached_tools_list(parsed, &params, &ctx) {
        return raw_reply(&id, listing, accept);
    }
    run_stateless(inner, parsed, params, ctx, accept).await
}

/// Decodes a header value that may use the `=?base64?…?=` sentinel.
fn decode_sentinel(value: &str) -> Result<Cow<'_, str>, String> {
    const PREFIX: &str = "=?base64?";
    const SUFFIX: &str = "?=";
    if value.len() >= PREFIX.len() + SUFFIX.len()
        && value.starts_with(PREFIX)
        && value.ends_with(SUFFIX)
    {
        let encoded = &value[PREFIX.len()..value.len() - SUFFIX.len()];
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| format!("`{value}` is not valid padded standard Base64"))?;
        String::from_utf8(bytes)
            .map(Cow::Owned)
            .map_err(|_| format!("`{value}` does not decode to UTF-8"))
    } else {
        Ok(Cow::Borrowed(value))
    }
}

/// A header that must repeat a value of the body (2026 era): missing, malformed or
/// different is a `-32020`. `encoded` headers may use the `=?base64?…?=` sentinel.
fn header_equals(
    headers: &HeaderMap,
    name: &str,
    label: &str,
    expected: &str,
    encoded: bool,
) -> Result<(), RpcError> {
    let raw = header(headers, name).ok_or_else(|| {
        RpcError::header_mismatch(format!(
            "the {label} header is required and must be `{expected}`"
        ))
    })?;
    let value = if encoded {
        decode_sentinel(raw).map_err(|e| RpcError::header_mismatch(format!("{label}: {e}")))?
    } else {
        Cow::Borrowed(raw)
    };
    if value == expected {
        Ok(())
    } else {
        Err(RpcError::header_mismatch(format!(
            "{label} header `{value}` does not match body value `{expected}`"
        )))
    }
}

/// `x-mcp-header` parameters must be mirrored in `Mcp-Param-<Name>` headers.
fn check_param_headers(
    inner: &ServerInner,
    headers: &HeaderMap,
    params: &Map<String, Value>,
) -> Result<(), String> {
    let Some(tool) = params.get("name").and_then(Value::as_str) else {
        return Ok(());
    };
    for (property, header_name) in inner.tools.param_headers(tool) {
        let value = params.get("arguments").and_then(|a| a.get(property));
        let full = format!(
            "{}{}",
            protocol::HEADER_PARAM_PREFIX,
            header_name.to_ascii_lowercase()
        );
        let Some(value) = value.filter(|v| !v.is_null()) else {
            continue;
        };
        let raw = header(headers, &full).ok_or_else(|| {
            format!("argument `{property}` needs the header Mcp-Param-{header_name}")
        })?;
        let decoded = decode_sentinel(raw).map_err(|e| format!("Mcp-Param-{header_name}: {e}"))?;
        let matches = match value {
            Value::String(s) => *s == decoded,
            Value::Bool(b) => decoded == b.to_string(),
            Value::Number(n) => decoded.parse::<f64>().ok() == n.as_f64(),
            _ => false,
        };
        if !matches {
            return Err(format!(
                "Mcp-Param-{header_name} `{decoded}` does not match argument `{property}`"
            ));
        }
    }
    Ok(())
}

/// Modern errors that are about the request's shape get 4xx; others ride on 200.
fn modern_status(error: &RpcError) -> StatusCode {
    match error.code {
        jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        jsonrpc::MISSING_CLIENT_CAPABILITY
        | jsonrpc::HEADER_MISMATCH
        | jsonrpc::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// Runs a request that belongs to no session (the modern era, or a bare request): the
/// work ends with the request.
async fn run_stateless(
    inner: Arc<ServerInner>,
    method: Method,
    params: Map<String, Value>,
    ctx: RequestContext,
    accept: Accepts,
) -> Response {
    let id = ctx.request_id.clone();
    let modern = ctx.era.is_modern();
    let call = Call::new(
        inner.clone(),
        method,
        params,
        ctx,
        accept.sse,
        Lifetime::EndsWithRequest,
    );
    let (first, mut events, rest) = match call.run().await {
        Progress::Done(result) => return final_reply(&id, result, modern, accept),
        Progress::Streaming {
            first,
            events,
            rest,
        } => (first, events, rest),
    };
    // If the client goes away before the reply, the work stops.
    let cancel_on_drop = AbortOnDrop(rest.abort_handle());
    let (tx, rx) = mpsc::unbounded_channel();
    let pump = tokio::spawn(async move {
        let _cancel_on_drop = cancel_on_drop;
        let mut next = Some(first);
        while let Some(event) = next {
            // Modern streams cannot be resumed, so there is nothing to disconnect.
            if let StreamEvent::Message(message) = event {
                let _ = tx.send(sse_event(&message));
            }
            next = events.recv().await;
        }
        if let Some(message) = final_message(&id, rest_of(rest).await) {
            let _ = tx.send(sse_event(&message));
        }
    });
    sse_response(&inner, rx, Some(pump.abort_handle()))
}

/// The task owner key of a request (a keyed hash of its `Authorization` header).
fn caller(inner: &ServerInner, headers: &HeaderMap) -> Arc<str> {
    inner
        .tasks
        .owner_of(header(headers, header::AUTHORIZATION.as_str()))
}

/// What a `subscriptions/listen` asks for; task ids need the Tasks extension, and only
/// the caller's own live tasks are agreed to.
async fn listen_filter(
    inner: &ServerInner,
    params: &Map<String, Value>,
    capabilities: &Value,
    owner: Arc<str>,
) -> Result<ListenFilter, RpcError> {
    let notifications = params.get("notifications").unwrap_or(&Value::Null);
    let mut filter = ListenFilter::from_params(notifications, !inner.prompts.is_empty());
    let Some(task_ids) = notifications.get("taskIds").filter(|v| !v.is_null()) else {
        return Ok(filter);
    };
    if capabilities["extensions"]
        .get(crate::mcp::tasks::TASKS_EXTENSION)
        .is_none()
    {
        return Err(crate::mcp::tasks::missing_tasks_capability());
    }
    let ids = task_ids.as_array().ok_or_else(|| {
        RpcError::invalid_params("`notifications.taskIds` must be an array of task ids")
    })?;
    filter.task_ids = inner.tasks.agreed_task_ids(ids, &owner).await?;
    filter.task_owner = Some(owner);
    Ok(filter)
}

/// `subscriptions/listen`: acknowledgment first, then the changes the client asked for.
fn listen(inner: &Arc<ServerInner>, id: &Value, filter: ListenFilter) -> Response {
    let (tx, rx) = mpsc::unbounded_channel();
    let ack = jsonrpc::notification(
        "notifications/subscriptions/acknowledged",
        json!({"_meta": {protocol::META_SUBSCRIPTION_ID: id}, "notifications": filter.to_json()}),
    );
    let _ = tx.send(sse_event(&ack));
    let mut changes = inner.notifier.subscribe();
    let subscription_id = id.clone();
    let forwarder = tokio::spawn(async move {
        loop {
            match changes.recv().await {
                Ok(change) if filter.wants(&change) => {
                    if tx
                        .send(sse_event(&change.to_notification(Some(&subscription_id))))
                        .is_err()
                    {
                        break;
                    }
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
    });
    sse_response(inner, rx, Some(forwarder.abort_handle()))
}

// ---- shared by both eras ---------------------------------------------------------------

/// The response message for a finished handler; `None` if it was cancelled.
fn final_message(id: &Value, result: Finished) -> Option<Value> {
    match result {
        Ok(Ok(value)) => Some(jsonrpc::response(id, value)),
        Ok(Err(error)) => Some(jsonrpc::error_response(Some(id), &error)),
        Err(Unfinished::Panicked) => {
            tracing::error!(target: "porthole::mcp::dispatch", ?id, "an MCP handler panicked");
            Some(jsonrpc::error_response(
                Some(id),
                &RpcError::internal(
                    "Internal error: the handler crashed; the server log has details",
                ),
            ))
        }
        Err(Unfinished::Cancelled) => None,
    }
}

/// A reply whose result is already serialised (the cached tool listing): the
/// envelope is written around the bytes instead of copying a `Value` tree.
fn raw_reply(id: &Value, result: &serde_json::value::RawValue, accept: Accepts) -> Response {
    #[derive(serde::Serialize)]
    struct Envelope<'a> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: &'a serde_json::value::RawValue,
    }
    let body = serde_json::to_vec(&Envelope {
        jsonrpc: "2.0",
        id,
        result,
    })
    .unwrap_or_default();
    let (content_type, body) = if accept.json {
        ("application/json", body)
    } else {
        let mut event = b"event: message\ndata: ".to_vec();
        event.extend_from_slice(&body);
        event.extend_from_slice(b"\n\n");
        ("text/event-stream", event)
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

/// The reply for a handler that sent nothing before its result: JSON, or a one-event
/// SSE stream for a client that accepts only `text/event-stream`.
fn final_reply(id: &Value, result: Finished, modern: bool, accept: Accepts) -> Response {
    if accept.json {
        return final_json(id, result, modern);
    }
    let message = final_message(id, result).unwrap_or_else(|| {
        jsonrpc::error_response(Some(id), &RpcError::internal("Request cancelled"))
    });
    let mut response = Response::new(Body::from(sse_event(&message)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn final_json(id: &Value, result: Finished, modern: bool) -> Response {
    let status = match &result {
        Ok(Err(error)) if modern => modern_status(error),
        _ => StatusCode::OK,
    };
    match final_message(id, result) {
        Some(message) => json_body(status, &message),
        None => rpc_error(
            StatusCode::OK,
            Some(id),
            &RpcError::internal("Request cancelled"),
        ),
    }
}

// ---- GET and DELETE --------------------------------------------------------------------

pub(crate) async fn handle_get(
    State(inner): State<Arc<ServerInner>>,
    headers: HeaderMap,
) -> Response {
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
    let session = match inner.sessions.get(session_id) {
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
                Ok(super::subscriptions::Change::Task(task)) => {
                    // 2025-11-25: a session hears about its own tasks only.
                    if task.session.as_deref() == Some(forward_session.id.as_str()) {
                        let status =
                            jsonrpc::notification("notifications/tasks/status", task.legacy());
                        forward_session.push_if_current(stream, &status);
                    }
                }
                Ok(change) => {
                    let wanted = match &change {
                        super::subscriptions::Change::ResourceUpdated(uri) => {
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

/// Removes a GET stream from its session when its connection ends.
struct StreamCleanup {
    session: Arc<Session>,
    stream: u64,
}

impl Drop for StreamCleanup {
    fn drop(&mut self) {
        self.session.close_notification_stream(self.stream);
    }
}

pub(crate) async fn handle_delete(
    State(inner): State<Arc<ServerInner>>,
    headers: HeaderMap,
) -> Response {
    let Some(session_id) = header(&headers, protocol::HEADER_SESSION_ID) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            jsonrpc::INVALID_REQUEST,
            "Bad Request: DELETE /mcp ends a session; send its Mcp-Session-Id",
        );
    };
    if matches!(inner.sessions.get(session_id), Lookup::Found(_)) && inner.sessions.end(session_id)
    {
        tracing::info!(target: "porthole::mcp::session", session = %super::session::short(session_id), "MCP session ended by the client");
        StatusCode::NO_CONTENT.into_response()
    } else {
        session_not_found()
    }
}

#[cfg(test)]
mod tests {
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
