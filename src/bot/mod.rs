//! The running bot: its services and how they are built. Knows nothing of its own
//! `/mcp` endpoint (it is an MCP *client* of other servers, through `mcp_client`).
//!
//! [`Bot::build`] creates, in order: the store, the LLM provider, the tool runner with
//! native and user tools (and the MCP client host, which adds the tools of configured
//! MCP servers as they connect, once [`Bot::connect_mcp_servers`] starts them), the agent registry, supervisor and workers, the task service
//! and the skill list. Everything else (web, scheduler, the MCP endpoint) reads these.

pub mod agents;
pub mod child_env;
pub mod llm;
pub mod mcp_client;
pub mod replay;
pub mod retention;
pub mod schedule;
pub mod stats;
pub mod store;
pub mod tools;
pub mod trace;
pub mod web;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde::Serialize;

use crate::config::Config;
use crate::redact::{Redactor, is_secret_key};
use crate::skills::SkillFolder;
use agents::{AgentRegistry, Supervisor, Workers};
use llm::LlmProvider;
use schedule::Scheduler;
use store::Store;
use tools::ToolRunner;
use trace::Tracer;

/// Locks `mutex`, also after a panic in another holder: the bot's shared state stays
/// usable (every writer leaves it consistent between statements), so a poisoned lock
/// is no reason to fail a request.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// One console line forwarded by the web page.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct WebLogLine {
    pub level: String,
    pub message: String,
    /// The browser's timestamp, as sent.
    pub timestamp: Option<String>,
}

/// Receives browser console lines. The default sink writes them to the server log;
/// the MCP layer installs one that also keeps them for `web_log`.
pub trait WebLogSink: Send + Sync {
    fn record(&self, line: WebLogLine);
}

/// Target of the tracing events that carry browser console lines.
pub const WEB_CONSOLE_TARGET: &str = "web_console";

/// Writes browser console lines to the server log (target `web_console`).
pub struct TracingWebLogSink;

impl WebLogSink for TracingWebLogSink {
    fn record(&self, line: WebLogLine) {
        // A page must not be able to forge extra server log lines with line breaks.
        let message = line.message.replace('\r', "\\r").replace('\n', "\\n");
        let message = message.as_str();
        match line.level.as_str() {
            "error" => tracing::error!(target: WEB_CONSOLE_TARGET, "browser console: {message}"),
            "warn" => tracing::warn!(target: WEB_CONSOLE_TARGET, "browser console: {message}"),
            _ => {
                tracing::info!(target: WEB_CONSOLE_TARGET, level = %line.level, "browser console: {message}")
            }
        }
    }
}

