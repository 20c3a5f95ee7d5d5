//! `completion/complete`: suggestions for a prompt's argument or a resource template's
//! variable, at most 100 of them.

use serde_json::{Map, Value, json};

use crate::ServerInner;
use crate::jsonrpc::RpcError;

/// Most suggestions one answer carries (the spec's limit).
const MAX_VALUES: usize = 100;

pub(super) async fn complete(
    inner: &ServerInner,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let reference = params
        .get("ref")
        .ok_or_else(|| RpcError::invalid_params("`ref` is required"))?;
    let argument = params
        .get("argument")
        .ok_or_else(|| RpcError::invalid_params("`argument` ({name, value}) is required"))?;
    let (Some(arg_name), Some(value)) = (argument["name"].as_str(), argument["value"].as_str())
    else {
        return Err(RpcError::invalid_params(
            "`argument` must be {\"name\": \"…\", \"value\": \"…\"}: the argument to complete \
             and what the user typed of it so far (\"\" for nothing yet)",
        ));
    };
    let mut values = match reference["type"].as_str() {
        Some("ref/prompt") => {
            let name = reference["name"].as_str().unwrap_or_default();
            let (_, prompt) = inner
                .prompts
                .find(name)
                .ok_or_else(|| RpcError::invalid_params(format!("Unknown prompt: {name}")))?;
            prompt.complete(arg_name, value).await
        }
        Some("ref/resource") => {
            let uri = reference["uri"].as_str().unwrap_or_default();
            let mut all = Vec::new();
            for provider in &inner.resources {
                all.extend(provider.complete(uri, arg_name, value).await);
            }
            all
        }
        _ => {
            return Err(RpcError::invalid_params(
                "`ref.type` must be \"ref/prompt\" or \"ref/resource\"",
            ));
        }
    };
    let total = values.len();
    values.truncate(MAX_VALUES);
    Ok(json!({"completion": {"values": values, "total": total, "hasMore": total > MAX_VALUES}}))
}
