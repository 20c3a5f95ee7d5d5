//! MCP prompts: ready-made investigations a client can start with one pick.
//!
//! - `diagnose_recent_errors`: the latest warning and error lines of the server log and
//!   browser console, with the conversations active around them;
//! - `explain_conversation`: one conversation's messages and tool calls (the id
//!   argument completes from the store);
//! - `explain_failed_turn` (in `trace_prompts`): one failed turn from its trace.
//!
//! The first two add the turns' traces when there are any.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tracing::Level;

use super::Diagnostics;
use super::resources::{complete_conversation_ids, conversation_with_messages};
use super::trace_prompts::{ExplainFailedTurn, trace_digest};
use crate::bot::store::SpanQuery;
use crate::logs::buffer::LogQuery;
use crate::mcp::{
    Outcome, Prompt, PromptArgument, PromptMessages, PromptSpec, RequestContext, RpcError,
};

pub fn prompts(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Prompt>> {
    vec![
        Arc::new(DiagnoseRecentErrors(d.clone())),
        Arc::new(ExplainConversation(d.clone())),
        Arc::new(ExplainFailedTurn(d.clone())),
    ]
}

struct DiagnoseRecentErrors(Arc<Diagnostics>);

#[async_trait]
impl Prompt for DiagnoseRecentErrors {
    fn spec(&self) -> PromptSpec {
        PromptSpec {
            name: "diagnose_recent_errors".into(),
            title: Some("Diagnose recent errors".into()),
            description: "Collects the bot's latest warnings and errors (server and browser) and the conversations active \
                          around them, and asks for a diagnosis."
                .into(),
            arguments: vec![],
        }
    }

    async fn get(
        &self,
        _args: &Map<String, Value>,
        _ctx: &RequestContext,
    ) -> Result<Outcome<PromptMessages>, RpcError> {
        let page = self.0.logs.query(&LogQuery {
            min_level: Some(Level::WARN),
            limit: 50,
            ..LogQuery::default()
        });
        let lines: Vec<String> = page
            .records
            .iter()
            .map(|r| {
                format!(
                    "[{}] {} {} {}: {}",
                    r.timestamp(),
                    r.source.as_str(),
                    crate::logs::buffer::level_name(r.level),
                    r.target,
                    r.message
                )
            })
            .collect();
        let conversations = self
            .0
            .bot
            .store
            .list_conversations(5)
            .await
            .unwrap_or_default();
        let recent: Vec<String> = conversations
            .iter()
            .map(|c| {
                format!(
                    "- {} {} ({} messages, updated {})",
                    c.id,
                    quoted_title(c),
                    c.message_count,
                    c.updated_at
                )
            })
            .collect();
        let failed_turns = trace_digest(
            &self.0,
            SpanQuery {
                status: Some("error".into()),
                limit: 3,
                ..SpanQuery::default()
            },
            true,
        )
        .await
        .unwrap_or_else(|| "(no failed turn traced)".into());
        let body = format!(
            "You are diagnosing the running Porthole bot.\n\nRecent warnings and errors ({} lines, oldest first):\n{}\n\n\
             Most recently active conversations:\n{}\n\n\
             The latest failed turns, from their traces (newest first):\n{failed_turns}\n\n\
             Explain what went wrong, the likely cause, and what to check next. Use the server_log, list_messages, \
             get_trace, get_llm_call and db_query tools for more detail.",
            lines.len(),
            if lines.is_empty() {
                "(none)".to_string()
            } else {
                lines.join("\n")
            },
            if recent.is_empty() {
                "(none)".to_string()
            } else {
                recent.join("\n")
            },
        );
        Ok(Outcome::Complete(PromptMessages::user_text(body)))
    }
}

struct ExplainConversation(Arc<Diagnostics>);

#[async_trait]
impl Prompt for ExplainConversation {
    fn spec(&self) -> PromptSpec {
        PromptSpec {
            name: "explain_conversation".into(),
            title: Some("Explain a conversation".into()),
            description:
                "Lays out one conversation's messages and tool calls and asks what happened in it."
                    .into(),
            arguments: vec![PromptArgument {
                name: "conversation_id".into(),
                description: "The conversation to explain (completes from the store)".into(),
                required: true,
            }],
        }
    }

    async fn get(
        &self,
        args: &Map<String, Value>,
        _ctx: &RequestContext,
    ) -> Result<Outcome<PromptMessages>, RpcError> {
        let id = args
            .get("conversation_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (conversation, page) =
            conversation_with_messages(&self.0, id)
                .await?
                .ok_or_else(|| {
                    RpcError::invalid_params(format!(
                        "no conversation with id `{id}`; use completion or list_conversations"
                    ))
                })?;
        let transcript: Vec<String> = page
            .messages
            .iter()
            .map(|m| {
                let calls = m
                    .tool_calls
                    .as_ref()
                    .map(|calls| {
                        calls
                            .iter()
                            .map(|c| format!(" [calls {} {}]", c.name, c.arguments))
                            .collect::<String>()
                    })
                    .unwrap_or_default();
                format!(
                    "#{} {} {}: {}{}",
                    m.id,
                    m.created_at,
                    m.role.as_str(),
                    m.content,
                    calls
                )
            })
            .collect();
        let traces = trace_digest(
            &self.0,
            SpanQuery {
                conversation_id: Some(conversation.id.clone()),
                limit: 5,
                ..SpanQuery::default()
            },
            false,
        )
        .await
        .map(|t| {
            format!("\n\nIts latest turns as traced (newest first; get_trace shows more):\n{t}")
        })
        .unwrap_or_default();
        let body = format!(
            "Explain this conversation with the Porthole bot: what the user wanted, what the agent did (tools it called and \
             what they returned), and whether anything went wrong.\n\nConversation {} {} ({} messages{}):\n{}{traces}",
            conversation.id,
            quoted_title(&conversation),
            conversation.message_count,
            if page.has_more {
                format!(", latest {} shown", page.messages.len())
            } else {
                String::new()
            },
            transcript.join("\n")
        );
        Ok(Outcome::Complete(PromptMessages::user_text(body)))
    }

    async fn complete(&self, argument: &str, value: &str) -> Vec<String> {
        if argument != "conversation_id" {
            return Vec::new();
        }
        complete_conversation_ids(&self.0, value).await
    }
}

/// A conversation's title in quotes, or a note that it has none (set to NULL by hand).
fn quoted_title(conversation: &crate::bot::store::Conversation) -> String {
    match &conversation.title {
        Some(title) => format!("\"{title}\""),
        None => "(title NULL)".to_string(),
    }
}
