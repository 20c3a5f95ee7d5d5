//! The agent system: `list_agents` (the registry) and `get_agent_state` (the
//! supervisor's snapshot).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Diagnostics, done, object_schema, output_schema};
use crate::mcp::{Annotations, CallToolResult, Outcome, RequestContext, RpcError, Tool, ToolSpec};

pub fn tools(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ListAgents(d.clone())),
        Arc::new(GetAgentState(d.clone())),
    ]
}

struct ListAgents(Arc<Diagnostics>);

#[async_trait]
impl Tool for ListAgents {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_agents".into(),
            title: Some("List agents".into()),
            description: "The agents that exist right now: the supervisor and any worker agents it delegated to, \
                          with id, name, emoji, role, parent, status and current task, and which replica answered."
                .into(),
            input_schema: object_schema(json!({}), &[]),
            output_schema: Some(output_schema(
                json!({"agents": {"type": "array", "items": {"type": "object"}}, "count": {"type": "integer"},
                       "replica": {"type": "object", "description": "the replica that answered: id and hostname"}}),
                &["agents", "count"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        _args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let agents = self.0.bot.agents.list();
        Ok(done(
            json!({"count": agents.len(), "agents": agents, "replica": self.0.bot.replica()}),
        ))
    }
}

struct GetAgentState(Arc<Diagnostics>);

#[async_trait]
impl Tool for GetAgentState {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "get_agent_state".into(),
            title: Some("Supervisor state".into()),
            description: "A snapshot of the supervisor agent: idle or processing, which conversations it is working on \
                          (and since when), its active workers, its LLM, and how many messages it has handled."
                .into(),
            input_schema: object_schema(json!({}), &[]),
            output_schema: Some(output_schema(
                json!({
                    "id": {"type": "string"},
                    "status": {"type": "string", "enum": ["idle", "processing"]},
                    "processing": {"type": "array"},
                    "active_workers": {"type": "array"}
                }),
                &["id", "status", "processing", "active_workers"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        _args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let state = self.0.bot.supervisor.state();
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
