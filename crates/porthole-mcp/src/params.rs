//! Reading a request's `params` into its method's type (`porthole_core::params`), and
//! the pages of list results (cursors are opaque offsets). Below the methods and the
//! tasks, so both can use it.

use porthole_core::text::elide_middle;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::jsonrpc::RpcError;

/// Page size of list results.
pub(crate) const PAGE_SIZE: usize = 100;

/// `params` read as `method`'s type, or the `-32602` error that names the method, the
/// member at fault and what was wrong with it.
pub(crate) fn read<'a, T: Deserialize<'a>>(
    method: &str,
    params: &'a Map<String, Value>,
) -> Result<T, RpcError> {
    serde_path_to_error::deserialize(params).map_err(|error| {
        let at = error.path().to_string();
        // serde quotes a wrong value whole: a 1 MB string is no help in an error.
        let what = elide_middle(&in_json_terms(error.into_inner().to_string()), 300);
        RpcError::invalid_params(match at.as_str() {
            "." => format!("{method}: {what}"),
            member => format!("{method}: `{member}`: {what}"),
        })
    })
}

/// serde's words for JSON's values are Rust's (a map, a sequence): a client reads them
/// as JSON names them.
fn in_json_terms(message: String) -> String {
    message
        .replace("expected a map", "expected an object")
        .replace("invalid type: map", "invalid type: object")
        .replace("invalid type: sequence", "invalid type: array")
}

/// One page of a list result, under `key`, with `nextCursor` when more follow.
pub(crate) fn page(key: &str, all: &[Value], cursor: Option<&str>) -> Result<Value, RpcError> {
    let start = match cursor {
        None | Some("") => 0,
        Some(c) => c
            .strip_prefix("offset-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n <= all.len())
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "invalid cursor `{c}`; pass back a nextCursor unchanged"
                ))
            })?,
    };
    let end = (start + PAGE_SIZE).min(all.len());
    let mut result = json!({key: &all[start..end]});
    if end < all.len() {
        result["nextCursor"] = json!(format!("offset-{end}"));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use porthole_core::params::{CallToolParams, UriParams};
    use serde::de::IgnoredAny;

    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn an_error_names_the_method_and_the_member_at_fault() {
        let wrong = read::<UriParams>("resources/read", &map(json!({"uri": 5}))).unwrap_err();
        assert_eq!(wrong.code, crate::jsonrpc::INVALID_PARAMS);
        assert!(
            wrong
                .message
                .starts_with("resources/read: `uri`: invalid type: integer `5`"),
            "{}",
            wrong.message
        );
        // serde quotes a string given for another type: the error keeps its two ends.
        let huge = map(json!({"name": "x", "arguments": "y".repeat(100_000)}));
        let huge = read::<CallToolParams<IgnoredAny>>("tools/call", &huge).unwrap_err();
        assert!(huge.message.len() < 400, "{}", huge.message.len());
        assert!(
            huge.message.ends_with("expected an object"),
            "{}",
            huge.message
        );
        let missing = read::<UriParams>("skills/get", &map(json!({}))).unwrap_err();
        assert_eq!(missing.message, "skills/get: missing field `uri`");
        let deep = map(json!({"name": "x", "arguments": []}));
        let deep = read::<CallToolParams<IgnoredAny>>("tools/call", &deep).unwrap_err();
        assert!(
            deep.message.starts_with("tools/call: `arguments`: "),
            "{}",
            deep.message
        );
    }

    #[test]
    fn a_page_starts_at_its_cursor_and_refuses_one_it_never_gave() {
        let all: Vec<Value> = (0..PAGE_SIZE + 1).map(|n| json!(n)).collect();
        let first = page("items", &all, None).unwrap();
        assert_eq!(first["nextCursor"], "offset-100");
        let second = page("items", &all, first["nextCursor"].as_str()).unwrap();
        assert_eq!(
            (
                second["items"].as_array().unwrap().len(),
                second.get("nextCursor")
            ),
            (1, None)
        );
        assert!(page("items", &all, Some("offset-999")).is_err());
        assert!(page("items", &all, Some("7")).is_err());
    }
}
