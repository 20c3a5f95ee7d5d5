//! The loop every agent runs: ask the model, run the tools it asks for, feed the
//! results back, until it answers in plain text or the step budget runs out; and how a
//! stored history becomes the model's context.

use super::*;
use crate::bot::llm::ChatResponse;
use crate::model::ToolCall;

/// Where a loop keeps its messages: the store (supervisor) or memory (workers).
#[async_trait]
pub(super) trait Transcript: Send {
    async fn push(&mut self, message: NewMessage) -> Result<(), StoreError>;
}

pub(super) struct StoredTranscript<'a> {
    pub(super) store: &'a Store,
    pub(super) conversation_id: &'a str,
}

#[async_trait]
impl Transcript for StoredTranscript<'_> {
    async fn push(&mut self, message: NewMessage) -> Result<(), StoreError> {
        self.store
            .append_message(self.conversation_id, message)
            .await
            .map(|_| ())
    }
}

pub(super) struct MemoryTranscript;

#[async_trait]
impl Transcript for MemoryTranscript {
    async fn push(&mut self, _message: NewMessage) -> Result<(), StoreError> {
        Ok(())
    }
}

/// How a loop ended.
pub(super) struct LoopOutcome {
    pub(super) text: String,
    /// Set when the model failed; `text` then explains the failure.
    pub(super) error: Option<String>,
}

pub(super) struct LoopSettings<'a> {
    pub(super) llm: &'a dyn LlmProvider,
    pub(super) runner: &'a ToolRunner,
    pub(super) ctx: &'a ExecContext,
    pub(super) system: &'a str,
    pub(super) max_steps: usize,
}

/// The model ↔ tools loop shared by the supervisor and workers.
pub(super) async fn run_tool_loop(
    settings: LoopSettings<'_>,
    mut context: Vec<ChatMessage>,
    transcript: &mut dyn Transcript,
    events: &Events,
) -> Result<LoopOutcome, StoreError> {
    let tools = settings.runner.llm_tools(settings.ctx);
    for step in 1..=settings.max_steps {
        emit(events, AgentEvent::Step(step));
        let request = ChatRequest {
            system: settings.system,
            messages: &context,
            tools: &tools,
            parameters: None,
        };
        let token_events = events.clone();
        let on_token = move |t: &str| emit(&token_events, AgentEvent::Token(t.to_string()));
        let response =
            match traced_chat(settings.llm, &request, &on_token, &settings.ctx.trace).await {
                Ok(r) => r,
                Err(e) => return model_failed(e, transcript).await,
            };
        record_answer(&response, transcript, &mut context).await?;
        if response.tool_calls.is_empty() {
            return Ok(LoopOutcome {
                text: response.content,
                error: None,
            });
        }
        for call in response.tool_calls {
            let content = run_call(&settings, &call, events).await;
            record_tool_result(call, content, transcript, &mut context).await?;
        }
    }
    let text = format!(
        "I stopped after {} steps without a final answer (AGENT_MAX_STEPS).",
        settings.max_steps
    );
    transcript
        .push(NewMessage::text(Role::Assistant, text.clone()))
        .await?;
    Ok(LoopOutcome {
        error: Some(text.clone()),
        text,
    })
}

/// Keeps the model's answer (text and tool calls) in the transcript and the context.
async fn record_answer(
    response: &ChatResponse,
    transcript: &mut dyn Transcript,
    context: &mut Vec<ChatMessage>,
) -> Result<(), StoreError> {
    let assistant = ChatMessage {
        role: Role::Assistant,
        content: response.content.clone(),
        tool_calls: response.tool_calls.clone(),
        tool_call_id: None,
        name: None,
    };
    transcript
        .push(NewMessage {
            role: Role::Assistant,
            content: response.content.clone(),
            tool_calls: (!response.tool_calls.is_empty()).then(|| response.tool_calls.clone()),
            tool_call_id: None,
            name: None,
        })
        .await?;
    context.push(assistant);
    Ok(())
}

/// Runs one tool call the model asked for and returns the text the model gets back
/// (a failure as `Error: …`), reporting the call and its result as events.
async fn run_call(settings: &LoopSettings<'_>, call: &ToolCall, events: &Events) -> String {
    emit(
        events,
        AgentEvent::ToolCall {
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        },
    );
    let (content, is_error) = settings
        .runner
        .call_for_model(&call.name, &call.arguments, settings.ctx)
        .await;
    emit(
        events,
        AgentEvent::ToolResult {
            name: call.name.clone(),
            content: content.clone(),
            is_error,
        },
    );
    content
}

/// Keeps a tool's result in the transcript and the context, paired with its call.
async fn record_tool_result(
    call: ToolCall,
    content: String,
    transcript: &mut dyn Transcript,
    context: &mut Vec<ChatMessage>,
) -> Result<(), StoreError> {
    let message = NewMessage {
        role: Role::Tool,
        content: content.clone(),
        tool_calls: None,
        tool_call_id: Some(call.id.clone()),
        name: Some(call.name.clone()),
    };
    transcript.push(message).await?;
    context.push(ChatMessage {
        role: Role::Tool,
        content,
        tool_calls: Vec::new(),
        tool_call_id: Some(call.id),
        name: Some(call.name),
    });
    Ok(())
}

pub(super) async fn model_failed(
    error: LlmError,
    transcript: &mut dyn Transcript,
) -> Result<LoopOutcome, StoreError> {
    tracing::warn!(%error, "LLM request failed");
    let text = format!("⚠ The language model request failed: {error}");
    transcript
        .push(NewMessage::text(Role::Assistant, text.clone()))
        .await?;
    Ok(LoopOutcome {
        text,
        error: Some(error.to_string()),
    })
}

/// Turns stored messages into model context, dropping the pieces of a turn that was
/// interrupted: tool calls without a result and results without a call. Providers
/// reject such histories, and a cancelled request must not break the conversation.
pub fn history_to_context(history: &[Message]) -> Vec<ChatMessage> {
    let answered: HashSet<&str> = history
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    let asked: HashSet<&str> = history
        .iter()
        .flat_map(|m| m.tool_calls.iter().flatten().map(|c| c.id.as_str()))
        .collect();
    let mut context = Vec::new();
    for m in history {
        match m.role {
            Role::Tool => {
                let Some(id) = m.tool_call_id.as_deref() else {
                    continue;
                };
                if !asked.contains(id) {
                    continue;
                }
            }
            Role::System => continue,
            _ => {}
        }
        let tool_calls: Vec<_> = m
            .tool_calls
            .iter()
            .flatten()
            .filter(|c| answered.contains(c.id.as_str()))
            .cloned()
            .collect();
        if m.role == Role::Assistant && m.content.is_empty() && tool_calls.is_empty() {
            continue;
        }
        context.push(ChatMessage {
            role: m.role,
            content: m.content.clone(),
            tool_calls,
            tool_call_id: m.tool_call_id.clone(),
            name: m.name.clone(),
        });
    }
    context
}
