//! Interaction: `send_message` — talk to the live bot as a user would.
//!
//! The call waits for the agent's full reply. With a `progressToken` the client sees
//! the turn unfold as progress notifications (steps, tool calls, text as it streams).
//! A timeout answers with a clear error; a client that disconnects or cancels stops the
//! agent's work. Either way the conversation stays consistent: the next turn ignores a
//! half-finished tool call.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Diagnostics, conversation_id_property, done, failed, object_schema, output_schema};
use crate::bot::agents::{AgentError, AgentEvent};
use crate::bot::tools::{ADMIN_ROLE, ExecContext};
use crate::mcp::{
    Annotations, CallToolResult, Outcome, RequestContext, RpcError, TaskSupport, Tool, ToolSpec,
};

pub fn tools(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(SendMessage(d.clone()))]
}

struct SendMessage(Arc<Diagnostics>);

#[derive(Deserialize)]
struct SendArgs {
    content: String,
    conversation_id: Option<String>,
}

/// Streamed text is sent as progress in pieces of about this many characters.
const TEXT_CHUNK: usize = 80;

#[async_trait]
impl Tool for SendMessage {
    /// Long work: a client that supports tasks gets a handle to poll.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send_message".into(),
            title: Some("Send a message to the bot".into()),
            description: "Sends a user message to the running bot and waits for the agent's full reply (the agent may call \
                          tools). Omit conversation_id to start a new conversation; pass one from list_conversations to continue it. \
                          Returns {response, conversation_id}. Send a progressToken to watch the turn as it happens."
                .into(),
            input_schema: object_schema(
                json!({
                    "content": {"type": "string", "minLength": 1, "maxLength": 100000, "description": "The user message"},
                    "conversation_id": conversation_id_property("Continue this conversation")
                }),
                &["content"],
            ),
            output_schema: Some(output_schema(
                json!({
                    "response": {"type": "string"},
                    "conversation_id": {"type": "string"},
                    "error": {"type": ["string", "null"]},
                    "trace_id": {"type": ["string", "null"], "description": "The turn's trace, for get_trace"}
                }),
                &["response", "conversation_id"],
            )),
            annotations: Annotations {
                read_only: false,
                destructive: true,
                idempotent: false,
                open_world: true,
            },
        }
    }

    async fn call(
        &self,
        args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: SendArgs = args_or_error!("send_message", args);
        if args.content.trim().is_empty() {
            return Ok(failed("`content` must contain some text"));
        }
        let bot = &self.0.bot;
        let timeout = self.0.settings.send_message_timeout;
        let mut exec = ExecContext::new(&[ADMIN_ROLE]);
        exec.correlation_id = format!("mcp-{}", exec.correlation_id);
        exec.trace = super::mcp_trace(&self.0, "send_message", ctx);

        let (events_tx, mut events_rx) = mpsc::unbounded_channel();
        let send = tokio::time::timeout(
            timeout,
            bot.supervisor.send(
                args.conversation_id.as_deref(),
                &args.content,
                &exec,
                Some(events_tx),
            ),
        );
        let progress = async {
            let mut conversation = None;
            let mut step = 0.0;
            let mut text = String::new();
            while let Some(event) = events_rx.recv().await {
                step += 1.0;
                let message = match event {
                    AgentEvent::Conversation(id) => {
                        conversation = Some(id.clone());
                        format!("conversation {id}")
                    }
                    AgentEvent::Step(n) => format!("agent step {n}"),
                    AgentEvent::ToolCall { name, arguments } => {
                        format!("calling {name} {arguments}")
                    }
                    AgentEvent::ToolResult { name, is_error, .. } => {
                        format!("{name} {}", if is_error { "failed" } else { "returned" })
                    }
                    AgentEvent::Token(t) => {
                        text.push_str(&t);
                        if text.len() < TEXT_CHUNK {
                            continue;
                        }
                        std::mem::take(&mut text)
                    }
                };
                ctx.progress(step, None, Some(&message));
            }
            if !text.is_empty() {
                ctx.progress(step + 1.0, None, Some(&text));
            }
            conversation
        };
        let (reply, conversation) = tokio::join!(send, progress);
        match reply {
            Ok(Ok(reply)) => Ok(done(json!({
                "response": reply.response,
                "conversation_id": reply.conversation_id,
                "error": reply.error,
                "trace_id": reply.trace_id,
            }))),
            Ok(Err(AgentError::UnknownConversation(id))) => Ok(failed(format!(
                "no conversation with id `{id}`; omit conversation_id to start one, or call list_conversations"
            ))),
            Ok(Err(e)) => Ok(failed(e.to_string())),
            Err(_) => Ok(failed(format!(
                "the agent did not finish within {} s (MCP_SEND_MESSAGE_TIMEOUT_SECS) and was stopped; \
                 what it stored so far stays in conversation {}",
                timeout.as_secs(),
                conversation.as_deref().unwrap_or("(none created)")
            ))),
        }
    }
}
