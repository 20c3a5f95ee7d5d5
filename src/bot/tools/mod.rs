//! The tool runner: one registry for every tool the bot can call — native tools
//! compiled in, user tools from `USER_TOOLS_DIR`, and tools of connected MCP servers.
//!
//! Every call goes through [`ToolRunner::call`], which checks the tool exists, is
//! enabled and allowed for the caller's roles, validates the arguments against the
//! tool's JSON Schema, runs the handler under a timeout (catching panics), and records
//! usage stats. Internal tools are never offered to the LLM ([`ToolRunner::llm_tools`])
//! but stay callable by admins; `LLM_TOOLS_INCLUDE`/`LLM_TOOLS_EXCLUDE` trim what the
//! LLM is offered further. A tool can be disabled at runtime by name. Changes to the tool list are broadcast so that other
//! layers (the `/mcp` endpoint) can tell their clients.

pub mod native;
pub mod provenance;
pub mod user;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::bot::lock;
use crate::bot::stats::Recorder;
use crate::bot::trace::TraceScope;
use crate::model::SpanKind;
use crate::model::{ToolDef, ToolSource};
use crate::tool_filter::ToolFilter;

use async_trait::async_trait;
use futures::FutureExt;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

/// Who is calling and why; passed to every tool.
#[derive(Debug, Clone)]
pub struct ExecContext {
    pub roles: Vec<String>,
    pub correlation_id: String,
    pub conversation_id: Option<String>,
    /// Where this work's spans go: a new trace (set by whoever starts a turn) or under
    /// the step that called it. Off unless set.
    pub trace: TraceScope,
    /// The scheduled run this work belongs to, if any: user tools get it as environment
    /// variables, the agent as a line of its instructions.
    pub scheduled_run: Option<ScheduledRun>,
    /// How many workers deep this work runs: 0 for a turn, 1 inside a worker the
    /// supervisor delegated to, and so on (`delegate` refuses past its limit).
    pub delegation_depth: u8,
}

/// One attempt at one due time of a scheduled task. `(task_id, due_at)` names the work
/// once however often it is attempted, so a tool can make its effect idempotent with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledRun {
    pub task_id: i64,
    /// RFC 3339, UTC, milliseconds (`2026-11-26T18:00:00.000Z`); for a run started by
    /// hand, the moment it was asked for.
    pub due_at: String,
    /// 1 for the first attempt; more only after an attempt was interrupted.
    pub attempt: u32,
}

impl ScheduledRun {
    /// The environment variables a user tool gets during the run.
    pub fn env(&self) -> [(&'static str, String); 3] {
        [
            ("PORTHOLE_TASK_ID", self.task_id.to_string()),
            ("PORTHOLE_TASK_DUE_AT", self.due_at.clone()),
            ("PORTHOLE_TASK_ATTEMPT", self.attempt.to_string()),
        ]
    }

    /// What the agent is told about the run it works in (a line of its instructions).
    pub fn note(&self) -> String {
        let run = serde_json::json!({"scheduled_run": {
            "task_id": self.task_id, "due_at": self.due_at, "attempt": self.attempt}});
        format!(
            "This turn is a scheduled run of a task: {run}. An attempt above 1 means an \
             earlier attempt at this due time was interrupted and may have done part of the work."
        )
    }
}

/// The start of the runner's name of every tool of MCP server `server`:
/// `mcp.<server>__<tool>`.
pub fn mcp_tool_prefix(server: &str) -> String {
    format!("mcp.{server}__")
}

pub const ADMIN_ROLE: &str = "admin";
/// The role of a chat user: the web page, and tasks created through it.
pub const USER_ROLE: &str = "user";

impl ExecContext {
    pub fn new(roles: &[&str]) -> Self {
        ExecContext {
            roles: roles.iter().map(|r| r.to_string()).collect(),
            correlation_id: uuid::Uuid::new_v4().to_string(),
            conversation_id: None,
            trace: TraceScope::disabled(),
            scheduled_run: None,
            delegation_depth: 0,
        }
    }

    pub fn is_admin(&self) -> bool {
        self.roles.iter().any(|r| r == ADMIN_ROLE)
    }

    fn may_use(&self, def: &ToolDef) -> bool {
        self.is_admin()
            || def.required_roles.is_empty()
            || def.required_roles.iter().any(|r| self.roles.contains(r))
    }

