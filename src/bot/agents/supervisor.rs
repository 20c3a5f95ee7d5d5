//! The supervisor: answers a user message in its conversation, persists every message of
//! the loop, and reports its state (idle or processing, since when).

use super::*;
use crate::bot::lock;
use crate::bot::store::{Conversation, ConversationHold, is_admin_conversation};
use crate::bot::tools::USER_ROLE;

/// The supervisor's instructions for one turn: a scheduled prompt also reads which
/// task, due time and attempt it runs as.
fn system_prompt(ctx: &ExecContext) -> std::borrow::Cow<'static, str> {
    match &ctx.scheduled_run {
        Some(run) => format!("{SUPERVISOR_PROMPT}\n\n{}", run.note()).into(),
        None => SUPERVISOR_PROMPT.into(),
    }
}

pub(super) const SUPERVISOR_PROMPT: &str = "You are Porthole, a helpful assistant. Use the tools you are given when they help; \
delegate self-contained sub-tasks with the `delegate` tool. Answer concisely.";

/// The longest message a turn takes, from any surface (the page, `/api`, a task's
/// prompt, `/mcp`'s `send_message`).
pub const MAX_MESSAGE_CHARS: usize = 100_000;

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
    /// Creates the supervisor and registers it. It shares its id, model, registry and
    /// step budget with the `workers` it delegates to, so they cannot disagree.
    pub fn new(store: Store, runner: Arc<ToolRunner>, workers: &Workers) -> Self {
        let id = workers.supervisor_id.clone();
        let mut info = new_agent("Porthole", "🤖", "supervisor", None);
        info.id = id.clone();
        info.status = "idle".into();
        workers.registry.insert(info);
        Supervisor {
            id,
            store,
            llm: workers.llm.clone(),
            runner,
            registry: workers.registry.clone(),
            max_steps: workers.max_steps,
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
        let processing: Vec<(String, String)> = lock(&self.in_progress)
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

    /// The turn's conversation, held: `conversation_id`'s, or a new one titled after the
    /// message. A chat user's turn cannot continue a conversation started with admin
    /// rights: to it, that conversation does not exist.
    async fn open_conversation(
        &self,
        conversation_id: Option<&str>,
        content: &str,
        ctx: &ExecContext,
    ) -> Result<(Conversation, ConversationHold), AgentError> {
        match conversation_id {
            Some(id) if is_admin_conversation(id) && !ctx.is_admin() => {
                Err(AgentError::UnknownConversation(id.to_string()))
            }
            Some(id) => {
                let held = self.store.hold_conversation(id).await;
                let conversation = self
                    .store
                    .get_conversation(id)
                    .await?
                    .ok_or_else(|| AgentError::UnknownConversation(id.to_string()))?;
                Ok((conversation, held))
            }
            None => {
                let title: String = content.chars().take(60).collect();
                Ok(self
                    .store
                    .create_held_conversation(&title, ctx.is_admin())
                    .await?)
            }
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
        // Every later turn of the conversation sends it to the model again: one message
        // must not make the conversation unusable (`/mcp`'s `send_message` has the same
        // bound in its schema).
        let length = content.chars().count();
        if length > MAX_MESSAGE_CHARS {
            return Err(AgentError::MessageTooLong {
                length,
                max: MAX_MESSAGE_CHARS,
            });
        }
        // Held from before the turn first reads or writes it until the turn ends, so
        // conversation retention never deletes it under the turn.
        let (conversation, _held) = self
            .open_conversation(conversation_id, content, ctx)
            .await?;
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
        if ctx.is_admin() && !is_admin_conversation(&conversation.id) {
            // A conversation started on the page is the page's to read: an admin who
            // continues it (`/mcp` `send_message` with its id) gets a chat user's
            // rights there, so no admin tool's result or admin memory is stored where
            // chat users read.
            ctx.roles = vec![USER_ROLE.to_string()];
        }
        ctx.trace = span.scope();
        let system = system_prompt(&ctx);
        let settings = LoopSettings {
            llm: self.llm.as_ref(),
            runner: &self.runner,
            ctx: &ctx,
            system: &system,
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
pub(super) struct InProgress<'a> {
    supervisor: &'a Supervisor,
    conversation_id: String,
}

impl<'a> InProgress<'a> {
    fn new(supervisor: &'a Supervisor, conversation_id: &str) -> Self {
        lock(&supervisor.in_progress).insert(conversation_id.to_string(), now_rfc3339());
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
        let mut map = lock(&self.supervisor.in_progress);
        map.remove(&self.conversation_id);
        if map.is_empty() {
            self.supervisor
                .registry
                .set_status(&self.supervisor.id, "idle", None);
        }
    }
}