/// Resident memory of this process in bytes (Linux, from /proc); `None` elsewhere.
pub fn resident_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The memory the heap holds from the OS (mimalloc's committed bytes) when mimalloc is
/// the process's allocator, as in the `porthole` binary; `None` under any other (the
/// test harness's), whose heap mimalloc cannot see.
pub fn heap_committed_bytes() -> Option<u64> {
    static MIMALLOC_IS_THE_ALLOCATOR: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let is_mimalloc = *MIMALLOC_IS_THE_ALLOCATOR.get_or_init(|| {
        let probe = std::hint::black_box(Box::new(0u64));
        // SAFETY: only compares an address against mimalloc's own regions.
        unsafe { libmimalloc_sys::mi_is_in_heap_region(std::ptr::from_ref(&*probe).cast()) }
    });
    if !is_mimalloc {
        return None;
    }
    let mut committed = 0usize;
    let null = std::ptr::null_mut();
    // SAFETY: every out-pointer but `current_commit` is null, which mimalloc skips.
    unsafe {
        libmimalloc_sys::mi_process_info(null, null, null, null, null, &mut committed, null, null);
    }
    Some(committed as u64)
}

/// The limits and switches `get_bot_status` reports: numbers, flags and the model's
/// name, never a key, a token or a URL that could carry credentials.
fn operational_settings(config: &Config) -> serde_json::Value {
    serde_json::json!({
        "llm_timeout_secs": config.llm.timeout.as_secs(),
        "agent_max_steps": config.agent_max_steps,
        "tool_timeout_secs": config.tool_timeout.as_secs(),
        "log_file_max_bytes": config.log_file.as_ref().map(|_| config.log_file_max_bytes),
        "scheduler_enabled": config.scheduler_enabled,
        "web_console_forwarding": config.web_console_forwarding,
        "database": if config.database_url.is_some() { "postgres" } else if config.database_path == ":memory:" { "in memory" } else { "file" },
        "conversation_max_count": config.conversations.max_count,
        "conversation_max_age_secs": config.conversations.max_age.map(|age| age.as_secs()),
    })
}

impl Bot {
    /// Which process answered, among replicas sharing one database: the replica id
    /// (`PORTHOLE_REPLICA_ID`, default hostname and process id) and the hostname.
    pub fn replica(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.config.replica_id,
            "hostname": crate::config::hostname(),
        })
    }

    /// Applies the enabled states `toggle_tool` saved in earlier runs (tools that
    /// register later, such as MCP tools, pick theirs up when they appear).
    pub async fn restore_tool_settings(&self) {
        match self.store.tool_settings().await {
            Ok(saved) => {
                let disabled = saved.iter().filter(|(_, enabled)| !enabled).count();
                if disabled > 0 {
                    tracing::info!(disabled, "restored tools disabled at runtime earlier");
                }
                self.tools.restore_overrides(saved);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the saved tool settings; every tool starts enabled")
            }
        }
    }

    /// Connects to the MCP servers `mcp.json` names, with the enabled states
    /// `toggle_mcp_server` saved in earlier runs (or on another replica) over what the
    /// file says: a server switched off is not started at all. Unreadable saved states
    /// leave the file to decide.
    pub async fn connect_mcp_servers(&self) {
        let saved = match self.store.mcp_server_settings().await {
            Ok(saved) => saved.into_iter().collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the saved MCP server settings; mcp.json decides which servers run");
                std::collections::HashMap::new()
            }
        };
        self.mcp_host.connect(&saved);
    }

    /// Enables (connects) or disables an MCP server at runtime and saves the choice, so
    /// it survives a restart and every replica sharing the database starts with it.
    pub async fn set_mcp_server_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<mcp_client::McpServerStatus, String> {
        let status = self.mcp_host.set_enabled(name, enabled).await?;
        if let Err(e) = self.store.save_mcp_server_enabled(name, enabled).await {
            return Err(not_saved(&format!("MCP server `{name}`"), enabled, &e));
        }
        Ok(status)
    }

    /// Enables or disables one tool at runtime and saves the choice, so it survives a
    /// restart. The error says what to fix (an unknown name, with close matches).
    pub async fn set_tool_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<tools::ToolInfo, String> {
        if !self.tools.set_enabled(name, enabled) {
            let similar = self.tools.similar_names(name);
            let hint = if similar.is_empty() {
                "call list_tools to see every tool".to_string()
            } else {
                format!("did you mean {}?", similar.join(", "))
            };
            return Err(format!("the bot has no tool named `{name}`; {hint}"));
        }
        tracing::info!(
            tool = name,
            enabled,
            "tool enabled state changed at runtime"
        );
        if let Err(e) = self.store.save_tool_enabled(name, enabled).await {
            return Err(not_saved(&format!("`{name}`"), enabled, &e));
        }
        self.tools
            .get(name)
            .ok_or_else(|| format!("`{name}` went away while it was being changed"))
    }
}

/// The error of a runtime switch that took effect but could not be saved.
fn not_saved(what: &str, enabled: bool, error: &store::StoreError) -> String {
    let state = if enabled { "enabled" } else { "disabled" };
    format!(
        "{what} is now {state} but the choice could not be saved, so a restart will undo it: {error}"
    )
}

