//! The bot as an MCP client host: it connects to the MCP servers named in the servers
//! config file and offers their tools through the [`ToolRunner`] as
//! `mcp.<server>__<tool>`.
//!
//! [`McpHost::load`] reads the file; [`McpHost::connect`] starts one supervising task
//! per enabled server (the saved runtime switches applied first), returning at once. Each task connects (stdio child process, Streamable
//! HTTP, or the older HTTP+SSE transport), lists the tools, registers them, re-lists
//! on `tools/list_changed`, and on a lost connection keeps the tools registered (calls
//! fail fast with a clear message) while it reconnects with exponential backoff. Calls
//! are routed to the live connection with the server's timeout and counted per server
//! and per tool.
//!
//! This module belongs to the `bot` layer and does not use the crate's `mcp` module
//! (the server side). It speaks the protocol through the ground floor's vocabulary and
//! message reader (`crate::protocol`, `crate::jsonrpc`), the ones the endpoint serves
//! with; what only a client does (building requests, sorting what a server sends, the
//! header encodings) lives in `jsonrpc.rs`.
//!
//! The files, from the top down:
//! - `mod.rs`: [`McpHost`], the servers as a whole (start, enable, status, shutdown).
//! - `config.rs`: the servers config file, parsed and checked.
//! - `server.rs`: one configured server: its status, live connection and stats.
//! - `supervise.rs`: the task that keeps a server connected, reconnecting with backoff.
//! - `registration.rs`: which listed tools are offered, and keeping the runner in step.
//! - `tool.rs`: the runner's handler for one MCP tool: the call, its result, its stats.
//! - `connection.rs`: one live connection, whatever its transport.
//! - `stdio.rs`, `http.rs`, `http_sse.rs`: the transports; `http_endpoint.rs`: one
//!   Streamable HTTP POST and its answer; `http_client.rs`: what both HTTP ones share.
//! - `stream_requests.rs`, `pending.rs`: requests answered on a stream of their own
//!   (stdio, HTTP+SSE), and the legacy handshake over them; `handshake.rs`: the
//!   pieces of `initialize` every legacy transport shares.
//! - `events.rs`: what a connection reports to its supervisor; `jsonrpc.rs`: messages.
//! - `stats.rs`: usage figures per server and per tool.

mod config;
#[doc(hidden)]
pub use config::fuzz_parse as fuzz_parse_config;
mod connection;
mod events;
mod handshake;
mod http;
mod http_client;
mod http_endpoint;
mod http_sse;
mod jsonrpc;
mod pending;
mod registration;
mod server;
mod stats;
mod stdio;
mod stream_requests;
mod supervise;
#[cfg(test)]
mod tests;
mod tool;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use super::tools::ToolRunner;
use server::ServerEntry;
pub use stats::{ServerStats, ToolStatsEntry};

/// One configured server as reported to admins and the status tool.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(description = "One of the MCP servers the bot connects to, its state and call stats.")]
pub struct McpServerStatus {
    /// The server's key in the config file, as the design documents call it; the same
    /// as `name`, which is what the bot calls it everywhere else.
    pub id: String,
    pub name: String,
    /// `"stdio"`, `"http"` or `"sse"`.
    pub transport: &'static str,
    pub enabled: bool,
    /// `"connecting"`, `"connected"`, `"disconnected"`, `"disabled"` or `"failed"`.
    pub state: &'static str,
    pub protocol_version: Option<String>,
    pub tool_count: usize,
    pub last_error: Option<String>,
    /// When `last_error` began (RFC 3339; a server that stays down keeps the time its
    /// outage started).
    pub last_error_at: Option<String>,
    pub stats: ServerStats,
    pub tools: Vec<ToolStatsEntry>,
}

/// The MCP servers the bot is a client of.
pub struct McpHost {
    servers: BTreeMap<String, Arc<ServerEntry>>,
    shut_down: AtomicBool,
}

impl McpHost {
    /// Reads the config file (an absent file means no servers) without connecting to
    /// any server: [`McpHost::connect`] does, once the saved settings are known, so a
    /// server switched off at runtime is never started again only to be stopped.
    pub fn load(
        config_path: &Path,
        runner: Arc<ToolRunner>,
        default_timeout: Duration,
    ) -> Arc<McpHost> {
        let parsed = config::load(config_path, default_timeout);
        let servers: BTreeMap<String, Arc<ServerEntry>> = parsed
            .servers
            .into_iter()
            .map(|config| {
                (
                    config.name.clone(),
                    ServerEntry::new(config, runner.clone()),
                )
            })
            .collect();
        if !servers.is_empty() {
            tracing::info!(
                path = %config_path.display(),
                servers = servers.len(),
                enabled = servers.values().filter(|e| e.config.enabled).count(),
                "MCP servers configured"
            );
        }
        Arc::new(McpHost {
            servers,
            shut_down: AtomicBool::new(false),
        })
    }

