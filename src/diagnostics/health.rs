//! `health`: the bot's vital signs in one call.

use serde_json::json;

use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done};
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
        .output(
            json!({
                "uptime_secs": {"type": "integer"},
                "memory_rss_bytes": {"type": ["integer", "null"]},
                "memory_heap_bytes": {"type": ["integer", "null"]},
                "websocket_clients": {"type": "integer"},
                "llm": {"type": "object"},
                "agents": {"type": "object"},
                "mcp": {"type": "object"},
                "log_buffer": {"type": "object"},
                "database": {"type": "object"}
            }),
            &["uptime_secs", "websocket_clients", "llm", "agents", "mcp", "log_buffer", "database"],
        )
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        let bot = &d.bot;
        let state = bot.supervisor.state();
        let agents = bot.agents.list();
        let logs = &d.logs;
        let server = d.server.get();
        Ok(done(json!({
            "uptime_secs": bot.started.elapsed().as_secs(),
            "memory_rss_bytes": crate::bot::resident_memory_bytes(),
            "memory_heap_bytes": crate::bot::heap_committed_bytes(),
            "websocket_clients": bot.web.connected_clients(),
            "llm": {"provider": bot.llm.provider(), "model": bot.llm.model()},
            "agents": {
                "active": agents.len(),
                "supervisor_status": state.status,
                "conversations_in_progress": state.processing.len(),
                "workers": state.active_workers.len(),
                "messages_handled": state.messages_handled,
            },
            "mcp": {
                "live_sessions": server.map(|s| s.live_sessions()).unwrap_or(0),
                "tools": server.map(|s| s.tool_count()).unwrap_or(0),
            },
            "log_buffer": {
                "lines": logs.len(),
                "capacity": logs.capacity(),
                "fill_percent": (logs.len() as f64 * 100.0 / logs.capacity() as f64).round(),
            },
            "replica": bot.replica(),
            "database": {
                "backend": bot.store.backend_name(),
                "path": bot.store.path(),
                "size_bytes": bot.store.file_size(),
                "writer_waits": bot.store.writer_waits(),
                "traces_file": bot.store.traces_file(),
            },
            "bot_tools": bot.tools.len(),
            "traces": {
                "enabled": bot.config.trace.enabled,
                "exporting": bot.tracer.is_exporting(),
                "counters": bot.tracer.counters(),
            },
        })))
    }
}
