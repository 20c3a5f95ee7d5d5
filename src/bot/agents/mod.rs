//! Agents: the supervisor that answers user messages, the worker agents it delegates
//! to, and the registry listing who is active.
//!
//! Both run the same loop ([`run_tool_loop`]): ask the model, run the tools it asks for,
//! feed the results back, until it answers in plain text or the step budget runs out.
//! The supervisor persists every message of the loop; workers keep theirs in memory and
//! hand back only the answer. Dropping a running [`Supervisor::send`] future (a client
//! disconnected, a timeout fired) stops the work at its next await point; the history
//! reader tolerates the half-finished turn this can leave behind.
//!
//! Files: this one holds the registry, the events and the errors; `tool_loop.rs` the
//! loop, `supervisor.rs` and `workers.rs` the two kinds of agent.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::bot::llm::{ChatMessage, ChatRequest, LlmError, LlmProvider};
use crate::bot::store::{Store, StoreError, now_rfc3339};
use crate::bot::tools::{ExecContext, ToolRunner};
use crate::bot::trace::traced_chat;
use crate::model::{Message, NewMessage, Role, SpanKind};

mod supervisor;
mod tool_loop;
mod workers;

pub use supervisor::{MAX_MESSAGE_CHARS, Reply, Supervisor, SupervisorState};
pub use tool_loop::history_to_context;
use tool_loop::*;
pub use workers::Workers;

/// One entry of the agent registry. The fields are in the order of their names:
/// `list_agents` serialises entries straight into its answer, and they must come out
/// as a `Value` (whose members are sorted) would write them.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
#[schemars(description = "An agent: the supervisor or a worker it delegated to.")]
pub struct AgentInfo {
    pub emoji: String,
    pub id: String,
    pub name: String,
    pub parent: Option<String>,
    pub role: String,
    pub started_at: String,
    pub status: String,
    pub task: Option<String>,
    /// The task came from a turn with admin rights: not for chat users' eyes.
    #[serde(skip)]
    pub admin_task: bool,
}

impl AgentInfo {
    /// The agent as a chat user may see it: an admin turn's task is left out.
    pub fn for_chat_users(mut self) -> AgentInfo {
        // The supervisor's task is the conversation it works in: an admin one is named
        // to admins only, as `processing` is.
        let admin_conversation = self
            .task
            .as_deref()
            .is_some_and(crate::bot::store::is_admin_conversation);
        if self.admin_task || admin_conversation {
            self.task = None;
        }
        self
    }
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

    /// The agents by id, read under the lock, so a caller can serialise them without
    /// cloning (`list_agents` answers this on every call).
    pub fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, AgentInfo>> {
        self.agents.read().unwrap_or_else(|p| p.into_inner())
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
    #[error(
        "conversation {0} does not exist (it never did, or the retention limits \
         CONVERSATION_MAX_COUNT/CONVERSATION_MAX_AGE_SECS removed it)"
    )]
    UnknownConversation(String),
    #[error("the message is empty; send some text")]
    EmptyMessage,
    #[error(
        "the message is {length} characters long; send at most {max} (split it, or put a long text in a file of the workspace)"
    )]
    MessageTooLong { length: usize, max: usize },
    #[error(transparent)]
    Store(#[from] StoreError),
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
        admin_task: false,
        started_at: now_rfc3339(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCall;

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

    #[test]
    fn chat_users_see_no_admin_turns_task() {
        let mut worker = new_agent("w", "🛠", "worker", None);
        worker.task = Some("summarise the private table".into());
        assert_eq!(worker.clone().for_chat_users().task, worker.task);
        worker.admin_task = true;
        assert_eq!(worker.for_chat_users().task, None);
        let mut supervisor = new_agent("s", "🧭", "supervisor", None);
        supervisor.task = Some(format!(
            "{}abc",
            crate::bot::store::ADMIN_CONVERSATION_PREFIX
        ));
        assert_eq!(
            supervisor.for_chat_users().task,
            None,
            "an admin conversation"
        );
    }
}
