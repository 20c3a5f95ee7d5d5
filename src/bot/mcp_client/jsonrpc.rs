//! The client side of JSON-RPC 2.0 as MCP uses it: building requests, sorting incoming
//! messages, the error type of a request, and the header encodings of Streamable HTTP
//! (`Mcp-Name`, `Mcp-Param-*`). The protocol's vocabulary (versions, header and `_meta`
//! names, error codes) and the reader of its messages are the ground floor's
//! ([`crate::protocol`], [`crate::jsonrpc`]), the ones the bot's own endpoint serves with.

use std::time::Duration;

use base64::Engine;
use porthole_core::params::{CallToolParams, Implementation};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::jsonrpc::{METHOD_NOT_FOUND, parse_message};
use crate::protocol::{LEGACY_VERSIONS, MODERN_VERSIONS};

/// The legacy (handshake) protocol revision this client asks for: the newest.
pub(crate) const LEGACY_VERSION: &str = LEGACY_VERSIONS[LEGACY_VERSIONS.len() - 1];
/// The modern (per-request metadata) revision this client speaks over HTTP: the newest.
pub(crate) const MODERN_VERSION: &str = MODERN_VERSIONS[MODERN_VERSIONS.len() - 1];
/// The first MCP revision: the endpoint no longer serves it, but a server may still
/// answer `initialize` with it, and this client speaks it.
const FIRST_VERSION: &str = "2024-11-05";

/// Whether a server's answer to `initialize` names a legacy revision this client speaks.
pub(crate) fn is_known_legacy_version(version: &str) -> bool {
    crate::protocol::legacy_version(version).is_some() || version == FIRST_VERSION
}

/// Largest single message (one stdio line or one HTTP body) accepted from a server.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// `clientInfo` sent in handshakes and modern request metadata.
pub(crate) fn client_info() -> Implementation {
    Implementation {
        name: "porthole".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// The params of a request, written from the protocol's type for them (the one the
/// endpoint reads them as).
pub(crate) fn params_of(params: &impl Serialize) -> Value {
    serde_json::to_value(params).unwrap_or_default()
}

/// `tools/call`'s params; `null` arguments are none (`McpTool` refuses any other that
/// is no object before a call is made).
pub(crate) fn call_tool_params(name: &str, arguments: Value) -> Value {
    params_of(&CallToolParams::<Map<String, Value>> {
        name: name.into(),
        arguments: match arguments {
            Value::Object(arguments) => Some(arguments),
            _ => None,
        },
        task: None,
        input_responses: None,
        request_state: None,
        meta: None,
    })
}

pub(crate) fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub(crate) fn notification(method: &str, params: Option<Value>) -> Value {
    match params {
        Some(params) => crate::jsonrpc::notification(method, params),
        None => json!({"jsonrpc": "2.0", "method": method}),
    }
}

/// The answer to a request the server sent us: `ping` gets an empty result, anything
/// else "method not found" (this client declares no capabilities).
pub(crate) fn answer_server_request(id: &Value, method: &str) -> Value {
    if method == "ping" {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    } else {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": METHOD_NOT_FOUND,
            "message": format!("method not supported by this client: {method}")}})
    }
}

/// What an incoming message is.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// The answer to one of our requests.
    Response {
        id: Value,
        outcome: Result<Value, CallError>,
    },
    /// A request from the server to us.
    Request {
        id: Value,
        method: String,
    },
    Notification {
        method: String,
        params: Value,
    },
    Invalid,
}

/// Sorts `message` with the protocol's one reader ([`parse_message`]): anything it
/// refuses (no `jsonrpc` "2.0", an id that is neither a string nor an integer, a
/// response with both or neither of `result` and `error`) is [`Incoming::Invalid`].
pub(crate) fn classify(message: Value) -> Incoming {
    use crate::jsonrpc::Incoming as Message;
    match parse_message(message) {
        Ok(Message::Request { id, method, .. }) => Incoming::Request { id, method },
        Ok(Message::Notification { method, params }) => Incoming::Notification {
            method,
            params: Value::Object(params),
        },
        Ok(Message::Response { id, outcome }) => Incoming::Response {
            id,
            outcome: outcome.map_err(|error| CallError::from_error_object(&error)),
        },
        Err(_) => Incoming::Invalid,
    }
}

/// Whether a response id is the one we sent (servers must echo it with the same type,
/// but a string holding the same number is accepted too).
pub(crate) fn id_matches(id: &Value, ours: u64) -> bool {
    id.as_u64() == Some(ours) || id.as_str() == Some(ours.to_string().as_str())
}

/// Why a request to a server did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum CallError {
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("connection lost: {0}")]
    Lost(String),
    #[error("{message} (JSON-RPC error {code})")]
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    #[error("{0}")]
    Protocol(String),
}

impl CallError {
    pub(crate) fn from_error_object(error: &Value) -> CallError {
        CallError::Rpc {
            code: error["code"].as_i64().unwrap_or(0),
            message: error["message"]
                .as_str()
                .unwrap_or("the server sent an error without a message")
                .to_string(),
            data: error.get("data").cloned(),
        }
    }
}