    /// Starts one background connection task per enabled server and returns at once.
    /// `saved` (a server's name → enabled, as `toggle_mcp_server` saved it) wins over
    /// the file; a saved name the file no longer lists is left alone.
    pub fn connect(&self, saved: &HashMap<String, bool>) {
        let runtime = tokio::runtime::Handle::try_current();
        for (name, entry) in &self.servers {
            let enabled = saved.get(name).copied().unwrap_or(entry.config.enabled);
            if enabled != entry.config.enabled {
                tracing::info!(server = %name, enabled, "restored an MCP server toggled at runtime earlier");
            }
            if !enabled {
                entry.status_mut().enabled = false;
                entry.set_state("disabled", None);
                continue;
            }
            entry.status_mut().enabled = true;
            match &runtime {
                Ok(runtime) => {
                    entry.set_state("connecting", None);
                    let running = entry.spawn_supervisor(runtime);
                    if let Ok(mut control) = entry.control.try_lock() {
                        *control = Some(running);
                    }
                }
                Err(_) => {
                    tracing::error!(server = %name, "no async runtime: the MCP server is not connected");
                    entry.set_state(
                        "failed",
                        Some("no async runtime to run the connection".into()),
                    );
                }
            }
        }
    }

    /// The values of every configured header and environment variable: they often
    /// hold credentials, so the `/mcp` side redacts them wherever they appear.
    pub fn secret_values(&self) -> Vec<String> {
        self.servers
            .values()
            .flat_map(|e| match &e.config.transport {
                config::TransportConfig::Stdio(stdio) => {
                    stdio.env.values().cloned().collect::<Vec<_>>()
                }
                config::TransportConfig::Http { headers, .. }
                | config::TransportConfig::Sse { headers, .. } => headers
                    .values()
                    .flat_map(|v| {
                        // `Bearer abc…` → also the bare token.
                        let mut values = vec![v.clone()];
                        if let Some((_, token)) = v.split_once(' ') {
                            values.push(token.to_string());
                        }
                        values
                    })
                    .collect(),
            })
            .collect()
    }

    /// Every configured server, by name.
    pub fn servers(&self) -> Vec<McpServerStatus> {
        self.servers.values().map(|e| e.status()).collect()
    }

    /// Enables (connects) or disables (disconnects, unregistering its tools) a server.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<McpServerStatus, String> {
        let Some(entry) = self.servers.get(name) else {
            return Err(if self.servers.is_empty() {
                format!("unknown MCP server `{name}`: no MCP servers are configured")
            } else {
                let known: Vec<&str> = self.servers.keys().map(String::as_str).collect();
                format!(
                    "unknown MCP server `{name}`; the configured servers are: {}",
                    known.join(", ")
                )
            });
        };
        if self.shut_down.load(Ordering::SeqCst) {
            return Err("the MCP host has shut down".into());
        }
        let mut control = entry.control.lock().await;
        entry.status_mut().enabled = enabled;
        if enabled {
            if control.is_none() {
                entry.set_state("connecting", None);
                *control = Some(entry.spawn_supervisor(&tokio::runtime::Handle::current()));
                tracing::info!(server = %name, "MCP server enabled");
            }
        } else {
            if let Some(running) = control.take() {
                running.stop().await;
            }
            entry.take_conn();
            entry.unregister_all();
            entry.set_state("disabled", None);
            tracing::info!(server = %name, "MCP server disabled");
        }
        Ok(entry.status())
    }

    /// Stops every connection and child process (waiting until they are gone).
    /// Registered tools stay, failing with a clear message.
    pub async fn shutdown(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
        let stops = self.servers.values().map(|entry| async move {
            let mut control = entry.control.lock().await;
            if let Some(running) = control.take() {
                running.stop().await;
            }
            if let Some(conn) = entry.take_conn() {
                conn.close().await;
            }
            if entry.status_mut().state != "disabled" {
                entry.set_state("disconnected", None);
            }
        });
        futures::future::join_all(stops).await;
    }
}
