//! The modern, stateless era (2026-07-28): every request carries its `_meta` and the
//! routing headers, checked in the order the spec's tests expect, then runs without a
//! session. `subscriptions/listen` is in `listen.rs`.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::headers::{
    Accepts, METHOD, NAME, PROTOCOL_VERSION, apply_headers, caller, check_param_headers,
    header_equals,
};
use super::listen::{listen, listen_filter};
use super::reply::{accepted, final_message, final_reply, modern_status, raw_reply, rpc_error};
use super::sse_response::{AbortOnDrop, sse_event, sse_response};
use crate::ServerInner;
use crate::call::{Call, Lifetime, Progress};
use crate::context::{RequestContext, StreamEvent};
use crate::guard::Access;
use crate::jsonrpc::{self, Incoming, RpcError};
use crate::methods::{self, Method, Work};
use crate::protocol::{self, Era};

/// Why a request was refused before it ran: the HTTP status and the JSON-RPC error.
type Refusal = (StatusCode, RpcError);

fn bad_request(error: RpcError) -> Refusal {
    (StatusCode::BAD_REQUEST, error)
}

/// What the checks learned about a request that passed them.
struct Checked<'a> {
    version: &'static str,
    method: Method,
    capabilities: &'a Value,
    log_threshold: Option<u8>,
}

pub(super) async fn modern_post(
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
    let fail = |(status, error): Refusal| rpc_error(status, Some(&id), &error);
    let checked = match check_request(&inner, headers, &method, &params, has_params) {
        Ok(checked) => checked,
        Err(refusal) => return fail(refusal),
    };
    if checked.method == Method::SubscriptionsListen {
        let owner = inner.tasks.owner(&caller(headers));
        return match listen_filter(&inner, &params, checked.capabilities, owner).await {
            Ok(filter) => listen(&inner, &id, filter),
            Err(error) => fail((modern_status(&error), error)),
        };
    }
    let ctx = match request_context(&inner, headers, access, &id, &params, &checked) {
        Ok(ctx) => ctx,
        Err(refusal) => return fail(refusal),
    };
    if let Some(known) = methods::remembered(&inner, checked.method, &params, &ctx) {
        return raw_reply(&id, known, accept);
    }
    run_stateless(inner, Work::Method(checked.method, params), ctx, accept).await
}

/// The spec's checks, in the order its tests expect: `_meta`, the version header and
/// the version, the routing headers, the method, the mirrored parameters, the log level.
fn check_request<'a>(
    inner: &ServerInner,
    headers: &HeaderMap,
    method: &str,
    params: &'a Map<String, Value>,
    has_params: bool,
) -> Result<Checked<'a>, Refusal> {
    let meta = params.get("_meta").and_then(Value::as_object);
    let (meta_version, capabilities) = required_meta(meta, has_params).map_err(bad_request)?;
    let version = checked_version(headers, meta_version).map_err(bad_request)?;
    check_routing_headers(headers, method, routed_value(method, params)).map_err(bad_request)?;
    let parsed = methods::served(inner, method, true)
        .ok_or_else(|| (StatusCode::NOT_FOUND, RpcError::method_not_found(method)))?;
    if parsed == Method::ToolsCall {
        let tool = params.get("name").and_then(Value::as_str);
        check_param_headers(
            inner,
            headers,
            tool,
            params.get("arguments").and_then(Value::as_object),
        )
        .map_err(|reason| bad_request(RpcError::header_mismatch(reason)))?;
    }
    let log_threshold = log_threshold(meta).map_err(bad_request)?;
    Ok(Checked {
        version,
        method: parsed,
        capabilities,
        log_threshold,
    })
}

/// `_meta` must carry the protocol version and the client's capabilities (an object).
fn required_meta(
    meta: Option<&Map<String, Value>>,
    has_params: bool,
) -> Result<(&str, &Value), RpcError> {
    let meta_version = meta
        .and_then(|m| m.get(protocol::META_PROTOCOL_VERSION))
        .and_then(Value::as_str);
    let capabilities = meta.and_then(|m| m.get(protocol::META_CLIENT_CAPABILITIES));
    let (Some(meta_version), Some(capabilities), true) = (meta_version, capabilities, has_params)
    else {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: every request needs params._meta with \"{}\" and \"{}\" (or call initialize for the 2025 protocol)",
            protocol::META_PROTOCOL_VERSION,
            protocol::META_CLIENT_CAPABILITIES
        )));
    };
    if !capabilities.is_object() {
        return Err(RpcError::invalid_params(format!(
            "`{}` must be an object",
            protocol::META_CLIENT_CAPABILITIES
        )));
    }
    Ok((meta_version, capabilities))
}

