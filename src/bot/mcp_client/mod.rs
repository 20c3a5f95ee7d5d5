//! The bot as an MCP client host: it connects to the MCP servers named in the servers
//! config file and offers their tools through the [`ToolRunner`] as
//! `mcp.<server>__<tool>`.
//!
//! [`McpHost::start`] reads the file and starts one supervising task per enabled
//! server, returning at once. Each task connects (stdio child process, Streamable
//! HTTP, or the older HTTP+SSE transport), lists the tools, registers them, re-lists
//! on `tools/list_changed`, and on a lost connection keeps the tools registered (calls
//! fail fast with a clear message) while it reconnects with exponential backoff. Calls
//! are routed to the live connection with the server's timeout and counted per server
//! and per tool.
//!
//! This module belongs to the `bot` layer and does not use the crate's `mcp` module
//! (the server side); the little client-side JSON-RPC it needs lives in `jsonrpc.rs`.

mod config;
#[doc(hidden)]
pub use config::fuzz_parse as fuzz_parse_config;
mod connection;
mod events;
mod handshake;
mod http;
mod http_sse;
mod jsonrpc;
mod pending;
mod stats;
mod stdio;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::tools::{ToolCall, ToolDef, ToolHandler, ToolRunner, ToolSource};
use config::ServerConfig;
use connection::Conn;
use events::ConnEvent;
use jsonrpc::{CallError, ParamHeader};
use stats::StatsBook;
pub use stats::{ServerStats, ToolStatsEntry};

/// First wait before reconnecting; doubled after each failure up to [`MAX_BACKOFF`].
const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that lived this long resets the backoff.
const STABLE_CONNECTION: Duration = Duration::from_secs(30);
/// How long stopping a server may take before its task is aborted.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// One configured server as reported to admins and the status tool.
#[derive(Debug, Clone, Serialize)]
pub struct McpServerStatus {
    pub name: String,
    /// `"stdio"`, `"http"` or `"sse"`.
    pub transport: &'static str,
    pub enabled: bool,
    /// `"connecting"`, `"connected"`, `"disconnected"`, `"disabled"` or `"failed"`.
    pub state: &'static str,
    pub protocol_version: Option<String>,
    pub tool_count: usize,
    pub last_error: Option<String>,
    pub stats: ServerStats,
    pub tools: Vec<ToolStatsEntry>,
}

/// The MCP servers the bot is a client of.
pub struct McpHost {
    servers: BTreeMap<String, Arc<ServerEntry>>,
    shut_down: AtomicBool,
}

impl McpHost {
    /// Reads the config file (an absent file means no servers), starts one background
    /// connection task per enabled server and returns at once; tools appear in
    /// `runner` as their servers connect.
    pub fn start(
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
        let runtime = tokio::runtime::Handle::try_current();
        for entry in servers.values().filter(|e| e.config.enabled) {
            match &runtime {
                Ok(runtime) => {
                    let running = entry.spawn_supervisor(runtime);
                    if let Ok(mut control) = entry.control.try_lock() {
                        *control = Some(running);
                    }
                }
                Err(_) => {
                    tracing::error!(server = %entry.config.name, "no async runtime: the MCP server is not connected");
                    entry.set_state(
                        "failed",
                        Some("no async runtime to run the connection".into()),
                    );
                }
            }
        }
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

    /// The values of every configured header and environment variable: they often
    /// hold credentials, so the `/mcp` side redacts them wherever they appear.
    pub fn secret_values(&self) -> Vec<String> {
        self.servers
            .values()
            .flat_map(|e| match &e.config.transport {
                config::TransportConfig::Stdio { env, .. } => {
                    env.values().cloned().collect::<Vec<_>>()
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

/// A running supervisor task and the switch that stops it.
struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(true);
        let mut task = self.task;
        if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
            task.abort();
            let _ = task.await;
        }
    }
}

struct Status {
    enabled: bool,
    state: &'static str,
    /// Whether a supervisor is working on the connection.
    running: bool,
    protocol_version: Option<String>,
    last_error: Option<String>,
}

/// What was registered for one tool; a re-list re-registers only what changed.
#[derive(Debug, Clone, PartialEq)]
struct RegisteredTool {
    description: String,
    schema: Value,
}

/// The tools to offer, by the server's names, with their `x-mcp-header` annotations.
type WantedTools = BTreeMap<String, (RegisteredTool, Vec<ParamHeader>)>;

struct ServerEntry {
    config: ServerConfig,
    runner: Arc<ToolRunner>,
    status: Mutex<Status>,
    conn: RwLock<Option<Arc<Conn>>>,
    /// By the server's own tool names.
    registered: Mutex<BTreeMap<String, RegisteredTool>>,
    stats: Mutex<StatsBook>,
    control: tokio::sync::Mutex<Option<Running>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl ServerEntry {
    fn new(config: ServerConfig, runner: Arc<ToolRunner>) -> Arc<ServerEntry> {
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
            }),
            conn: RwLock::new(None),
            registered: Mutex::new(BTreeMap::new()),
            stats: Mutex::new(StatsBook::default()),
            control: tokio::sync::Mutex::new(None),
        })
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    fn status_mut(&self) -> MutexGuard<'_, Status> {
        lock(&self.status)
    }