    /// Whether this caller may know of the tool: call it, and it is not one of the
    /// admins' internal tools.
    fn may_see(&self, def: &ToolDef) -> bool {
        self.may_use(def) && (!def.internal || self.is_admin())
    }
}

/// What a tool handler receives besides its arguments.
pub struct ToolCall<'a> {
    pub args: Value,
    pub ctx: &'a ExecContext,
    /// The runner itself, so tools such as `list_available_tools` or `delegate` can
    /// reach other tools without a reference cycle.
    pub runner: &'a ToolRunner,
}

#[async_trait]
pub trait ToolHandler: Send + Sync {
    /// Runs the tool. An `Err` is a message for the caller saying what went wrong.
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String>;
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum ToolError {
    #[error("unknown tool `{name}`{}", suggestion_text(.suggestions))]
    Unknown {
        name: String,
        suggestions: Vec<String>,
    },
    #[error("tool `{0}` is disabled")]
    Disabled(String),
    #[error("tool `{name}` needs one of the roles {required:?}")]
    Forbidden { name: String, required: Vec<String> },
    #[error(
        "tool `{0}` is internal: only an admin (for example through /mcp run_tool) may call it"
    )]
    Internal(String),
    #[error("invalid arguments for `{name}`: {message}")]
    InvalidArguments { name: String, message: String },
    #[error("tool `{name}` timed out after {seconds} s")]
    Timeout { name: String, seconds: u64 },
    #[error("tool `{name}` failed: {message}")]
    Failed { name: String, message: String },
    #[error("tool `{0}` crashed (panicked); see the server log")]
    Panicked(String),
}

fn suggestion_text(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", suggestions.join(", "))
    }
}

/// Tool results go to the model as text: strings as-is, anything else as JSON.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// Usage figures for one tool.
pub type ToolStats = crate::bot::stats::CallStats;

struct ToolEntry {
    def: ToolDef,
    enabled: AtomicBool,
    validator: jsonschema::Validator,
    handler: Arc<dyn ToolHandler>,
    stats: Mutex<Recorder>,
}

/// A listed tool: its definition, state and stats.
#[derive(Debug, Clone, Serialize)]
pub struct ToolInfo {
    #[serde(flatten)]
    pub def: ToolDef,
    pub enabled: bool,
    pub stats: ToolStats,
}

/// Sent whenever the set of tools or their enabled state changes.
#[derive(Debug, Clone)]
pub struct ToolsChanged;

pub struct ToolRunner {
    tools: RwLock<BTreeMap<String, Arc<ToolEntry>>>,
    timeout: Duration,
    changes: broadcast::Sender<ToolsChanged>,
    /// Which tools the LLM is offered (`LLM_TOOLS_INCLUDE`/`LLM_TOOLS_EXCLUDE`).
    llm_filter: ToolFilter,
    /// Enabled states set at runtime (`toggle_tool`, or restored from the store at
    /// start-up). They outlive the tool: an MCP tool that goes away with its server
    /// comes back in the state it was left in.
    overrides: RwLock<HashMap<String, bool>>,
}

impl ToolRunner {
    pub fn new(timeout: Duration) -> Self {
        ToolRunner {
            tools: RwLock::new(BTreeMap::new()),
            timeout,
            changes: broadcast::channel(16).0,
            llm_filter: ToolFilter::default(),
            overrides: RwLock::new(HashMap::new()),
        }
    }

    /// Offers the LLM only the tools `filter` allows.
    pub fn with_llm_filter(mut self, filter: ToolFilter) -> Self {
        self.llm_filter = filter;
        self
    }

