//! Plain JSON answers: JSON-RPC errors with the right status, `202 Accepted`, and a
//! request's final response as JSON or as the one event of an SSE stream.

use super::*;

/// A message serialised straight into a buffer sized for a typical reply (`to_string`
/// would go through `Display`, and a small buffer grows by copying).
pub(super) fn json_bytes(message: &impl serde::Serialize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1024);
    let _ = serde_json::to_writer(&mut bytes, message);
    bytes
}

pub(super) fn json_body(status: StatusCode, body: &Value) -> Response {
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

/// The response message for a finished handler; `None` if it was cancelled.
pub(super) fn final_message(id: &Value, result: Finished) -> Option<Value> {
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
pub(super) fn raw_reply(
    id: &Value,
    result: &serde_json::value::RawValue,
    accept: Accepts,
) -> Response {
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
pub(super) fn final_reply(id: &Value, result: Finished, modern: bool, accept: Accepts) -> Response {
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

pub(super) fn final_json(id: &Value, result: Finished, modern: bool) -> Response {
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
