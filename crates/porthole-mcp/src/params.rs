//! Reading a request's `params`: the required strings every method family asks for, and
//! the pages of list results (cursors are opaque offsets). Below the methods and the
//! tasks, so both can use it.

use serde_json::{Map, Value, json};

use super::jsonrpc::RpcError;

/// Page size of list results.
pub(crate) const PAGE_SIZE: usize = 100;

/// The string `params[key]`, or the `-32602` error naming it.
pub(crate) fn required_str<'a>(
    params: &'a Map<String, Value>,
    key: &str,
) -> Result<&'a str, RpcError> {
    params.get(key).and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params(format!("`{key}` is required and must be a string"))
    })
}

/// Whether the request carries no cursor, so it asks for the first page.
pub(crate) fn is_first_page(params: &Map<String, Value>) -> bool {
    matches!(params.get("cursor"), None | Some(Value::Null))
}

/// One page of a list result, under `key`, with `nextCursor` when more follow.
pub(crate) fn page(
    key: &str,
    all: &[Value],
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) if c.is_empty() => 0,
        Some(Value::String(c)) => c
            .strip_prefix("offset-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n <= all.len())
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "invalid cursor `{c}`; pass back a nextCursor unchanged"
                ))
            })?,
        Some(_) => return Err(RpcError::invalid_params("`cursor` must be a string")),
    };
    let end = (start + PAGE_SIZE).min(all.len());
    let mut result = json!({key: &all[start..end]});
    if end < all.len() {
        result["nextCursor"] = json!(format!("offset-{end}"));
    }
    Ok(result)
}
