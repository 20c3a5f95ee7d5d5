//! The diagnostics MCP tools: thin adapters from the `mcp` seams onto the bot's
//! services, one file per area as users name it:
//!
//! - `logs`: `server_log`, `web_log`, `set_log_level`; `log_readers`: the log file and
//!   database readers `server_log` merges with the ring buffer;
//! - `health`: `health`;
//! - `data`: `db_query`, `list_conversations`, `list_messages`;
//! - `tools`: `list_tools`, `get_tool_schema`, `run_tool`, `toggle_tool`;
//! - `agents`: `list_agents`, `get_agent_state`;
//! - `mcp_servers`: `list_mcp_servers`, `toggle_mcp_server`;
//! - `tasks`: `list_tasks`, `run_task`;
//! - `skills`: `list_skills`;
//! - `config`: `get_config`;
//! - `interaction`: `send_message`;
//! - `traces`: `list_traces`, `get_trace`, `last_error`; `llm_calls`: `get_llm_calls`,
//!   `get_llm_call`, `get_trace_stats`; `trace_view`: the shapes both show traces in;
//!   `replay`: `replay_llm_call`, `replay_llm_calls` (what if); `replay_turn`: `replay_turn`;
//!   `replay_sets`: `save_replay_set`, `list_replay_sets`, `delete_replay_set`;
//! - `resources` and `prompts` (with `trace_prompts`): the MCP resources and prompts;
//! - `session_ledger` and `mcp_task_store`: the endpoint's sessions and tasks kept in
//!   the bot's store; `bridges`: the bot's events carried to `/mcp` (browser console
//!   lines, the log journal, tool-list changes); `replicas`: what crosses between
//!   replicas sharing PostgreSQL, both ways.
//!
//! Every tool is a [`typed_tool::DiagnosticTool`]: its arguments struct, its spec and
//! its work. It calls a bot service directly (never `/api`) and shapes a structured
//! result; the `mcp` layer validates arguments before and redacts results after.

mod agents;
mod bridges;
mod config;
mod data;
mod health;
mod interaction;
mod llm_calls;
mod log_readers;
mod logs;
mod mcp_servers;
mod mcp_task_store;
mod prompts;
mod replay;
mod replay_sets;
mod replay_turn;
mod replicas;
mod resources;
mod schedule;
mod session_ledger;
mod skills;
mod tools;
mod trace_prompts;
mod trace_shapes;
mod trace_view;
mod traces;
mod typed_tool;

pub use bridges::{
    BufferedWebLogSink, forward_conversation_changes, forward_tool_changes, spawn_journal_writer,
};
pub use mcp_task_store::StoredTasks;
pub use replicas::{ReplicaLink, link_replicas};
pub use session_ledger::StoredSessionLedger;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::bot::Bot;
use crate::bot::tools::{ADMIN_ROLE, ExecContext};
use crate::logs::buffer::LogBuffer;
use crate::logs::buffer::LogSource;
use crate::logs::file::LogFile;
use crate::logs::journal::LogJournal;
use crate::mcp::{
    CallToolResult, McpServer, Outcome, Prompt, RequestContext, ResourceProvider, Tool,
};
use typed_tool::adapt;

/// Settings the diagnostics read besides the bot's own.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `DB_QUERY_READONLY`: `db_query` runs only statements that read, on its own
    /// read-only connection.
    pub db_query_readonly: bool,
    /// How long `send_message` waits for the agent's reply.
    pub send_message_timeout: Duration,
    /// How long one `db_query` statement may run.
    pub statement_timeout: Duration,
}

/// Changes the process's log filter at runtime (the `tracing-subscriber` reload
/// handle, provided by the binary that installed the subscriber).
pub trait LogFilterControl: Send + Sync {
    /// The filter in force, in `RUST_LOG` syntax.
    fn current(&self) -> String;
    /// Replaces the filter; the error says what is wrong with `filter`.
    fn set(&self, filter: &str) -> Result<(), String>;
}

