//! MCP resources over the bot: recent logs, the database schema, the configuration,
//! one resource per conversation (`porthole://conversations/{id}`, with id
//! completion) and one per turn trace (`porthole://traces/{id}`).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::Diagnostics;
use super::config::config_snapshot;
use super::trace_view::MAX_MAX_BYTES;
use super::traces::trace_answer;
use crate::bot::store::{Conversation, MessagePage, MessageQuery};
use crate::logs::buffer::{LogQuery, LogSource};
use crate::mcp::{Outcome, RequestContext, ResourceProvider, RpcError};

pub struct BotResources(pub Arc<Diagnostics>);

const CONVERSATION_PREFIX: &str = "porthole://conversations/";
const CONVERSATION_TEMPLATE: &str = "porthole://conversations/{id}";

/// The resource of conversation `id`.
pub(super) fn conversation_uri(id: &str) -> String {
    format!("{CONVERSATION_PREFIX}{id}")
}
const TRACE_PREFIX: &str = "porthole://traces/";
const TRACE_TEMPLATE: &str = "porthole://traces/{id}";

fn json_contents(uri: &str, value: &Value) -> Vec<Value> {
    vec![json!({
        "uri": uri,
        "mimeType": "application/json",
        "text": serde_json::to_string_pretty(value).unwrap_or_default(),
    })]
}

impl BotResources {
    fn recent_logs(&self, source: LogSource) -> Value {
        let page = self.0.logs.query(&LogQuery {
            source: Some(source),
            limit: 200,
            byte_budget: Some(crate::mcp::logs::DEFAULT_LOG_BYTES),
            ..LogQuery::default()
        });
        json!({
            "lines": page.records.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
            "cursor": page.cursor,
            "truncated": page.truncated_by_limit || page.truncated_by_budget,
        })
    }
}

#[async_trait]
impl ResourceProvider for BotResources {
    fn resources(&self) -> Vec<Value> {
        vec![
            json!({"uri": "porthole://logs/server", "name": "server-log", "title": "Server log (latest 200 lines)",
                   "description": "The bot's recent server log lines; use the server_log tool to filter.", "mimeType": "application/json"}),
            json!({"uri": "porthole://logs/web", "name": "web-log", "title": "Browser console (latest 200 lines)",
                   "description": "Console lines forwarded by the web page.", "mimeType": "application/json"}),
            json!({"uri": "porthole://db/schema", "name": "db-schema", "title": "Database schema",
                   "description": "Tables, columns, indexes and row counts of the bot's SQLite database.", "mimeType": "application/json"}),
            json!({"uri": "porthole://config", "name": "config", "title": "Runtime configuration",
                   "description": "The bot's configuration with secrets redacted.", "mimeType": "application/json"}),
        ]
    }

    fn templates(&self) -> Vec<Value> {
        vec![
            json!({
                "uriTemplate": CONVERSATION_TEMPLATE,
                "name": "conversation",
                "title": "A conversation",
                "description": "One conversation with its latest 100 messages (fewer when they pass 4 MiB of text).",
                "mimeType": "application/json",
            }),
            json!({
                "uriTemplate": TRACE_TEMPLATE,
                "name": "trace",
                "title": "A turn trace",
                "description": "One turn's span tree (LLM calls, tool calls, worker agents) with timings, tokens and errors, as get_trace shows it.",
                "mimeType": "application/json",
            }),
        ]
    }

    async fn read(
        &self,
        uri: &str,
        _ctx: &RequestContext,
    ) -> Result<Option<Outcome<Vec<Value>>>, RpcError> {
        let bot = &self.0.bot;
        let value = match uri {
            "porthole://logs/server" => self.recent_logs(LogSource::Server),
            "porthole://logs/web" => self.recent_logs(LogSource::Web),
            "porthole://config" => config_snapshot(&bot.config),
            "porthole://db/schema" => bot
                .store
                .describe_schema()
                .await
                .map_err(|e| RpcError::internal(format!("cannot read the schema: {e}")))?,
            _ if uri.starts_with(TRACE_PREFIX) => {
                let id = &uri[TRACE_PREFIX.len()..];
                if !crate::trace_context::is_trace_id(id) {
                    return Ok(None);
                }
                match trace_answer(&self.0, id, None, MAX_MAX_BYTES).await {
                    Outcome::Complete(result) if !result.is_error => result
                        .structured
                        .map(crate::mcp::Structured::into_value)
                        .unwrap_or_default(),
                    _ => return Ok(None),
                }
            }
            _ => {
                let Some(id) = uri.strip_prefix(CONVERSATION_PREFIX) else {
                    return Ok(None);
                };
                let Some((conversation, page)) = conversation_with_messages(&self.0, id).await?
                else {
                    return Ok(None);
                };
                json!({"conversation": conversation, "messages": page.messages, "has_more": page.has_more})
            }
        };
        Ok(Some(Outcome::Complete(json_contents(uri, &value))))
    }

    async fn complete(&self, template: &str, argument: &str, value: &str) -> Vec<String> {
        if template != CONVERSATION_TEMPLATE || argument != "id" {
            return Vec::new();
        }
        complete_conversation_ids(&self.0, value).await
    }
}

/// Conversation `id` with its latest 100 messages (fewer past 4 MiB of text), or `None` when there is no such
/// conversation: what its resource holds and what `explain_conversation` lays out.
pub(super) async fn conversation_with_messages(
    d: &Diagnostics,
    id: &str,
) -> Result<Option<(Conversation, MessagePage)>, RpcError> {
    let store = &d.bot.store;
    let internal = |e: crate::bot::store::StoreError| RpcError::internal(e.to_string());
    let Some(conversation) = store.get_conversation(id).await.map_err(internal)? else {
        return Ok(None);
    };
    let latest = MessageQuery {
        limit: 100,
        ..MessageQuery::default()
    };
    let page = store.list_messages(id, latest).await.map_err(internal)?;
    Ok(Some((conversation, page)))
}

/// Conversation ids starting with `prefix`, most recent first.
pub(super) async fn complete_conversation_ids(d: &Diagnostics, prefix: &str) -> Vec<String> {
    d.bot
        .store
        .list_conversations(500)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .filter(|id| id.starts_with(prefix))
        .take(100)
        .collect()
}
