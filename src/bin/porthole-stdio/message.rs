//! The shapes of the JSON-RPC messages the relay reads on stdin: which are requests
//! (and their ids), which answer one, which cancel one, and the routing headers a
//! 2026-07-28 message carries.

use base64::Engine;
use serde_json::Value;

/// `Mcp-Name` values that are not plain ASCII travel Base64-encoded.
/// 2026-era clients put their version in `_meta`; it is mirrored (with the method and
/// name) in the headers the server checks. Other messages go without them, so a bare
/// request (no initialize, no `_meta`) is served statelessly.
pub(crate) fn with_routing_headers(
    mut request: reqwest::RequestBuilder,
    method: &str,
    params: &Value,
) -> reqwest::RequestBuilder {
    let modern_version = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str();
    if let Some(version) = modern_version {
        request = request.header("mcp-protocol-version", version);
    }
    if modern_version.is_some() && !method.is_empty() {
        request = request.header("mcp-method", method);
    }
    if let Some(name) = params["name"].as_str().or(params["uri"].as_str())
        && modern_version.is_some()
        && matches!(method, "tools/call" | "prompts/get" | "resources/read")
    {
        request = request.header("mcp-name", header_safe(name));
    }
    request
}

fn header_safe(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x21..0x7f).contains(&b)) && !value.starts_with("=?base64?");
    if plain {
        value.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

/// Whether `message` is the response to request `id` (a result or an error).
pub(crate) fn answers(message: &str, id: &Value) -> bool {
    serde_json::from_str::<Value>(message).is_ok_and(|m| {
        m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some())
    })
}

/// Whether a message is an `initialize` request (later messages wait for its answer).
pub(crate) fn is_initialize(message: &Value) -> bool {
    message["method"] == "initialize" && message.get("id").is_some()
}

/// Whether a message (or a batch) holds a request, whose answer the client waits for.
pub(crate) fn carries_a_request(message: &Value) -> bool {
    let is_request = |m: &Value| m.get("method").is_some() && m.get("id").is_some();
    match message {
        Value::Array(batch) => batch.iter().any(is_request),
        single => is_request(single),
    }
}

/// The id of a request (a message with a method and an id), as JSON text.
pub(crate) fn request_id(message: &Value) -> Option<String> {
    message.get("method")?;
    Some(message.get("id")?.to_string())
}

/// The id a `notifications/cancelled` names (`params.requestId`), as JSON text.
pub(crate) fn cancelled_request(message: &Value) -> Option<String> {
    (message["method"] == "notifications/cancelled")
        .then(|| message["params"].get("requestId").map(Value::to_string))
        .flatten()
}
