//! Reading the request's headers: one header's text, what `Accept` allows, the 2026
//! routing headers (`Mcp-Method`, `Mcp-Name`, parameter headers with their base64
//! sentinel) checked against the body, and the caller's identity for task ownership.

use std::borrow::Cow;

use axum::http::header::AsHeaderName;
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use serde_json::{Map, Value};

use crate::ServerInner;
use crate::caller::Caller;
use crate::context::RequestContext;
use crate::guard::refuse;
use crate::jsonrpc::{self, RpcError};
use crate::protocol;
use porthole_core::trace_context::TraceParent;

/// The MCP headers' names, parsed once: a lookup by `&str` parses the name again on
/// every request.
pub(super) static SESSION_ID: HeaderName = HeaderName::from_static(protocol::HEADER_SESSION_ID);
pub(super) static PROTOCOL_VERSION: HeaderName =
    HeaderName::from_static(protocol::HEADER_PROTOCOL_VERSION);
pub(super) static METHOD: HeaderName = HeaderName::from_static(protocol::HEADER_METHOD);
pub(super) static NAME: HeaderName = HeaderName::from_static(protocol::HEADER_NAME);
pub(super) static LAST_EVENT_ID: HeaderName =
    HeaderName::from_static(protocol::HEADER_LAST_EVENT_ID);
static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// A header's value with surrounding whitespace trimmed (names are case-insensitive).
pub(super) fn header(headers: &HeaderMap, name: impl AsHeaderName) -> Option<&str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches([' ', '\t']))
}

/// The MCP headers that each name one thing (a session, a version, a method, a name, a
/// stream position): sent twice, they are refused rather than read first-wins, so a
/// proxy and the bot can never act on different values.
static SINGLE_MCP_HEADERS: [(&HeaderName, &str); 5] = [
    (&SESSION_ID, "Mcp-Session-Id"),
    (&PROTOCOL_VERSION, "MCP-Protocol-Version"),
    (&METHOD, "Mcp-Method"),
    (&NAME, "Mcp-Name"),
    (&LAST_EVENT_ID, "Last-Event-ID"),
];

/// A 400 naming the first of [`SINGLE_MCP_HEADERS`] the request repeats, if any.
pub(super) fn repeated_mcp_header(headers: &HeaderMap) -> Option<Response> {
    // Most requests repeat no header at all: one comparison, no lookups.
    if headers.len() == headers.keys_len() {
        return None;
    }
    let (_, label) = SINGLE_MCP_HEADERS
        .iter()
        .find(|(name, _)| headers.get_all(*name).iter().nth(1).is_some())?;
    Some(refuse(
        StatusCode::BAD_REQUEST,
        jsonrpc::INVALID_REQUEST,
        format!("Bad Request: send exactly one {label} header"),
    ))
}

/// What the client's `Accept` header allows.
#[derive(Clone, Copy)]
pub(super) struct Accepts {
    pub(super) json: bool,
    pub(super) sse: bool,
}

pub(super) fn accepts(headers: &HeaderMap) -> Accepts {
    let Some(accept) = header(headers, header::ACCEPT) else {
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

/// Decodes a header value that may use the `=?base64?…?=` sentinel.
pub(super) fn decode_sentinel(value: &str) -> Result<Cow<'_, str>, String> {
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
pub(super) fn header_equals(
    headers: &HeaderMap,
    name: &HeaderName,
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
pub(super) fn check_param_headers(
    inner: &ServerInner,
    headers: &HeaderMap,
    tool: Option<&str>,
    arguments: Option<&Map<String, Value>>,
) -> Result<(), String> {
    let Some(tool) = tool else {
        return Ok(());
    };
    for (property, header_name) in inner.tools.param_headers(tool) {
        let value = arguments.and_then(|a| a.get(property));
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

/// Who sent a request: its credentials, hashed into a task owner only when needed.
pub(super) fn caller(headers: &HeaderMap) -> Caller {
    Caller {
        authorization: headers.get(header::AUTHORIZATION).cloned(),
    }
}

/// What a request's headers give its context: the caller, and the caller's trace from a
/// `traceparent` header when `_meta` named none (`_meta` wins: it is the request's own).
pub(super) fn apply_headers(ctx: &mut RequestContext, headers: &HeaderMap) {
    ctx.caller = caller(headers);
    if ctx.trace_parent.is_none() {
        ctx.trace_parent = header(headers, &TRACEPARENT).and_then(TraceParent::parse);
    }
}
