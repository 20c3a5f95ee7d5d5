//! Interaction: `send_message` — talk to the live bot as a user would.
//!
//! The call waits for the agent's full reply. With a `progressToken` the client sees
//! the turn unfold as progress notifications (steps, tool calls, text as it streams).
//! A timeout answers with a clear error; a client that disconnects or cancels stops the
//! agent's work. Either way the conversation stays consistent: the next turn ignores a
//! half-finished tool call.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;

use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed, mcp_exec};
use crate::bot::agents::{AgentError, AgentEvent};
use crate::mcp::{Annotations, RequestContext, TaskSupport, ToolSpec};
use crate::redact::{RedactedStream, Redactor};

pub(super) struct SendMessage;

#[derive(Deserialize, JsonSchema)]
pub(super) struct SendArgs {
    /// The user message
    #[schemars(length(min = 1, max = crate::bot::agents::MAX_MESSAGE_CHARS))]
    content: String,
    /// Continue this conversation
    #[schemars(length(min = 1), extend("x-aliases" = ["conversationId"]))]
    conversation_id: Option<String>,
}

/// `send_message`'s answer.
#[derive(Serialize, JsonSchema)]
struct Reply {
    /// The agent's reply.
    response: String,
    /// The conversation it is part of: pass it back to continue.
    conversation_id: String,
    /// What went wrong in the turn, if anything did (the reply then says so too).
    error: Option<String>,
    /// The turn's trace, for get_trace
    trace_id: Option<String>,
}

/// Streamed text is sent as progress in pieces of about this many characters.
const TEXT_CHUNK: usize = 80;

impl DiagnosticTool for SendMessage {
    type Args = SendArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "send_message",
            "Send a message to the bot",
            "Sends a user message to the running bot and waits for the agent's full reply (the agent may call \
             tools). Omit conversation_id to start a new conversation; pass one from list_conversations to continue it \
             (in a conversation the web page started, the agent has a chat user's rights, not an admin's). \
             Returns {response, conversation_id}. Send a progressToken to watch the turn as it happens.",
        )
        .output_of::<Reply>()
        .annotations(Annotations {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        })
    }

    /// Long work: a client that supports tasks gets a handle to poll.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    /// The turn is the trace (`mcp_exec`).
    fn starts_a_trace(&self) -> bool {
        true
    }

    async fn run(&self, d: &Diagnostics, args: SendArgs, ctx: &RequestContext) -> Answer {
        if args.content.trim().is_empty() {
            return Ok(failed("`content` must contain some text"));
        }
        let bot = &d.bot;
        let timeout = d.settings.send_message_timeout;
        let exec = mcp_exec(d, "send_message", ctx);

        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let send = tokio::time::timeout(
            timeout,
            bot.supervisor.send(
                args.conversation_id.as_deref(),
                &args.content,
                &exec,
                Some(events_tx),
            ),
        );
        let progress = report_progress(events_rx, ctx, &bot.redactor);
        let (reply, conversation) = tokio::join!(send, progress);
        match reply {
            Ok(Ok(reply)) => Ok(done(json!(Reply {
                response: reply.response,
                conversation_id: reply.conversation_id,
                error: reply.error,
                trace_id: reply.trace_id,
            }))),
            Ok(Err(AgentError::UnknownConversation(id))) => Ok(failed(format!(
                "no conversation with id `{id}` (never made, or deleted by conversation retention: \
                 CONVERSATION_MAX_COUNT, CONVERSATION_MAX_AGE_SECS); omit conversation_id to start \
                 one, or call list_conversations"
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

/// Forwards the turn's events as progress notifications until the turn ends, and
/// returns the conversation it ran in (for the timeout's message).
async fn report_progress(
    mut events: mpsc::UnboundedReceiver<AgentEvent>,
    ctx: &RequestContext,
    redactor: &Redactor,
) -> Option<String> {
    let mut conversation = None;
    let mut step = 0.0;
    // The answer's text, let out whole words at a time and redacted before it is cut
    // into messages: a secret in pieces must not pass as pieces too short to recognise.
    let mut stream = RedactedStream::new(redactor);
    let mut text = String::new();
    while let Some(event) = events.recv().await {
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
                text.extend(stream.push(&t));
                if text.len() < TEXT_CHUNK {
                    continue;
                }
                std::mem::take(&mut text)
            }
        };
        ctx.progress(step, None, Some(&message));
    }
    text.extend(stream.flush());
    if !text.is_empty() {
        ctx.progress(step + 1.0, None, Some(&text));
    }
    conversation
}
