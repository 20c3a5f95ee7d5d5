//! `remember` and `recall`: long-term memory, facts under keys kept in the store so
//! they outlive the conversation.

use serde_json::{Value, json};

use super::{NativeTool, native};
use crate::bot::store::Store;
use crate::bot::tools::FnTool;

pub(super) fn remember(store: Store) -> NativeTool {
    native(
        "remember",
        "Stores a fact under a key in long-term memory (overwrites the key).",
        json!({
            "type": "object",
            "properties": {
                "key": {"type": "string", "minLength": 1, "maxLength": 200},
                "value": {"type": "string", "maxLength": 10000}
            },
            "required": ["key", "value"],
            "additionalProperties": false
        }),
        FnTool(move |args: Value| store_fact(store.clone(), args)),
    )
}

async fn store_fact(store: Store, args: Value) -> Result<Value, String> {
    let key = args["key"].as_str().unwrap_or_default();
    let value = args["value"].as_str().unwrap_or_default();
    store
        .remember(key, value)
        .await
        .map_err(|e| e.to_string())?;
    Ok(json!({"stored": key}))
}

pub(super) fn recall(store: Store) -> NativeTool {
    native(
        "recall",
        "Finds facts in long-term memory whose key or value contains the query (all facts when empty).",
        json!({
            "type": "object",
            "properties": {"query": {"type": "string", "maxLength": 200}},
            "additionalProperties": false
        }),
        FnTool(move |args: Value| find_facts(store.clone(), args)),
    )
}

async fn find_facts(store: Store, args: Value) -> Result<Value, String> {
    let query = args["query"].as_str().unwrap_or_default();
    let found = store.recall(query).await.map_err(|e| e.to_string())?;
    let memories: Vec<Value> = found
        .into_iter()
        .map(|(key, value)| json!({"key": key, "value": value}))
        .collect();
    Ok(json!({"memories": memories}))
}
