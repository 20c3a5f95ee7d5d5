//! Worker agents: run a delegated sub-task in memory and hand back only the answer.

use super::*;
use crate::bot::tools::native::Delegation;
use crate::bot::tools::provenance::{CHAT_USER, chat_user_text};

pub(super) const WORKER_PROMPT: &str =
    "You are a worker agent. Complete the task you are given and answer with the result only.";

/// Runs worker agents for delegated sub-tasks.
pub struct Workers {
    pub(super) llm: Arc<dyn LlmProvider>,
    pub(super) registry: Arc<AgentRegistry>,
    pub(super) max_steps: usize,
    pub(super) supervisor_id: String,
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
}

/// How many levels of workers a turn may start: the supervisor's worker (1) may hand a
/// part on once more (2); a worker there does its task itself. Each level multiplies
/// the model calls a turn can make by the step limit.
const MAX_DELEGATION_DEPTH: u8 = 2;

/// The `delegate` tool's seam: a worker is listed in the registry while it works and
/// removed when done (or when the call is dropped).
#[async_trait]
impl Delegation for Workers {
    async fn run(
        &self,
        name: &str,
        task: &str,
        runner: &ToolRunner,
        ctx: &ExecContext,
    ) -> Result<String, String> {
        if ctx.delegation_depth >= MAX_DELEGATION_DEPTH {
            return Err(format!(
                "a worker may not hand its task on more than {MAX_DELEGATION_DEPTH} levels deep; do this task yourself with the tools you have"
            ));
        }
        let mut info = new_agent(name, "🛠", "worker", Some(self.supervisor_id.clone()));
        info.task = Some(task.to_string());
        info.admin_task = ctx.is_admin();
        let mut span = ctx.trace.start(SpanKind::Agent, format!("agent {name}"));
        span.set_attribute("agent_id", info.id.as_str());
        span.set_attribute("task", task);
        let mut ctx = ctx.clone();
        ctx.trace = span.scope();
        ctx.delegation_depth += 1;
        let guard = RegistryEntry::new(&self.registry, info);
        let settings = LoopSettings {
            llm: self.llm.as_ref(),
            runner,
            ctx: &ctx,
            system: WORKER_PROMPT,
            // One step fewer than the supervisor; nesting ends at MAX_DELEGATION_DEPTH.
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

    fn agents(&self, ctx: &ExecContext) -> Value {
        let agents = self.registry.list();
        if !ctx.is_admin() {
            let shown: Vec<AgentInfo> = agents.into_iter().map(AgentInfo::for_chat_users).collect();
            return serde_json::to_value(shown).unwrap_or_default();
        }
        // An admin's turn: a worker's task that a chat user's turn gave it is that
        // user's text, shown marked as such (crate::bot::tools::provenance).
        let shown = agents.into_iter().map(|agent| {
            let from_chat_user = agent.parent.is_some() && !agent.admin_task;
            let mut value = serde_json::to_value(&agent).unwrap_or_default();
            if from_chat_user && let Some(task) = agent.task.as_deref() {
                value["task"] = chat_user_text(task);
                value["written_by"] = CHAT_USER.into();
            }
            value
        });
        Value::Array(shown.collect())
    }
}
