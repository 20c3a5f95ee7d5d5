//! Shared by the benches: a realistic full log buffer and a bot started in-process.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use porthole::logs::buffer::LogBuffer;
use tracing_subscriber::layer::SubscriberExt;

pub const CAPACITY: usize = 10_000;

/// Fills a buffer to capacity with a deterministic mix of lines.
pub fn full_buffer() -> Arc<LogBuffer> {
    let buffer = LogBuffer::new(CAPACITY);
    let subscriber = tracing_subscriber::registry().with(buffer.layer().skipping("web_console"));
    tracing::subscriber::with_default(subscriber, || {
        for n in 0..CAPACITY as u64 {
            match n % 10 {
                0..=2 => {
                    tracing::info!(target: "porthole::bot::agents", conversation = n % 37, step = n % 8,
                    "supervisor finished a step and sent the reply to the user")
                }
                3..=4 => {
                    tracing::info!(target: "porthole::bot::llm", model = "gpt-4o-mini", tokens = 412 + n % 300,
                    latency_ms = 830 + n % 500, "chat completion")
                }
                5 => {
                    tracing::info!(target: "porthole::mcp::audit", tool = "list_agents", era = "2026-07-28",
                    session = "-", duration_ms = "0.1", outcome = "ok", "tools/call")
                }
                6 => tracing::debug!(target: "porthole::bot::web", path = "/api/info", "request"),
                7 => {
                    tracing::info!(target: "porthole::bot::schedule", task = "nightly-digest", "scheduler checked due tasks")
                }
                8 => tracing::warn!(target: "porthole::bot::mcp_client", server = "filesystem",
                    "MCP server answered slowly; retrying the tools/list request once"),
                _ => {
                    if n % 500 == 9 {
                        tracing::error!(target: "porthole::bot::llm", "LLM request failed: connection reset by peer")
                    } else {
                        tracing::info!(target: "porthole::bot", "websocket client connected")
                    }
                }
            }
        }
    });
    assert_eq!(buffer.len(), CAPACITY);
    buffer
}

/// The bearer token of bots started by [`start_bot`].
pub const TOKEN: &str = "bench-secret-0123456789abcdef0123456789abcdef";

/// Starts the real bot on 127.0.0.1:0 with an in-memory store, like the tests do.
pub async fn start_bot(
    mcp_enabled: bool,
    log_buffer: Option<Arc<LogBuffer>>,
) -> porthole::app::RunningApp {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let mut vars: HashMap<String, String> = [
        ("HOST", "127.0.0.1"),
        ("PORT", "0"),
        ("DATABASE_PATH", ":memory:"),
        (
            "MCP_SERVER_ENABLED",
            if mcp_enabled { "true" } else { "false" },
        ),
        ("MCP_SERVER_SECRET", TOKEN),
        ("SCHEDULER_ENABLED", "false"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for folder in ["WORKSPACE_DIR", "USER_TOOLS_DIR", "SKILLS_DIR"] {
        vars.insert(
            folder.into(),
            dir.join(folder.to_lowercase()).display().to_string(),
        );
    }
    vars.insert(
        "MCP_SERVERS_CONFIG".into(),
        dir.join("mcp.json").display().to_string(),
    );
    let config = porthole::config::Config::from_map(&vars).expect("bench config is valid");
    porthole::app::start(
        config,
        porthole::app::Logging {
            buffer: log_buffer,
            ..Default::default()
        },
    )
    .await
    .expect("bot starts")
}