/// Adds `key: value` to `params._meta`, creating both objects as needed.
pub(crate) fn with_meta(params: Value, meta: &Map<String, Value>) -> Value {
    let mut params = match params {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let slot = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    if let Value::Object(existing) = slot {
        for (k, v) in meta {
            existing.insert(k.clone(), v.clone());
        }
    }
    Value::Object(params)
}

const SENTINEL_PREFIX: &str = "=?base64?";
const SENTINEL_SUFFIX: &str = "?=";

/// A value for `Mcp-Name` / `Mcp-Param-*`: as is when it is plain visible ASCII, else
/// (or when it looks like the sentinel itself) `=?base64?…?=` of its UTF-8 bytes.
pub(crate) fn header_value(value: &str) -> String {
    let visible_ascii = value.chars().all(|c| c == ' ' || c.is_ascii_graphic());
    let padded = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let looks_encoded = value.starts_with(SENTINEL_PREFIX) && value.ends_with(SENTINEL_SUFFIX);
    let plain = visible_ascii && !padded && !looks_encoded;
    if plain {
        value.to_string()
    } else {
        format!(
            "{SENTINEL_PREFIX}{}{SENTINEL_SUFFIX}",
            base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
        )
    }
}

/// One `x-mcp-header` annotation: the header name (without `Mcp-Param-`) and the
/// property path of its value in the tool arguments.
pub(crate) type ParamHeader = (String, Vec<String>);

/// The `x-mcp-header` annotations of a tool's input schema: header name (without the
/// `Mcp-Param-` prefix) and the property path in the arguments. `Err` when an
/// annotation breaks the rules, in which case the tool must not be used.
pub(crate) fn param_headers(schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    collect_param_headers(schema, &mut Vec::new(), &mut found)?;
    let mut seen = std::collections::HashSet::new();
    for (name, _) in &found {
        if !seen.insert(name.to_ascii_lowercase()) {
            return Err(format!("x-mcp-header `{name}` is used twice"));
        }
    }
    Ok(found)
}

fn collect_param_headers(
    schema: &Value,
    path: &mut Vec<String>,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (key, property) in properties {
        path.push(key.clone());
        if let Some(header) = property.get("x-mcp-header") {
            let name = header.as_str().unwrap_or_default();
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(format!("x-mcp-header {header} is not a valid header name"));
            }
            let kind = property.get("type").and_then(Value::as_str);
            if !matches!(kind, Some("string" | "integer" | "boolean")) {
                return Err(format!(
                    "x-mcp-header `{name}` must sit on a string, integer or boolean property"
                ));
            }
            found.push((name.to_string(), path.clone()));
        }
        collect_param_headers(property, path, found)?;
        path.pop();
    }
    Ok(())
}

/// The `Mcp-Param-*` headers for one call: (full header name, value). Absent or null
/// arguments give no header.
pub(crate) fn param_header_values(
    headers: &[ParamHeader],
    arguments: &Value,
) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(name, path)| {
            let value = path.iter().try_fold(arguments, |v, key| v.get(key))?;
            let text = match value {
                Value::String(s) => header_value(s),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            Some((format!("Mcp-Param-{name}"), text))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_classified() {
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":3,"result":{"x":1}})),
            Incoming::Response { outcome: Ok(_), .. }
        ));
        let Incoming::Response {
            outcome: Err(CallError::Rpc { code, .. }),
            ..
        } = classify(json!({"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad"}}))
        else {
            panic!("not an error response");
        };
        assert_eq!(code, -32602);
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})),
            Incoming::Notification { .. }
        ));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":"s1","method":"ping"})),
            Incoming::Request { .. }
        ));
        assert!(matches!(classify(json!([1])), Incoming::Invalid));
        assert!(
            id_matches(&json!(7), 7) && id_matches(&json!("7"), 7) && !id_matches(&json!(8), 7)
        );
    }

    #[test]
    fn header_values_use_the_base64_sentinel_when_needed() {
        assert_eq!(header_value("get_weather"), "get_weather");
        assert_eq!(
            header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }

    #[test]
    fn x_mcp_header_annotations_become_param_headers() {
        let schema = json!({"type":"object","properties":{
            "region": {"type":"string","x-mcp-header":"Region"},
            "opts": {"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}},
            "plain": {"type":"string"}
        }});
        let headers = param_headers(&schema).unwrap();
        assert_eq!(headers.len(), 2);
        let values = param_header_values(&headers, &json!({"region":"eu west","opts":{"n":4}}));
        assert!(values.contains(&("Mcp-Param-Region".into(), "eu west".into())));
        assert!(values.contains(&("Mcp-Param-N".into(), "4".into())));
        assert!(param_header_values(&headers, &json!({})).is_empty());
        let bad = json!({"properties":{"a":{"type":"number","x-mcp-header":"A"}}});
        assert!(param_headers(&bad).is_err());
        let twice = json!({"properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}});
        assert!(param_headers(&twice).is_err());
    }

    #[test]
    fn meta_is_merged_into_params() {
        let mut meta = Map::new();
        meta.insert("k".into(), json!(1));
        assert_eq!(with_meta(Value::Null, &meta), json!({"_meta":{"k":1}}));
        assert_eq!(
            with_meta(json!({"cursor":"c","_meta":{"p":2}}), &meta),
            json!({"cursor":"c","_meta":{"p":2,"k":1}})
        );
    }
}