#[derive(Debug, thiserror::Error)]
pub enum BotError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("cannot register tools: {0}")]
    Tools(String),
}

/// Every service of the running bot.
pub struct Bot {
    pub config: Config,
    pub started: Instant,
    pub store: Store,
    pub llm: Arc<dyn LlmProvider>,
    pub tools: Arc<ToolRunner>,
    /// The MCP servers the bot is a client of; their tools live in `tools`.
    pub mcp_host: Arc<mcp_client::McpHost>,
    pub agents: Arc<AgentRegistry>,
    pub supervisor: Arc<Supervisor>,
    /// The scheduled tasks (the `tasks` table) and their scheduler.
    pub schedule: Arc<Scheduler>,
    /// The skills folder as last read; `/mcp` serves and refreshes the same view.
    pub skills: Arc<SkillFolder>,
    pub web: web::WebState,
    /// Removes every secret the process knows from what leaves it (`/mcp`, `/api`, `/ws`).
    pub redactor: Arc<Redactor>,
    /// Records a trace per turn and per `/mcp` tool call (and exports it when
    /// OpenTelemetry is configured).
    pub tracer: Arc<Tracer>,
    /// The provider calls replays may still make this minute (`REPLAY_MAX_PER_MINUTE`).
    pub replay_limit: replay::RateLimit,
}

/// The tracer the configuration asks for: off, stored, or stored and exported.
fn start_tracer(config: &Config, store: &Store, redactor: &Arc<Redactor>) -> Arc<Tracer> {
    if !config.trace.enabled {
        return Tracer::disabled();
    }
    let settings = trace::TraceSettings {
        max_turns: config.trace.max_turns,
        max_mcp_calls: config.trace.max_mcp_calls,
        max_age: config.trace.max_age,
        max_payload_bytes: config.trace.max_payload_bytes,
    };
    let exporter = config.trace.otlp_endpoint.as_ref().and_then(|endpoint| {
        let otlp = trace::OtlpSettings {
            endpoint: endpoint.clone(),
            headers: config.trace.otlp_headers.clone(),
            service_name: config.trace.service_name.clone(),
        };
        match trace::OtlpExporter::start(&otlp) {
            Ok(exporter) => {
                tracing::info!(service = %otlp.service_name, "exporting turn traces over OTLP/HTTP");
                Some(exporter as Arc<dyn trace::SpanExporter>)
            }
            Err(e) => {
                tracing::warn!(error = %e, "turn traces are stored but not exported");
                None
            }
        }
    });
    Tracer::start(store.clone(), redactor.clone(), settings, exporter)
}

/// Every secret value the process knows: configured ones, the headers and environment of
/// the MCP servers it uses, the `env` of its user tools, and environment variables whose
/// names say they are secret (including those loaded from `.env`).
fn known_secrets(
    config: &Config,
    mcp_host: &mcp_client::McpHost,
    user_tool_env: Vec<String>,
) -> Vec<String> {
    let mut secrets = config.secret_values();
    secrets.extend(mcp_host.secret_values());
    secrets.extend(user_tool_env);
    secrets.extend(
        std::env::vars()
            .filter(|(name, _)| is_secret_key(name))
            .map(|(_, value)| value),
    );
    secrets
}

