//! `remember` and `recall`: long-term memory, facts under keys kept in the store so
//! they outlive the conversation. A turn's rights decide whose memories it reaches
//! ([`MemoryScope`]): a chat user's turn only the users'; an admin's turn stores the
//! admins' and finds its own, and the chat users' only when it asks (`scope`), each of
//! those marked as a chat user's text ([`provenance`](crate::bot::tools::provenance)):
//! a chat user could plant "ignore your instructions" where an admin turn reads it.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{NativeTool, native, read_only};
use crate::bot::store::{Memory, MemoryScope, Store};
use crate::bot::tools::provenance::{CHAT_USER, CHAT_USER_NOTE, chat_user_text};
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
    read_only(native(
        "recall",
        "Finds facts in long-term memory whose key or value contains the query (all facts when empty). \
         scope: `own` (default) reads the memories of your own kind of turn; with admin rights, `chat_users` \
         reads what chat users' turns stored and `all` both; those come marked written_by=chat_user.",
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": 200},
                "scope": {"type": "string", "enum": ["own", "chat_users", "all"], "default": "own",
                          "description": "Whose memories: your own kind's, the chat users' (admin rights only), or all"}
            },
            "additionalProperties": false
        }),
        Recall(store),
    ))
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

/// The memories a turn with `ctx`'s rights reads for `asked` (`recall`'s `scope`): a chat
/// user's turn only the users', whatever it asks.
fn scopes_read(ctx: &ExecContext, asked: &str) -> &'static [MemoryScope] {
    match (scope_of(ctx), asked) {
        (MemoryScope::User, _) => &[MemoryScope::User],
        (MemoryScope::Admin, "chat_users") => &[MemoryScope::User],
        (MemoryScope::Admin, "all") => &[MemoryScope::Admin, MemoryScope::User],
        (MemoryScope::Admin, _) => &[MemoryScope::Admin],
    }
}

#[async_trait]
impl ToolHandler for Recall {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let query = call.args["query"].as_str().unwrap_or_default();
        let asked = call.args["scope"].as_str().unwrap_or("own");
        let admin = call.ctx.is_admin();
        let found = self
            .0
            .recall(scopes_read(call.ctx, asked), query)
            .await
            .map_err(|e| e.to_string())?;
        // An admin's turn is told whose each memory is, and a chat user's text comes
        // marked as such; a chat user's turn reads only its own kind's, as written.
        let shown = |m: Memory| match (admin, m.scope.as_str()) {
            (true, "user") => {
                json!({"key": chat_user_text(&m.key), "value": chat_user_text(&m.value), "written_by": CHAT_USER})
            }
            (true, _) => json!({"key": m.key, "value": m.value, "written_by": "admin"}),
            (false, _) => json!({"key": m.key, "value": m.value}),
        };
        let memories: Vec<Value> = found.into_iter().map(shown).collect();
        let mut answer = json!({});
        if admin && memories.iter().any(|m| m["written_by"] == CHAT_USER) {
            answer["note"] = CHAT_USER_NOTE.into();
        }
        answer["memories"] = Value::Array(memories);
        Ok(answer)
    }
}
