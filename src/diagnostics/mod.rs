//! The diagnostics MCP tools: thin adapters from the `mcp` seams onto the bot's
//! services, one file per category — `logs`, `data`, `tools`, `agents`, `config`,
//! `interaction`, and the turn traces (`traces`, `llm_calls`) — plus `resources` and
//! `prompts`.
//!
//! Each tool parses its (already schema-validated) arguments, calls a bot service
//! directly (never `/api`), and shapes a structured result with a text rendering.
//! Results are redacted by the `mcp` layer before they leave.

/// Parses a tool's arguments or returns the tool error from the enclosing `call`.
macro_rules! args_or_error {
    ($name:expr, $args:expr) => {
        match $crate::diagnostics::parse_args($name, $args) {
            Ok(a) => a,
            Err(e) => return Ok($crate::mcp::Outcome::Complete(e)),
        }
    };
}

mod agents;
mod bridges;
mod config;
mod data;
mod interaction;
mod llm_calls;
mod logs;
mod prompts;
mod resources;
mod session_ledger;
mod task_store;
mod tools;
mod trace_prompts;
mod trace_view;
mod traces;

pub use bridges::{BufferedWebLogSink, forward_tool_changes, spawn_journal_writer};
pub use session_ledger::StoredSessionLedger;
pub use task_store::StoredTasks;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::bot::Bot;
use crate::bot::trace::TraceScope;
use crate::logs::buffer::LogBuffer;
use crate::logs::file::LogFile;
use crate::logs::journal::LogJournal;
use crate::mcp::{
    CallToolResult, McpServer, Outcome, Prompt, RequestContext, ResourceProvider, Tool,
};

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

/// Every diagnostics tool.
pub fn tools(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Tool>> {
    let mut all: Vec<Arc<dyn Tool>> = Vec::new();
    all.extend(logs::tools(d));
    all.extend(data::tools(d));
    all.extend(tools::tools(d));
    all.extend(agents::tools(d));
    all.extend(config::tools(d));
    all.extend(interaction::tools(d));
    all.extend(traces::tools(d));
    all.extend(llm_calls::tools(d));
    all
}

pub fn resources(d: &Arc<Diagnostics>) -> Arc<dyn ResourceProvider> {
    Arc::new(resources::BotResources(d.clone()))
}

pub fn prompts(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Prompt>> {
    prompts::prompts(d)
}

/// Deserialises validated arguments; a mismatch (which the schema should have caught)
/// becomes a tool error.
fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, CallToolResult> {
    serde_json::from_value(args)
        .map_err(|e| CallToolResult::error(format!("Invalid arguments for {tool}: {e}")))
}

/// A finished structured result.
fn done(value: Value) -> Outcome<CallToolResult> {
    Outcome::Complete(CallToolResult::structured(value))
}

/// A finished tool error.
fn failed(message: impl Into<String>) -> Outcome<CallToolResult> {
    Outcome::Complete(CallToolResult::error(message))
}

/// `{"type":"object","additionalProperties":false,"properties":…}` with `required`.
fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The conversation id property of every tool that takes one (`send_message`,
/// `list_messages`): one spelling rule for all of them. The property is
/// `conversation_id`; the seed's `conversationId` is accepted as the same property (the
/// tool set renames it before validation, see `x-aliases` in `mcp::tool`).
fn conversation_id_property(description: &str) -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "description": description,
        "x-aliases": ["conversationId"],
    })
}

/// An output schema: an object with these properties (others allowed).
fn output_schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// The trace scope of work an MCP request starts: a new trace (the child of the
/// caller's, when it sent a `traceparent`), its root marked with the MCP semantic
/// conventions of the request. The session id is left out: it is a credential.
fn mcp_trace(d: &Diagnostics, tool: &str, ctx: &RequestContext) -> TraceScope {
    d.bot
        .tracer
        .root(tool, ctx.trace_parent())
        .with_root_attribute("mcp.method.name", "tools/call")
        .with_root_attribute("mcp.protocol.version", ctx.era.version())
        .with_root_attribute("jsonrpc.request.id", ctx.request_id.to_string())
}