    /// Applies enabled states saved earlier (before any tool is registered, or after).
    pub fn restore_overrides(&self, saved: impl IntoIterator<Item = (String, bool)>) {
        for (name, enabled) in saved {
            self.overrides
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name.clone(), enabled);
            self.set_enabled(&name, enabled);
        }
    }

    /// Adds (or replaces) a tool. Fails if its input schema is not a valid JSON Schema.
    pub fn register(&self, def: ToolDef, handler: Arc<dyn ToolHandler>) -> Result<(), String> {
        let validator = jsonschema::validator_for(&def.input_schema)
            .map_err(|e| format!("tool `{}` has an invalid input schema: {e}", def.name))?;
        let enabled = self
            .overrides
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&def.name)
            .copied()
            .unwrap_or(true);
        let entry = Arc::new(ToolEntry {
            def,
            enabled: AtomicBool::new(enabled),
            validator,
            handler,
            stats: Mutex::new(Recorder::default()),
        });
        self.write().insert(entry.def.name.clone(), entry);
        self.notify();
        Ok(())
    }

    /// Removes every tool whose name starts with `prefix`; returns how many went.
    pub fn unregister_prefix(&self, prefix: &str) -> usize {
        let mut tools = self.write();
        let before = tools.len();
        tools.retain(|name, _| !name.starts_with(prefix));
        let removed = before - tools.len();
        drop(tools);
        if removed > 0 {
            self.notify();
        }
        removed
    }

    /// Enables or disables a tool; returns false if no such tool exists. The state is
    /// remembered for the name, so it also holds when the tool is registered again.
    pub fn set_enabled(&self, name: &str, enabled: bool) -> bool {
        let found = self.read().get(name).cloned();
        match found {
            Some(entry) => {
                self.overrides
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name.to_string(), enabled);
                if entry.enabled.swap(enabled, Ordering::SeqCst) != enabled {
                    self.notify();
                }
                true
            }
            None => false,
        }
    }

    /// The LLM tool filter in force, for status reports.
    pub fn llm_filter(&self) -> &ToolFilter {
        &self.llm_filter
    }

    pub fn subscribe_changes(&self) -> broadcast::Receiver<ToolsChanged> {
        self.changes.subscribe()
    }

    fn notify(&self) {
        // No receivers is fine: nobody is listening for changes yet.
        let _ = self.changes.send(ToolsChanged);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<ToolEntry>>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<ToolEntry>>> {
        self.tools.write().unwrap_or_else(|p| p.into_inner())
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Every tool, enabled or not, in name order.
    pub fn all(&self) -> Vec<ToolInfo> {
        self.read().values().map(|e| info(e)).collect()
    }

    pub fn get(&self, name: &str) -> Option<ToolInfo> {
        self.read().get(name).map(|e| info(e))
    }

    /// The registered name a caller means: `name` itself, or for `user.<name>` (the
    /// design documents' full name of a user tool) the user tool `<name>`.
    pub fn canonical_name<'a>(&self, name: &'a str) -> &'a str {
        let tools = self.read();
        if tools.contains_key(name) {
            return name;
        }
        match name.strip_prefix("user.") {
            Some(bare)
                if tools
                    .get(bare)
                    .is_some_and(|e| e.def.source == ToolSource::User) =>
            {
                bare
            }
            _ => name,
        }
    }

    /// The tools a caller with `ctx`'s roles may use (enabled ones, internal included
    /// for admins only).
    pub fn available_to(&self, ctx: &ExecContext) -> Vec<ToolInfo> {
        self.read()
            .values()
            .filter(|e| e.enabled.load(Ordering::Relaxed))
            .filter(|e| ctx.may_see(&e.def))
            .map(|e| info(e))
            .collect()
    }

    /// The tools offered to the LLM: enabled, allowed for the roles and by the LLM tool
    /// filter, never internal.
    pub fn llm_tools(&self, ctx: &ExecContext) -> Vec<ToolDef> {
        self.read()
            .values()
            .filter(|e| e.enabled.load(Ordering::Relaxed) && !e.def.internal)
            .filter(|e| ctx.may_use(&e.def) && self.llm_filter.allows(&e.def.name))
            .map(|e| e.def.clone())
            .collect()
    }

    /// Up to three known names close to `name`, for "did you mean" messages.
    pub fn similar_names(&self, name: &str) -> Vec<String> {
        self.similar_names_among(name, |_| true)
    }

    /// The names closest to `name` among the tools `ctx` may know of: a chat user's
    /// typo is not answered with the names of the admins' tools.
    fn similar_names_for(&self, name: &str, ctx: &ExecContext) -> Vec<String> {
        self.similar_names_among(name, |def| ctx.may_see(def))
    }

    fn similar_names_among(&self, name: &str, known: impl Fn(&ToolDef) -> bool) -> Vec<String> {
        let tools = self.read();
        let candidates = tools
            .iter()
            .filter(|(_, entry)| known(&entry.def))
            .map(|(name, _)| name.as_str());
        crate::text::closest(candidates, name, 3)
    }

    /// Runs a tool call the model asked for and returns what the model reads back: the
    /// result as text, or `Error: …` (then `true`). The LLM tool filter holds for calls
    /// too, not only for the offer: a model may name a tool it was not offered.
    pub async fn call_for_model(
        &self,
        name: &str,
        arguments: &Value,
        ctx: &ExecContext,
    ) -> (String, bool) {
        let outcome = if self.llm_filter.allows(name) {
            self.call(name, arguments.clone(), ctx)
                .await
                .map_err(|e| e.to_string())
        } else {
            Err(format!(
                "tool `{name}` is not available to the model here (LLM_TOOLS_INCLUDE/LLM_TOOLS_EXCLUDE)"
            ))
        };
        match outcome {
            Ok(value) => (render_value(&value), false),
            Err(e) => (format!("Error: {e}"), true),
        }
    }

    /// Calls a tool with every check applied and stats recorded.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        ctx: &ExecContext,
    ) -> Result<Value, ToolError> {
        let mut span = ctx.trace.start(SpanKind::Tool, format!("tool {name}"));
        if !span.is_recording() {
            return self.call_untraced(name, args, ctx).await;
        }
        span.set_tool(name);
        span.set_attribute("arguments", args.clone());
        if let Some(source) = self.get(name).map(|t| t.def.source) {
            span.set_attribute("source", source.as_str());
        }
        // Whatever the tool starts (a delegated worker agent) nests under this span.
        let mut inner = ctx.clone();
        inner.trace = span.scope();
        let result = self.call_untraced(name, args, &inner).await;
        match &result {
            Ok(value) => {
                span.set_attribute("result", value.clone());
                span.end();
            }
            Err(e) => span.fail(e.to_string()),
        }
        result
    }

    async fn call_untraced(
        &self,
        name: &str,
        args: Value,
        ctx: &ExecContext,
    ) -> Result<Value, ToolError> {
        let entry = self.read().get(name).cloned();
        let Some(entry) = entry else {
            return Err(ToolError::Unknown {
                name: name.to_string(),
                suggestions: self.similar_names_for(name, ctx),
            });
        };
        if !entry.enabled.load(Ordering::Relaxed) {
            return Err(ToolError::Disabled(name.to_string()));
        }
        if !ctx.may_use(&entry.def) {
            return Err(ToolError::Forbidden {
                name: name.to_string(),
                required: entry.def.required_roles.clone(),
            });
        }
        if entry.def.internal && !ctx.is_admin() {
            return Err(ToolError::Internal(name.to_string()));
        }
        // A missing argument object means "no arguments".
        let args = if args.is_null() {
            Value::Object(Default::default())
        } else {
            args
        };
        if let Some(message) = schema_errors(&entry.validator, &args) {
            return Err(ToolError::InvalidArguments {
                name: name.to_string(),
                message,
            });
        }

        let started = Instant::now();
        let call = ToolCall {
            args,
            ctx,
            runner: self,
        };
        let outcome = tokio::time::timeout(
            self.timeout,
            std::panic::AssertUnwindSafe(entry.handler.call(call)).catch_unwind(),
        )
        .await;
        let result = match outcome {
            Err(_) => Err(ToolError::Timeout {
                name: name.to_string(),
                seconds: self.timeout.as_secs(),
            }),
            Ok(Err(_panic)) => {
                tracing::error!(tool = name, "tool handler panicked");
                Err(ToolError::Panicked(name.to_string()))
            }
            Ok(Ok(Err(message))) => Err(ToolError::Failed {
                name: name.to_string(),
                message,
            }),
            Ok(Ok(Ok(value))) => Ok(value),
        };
        let error_text = result.as_ref().err().map(|e| e.to_string());
        lock(&entry.stats).record(started.elapsed(), error_text.as_deref());
        result
    }
}

fn info(entry: &ToolEntry) -> ToolInfo {
    ToolInfo {
        def: entry.def.clone(),
        enabled: entry.enabled.load(Ordering::Relaxed),
        stats: lock(&entry.stats).snapshot(),
    }
}

/// All schema violations of `args` as one readable sentence, or `None` when valid.
pub fn schema_errors(validator: &jsonschema::Validator, args: &Value) -> Option<String> {
    let messages: Vec<String> = validator
        .iter_errors(args)
        .take(5)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("at `{path}`: {e}")
            }
        })
        .collect();
    (!messages.is_empty()).then(|| messages.join("; "))
}

/// A handler made from an async closure; keeps simple native tools short.
pub struct FnTool<F>(pub F);

#[async_trait]
impl<F, Fut> ToolHandler for FnTool<F>
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<Value, String>> + Send,
{
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        (self.0)(call.args).await
    }
}

#[cfg(test)]
mod tests;