    fn set_state(&self, state: &'static str, error: Option<String>) {
        let mut status = self.status_mut();
        status.state = state;
        if error.is_some() {
            status.last_error = error;
        }
    }

    fn status(&self) -> McpServerStatus {
        let registered = lock(&self.registered);
        let stats = lock(&self.stats);
        let status = self.status_mut();
        McpServerStatus {
            name: self.config.name.clone(),
            transport: self.config.transport.kind(),
            enabled: status.enabled,
            state: status.state,
            protocol_version: status.protocol_version.clone(),
            tool_count: registered.len(),
            last_error: status.last_error.clone(),
            stats: stats.server.snapshot(),
            tools: stats.tool_entries(registered.keys()),
        }
    }

    fn prefix(&self) -> String {
        format!("mcp.{}__", self.config.name)
    }

    fn current_conn(&self) -> Option<Arc<Conn>> {
        self.conn.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_conn(&self, conn: Option<Arc<Conn>>) -> Option<Arc<Conn>> {
        std::mem::replace(
            &mut *self.conn.write().unwrap_or_else(|p| p.into_inner()),
            conn,
        )
    }

    fn take_conn(&self) -> Option<Arc<Conn>> {
        self.set_conn(None)
    }

    fn unregister_all(&self) {
        lock(&self.registered).clear();
        self.runner.unregister_prefix(&self.prefix());
    }

    fn spawn_supervisor(self: &Arc<Self>, runtime: &tokio::runtime::Handle) -> Running {
        let (stop, stop_rx) = watch::channel(false);
        self.status_mut().running = true;
        let task = runtime.spawn(supervise(self.clone(), stop_rx));
        Running { stop, task }
    }

    /// Lists the server's tools and brings the runner up to date: new and changed
    /// tools are registered, vanished ones removed, unchanged ones left alone (their
    /// stats and enabled state survive). Returns how many are registered.
    async fn refresh_tools(self: &Arc<Self>, conn: &Conn) -> Result<usize, String> {
        let listed = conn
            .list_tools(self.config.timeout)
            .await
            .map_err(|e| format!("`tools/list` failed: {e}"))?;
        let wanted = self.select_tools(listed);

        let mut registered = lock(&self.registered);
        let prefix = self.prefix();
        let gone: Vec<String> = registered
            .keys()
            .filter(|name| !wanted.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            registered.remove(&name);
            // Also removes tools whose names extend this one; they are re-added below.
            self.runner.unregister_prefix(&format!("{prefix}{name}"));
        }
        for (name, (tool, param_headers)) in wanted {
            let full_name = format!("{prefix}{name}");
            if registered.get(&name) == Some(&tool) && self.runner.get(&full_name).is_some() {
                continue;
            }
            let def = ToolDef {
                name: full_name,
                source: ToolSource::Mcp,
                description: tool.description.clone(),
                input_schema: tool.schema.clone(),
                required_roles: vec![],
                internal: false,
            };
            let handler = Arc::new(McpTool {
                entry: Arc::downgrade(self),
                tool: name.clone(),
                param_headers,
            });
            match self.runner.register(def, handler) {
                Ok(()) => {
                    registered.insert(name, tool);
                }
                Err(e) => {
                    tracing::warn!(server = %self.name(), tool = %name, "skipping MCP tool: {e}")
                }
            }
        }
        Ok(registered.len())
    }

    /// The listed tools this client will offer, after the allow/exclude lists and
    /// sanity checks, with their `x-mcp-header` annotations.
    fn select_tools(&self, listed: Vec<Value>) -> WantedTools {
        let server = self.name();
        let mut wanted = BTreeMap::new();
        for tool in listed {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                tracing::warn!(server, "skipping an MCP tool without a name");
                continue;
            };
            if !valid_tool_name(name) {
                tracing::warn!(
                    server,
                    tool = name,
                    "skipping MCP tool: its name must be 1-128 characters from A-Z, a-z, 0-9, `_`, `-`, `.` and `/`"
                );
                continue;
            }
            if !self.config.tool_wanted(name) {
                tracing::debug!(
                    server,
                    tool = name,
                    "MCP tool left out by allowedTools/excludedTools"
                );
                continue;
            }
            let schema = match tool.get("inputSchema") {
                None | Some(Value::Null) => json!({"type": "object"}),
                Some(schema) => schema.clone(),
            };
            if let Err(e) = jsonschema::validator_for(&schema) {
                tracing::warn!(
                    server,
                    tool = name,
                    "skipping MCP tool: its input schema does not compile: {e}"
                );
                continue;
            }
            let param_headers = match jsonrpc::param_headers(&schema) {
                Ok(headers) => headers,
                Err(e) => {
                    tracing::warn!(server, tool = name, "skipping MCP tool: {e}");
                    continue;
                }
            };
            let text = ["description", "title"]
                .iter()
                .find_map(|key| tool.get(*key).and_then(Value::as_str))
                .filter(|text| !text.trim().is_empty())
                .unwrap_or(name);
            let registered = RegisteredTool {
                description: format!("[{server}] {text}"),
                schema,
            };
            if wanted
                .insert(name.to_string(), (registered, param_headers))
                .is_some()
            {
                tracing::warn!(
                    server,
                    tool = name,
                    "the MCP server lists this tool twice; using the last one"
                );
            }
        }
        wanted
    }

