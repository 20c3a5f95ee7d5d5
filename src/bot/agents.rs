//! Agents: the supervisor that answers user messages, the worker agents it delegates
//! to, and the registry listing who is active.
//!
//! Both run the same loop ([`run_tool_loop`]): ask the model, run the tools it asks for,
//! feed the results back, until it answers in plain text or the step budget runs out.
//! The supervisor persists every message of the loop; workers keep theirs in memory and
//! hand back only the answer. Dropping a running [`Supervisor::send`] future (a client
//! disconnected, a timeout fired) stops the work at its next await point; the history
//! reader tolerates the half-finished turn this can leave behind.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::bot::llm::{ChatMessage, ChatRequest, LlmError, LlmProvider};
use crate::bot::store::{Message, NewMessage, Role, Store, StoreError, now_rfc3339};
use crate::bot::tools::{ExecContext, ToolRunner};
use crate::bot::trace::{SpanKind, traced_chat};

const SUPERVISOR_PROMPT: &str = "You are Porthole, a helpful assistant. Use the tools you are given when they help; \
delegate self-contained sub-tasks with the `delegate` tool. Answer concisely.";
const WORKER_PROMPT: &str =
    "You are a worker agent. Complete the task you are given and answer with the result only.";

/// One entry of the agent registry.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AgentInfo {
    pub id: String,
    pub name: String,
    pub emoji: String,
    pub role: String,
    pub parent: Option<String>,
    pub status: String,
    pub task: Option<String>,
    pub started_at: String,
}

/// Every agent that currently exists.
#[derive(Default)]
pub struct AgentRegistry {
    agents: RwLock<BTreeMap<String, AgentInfo>>,
}

impl AgentRegistry {
    pub fn insert(&self, info: AgentInfo) {
        self.agents
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(info.id.clone(), info);
    }

    pub fn set_status(&self, id: &str, status: &str, task: Option<String>) {
        if let Some(a) = self
            .agents
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(id)
        {
            a.status = status.to_string();
            a.task = task;
        }
    }

