//! `completion/complete`: suggestions for a prompt's argument or a resource template's
//! variable, at most 100 of them.

use porthole_core::params::{CompleteParams, CompletionReference};
use serde_json::{Value, json};

use crate::ServerInner;
use crate::jsonrpc::RpcError;

/// Most suggestions one answer carries (the spec's limit).
const MAX_VALUES: usize = 100;

pub(super) async fn complete(
    inner: &ServerInner,
    params: CompleteParams,
) -> Result<Value, RpcError> {
    let argument = &params.argument;
    let mut values = match &params.reference {
        CompletionReference::Prompt { name } => {
            let (_, prompt) = inner
                .prompts
                .find(name)
                .ok_or_else(|| RpcError::invalid_params(format!("Unknown prompt: {name}")))?;
            prompt.complete(&argument.name, &argument.value).await
        }
        CompletionReference::Resource { uri } => {
            let mut all = Vec::new();
            for provider in &inner.resources {
                all.extend(
                    provider
                        .complete(uri, &argument.name, &argument.value)
                        .await,
                );
            }
            all
        }
    };
    let total = values.len();
    values.truncate(MAX_VALUES);
    Ok(json!({"completion": {"values": values, "total": total, "hasMore": total > MAX_VALUES}}))
}