    /// The message for a call that cannot reach the server.
    fn unavailable(&self) -> String {
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

    async fn call_tool(
        &self,
        tool: &str,
        arguments: Value,
        param_headers: &[ParamHeader],
    ) -> Result<Value, String> {
        let record = CallRecord {
            entry: self,
            tool,
            started: Instant::now(),
            done: false,
        };
        let Some(conn) = self.current_conn() else {
            return record.finish(Err(self.unavailable()));
        };
        let server = self.name();
        let outcome = conn
            .call_tool(tool, arguments, param_headers, self.config.timeout)
            .await;
        let result = match outcome {
            Ok(result) => tool_result(server, tool, result),
            Err(CallError::Timeout(limit)) => Err(format!(
                "MCP server `{server}` did not answer `{tool}` within {} ms",
                limit.as_millis()
            )),
            Err(CallError::Lost(reason)) => Err(format!(
                "MCP server `{server}` was lost during `{tool}`: {reason}; reconnecting"
            )),
            Err(e @ CallError::Rpc { .. }) => {
                Err(format!("MCP server `{server}` rejected `{tool}`: {e}"))
            }
            Err(CallError::Protocol(problem)) => Err(format!(
                "MCP server `{server}` failed on `{tool}`: {problem}"
            )),
        };
        record.finish(result)
    }
}

/// Turns a `tools/call` result into the handler's value, or its error text.
fn tool_result(server: &str, tool: &str, result: Value) -> Result<Value, String> {
    let content = match result.get("content") {
        Some(Value::Array(blocks)) => blocks.clone(),
        _ => Vec::new(),
    };
    let text = content
        .iter()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if result["isError"] == json!(true) {
        return Err(if text.trim().is_empty() {
            format!("`{tool}` on MCP server `{server}` reported an error without a message")
        } else {
            text
        });
    }
    Ok(json!({
        "content": content,
        "isError": false,
        "structuredContent": result.get("structuredContent").cloned().unwrap_or(Value::Null),
        "text": text,
    }))
}

/// MCP tool names: 1-128 characters of `[A-Za-z0-9_./-]`.
fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
}

