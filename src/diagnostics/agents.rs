//! The agent system: `list_agents` (the registry) and `get_agent_state` (the
//! supervisor's snapshot).

use serde_json::{Map, Value, json};

use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done};
use crate::mcp::{Annotations, RequestContext, ToolSpec};

pub(super) struct ListAgents;

impl DiagnosticTool for ListAgents {
    type Args = NoArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_agents",
            "List agents",
            "The agents that exist right now: the supervisor and any worker agents it delegated to, \
             with id, name, emoji, role, parent, status and current task, and which replica answered.",
        )
        .output(
            json!({"agents": {"type": "array", "items": {"type": "object"}}, "count": {"type": "integer"},
                   "replica": {"type": "object", "description": "the replica that answered: id and hostname"}}),
            &["agents", "count"],
        )
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        let agents = d.bot.agents.to_json();
        let count = agents.as_array().map_or(0, Vec::len);
        // Built by moving the parts in: `json!` would serialise `agents` into a copy.
        let mut answer = Map::new();
        answer.insert("count".into(), count.into());
        answer.insert("agents".into(), agents);
        answer.insert("replica".into(), d.bot.replica());
        Ok(done(Value::Object(answer)))
    }
}

pub(super) struct GetAgentState;

impl DiagnosticTool for GetAgentState {
    type Args = NoArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "get_agent_state",
            "Supervisor state",
            "A snapshot of the supervisor agent: idle or processing, which conversations it is working on \
             (and since when), its active workers, its LLM, and how many messages it has handled.",
        )
        .output(
            json!({
                "id": {"type": "string"},
                "status": {"type": "string", "enum": ["idle", "processing"]},
                "processing": {"type": "array"},
                "active_workers": {"type": "array"}
            }),
            &["id", "status", "processing", "active_workers"],
        )
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        let state = d.bot.supervisor.state();
        let processing: Vec<Value> = state
            .processing
            .iter()
            .map(|(conversation, since)| json!({"conversation_id": conversation, "since": since}))
            .collect();
        Ok(done(json!({
            "id": state.id,
            "status": state.status,
            "processing": processing,
            "active_workers": state.active_workers,
            "llm": {"provider": state.llm.0, "model": state.llm.1},
            "messages_handled": state.messages_handled,
        })))
    }
}
