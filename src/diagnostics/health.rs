//! `health`: the bot's vital signs in one call.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::agents::{Llm, Replica};
use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done};
use crate::bot::store::{TracesFile, WriterWaits};
use crate::bot::trace::TraceCounters;
use crate::mcp::{Annotations, RequestContext, ToolSpec};

pub(super) struct Health;

impl DiagnosticTool for Health {
    type Args = NoArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "health",
            "Bot health",
            "The bot's vital signs: uptime, memory (resident, and the heap's committed bytes), WebSocket clients, LLM provider and model, \
             active agents and what the supervisor is doing, live MCP sessions, log buffer fill, database size and how often writers queued for it (the bot's file and the traces' own), and turn tracing \
             (spans recorded, dropped because the writer fell behind, dropped by the OpenTelemetry exporter).",
        )
        .output_of::<Vitals>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        let bot = &d.bot;
        let state = bot.supervisor.state();
        let logs = &d.logs;
        let server = d.server.get();
        let vitals = Vitals {
            uptime_secs: bot.started.elapsed().as_secs(),
            memory_rss_bytes: crate::bot::resident_memory_bytes(),
            memory_heap_bytes: crate::bot::heap_committed_bytes(),
            websocket_clients: bot.web.connected_clients(),
            llm: Llm {
                provider: bot.llm.provider().to_string(),
                model: bot.llm.model().to_string(),
            },
            agents: AgentCounts {
                active: bot.agents.list().len(),
                supervisor_status: state.status,
                conversations_in_progress: state.processing.len(),
                workers: state.active_workers.len(),
                messages_handled: state.messages_handled,
            },
            mcp: McpCounts {
                live_sessions: server.map(|s| s.live_sessions()).unwrap_or(0),
                tools: server.map(|s| s.tool_count()).unwrap_or(0),
            },
            log_buffer: LogBufferFill {
                lines: logs.len(),
                capacity: logs.capacity(),
                fill_percent: (logs.len() as f64 * 100.0 / logs.capacity() as f64).round(),
            },
            replica: Replica {
                hostname: crate::config::hostname(),
                id: &bot.config.replica_id,
            },
            database: DatabaseHealth {
                backend: bot.store.backend_name(),
                path: bot.store.path(),
                size_bytes: bot.store.file_size(),
                writer_waits: bot.store.writer_waits(),
                traces_file: bot.store.traces_file(),
            },
            bot_tools: bot.tools.len(),
            traces: TraceHealth {
                enabled: bot.config.trace.enabled,
                exporting: bot.tracer.is_exporting(),
                counters: bot.tracer.counters(),
            },
        };
        Ok(done(json!(vitals)))
    }
}

/// `health`'s answer.
#[derive(Serialize, JsonSchema)]
struct Vitals<'a> {
    uptime_secs: u64,
    /// Resident memory (Linux; null elsewhere).
    memory_rss_bytes: Option<u64>,
    /// The heap's committed bytes (null unless mimalloc is the allocator).
    memory_heap_bytes: Option<u64>,
    websocket_clients: usize,
    llm: Llm,
    agents: AgentCounts,
    mcp: McpCounts,
    log_buffer: LogBufferFill,
    /// The replica that answered.
    replica: Replica<'a>,
    database: DatabaseHealth<'a>,
    /// Tools the bot's agents can use.
    bot_tools: usize,
    traces: TraceHealth,
}

#[derive(Serialize, JsonSchema)]
struct AgentCounts {
    active: usize,
    supervisor_status: &'static str,
    conversations_in_progress: usize,
    workers: usize,
    messages_handled: u64,
}

/// The `/mcp` endpoint.
#[derive(Serialize, JsonSchema)]
struct McpCounts {
    live_sessions: usize,
    tools: usize,
}

#[derive(Serialize, JsonSchema)]
struct LogBufferFill {
    lines: usize,
    capacity: usize,
    fill_percent: f64,
}

#[derive(Serialize, JsonSchema)]
struct DatabaseHealth<'a> {
    /// `sqlite` or `postgres`.
    backend: &'static str,
    path: &'a str,
    /// The SQLite file's size (null for PostgreSQL or in memory).
    size_bytes: Option<u64>,
    /// How often writers queued for the SQLite writer connection (null for PostgreSQL).
    writer_waits: Option<WriterWaits>,
    /// The SQLite file traces are kept in (null for PostgreSQL).
    traces_file: Option<TracesFile>,
}

/// Turn tracing.
#[derive(Serialize, JsonSchema)]
struct TraceHealth {
    enabled: bool,
    /// Spans go to an OpenTelemetry collector.
    exporting: bool,
    counters: TraceCounters,
}
