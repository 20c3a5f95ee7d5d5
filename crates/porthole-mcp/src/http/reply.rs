//! Plain JSON answers: JSON-RPC errors with the right status, `202 Accepted`, and a
//! request's final response as JSON or as the one event of an SSE stream.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::headers::Accepts;
use super::sse_response::sse_data;
use crate::call::{Finished, Unfinished};
use crate::guard::refuse;
use crate::jsonrpc::{self, RpcError};
use crate::methods::MethodResult;

/// A message serialised straight into a buffer sized for a typical reply (`to_string`
/// would go through `Display`, and a small buffer grows by copying).
pub(super) fn json_bytes(message: &impl serde::Serialize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1024);
    let _ = serde_json::to_writer(&mut bytes, message);
    bytes
}

pub(super) fn json_body(status: StatusCode, body: &Value) -> Response {
    json_response(status, json_bytes(body))
}

/// A JSON text as an `application/json` response.
fn json_response(status: StatusCode, json: Vec<u8>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        json,
    )
        .into_response()
}

pub(super) fn rpc_error(status: StatusCode, id: Option<&Value>, error: &RpcError) -> Response {
    json_body(status, &jsonrpc::error_response(id, error))
}

pub(super) fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

pub(super) fn session_not_found() -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        jsonrpc::INVALID_REQUEST,
        "Not Found: the MCP session has ended or is unknown; initialize again without Mcp-Session-Id",
    )
}

/// Modern errors that are about the request's shape get 4xx; others ride on 200.
pub(super) fn modern_status(error: &RpcError) -> StatusCode {
    match error.code {
        jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        jsonrpc::MISSING_CLIENT_CAPABILITY
        | jsonrpc::HEADER_MISMATCH
        | jsonrpc::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// A response message written around its result's JSON text, without building the
/// envelope as a value.
fn response_bytes(id: &Value, write_result: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1024);
    bytes.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    let _ = serde_json::to_writer(&mut bytes, id);
    bytes.extend_from_slice(b",\"result\":");
    write_result(&mut bytes);
    bytes.push(b'}');
    bytes
}

/// A response message around a result already written as JSON text, in that text's
/// own buffer: the envelope is appended, then turned to the front (a tool result is
/// rendered with room for it, so this allocates nothing).
fn response_in_place(id: &Value, result: String) -> Vec<u8> {
    let mut bytes = result.into_bytes();
    let result_len = bytes.len();
    bytes.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    let _ = serde_json::to_writer(&mut bytes, id);
    bytes.extend_from_slice(b",\"result\":");
    bytes.rotate_left(result_len);
    bytes.push(b'}');
    bytes
}

/// The response message for a finished handler; `None` if it was cancelled.
pub(super) fn final_message(id: &Value, result: Finished) -> Option<Value> {
    match result {
        Ok(Ok(answer)) => Some(jsonrpc::response(id, answer.into_value())),
        Ok(Err(error)) => Some(jsonrpc::error_response(Some(id), &error)),
        Err(Unfinished::Panicked) => {
            tracing::error!(target: "porthole::mcp::methods", ?id, "an MCP handler panicked");
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
pub(super) fn raw_reply(
    id: &Value,
    result: &serde_json::value::RawValue,
    accept: Accepts,
) -> Response {
    let body = response_bytes(id, |bytes| bytes.extend_from_slice(result.get().as_bytes()));
    message_reply(StatusCode::OK, body, accept)
}

/// One response message as the body: JSON, or one SSE event for a client that accepts
/// only `text/event-stream`.
fn message_reply(status: StatusCode, message: Vec<u8>, accept: Accepts) -> Response {
    if accept.json {
        return json_response(status, message);
    }
    let mut response = Response::new(Body::from(sse_data(&message)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The reply for a handler that sent nothing before its result: JSON, or a one-event
/// SSE stream for a client that accepts only `text/event-stream`. Modern errors about
/// the request's shape get their 4xx status on JSON replies.
pub(super) fn final_reply(id: &Value, result: Finished, modern: bool, accept: Accepts) -> Response {
    let status = match &result {
        Ok(Err(error)) if modern && accept.json => modern_status(error),
        _ => StatusCode::OK,
    };
    let message = match result {
        Ok(Ok(MethodResult::Json(text))) => response_in_place(id, text),
        Ok(Ok(MethodResult::Value(result))) => {
            response_bytes(id, |bytes| drop(serde_json::to_writer(bytes, &result)))
        }
        unfinished_or_failed => {
            json_bytes(&final_message(id, unfinished_or_failed).unwrap_or_else(|| {
                jsonrpc::error_response(Some(id), &RpcError::internal("Request cancelled"))
            }))
        }
    };
    message_reply(status, message, accept)
}
