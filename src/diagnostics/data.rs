//! Data: `db_query` (any SQL on the bot's database), `list_conversations`,
//! `list_messages`.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Diagnostics, conversation_id_property, done, failed, object_schema, output_schema};
use crate::bot::store::{MessageQuery, StoreError};
use crate::mcp::{Annotations, CallToolResult, Outcome, RequestContext, RpcError, Tool, ToolSpec};

pub fn tools(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(DbQuery(d.clone())),
        Arc::new(ListConversations(d.clone())),
        Arc::new(ListMessages(d.clone())),
    ]
}

struct DbQuery(Arc<Diagnostics>);

#[derive(Deserialize)]
struct DbQueryArgs {
    sql: String,
    #[serde(default)]
    params: Vec<Value>,
    limit: Option<usize>,
}

#[async_trait]
impl Tool for DbQuery {
    fn spec(&self) -> ToolSpec {
        let mode = if self.0.settings.db_query_readonly {
            "This bot runs it read-only (DB_QUERY_READONLY=true): SQLite refuses writes."
        } else {
            "Full access: writes change the live bot's data."
        };
        ToolSpec {
            name: "db_query".into(),
            title: Some("Run SQL".into()),
            description: format!(
                "Runs one SQL statement (SELECT, INSERT, UPDATE, DELETE, DDL, PRAGMA) on the bot's SQLite database \
                 (tables: conversations, messages, tasks, embeddings, memories). Use ?1, ?2… with `params`. Rows come back \
                 as arrays matching `columns`; blobs as {{\"base64\": …}}. {mode} Clients that support elicitation \
                 are asked to confirm a write before it runs."
            ),
            input_schema: object_schema(
                json!({
                    "sql": {"type": "string", "minLength": 1, "maxLength": 100000, "description": "One SQL statement"},
                    "params": {"type": "array", "maxItems": 100, "description": "Positional parameters for ?1, ?2…",
                               "items": {"type": ["string", "number", "integer", "boolean", "null"]}},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100,
                              "description": "Most rows to return"}
                }),
                &["sql"],
            ),
            output_schema: Some(output_schema(
                json!({
                    "columns": {"type": "array", "items": {"type": "string"}},
                    "rows": {"type": "array", "items": {"type": "array"}},
                    "row_count": {"type": "integer"},
                    "truncated": {"type": "boolean"},
                    "rows_affected": {"type": ["integer", "null"]},
                    "last_insert_rowid": {"type": ["integer", "null"]}
                }),
                &["columns", "rows", "row_count", "truncated"],
            )),
            annotations: Annotations::DESTRUCTIVE,
        }
    }

    async fn call(
        &self,
        args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: DbQueryArgs = args_or_error!("db_query", args);
        let limit = args.limit.unwrap_or(100).clamp(1, 1000);
        let settings = &self.0.settings;
        // A write on a client that can ask its user: ask first. Clients that cannot ask
        // get the full-access behaviour unchanged.
        let writes = !settings.db_query_readonly
            && !self
                .0
                .bot
                .store
                .is_read_only_sql(&args.sql)
                .await
                .unwrap_or(true);
        if writes && ctx.has_capability("elicitation") {
            match confirm_write(ctx, &args.sql).await? {
                Confirmation::Confirmed => {}
                Confirmation::Declined => {
                    return Ok(failed(
                        "the user declined to run the statement; nothing was changed",
                    ));
                }
                Confirmation::Ask(input) => return Ok(Outcome::InputRequired(input)),
            }
        }
        let outcome = self
            .0
            .bot
            .store
            .run_sql(
                &args.sql,
                args.params,
                limit,
                settings.db_query_readonly,
                settings.statement_timeout,
            )
            .await;
        match outcome {
            Ok(o) => Ok(done(json!({
                "row_count": o.rows.len(),
                "columns": o.columns,
                "rows": o.rows,
                "truncated": o.truncated,
                "rows_affected": o.rows_affected,
                "last_insert_rowid": o.last_insert_rowid,
            }))),
            Err(StoreError::Sqlite(e)) => {
                let text = e.to_string();
                let hint = if text.contains("interrupted") {
                    format!(
                        " (the statement ran longer than {} s and was stopped)",
                        settings.statement_timeout.as_secs()
                    )
                } else if text.contains("readonly")
                    || text.contains("query_only")
                    || text.contains("read-only")
                {
                    " (DB_QUERY_READONLY=true: only reads are allowed)".to_string()
                } else {
                    String::new()
                };
                Ok(failed(format!("SQL error: {text}{hint}")))
            }
            Err(e) => Ok(failed(format!("database error: {e}"))),
        }
    }
}

