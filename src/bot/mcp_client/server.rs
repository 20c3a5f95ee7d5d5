//! One configured MCP server as the host keeps it: its configuration, its status for
//! admins, its live connection (if any), the tools registered for it and their stats,
//! and the switch of the task that supervises it. What the entry does lives beside it:
//! `supervise.rs` keeps it connected, `registration.rs` keeps its tools registered,
//! `tool.rs` calls them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use tokio::sync::watch;

use super::McpServerStatus;
use super::config::ServerConfig;
use super::connection::Conn;
use super::stats::StatsBook;
use crate::bot::lock;
use crate::bot::tools::ToolRunner;

/// What was registered for one tool; a re-list re-registers only what changed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RegisteredTool {
    pub(super) description: String,
    pub(super) schema: serde_json::Value,
}

/// How long stopping a server may take before its task is aborted.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// A running supervisor task (`supervise.rs`) and the switch that stops it.
pub(super) struct Running {
    pub(super) stop: watch::Sender<bool>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl Running {
    pub(super) async fn stop(self) {
        let _ = self.stop.send(true);
        let mut task = self.task;
        if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
            task.abort();
            let _ = task.await;
        }
    }
}

pub(super) struct Status {
    pub(super) enabled: bool,
    pub(super) state: &'static str,
    /// Whether a supervisor is working on the connection.
    pub(super) running: bool,
    pub(super) protocol_version: Option<String>,
    pub(super) last_error: Option<String>,
    /// When `last_error` began: a retry that fails the same way before the server was
    /// connected again keeps the time the outage started, so a server that stays down
    /// does not look like the newest failure at every retry (`last_error`).
    pub(super) last_error_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Whether the server has been connected, or switched off, since `last_error`.
    pub(super) outage_over: bool,
}

pub(super) struct ServerEntry {
    pub(super) config: ServerConfig,
    pub(super) runner: Arc<ToolRunner>,
    pub(super) status: Mutex<Status>,
    pub(super) conn: RwLock<Option<Arc<Conn>>>,
    /// By the server's own tool names.
    pub(super) registered: Mutex<BTreeMap<String, RegisteredTool>>,
    pub(super) stats: Mutex<StatsBook>,
    pub(super) control: tokio::sync::Mutex<Option<Running>>,
}

impl ServerEntry {
    pub(super) fn new(config: ServerConfig, runner: Arc<ToolRunner>) -> Arc<ServerEntry> {
        let enabled = config.enabled;
        Arc::new(ServerEntry {
            config,
            runner,
            status: Mutex::new(Status {
                enabled,
                state: if enabled { "connecting" } else { "disabled" },
                running: false,
                protocol_version: None,
                last_error: None,
                last_error_at: None,
                outage_over: false,
            }),
            conn: RwLock::new(None),
            registered: Mutex::new(BTreeMap::new()),
            stats: Mutex::new(StatsBook::default()),
            control: tokio::sync::Mutex::new(None),
        })
    }

    pub(super) fn name(&self) -> &str {
        &self.config.name
    }

    pub(super) fn status_mut(&self) -> MutexGuard<'_, Status> {
        lock(&self.status)
    }

    pub(super) fn set_state(&self, state: &'static str, error: Option<String>) {
        let mut status = self.status_mut();
        status.state = state;
        if state == "disabled" {
            status.outage_over = true;
        }
        if let Some(error) = error {
            let same_outage = !status.outage_over && status.last_error.as_ref() == Some(&error);
            if !same_outage {
                status.last_error_at = Some(chrono::Utc::now());
            }
            status.last_error = Some(error);
            status.outage_over = false;
        }
    }

    /// Marks the server connected with the protocol version it agreed to.
    pub(super) fn set_connected(&self, protocol_version: String) {
        let mut status = self.status_mut();
        status.state = "connected";
        status.protocol_version = Some(protocol_version);
        status.outage_over = true;
    }

    pub(super) fn status(&self) -> McpServerStatus {
        let registered = lock(&self.registered);
        let stats = lock(&self.stats);
        let status = self.status_mut();
        McpServerStatus {
            id: self.config.name.clone(),
            name: self.config.name.clone(),
            transport: self.config.transport.kind(),
            enabled: status.enabled,
            state: status.state,
            protocol_version: status.protocol_version.clone(),
            tool_count: registered.len(),
            last_error: status.last_error.clone(),
            last_error_at: status.last_error_at.map(|t| t.to_rfc3339()),
            stats: stats.server.snapshot(),
            tools: stats.tool_entries(registered.keys()),
        }
    }

    pub(super) fn prefix(&self) -> String {
        crate::bot::tools::mcp_tool_prefix(&self.config.name)
    }

    pub(super) fn current_conn(&self) -> Option<Arc<Conn>> {
        self.conn.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn set_conn(&self, conn: Option<Arc<Conn>>) -> Option<Arc<Conn>> {
        std::mem::replace(
            &mut *self.conn.write().unwrap_or_else(|p| p.into_inner()),
            conn,
        )
    }

    pub(super) fn take_conn(&self) -> Option<Arc<Conn>> {
        self.set_conn(None)
    }

    pub(super) fn unregister_all(&self) {
        lock(&self.registered).clear();
        self.runner.unregister_prefix(&self.prefix());
    }

    /// The message for a call that cannot reach the server.
    pub(super) fn unavailable(&self) -> String {
        let status = self.status_mut();
        let name = self.name();
        let reason = status
            .last_error
            .as_ref()
            .map(|e| format!(" (last error: {e})"))
            .unwrap_or_default();
        if !status.enabled {
            format!("MCP server `{name}` is disabled")
        } else if status.running {
            let what = match status.state {
                "failed" => "could not be connected",
                "connecting" => "is still connecting",
                _ => "is disconnected",
            };
            format!("MCP server `{name}` {what}; reconnecting{reason}")
        } else {
            format!("MCP server `{name}` is not running{reason}")
        }
    }
}