impl Bot {
    /// Builds every service from the configuration. Fails only on what the bot cannot
    /// run without (the database); broken user tools or skills are logged and skipped.
    pub fn build(config: Config, web_log_sink: Arc<dyn WebLogSink>) -> Result<Arc<Bot>, BotError> {
        let started = Instant::now();
        let store = Store::open(config.database_location())?;
        tracing::info!(
            backend = store.backend_name(),
            path = %store.path(),
            schema = store::schema_version(),
            replica = %config.replica_id,
            "database ready"
        );

        let llm = llm::from_config(&config.llm);
        tracing::info!(
            provider = llm.provider(),
            model = llm.model(),
            "LLM provider"
        );

        let tools = Arc::new(
            ToolRunner::new(config.tool_timeout).with_llm_filter(config.llm_tools_filter.clone()),
        );
        // Read only: `connect_mcp_servers` connects (in the background; start-up never
        // waits for MCP servers) once the saved switches are known.
        let mcp_host = mcp_client::McpHost::load(
            &config.mcp_servers_config,
            tools.clone(),
            config.tool_timeout,
        );
        let agents = Arc::new(AgentRegistry::default());
        let supervisor_id = Supervisor::new_id();
        let workers = Arc::new(Workers::new(
            llm.clone(),
            agents.clone(),
            config.agent_max_steps,
            supervisor_id,
        ));
        let status = tools::native::StatusSources {
            started,
            llm_provider: llm.provider().to_string(),
            llm_model: llm.model().to_string(),
            workers: workers.clone(),
            mcp_servers: {
                let host = mcp_host.clone();
                Arc::new(move || serde_json::to_value(host.servers()).unwrap_or_default())
            },
            settings: operational_settings(&config),
        };
        let user_tool_env = register_tools(&config, &tools, &store, status)?;
        let supervisor = Arc::new(Supervisor::new(store.clone(), tools.clone(), &workers));
        let secrets = known_secrets(&config, &mcp_host, user_tool_env);
        let redactor = Arc::new(Redactor::new(secrets));
        store.redact_conversations_with(redactor.clone());
        let tracer = start_tracer(&config, &store, &redactor);
        let schedule = Arc::new(Scheduler::new(
            store.clone(),
            supervisor.clone(),
            tools.clone(),
            tracer.clone(),
            config.replica_id.clone(),
        ));
        let skills = Arc::new(SkillFolder::load(config.skills_dir.clone()));
        retention::spawn_conversation_retention(store.clone(), config.conversations);

        Ok(Arc::new(Bot {
            replay_limit: replay::RateLimit::new(config.trace.replay_max_per_minute),
            redactor,
            tracer,
            started,
            store,
            llm,
            tools,
            mcp_host,
            agents,
            supervisor,
            schedule,
            skills,
            web: web::WebState::new(web_log_sink, config.web_console_forwarding),
            config,
        }))
    }
}

/// Registers the native tools, then the user's (broken ones are logged and skipped).
/// Returns the values of the user tools' `env`, which count as known secrets.
fn register_tools(
    config: &Config,
    tools: &ToolRunner,
    store: &Store,
    status: tools::native::StatusSources,
) -> Result<Vec<String>, BotError> {
    if let Err(e) = std::fs::create_dir_all(&config.workspace_dir) {
        tracing::warn!(dir = %config.workspace_dir.display(), error = %e, "cannot create the workspace folder; file tools will report it");
    }
    let traces_file = store.traces_file().map(|file| PathBuf::from(file.path));
    let databases: Vec<&Path> = std::iter::once(Path::new(&config.database_path))
        .chain(traces_file.as_deref())
        .collect();
    // The server log too (and its rotation `.1`): reading it is `/mcp`'s, not a turn's.
    let log_files: Vec<PathBuf> = config
        .log_file
        .iter()
        .flat_map(|log| [log.clone(), crate::logs::file::rotated(log)])
        .collect();
    let files: Vec<&Path> = std::iter::once(config.mcp_servers_config.as_path())
        .chain(log_files.iter().map(PathBuf::as_path))
        .collect();
    let private = tools::native::PrivateFiles::new(&files, &databases, &[&config.user_tools_dir]);
    let workspace = (config.workspace_dir.clone(), private);
    tools::native::register_all(tools, store.clone(), workspace, status)
        .map_err(BotError::Tools)?;
    let user = tools::user::load_user_tools(tools, &config.user_tools_dir, config.tool_timeout);
    tracing::info!(
        native = tools.len() - user.loaded.len(),
        user = user.loaded.len(),
        skipped = user.skipped.len(),
        "tools loaded"
    );
    Ok(user.env_values)
}
