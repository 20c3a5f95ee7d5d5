//! `remember` and `recall`: long-term memory, facts under keys kept in the store so
//! they outlive the conversation. A turn's rights decide whose memories it reaches
//! ([`MemoryScope`]): a chat user's turn only the users', an admin's turn stores the
//! admins' and finds both.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{NativeTool, native};
use crate::bot::store::{Memory, MemoryScope, Store};
use crate::bot::tools::{ExecContext, ToolCall, ToolHandler};

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
        Remember(store),
    )
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
        Recall(store),
    )
}

/// Whose memories a turn with `ctx`'s rights reaches.
fn scope_of(ctx: &ExecContext) -> MemoryScope {
    if ctx.is_admin() {
        MemoryScope::Admin
    } else {
        MemoryScope::User
    }
}

struct Remember(Store);

#[async_trait]
impl ToolHandler for Remember {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let key = call.args["key"].as_str().unwrap_or_default();
        let value = call.args["value"].as_str().unwrap_or_default();
        self.0
            .remember(scope_of(call.ctx), key, value)
            .await
            .map_err(|e| e.to_string())?;
        Ok(json!({"stored": key}))
    }
}

struct Recall(Store);

#[async_trait]
impl ToolHandler for Recall {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let query = call.args["query"].as_str().unwrap_or_default();
        let scope = scope_of(call.ctx);
        let found = self
            .0
            .recall(scope, query)
            .await
            .map_err(|e| e.to_string())?;
        // Only an admin's turn finds memories of both kinds; it is told whose each is.
        let shown = |m: Memory| match scope {
            MemoryScope::Admin => json!({"key": m.key, "value": m.value, "scope": m.scope}),
            MemoryScope::User => json!({"key": m.key, "value": m.value}),
        };
        Ok(json!({"memories": found.into_iter().map(shown).collect::<Vec<_>>()}))
    }
}