enum Confirmation {
    Confirmed,
    Declined,
    /// 2026: ask through an `input_required` result first.
    Ask(crate::mcp::InputRequired),
}

const CONFIRM_KEY: &str = "confirm_write";

fn confirmation_request(sql: &str) -> Value {
    let shown: String = sql.chars().take(500).collect();
    json!({
        "mode": "form",
        "message": format!("Run this statement on the live bot database?\n\n{shown}"),
        "requestedSchema": {
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "title": "Run it", "default": false}},
            "required": ["confirm"],
        },
    })
}

fn accepted(answer: &Value) -> bool {
    answer["action"] == "accept" && answer["content"]["confirm"] == true
}

/// Asks the user to confirm a write: a server request in the legacy era, an MRTR input
/// request in the modern one. The sealed state ties the answer to this exact statement.
async fn confirm_write(ctx: &RequestContext, sql: &str) -> Result<Confirmation, RpcError> {
    if !ctx.era.is_modern() {
        let answer = ctx
            .request_client(
                "elicitation/create",
                confirmation_request(sql),
                "elicitation",
            )
            .await?;
        return Ok(if accepted(&answer) {
            Confirmation::Confirmed
        } else {
            Confirmation::Declined
        });
    }
    let state = ctx.request_state()?;
    match (state, ctx.input_response(CONFIRM_KEY)) {
        (Some(state), Some(answer)) if state["sql"] == sql => Ok(if accepted(answer) {
            Confirmation::Confirmed
        } else {
            Confirmation::Declined
        }),
        _ => Ok(Confirmation::Ask(crate::mcp::dispatch::ask(
            CONFIRM_KEY,
            crate::mcp::dispatch::input_request("elicitation/create", confirmation_request(sql)),
            Some(ctx.seal_state(&json!({"sql": sql}))),
        ))),
    }
}

struct ListConversations(Arc<Diagnostics>);

#[derive(Deserialize)]
struct LimitArgs {
    limit: Option<usize>,
}

#[async_trait]
impl Tool for ListConversations {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_conversations".into(),
            title: Some("List conversations".into()),
            description: "Lists the bot's conversations, most recently active first: id, title, created/updated times, message count."
                .into(),
            input_schema: object_schema(
                json!({"limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 20}}),
                &[],
            ),
            output_schema: Some(output_schema(
                json!({"conversations": {"type": "array", "items": {"type": "object"}}}),
                &["conversations"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: LimitArgs = args_or_error!("list_conversations", args);
        match self
            .0
            .bot
            .store
            .list_conversations(args.limit.unwrap_or(20))
            .await
        {
            Ok(conversations) => Ok(done(json!({"conversations": conversations}))),
            Err(e) => Ok(failed(format!("database error: {e}"))),
        }
    }
}

struct ListMessages(Arc<Diagnostics>);

#[derive(Deserialize)]
struct ListMessagesArgs {
    conversation_id: String,
    limit: Option<usize>,
    before: Option<i64>,
    after: Option<i64>,
}

#[async_trait]
impl Tool for ListMessages {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_messages".into(),
            title: Some("List messages".into()),
            description: "A page of one conversation's messages (user, assistant, tool), oldest first. Without cursors: the newest page. \
                          Page back with `before` = the first id you have, forward with `after` = the last id you have."
                .into(),
            input_schema: object_schema(
                json!({
                    "conversation_id": conversation_id_property("From list_conversations"),
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
                    "before": {"type": "integer", "minimum": 1, "description": "Only messages with a smaller id"},
                    "after": {"type": "integer", "minimum": 0, "description": "Only messages with a larger id"}
                }),
                &["conversation_id"],
            ),
            output_schema: Some(output_schema(
                json!({
                    "conversation": {"type": "object"},
                    "messages": {"type": "array", "items": {"type": "object"}},
                    "has_more": {"type": "boolean"}
                }),
                &["messages", "has_more"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: ListMessagesArgs = args_or_error!("list_messages", args);
        let store = &self.0.bot.store;
        let conversation = match store.get_conversation(&args.conversation_id).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Ok(failed(format!(
                    "no conversation with id `{}`; call list_conversations for valid ids",
                    args.conversation_id
                )));
            }
            Err(e) => return Ok(failed(format!("database error: {e}"))),
        };
        let query = MessageQuery {
            limit: args.limit.unwrap_or(50).clamp(1, 200),
            before: args.before,
            after: args.after,
        };
        match store.list_messages(&conversation.id, query).await {
            Ok(page) => Ok(done(json!({
                "conversation": conversation,
                "messages": page.messages,
                "has_more": page.has_more,
            }))),
            Err(e) => Ok(failed(format!("database error: {e}"))),
        }
    }
}