/// The version header must match `_meta`, and the version must be one we serve.
pub(super) fn checked_version(
    headers: &HeaderMap,
    meta_version: &str,
) -> Result<&'static str, RpcError> {
    header_equals(
        headers,
        &PROTOCOL_VERSION,
        "MCP-Protocol-Version",
        meta_version,
        false,
    )?;
    protocol::modern_version(meta_version).ok_or_else(|| {
        RpcError::new(
            jsonrpc::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(json!({"supported": protocol::MODERN_VERSIONS, "requested": meta_version}))
    })
}

/// The body value `Mcp-Name` must repeat for `method` (`""` when the body lacks it), or
/// `None` when the method routes by nothing but its name.
fn routed_value<'a>(method: &str, params: &'a Map<String, Value>) -> Option<&'a str> {
    let member = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        // The Tasks extension routes by task id.
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    Some(
        params
            .get(member)
            .and_then(Value::as_str)
            .unwrap_or_default(),
    )
}

/// `Mcp-Method` and, where the method names something (`routed`, see
/// [`routed_value`]), `Mcp-Name` must match the body.
pub(super) fn check_routing_headers(
    headers: &HeaderMap,
    method: &str,
    routed: Option<&str>,
) -> Result<(), RpcError> {
    header_equals(headers, &METHOD, "Mcp-Method", method, false)?;
    match routed {
        Some(body_value) => header_equals(headers, &NAME, "Mcp-Name", body_value, true),
        None => Ok(()),
    }
}

/// The optional log level in `_meta`, as a rank.
fn log_threshold(meta: Option<&Map<String, Value>>) -> Result<Option<u8>, RpcError> {
    let Some(level) = meta.and_then(|m| m.get(protocol::META_LOG_LEVEL)) else {
        return Ok(None);
    };
    match level.as_str().and_then(protocol::log_level_rank) {
        Some(rank) => Ok(Some(rank)),
        None => Err(RpcError::invalid_params(format!(
            "`{}` must be one of {}",
            protocol::META_LOG_LEVEL,
            protocol::LOG_LEVELS.join(", ")
        ))),
    }
}

/// The context a checked request runs in: its era, the caller, and the answers to
/// earlier input requests (multi-round-trip requests) it carries.
fn request_context(
    inner: &Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    id: &Value,
    params: &Map<String, Value>,
    checked: &Checked<'_>,
) -> Result<RequestContext, Refusal> {
    if params
        .get("inputResponses")
        .is_some_and(|v| !v.is_object() && !v.is_null())
    {
        return Err((
            StatusCode::OK,
            RpcError::invalid_params(
                "`inputResponses` must be an object keyed by the server's input request keys",
            ),
        ));
    }
    let mut ctx = inner.context(
        access,
        Era::Modern(checked.version),
        None,
        id.clone(),
        Some(params),
        checked.log_threshold,
    );
    ctx.client_capabilities = checked.capabilities.clone();
    apply_headers(&mut ctx, headers);
    ctx.input_responses = params
        .get("inputResponses")
        .and_then(Value::as_object)
        .cloned();
    ctx.request_state = params
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(ctx)
}

/// Runs a request that belongs to no session (the modern era, or a bare request): the
/// work ends with the request.
pub(super) async fn run_stateless(
    inner: Arc<ServerInner>,
    work: Work,
    ctx: RequestContext,
    accept: Accepts,
) -> Response {
    let id = ctx.request_id.clone();
    let modern = ctx.era.is_modern();
    let call = Call::new(
        inner.clone(),
        work,
        ctx,
        accept.sse,
        Lifetime::EndsWithRequest,
    );
    let streaming = match call.run().await {
        Progress::Done(result) => return final_reply(&id, result, modern, accept),
        Progress::Streaming(streaming) => streaming,
    };
    // If the client goes away before the reply, the work stops.
    let cancel_on_drop = AbortOnDrop(streaming.abort_handle());
    let (tx, rx) = mpsc::unbounded_channel();
    let pump = tokio::spawn(async move {
        let _cancel_on_drop = cancel_on_drop;
        let result = streaming
            .pump(|event| {
                // Modern streams cannot be resumed, so there is nothing to disconnect.
                if let StreamEvent::Message(message) = event {
                    let _ = tx.send(sse_event(&message));
                }
            })
            .await;
        if let Some(message) = final_message(&id, result) {
            let _ = tx.send(sse_event(&message));
        }
    });
    sse_response(&inner, rx, Some(pump.abort_handle()))
}
