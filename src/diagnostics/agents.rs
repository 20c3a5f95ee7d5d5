//! The agent system: `list_agents` (the registry) and `get_agent_state` (the
//! supervisor's snapshot).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done};
use crate::bot::agents::AgentInfo;
use crate::mcp::{Annotations, CallToolResult, Outcome, RequestContext, ToolSpec};

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
        .output_of::<Listing>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        let agents = d.bot.agents.read();
        let listing = Listing {
            agents: Agents(&agents),
            count: agents.len(),
            replica: Replica {
                hostname: crate::config::hostname(),
                id: &d.bot.config.replica_id,
            },
        };
        Ok(Outcome::Complete(CallToolResult::typed(&listing)))
    }
}

/// `list_agents`' answer, written as JSON straight from the registry (no `Value` tree):
/// members in the order of their names, as a `Value` would write them.
#[derive(Serialize, JsonSchema)]
struct Listing<'a> {
    #[schemars(with = "Vec<AgentInfo>")]
    agents: Agents<'a>,
    count: usize,
    /// The replica that answered.
    replica: Replica<'a>,
}

/// The agents in the order of their ids.
struct Agents<'a>(&'a BTreeMap<String, AgentInfo>);

impl Serialize for Agents<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.values())
    }
}

/// The replica that answered, as `Bot::replica` describes it.
#[derive(Serialize, JsonSchema)]
pub(super) struct Replica<'a> {
    pub(super) hostname: &'a str,
    pub(super) id: &'a str,
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
        .output_of::<AgentState>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        let state = d.bot.supervisor.state();
        let (provider, model) = state.llm;
        let answer = AgentState {
            id: state.id,
            status: state.status,
            processing: (state.processing.into_iter())
                .map(|(conversation_id, since)| Processing {
                    conversation_id,
                    since,
                })
                .collect(),
            active_workers: state.active_workers,
            llm: Llm { provider, model },
            messages_handled: state.messages_handled,
        };
        Ok(done(json!(answer)))
    }
}

/// `get_agent_state`'s answer.
#[derive(Serialize, JsonSchema)]
struct AgentState {
    id: String,
    /// `idle` or `processing`.
    status: &'static str,
    /// The conversations with a turn in progress.
    processing: Vec<Processing>,
    active_workers: Vec<AgentInfo>,
    llm: Llm,
    messages_handled: u64,
}

#[derive(Serialize, JsonSchema)]
struct Processing {
    conversation_id: String,
    /// When the turn started (RFC 3339).
    since: String,
}

/// The language model: provider and model name.
#[derive(Serialize, JsonSchema)]
pub(super) struct Llm {
    pub(super) provider: String,
    pub(super) model: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed answer must be the bytes a `Value` of it would write (members sorted),
    /// so adding a field out of order to `AgentInfo` or `Listing` fails here.
    #[test]
    fn the_listing_is_written_as_a_value_would_write_it() {
        let agent = AgentInfo {
            emoji: "🤖".into(),
            id: "supervisor".into(),
            name: "Supervisor".into(),
            parent: None,
            role: "supervisor".into(),
            started_at: "2026-11-26T00:00:00Z".into(),
            status: "idle".into(),
            task: Some("say \"hi\"".into()),
            admin_task: false,
        };
        let agents = BTreeMap::from([(agent.id.clone(), agent)]);
        let listing = Listing {
            agents: Agents(&agents),
            count: agents.len(),
            replica: Replica {
                hostname: "host",
                id: "replica-1",
            },
        };
        let direct = serde_json::to_string(&listing).unwrap();
        let through_value = serde_json::to_value(&listing).unwrap().to_string();
        assert_eq!(direct, through_value);
    }
}