/// Records a call's latency and outcome, also when the call is abandoned midway
/// (the runner's own timeout dropped it).
struct CallRecord<'a> {
    entry: &'a ServerEntry,
    tool: &'a str,
    started: Instant,
    done: bool,
}

impl CallRecord<'_> {
    fn finish(mut self, result: Result<Value, String>) -> Result<Value, String> {
        self.done = true;
        self.save(result.as_ref().err().map(String::as_str));
        result
    }

    fn save(&self, error: Option<&str>) {
        lock(&self.entry.stats).record(self.tool, self.started.elapsed(), error);
    }
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.save(Some("the call was abandoned before the server answered"));
        }
    }
}

/// The runner's handler for one MCP tool.
struct McpTool {
    entry: Weak<ServerEntry>,
    /// The server's own name for the tool.
    tool: String,
    param_headers: Vec<ParamHeader>,
}

#[async_trait]
impl ToolHandler for McpTool {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let Some(entry) = self.entry.upgrade() else {
            return Err("the MCP host has shut down".into());
        };
        entry
            .call_tool(&self.tool, call.args, &self.param_headers)
            .await
    }
}

/// Keeps one server connected until stopped: connect, list and register its tools,
/// follow list changes, and reconnect with backoff whenever the connection fails.
async fn supervise(entry: Arc<ServerEntry>, mut stop: watch::Receiver<bool>) {
    let server = entry.config.name.clone();
    let mut backoff = INITIAL_BACKOFF;
    loop {
        entry.set_state("connecting", None);
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let attempt = tokio::select! {
            attempt = Conn::connect(&entry.config, events_tx) => attempt,
            _ = stopped(&mut stop) => break,
        };
        match attempt {
            Err(error) => {
                tracing::warn!(server = %server, retry_in_ms = backoff.as_millis() as u64, "cannot connect to the MCP server: {error}");
                entry.set_state("failed", Some(error));
            }
            Ok(conn) => {
                let conn = Arc::new(conn);
                entry.set_conn(Some(conn.clone()));
                let listed = tokio::select! {
                    listed = entry.refresh_tools(&conn) => listed,
                    _ = stopped(&mut stop) => {
                        entry.take_conn();
                        conn.close().await;
                        break;
                    }
                };
                match listed {
                    Err(error) => {
                        entry.take_conn();
                        conn.close().await;
                        tracing::warn!(server = %server, "the MCP server connected but its tools could not be listed: {error}");
                        entry.set_state("failed", Some(error));
                    }
                    Ok(count) => {
                        let version = conn.protocol_version();
                        tracing::info!(server = %server, tools = count, protocol_version = %version, "MCP server connected");
                        {
                            let mut status = entry.status_mut();
                            status.state = "connected";
                            status.protocol_version = Some(version);
                        }
                        let since = Instant::now();
                        let reason = loop {
                            tokio::select! {
                                _ = stopped(&mut stop) => {
                                    entry.take_conn();
                                    conn.close().await;
                                    entry.status_mut().running = false;
                                    return;
                                }
                                event = events.recv() => match event {
                                    Some(ConnEvent::ToolsChanged) => {
                                        match entry.refresh_tools(&conn).await {
                                            Ok(count) => tracing::info!(server = %server, tools = count, "MCP server tool list changed"),
                                            Err(e) => tracing::warn!(server = %server, "cannot refresh the MCP server's tools: {e}"),
                                        }
                                    }
                                    Some(ConnEvent::Closed(reason)) => break reason,
                                    None => break "the connection ended".to_string(),
                                }
                            }
                        };
                        entry.take_conn();
                        conn.close().await;
                        tracing::warn!(server = %server, "MCP server disconnected: {reason}; reconnecting");
                        entry.set_state("disconnected", Some(reason));
                        if since.elapsed() >= STABLE_CONNECTION {
                            backoff = INITIAL_BACKOFF;
                        }
                    }
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped(&mut stop) => break,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    entry.status_mut().running = false;
}

/// Resolves once the supervisor is told to stop (or its switch is dropped).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}