    pub fn remove(&self, id: &str) {
        self.agents
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    pub fn list(&self) -> Vec<AgentInfo> {
        self.agents
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

/// What happens during a turn, for callers that stream progress (WebSocket, MCP).
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    Conversation(String),
    Token(String),
    ToolCall {
        name: String,
        arguments: Value,
    },
    ToolResult {
        name: String,
        content: String,
        is_error: bool,
    },
    Step(usize),
}

type Events = Option<mpsc::UnboundedSender<AgentEvent>>;

fn emit(events: &Events, event: AgentEvent) {
    if let Some(tx) = events {
        // The listener may have gone; the turn goes on regardless.
        let _ = tx.send(event);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("conversation {0} does not exist")]
    UnknownConversation(String),
    #[error("the message is empty; send some text")]
    EmptyMessage,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where a loop keeps its messages: the store (supervisor) or memory (workers).
#[async_trait]
trait Transcript: Send {
    async fn push(&mut self, message: NewMessage) -> Result<(), StoreError>;
}

struct StoredTranscript<'a> {
    store: &'a Store,
    conversation_id: &'a str,
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

struct MemoryTranscript;

#[async_trait]
impl Transcript for MemoryTranscript {
    async fn push(&mut self, _message: NewMessage) -> Result<(), StoreError> {
        Ok(())
    }
}

/// How a loop ended.
struct LoopOutcome {
    text: String,
    /// Set when the model failed; `text` then explains the failure.
    error: Option<String>,
}

struct LoopSettings<'a> {
    llm: &'a dyn LlmProvider,
    runner: &'a ToolRunner,
    ctx: &'a ExecContext,
    system: &'a str,
    max_steps: usize,
}

/// The model ↔ tools loop shared by the supervisor and workers.
async fn run_tool_loop(
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
        };
        let token_events = events.clone();
        let on_token = move |t: &str| emit(&token_events, AgentEvent::Token(t.to_string()));
        let response =
            match traced_chat(settings.llm, &request, &on_token, &settings.ctx.trace).await {
                Ok(r) => r,
                Err(e) => return model_failed(e, transcript).await,
            };
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
        if response.tool_calls.is_empty() {
            return Ok(LoopOutcome {
                text: response.content,
                error: None,
            });
        }
        for call in response.tool_calls {
            emit(
                events,
                AgentEvent::ToolCall {
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                },
            );
            // A model may name a tool it was not offered; the LLM tool filter holds
            // for calls too, not only for the offer.
            let outcome = if settings.runner.llm_filter().allows(&call.name) {
                settings
                    .runner
                    .call(&call.name, call.arguments.clone(), settings.ctx)
                    .await
                    .map_err(|e| e.to_string())
            } else {
                Err(format!(
                    "tool `{}` is not available to the model here (LLM_TOOLS_INCLUDE/LLM_TOOLS_EXCLUDE)",
                    call.name
                ))
            };
            let (content, is_error) = match outcome {
                Ok(value) => (render_value(&value), false),
                Err(e) => (format!("Error: {e}"), true),
            };
            emit(
                events,
                AgentEvent::ToolResult {
                    name: call.name.clone(),
                    content: content.clone(),
                    is_error,
                },
            );
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

async fn model_failed(
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

/// Tool results go to the model as text: strings as-is, anything else as JSON.
fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
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

fn new_agent(name: &str, emoji: &str, role: &str, parent: Option<String>) -> AgentInfo {
    AgentInfo {
        id: format!("{role}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
        name: name.to_string(),
        emoji: emoji.to_string(),
        role: role.to_string(),
        parent,
        status: "working".into(),
        task: None,
        started_at: now_rfc3339(),
    }
}

/// Runs worker agents for delegated sub-tasks.
pub struct Workers {
    llm: Arc<dyn LlmProvider>,
    registry: Arc<AgentRegistry>,
    max_steps: usize,
    supervisor_id: String,
}

impl Workers {
    pub fn new(
        llm: Arc<dyn LlmProvider>,
        registry: Arc<AgentRegistry>,
        max_steps: usize,
        supervisor_id: String,
    ) -> Self {
        Workers {
            llm,
            registry,
            max_steps,
            supervisor_id,
        }
    }

    pub fn registry(&self) -> &AgentRegistry {
        &self.registry
    }

    /// Runs one worker on `task` and returns its answer. The worker is listed in the
    /// registry while it works and removed when done (or when the call is dropped).
    pub async fn run(
        &self,
        name: &str,
        task: &str,
        runner: &ToolRunner,
        ctx: &ExecContext,
    ) -> Result<String, String> {
        let mut info = new_agent(name, "🛠", "worker", Some(self.supervisor_id.clone()));
        info.task = Some(task.to_string());
        let mut span = ctx.trace.start(SpanKind::Agent, format!("agent {name}"));
        span.set_attribute("agent_id", info.id.as_str());
        span.set_attribute("task", task);
        let mut ctx = ctx.clone();
        ctx.trace = span.scope();
        let guard = RegistryEntry::new(&self.registry, info);
        let settings = LoopSettings {
            llm: self.llm.as_ref(),
            runner,
            ctx: &ctx,
            system: WORKER_PROMPT,
            // Workers get one step fewer so nested delegation always terminates.
            max_steps: self.max_steps.saturating_sub(1).max(1),
        };
        let outcome = run_tool_loop(
            settings,
            vec![ChatMessage::text(Role::User, task)],
            &mut MemoryTranscript,
            &None,
        )
        .await
        .map_err(|e| e.to_string());
        drop(guard);
        match outcome {
            Err(e) | Ok(LoopOutcome { error: Some(e), .. }) => {
                span.fail(e.clone());
                Err(e)
            }
            Ok(outcome) => {
                span.set_attribute("answer", outcome.text.as_str());
                span.end();
                Ok(outcome.text)
            }
        }
    }
}

/// Removes an agent from the registry when dropped, even if its work was cancelled.
struct RegistryEntry<'a> {
    registry: &'a AgentRegistry,
    id: String,
}

impl<'a> RegistryEntry<'a> {
    fn new(registry: &'a AgentRegistry, info: AgentInfo) -> Self {
        let id = info.id.clone();
        registry.insert(info);
        RegistryEntry { registry, id }
    }
}

impl Drop for RegistryEntry<'_> {
    fn drop(&mut self) {
        self.registry.remove(&self.id);
    }
}

/// The answer to one user message.
#[derive(Debug, Clone, Serialize)]
pub struct Reply {
    pub conversation_id: String,
    pub response: String,
    /// Set when the model failed; `response` then explains it (and is stored).
    pub error: Option<String>,
    /// The turn's trace, when tracing is on.
    pub trace_id: Option<String>,
}

/// A snapshot of what the supervisor is doing.
#[derive(Debug, Clone, Serialize)]
pub struct SupervisorState {
    pub id: String,
    pub status: &'static str,
    /// Conversations with a turn in progress, and when each started.
    pub processing: Vec<(String, String)>,
    pub active_workers: Vec<AgentInfo>,
    pub llm: (String, String),
    pub messages_handled: u64,
}

pub struct Supervisor {
    id: String,
    store: Store,
    llm: Arc<dyn LlmProvider>,
    runner: Arc<ToolRunner>,
    registry: Arc<AgentRegistry>,
    max_steps: usize,
    in_progress: Mutex<BTreeMap<String, String>>,
    handled: std::sync::atomic::AtomicU64,
}

impl Supervisor {
    /// Creates the supervisor and registers it; `id` is shared with its [`Workers`].
    pub fn new(
        id: String,
        store: Store,
        llm: Arc<dyn LlmProvider>,
        runner: Arc<ToolRunner>,
        registry: Arc<AgentRegistry>,
        max_steps: usize,
    ) -> Self {
        let mut info = new_agent("Porthole", "🤖", "supervisor", None);
        info.id = id.clone();
        info.status = "idle".into();
        registry.insert(info);
        Supervisor {
            id,
            store,
            llm,
            runner,
            registry,
            max_steps,
            in_progress: Mutex::new(BTreeMap::new()),
            handled: Default::default(),
        }
    }

    pub fn new_id() -> String {
        format!(
            "supervisor-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        )
    }

    pub fn llm(&self) -> &dyn LlmProvider {
        self.llm.as_ref()
    }

    pub fn state(&self) -> SupervisorState {
        let processing: Vec<(String, String)> = self
            .in_progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(c, t)| (c.clone(), t.clone()))
            .collect();
        SupervisorState {
            id: self.id.clone(),
            status: if processing.is_empty() {
                "idle"
            } else {
                "processing"
            },
            processing,
            active_workers: self
                .registry
                .list()
                .into_iter()
                .filter(|a| a.role == "worker")
                .collect(),
            llm: (
                self.llm.provider().to_string(),
                self.llm.model().to_string(),
            ),
            messages_handled: self.handled.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Answers a user message in a conversation (a new one when `conversation_id` is
    /// `None`), persisting every message, and returns the full reply. Progress goes to
    /// `events` if given.
    pub async fn send(
        &self,
        conversation_id: Option<&str>,
        content: &str,
        ctx: &ExecContext,
        events: Events,
    ) -> Result<Reply, AgentError> {
        let content = content.trim();
        if content.is_empty() {
            return Err(AgentError::EmptyMessage);
        }
        let conversation = match conversation_id {
            Some(id) => self
                .store
                .get_conversation(id)
                .await?
                .ok_or_else(|| AgentError::UnknownConversation(id.to_string()))?,
            None => {
                let title: String = content.chars().take(60).collect();
                self.store.create_conversation(&title).await?
            }
        };
        emit(&events, AgentEvent::Conversation(conversation.id.clone()));
        let mut span = ctx.trace.start(SpanKind::Turn, "turn");
        span.set_conversation(&conversation.id);
        span.set_attribute("input", content);
        span.set_attribute("agent_id", self.id.as_str());
        let _busy = InProgress::new(self, &conversation.id);
        self.store
            .append_message(&conversation.id, NewMessage::text(Role::User, content))
            .await?;
        let history = self.store.conversation_history(&conversation.id).await?;
        let mut ctx = ctx.clone();
        ctx.conversation_id = Some(conversation.id.clone());
        ctx.trace = span.scope();
        let settings = LoopSettings {
            llm: self.llm.as_ref(),
            runner: &self.runner,
            ctx: &ctx,
            system: SUPERVISOR_PROMPT,
            max_steps: self.max_steps,
        };
        let mut transcript = StoredTranscript {
            store: &self.store,
            conversation_id: &conversation.id,
        };
        let outcome = run_tool_loop(
            settings,
            history_to_context(&history),
            &mut transcript,
            &events,
        )
        .await?;
        self.handled
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        span.set_attribute("output", outcome.text.as_str());
        let trace_id = span.ids().map(|(trace, _)| trace.to_string());
        match &outcome.error {
            Some(e) => span.fail(e.clone()),
            None => span.end(),
        }
        Ok(Reply {
            trace_id,
            conversation_id: conversation.id,
            response: outcome.text,
            error: outcome.error,
        })
    }
}

/// Marks a conversation as being processed for as long as it lives.
struct InProgress<'a> {
    supervisor: &'a Supervisor,
    conversation_id: String,
}

impl<'a> InProgress<'a> {
    fn new(supervisor: &'a Supervisor, conversation_id: &str) -> Self {
        supervisor
            .in_progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(conversation_id.to_string(), now_rfc3339());
        supervisor.registry.set_status(
            &supervisor.id,
            "working",
            Some(conversation_id.to_string()),
        );
        InProgress {
            supervisor,
            conversation_id: conversation_id.to_string(),
        }
    }
}

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        let mut map = self
            .supervisor
            .in_progress
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.remove(&self.conversation_id);
        if map.is_empty() {
            self.supervisor
                .registry
                .set_status(&self.supervisor.id, "idle", None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bot::store::ToolCall;

    fn msg(id: i64, role: Role, calls: Option<Vec<&str>>, answers: Option<&str>) -> Message {
        Message {
            id,
            conversation_id: "c".into(),
            role,
            content: format!("m{id}"),
            tool_calls: calls.map(|ids| {
                ids.into_iter()
                    .map(|i| ToolCall {
                        id: i.into(),
                        name: "t".into(),
                        arguments: Value::Null,
                    })
                    .collect()
            }),
            tool_call_id: answers.map(str::to_string),
            name: None,
            created_at: String::new(),
        }
    }

    #[test]
    fn interrupted_turns_are_dropped_from_context() {
        let history = vec![
            msg(1, Role::User, None, None),
            msg(2, Role::Assistant, Some(vec!["a", "b"]), None),
            msg(3, Role::Tool, None, Some("a")),
            // "b" never got a result: the call was cancelled.
            msg(4, Role::Tool, None, Some("ghost")),
            msg(5, Role::User, None, None),
        ];
        let context = history_to_context(&history);
        assert_eq!(context.len(), 4);
        assert_eq!(context[1].tool_calls.len(), 1);
        assert_eq!(context[1].tool_calls[0].id, "a");
        assert_eq!(context[2].tool_call_id.as_deref(), Some("a"));
    }
}