/// What every diagnostics tool can reach.
pub struct Diagnostics {
    pub bot: Arc<Bot>,
    pub logs: Arc<LogBuffer>,
    /// `None` when the process installed no reloadable filter (tests, embedding).
    pub log_filter: Option<Arc<dyn LogFilterControl>>,
    /// The log file `server_log` reads beyond the ring buffer (`LOG_FILE`).
    pub log_file: Option<Arc<LogFile>>,
    /// What feeds the store's log events (server_log's database reader).
    pub journal: Arc<LogJournal>,
    /// The server these tools are served by (set once it is built), for `health`.
    pub server: OnceLock<McpServer>,
    pub settings: Settings,
}

impl Diagnostics {
    pub fn new(
        bot: Arc<Bot>,
        logs: Arc<LogBuffer>,
        log_filter: Option<Arc<dyn LogFilterControl>>,
        log_file: Option<Arc<LogFile>>,
        journal: Arc<LogJournal>,
        settings: Settings,
    ) -> Arc<Self> {
        Arc::new(Diagnostics {
            bot,
            logs,
            log_filter,
            log_file,
            journal,
            server: OnceLock::new(),
            settings,
        })
    }
}

/// Every diagnostics tool, by the file that holds it.
pub fn tools(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Tool>> {
    vec![
        adapt(d, logs::ReadLog(LogSource::Server)),
        adapt(d, logs::ReadLog(LogSource::Web)),
        adapt(d, logs::SetLogLevel),
        adapt(d, health::Health),
        adapt(d, data::DbQuery),
        adapt(d, data::ListConversations),
        adapt(d, data::ListMessages),
        adapt(d, tools::ListTools),
        adapt(d, tools::GetToolSchema),
        adapt(d, tools::RunTool),
        adapt(d, tools::ToggleTool),
        adapt(d, agents::ListAgents),
        adapt(d, agents::GetAgentState),
        adapt(d, mcp_servers::ListMcpServers),
        adapt(d, mcp_servers::ToggleMcpServer),
        adapt(d, schedule::ListTasks),
        adapt(d, schedule::RunTask),
        adapt(d, skills::ListSkills),
        adapt(d, config::GetConfig),
        adapt(d, interaction::SendMessage),
        adapt(d, traces::ListTraces),
        adapt(d, traces::GetTrace),
        adapt(d, traces::LastError),
        adapt(d, llm_calls::GetLlmCalls),
        adapt(d, llm_calls::GetLlmCall),
        adapt(d, llm_calls::GetTraceStats),
        adapt(d, replay::ReplayLlmCall),
        adapt(d, replay::ReplayLlmCalls),
        adapt(d, replay_turn::ReplayTurn),
        adapt(d, replay_sets::SaveReplaySet),
        adapt(d, replay_sets::ListReplaySets),
        adapt(d, replay_sets::DeleteReplaySet),
    ]
}

pub fn resources(d: &Arc<Diagnostics>) -> Arc<dyn ResourceProvider> {
    Arc::new(resources::BotResources(d.clone()))
}

/// Records the `tools/call`s refused before a tool ran, as the tools record theirs.
pub fn refused_calls(d: &Arc<Diagnostics>) -> Arc<dyn crate::mcp::RefusedCalls> {
    Arc::new(typed_tool::RefusedCallSpans {
        tracer: d.bot.tracer.clone(),
        redactor: d.bot.redactor.clone(),
    })
}

pub fn prompts(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Prompt>> {
    prompts::prompts(d)
}

/// A finished structured result.
fn done(value: Value) -> Outcome<CallToolResult> {
    Outcome::Complete(CallToolResult::structured(value))
}

/// A finished tool error.
fn failed(message: impl Into<String>) -> Outcome<CallToolResult> {
    Outcome::Complete(CallToolResult::error(message))
}

/// How a tool runs bot work for an MCP request: as an admin, under a correlation id
/// marked `mcp-`, in a new trace (the child of the caller's, when it sent a
/// `traceparent`) whose root carries the MCP semantic conventions of the request. The
/// session id is left out of the trace: it is a credential.
fn mcp_exec(d: &Diagnostics, tool: &'static str, ctx: &RequestContext) -> ExecContext {
    let mut exec = ExecContext::new(&[ADMIN_ROLE]);
    exec.correlation_id = format!("mcp-{}", exec.correlation_id);
    exec.trace = d
        .bot
        .tracer
        .root(tool, ctx.trace_parent())
        .with_mcp_request(typed_tool::mcp_request(ctx));
    exec
}
