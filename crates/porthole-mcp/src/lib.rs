//! A Model Context Protocol server over Streamable HTTP, for both protocol eras.
//!
//! This crate knows nothing about the bot: any axum service mounts it (the bot does, as
//! `porthole::mcp`; `examples/mount.rs` shows another service).
//!
//! ```no_run
//! # use porthole_mcp::{McpServer, Auth};
//! # fn demo(tools: Vec<std::sync::Arc<dyn porthole_mcp::Tool>>) -> Result<(), porthole_mcp::SetupError> {
//! let server = McpServer::builder("my-app", "1.0.0")
//!     .auth(Auth::bearer("a-long-random-secret"))
//!     .tools(tools)
//!     .build()?;
//! let app = axum::Router::new().merge(server.router());
//! # Ok(()) }
//! ```
//!
//! Layout: `http` (transport, both eras) → `call` (how one handler runs) → `methods`
//! (the method table, one file per method family) → the [`Tool`], [`ResourceProvider`]
//! and [`Prompt`] seams. `guard` holds the checks every `/mcp` handler runs first, `session` the legacy sessions and
//! resumable streams, `subscriptions` the change notifications, `seal` the server's
//! keyed tags and sealed state, `params` the reading of request parameters, `replicas`
//! what crosses to the other replicas sharing the server's state, `tasks`
//! (with `task_record`) and `skills` the two extensions; the skills themselves are read
//! by `porthole_core::skills`, which this crate shares with the bot. [`logs`] captures
//! the process's `tracing` log in a ring buffer and serves it (`server_log`); the
//! endpoint's own log targets start with `porthole::mcp`, so the log tools keep its
//! lines apart. Redaction comes from `porthole_core::redact`.

#![forbid(unsafe_code)]

mod call;
mod caller;
mod context;
mod error;
mod guard;
mod http;
mod methods;
mod params;
mod seal;
mod task_record;

pub mod logs;
mod prompt;
mod replicas;
mod resource;
mod schema;
pub mod session;
pub mod skills;
mod subscriptions;
pub mod tasks;
mod tool;
mod tool_result;
mod typed_tool;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{any, post};
use sha2::Digest;

pub use context::RequestContext;
pub use error::SetupError;
pub use guard::{Access, Auth, GuardConfig};
pub use jsonrpc::RpcError;
pub use porthole_core::redact::Redactor;
pub use porthole_core::skills::SkillFolder;
/// The protocol's vocabulary and its JSON-RPC messages, shared with the bot's own MCP
/// client from the ground floor.
pub use porthole_core::{jsonrpc, protocol};
pub use prompt::{Prompt, PromptArgument, PromptMessages, PromptSet, PromptSpec};
pub use protocol::Era;
pub use replicas::{Changed, Replicas};
pub use resource::ResourceProvider;
pub use schema::{default_of, input_schema_of, schema_of};
pub use seal::SealingKey;
pub use session::{SessionConfig, SessionLedger, StreamLimits};
pub use skills::SkillCatalog;
pub use subscriptions::{Change, Notifier};
pub use task_record::{TaskRecord, TaskStatus};
pub use tasks::{MemoryTaskStore, StoreFailure, TaskConfig, TaskStore};
pub use tool::{
    Annotations, InputRequired, Outcome, RefusedCalls, TaskSupport, Tool, ToolSet, ToolSpec,
    input_request,
};
pub use tool_result::{CallToolResult, Structured};
pub use typed_tool::{ToolError, TypedTool, arguments, typed};

/// Who the server says it is.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// The server's name in `serverInfo` (the first argument of [`McpServer::builder`]).
    pub name: String,
    /// The server's version in `serverInfo`.
    pub version: String,
    /// The human-readable name in `serverInfo`; the name unless set.
    pub title: String,
    /// Guidance for clients on using the server, sent with `initialize` (when not empty)
    /// and `server/discover`.
    pub instructions: String,
    /// `ttlMs` on cacheable 2026 results. Small, because our lists change.
    pub cache_ttl_ms: u64,
}

/// One server's state, shared by its requests. What it serves (`info` to `skills`) and
/// the shaped answers kept of it (`memo`) are the method layer's; `sessions` to `tasks`
/// are what its requests leave behind; the keys and limits guard the transport.
pub(crate) struct ServerInner {
    info: ServerInfo,
    tools: ToolSet,
    resources: Vec<Arc<dyn ResourceProvider>>,
    prompts: PromptSet,
    /// The skills served through the Skills extension, if a folder was given.
    skills: Option<Arc<SkillCatalog>>,
    memo: methods::Memo,
    sessions: session::Sessions,
    notifier: Notifier,
    /// Requests answered with a task handle, and the tasks' store.
    tasks: tasks::TaskEngine,
    sealer: Arc<SealingKey>,
    redactor: Arc<Redactor>,
    guard: GuardConfig,
    limits: http::Limits,
    /// Turns true when the server shuts down; open streams end.
    shutdown: tokio::sync::watch::Sender<bool>,
    /// This server, for work that outlives a request (a task's tool call).
    this: std::sync::Weak<ServerInner>,
}

impl ServerInner {
    fn context(
        &self,
        access: Access,
        era: Era,
        session: Option<Arc<session::Session>>,
        request_id: serde_json::Value,
        params: Option<&serde_json::Map<String, serde_json::Value>>,
        log_threshold: Option<u8>,
    ) -> RequestContext {
        let meta = params.and_then(|p| p.get("_meta"));
        RequestContext {
            progress_token: meta.and_then(http::progress_token),
            trace_parent: meta.and_then(context::trace_parent),
            caller_tag: context::caller_tag_of_meta(session.as_deref(), meta),
            client_capabilities: session
                .as_ref()
                .map(|s| s.client_capabilities.clone())
                .unwrap_or_else(|| serde_json::json!({})),
            era,
            access,
            session,
            request_id,
            log_threshold,
            outbound: None,
            input_responses: None,
            request_state: None,
            sealer: self.sealer.clone(),
            redactor: self.redactor.clone(),
            caller: caller::Caller::default(),
            in_task: false,
        }
    }
}

/// Collects what a server serves and how it guards `/mcp`; made by
/// [`McpServer::builder`], turned into a server by [`build`](Self::build).
pub struct McpServerBuilder {
    info: ServerInfo,
    auth: Auth,
    read_only_token: Option<[u8; 32]>,
    allowed_origins: Vec<String>,
    allowed_hosts: Vec<String>,
    max_body_bytes: usize,
    body_timeout: Duration,
    sessions: SessionConfig,
    secret: Option<String>,
    tools: Vec<Arc<dyn Tool>>,
    resources: Vec<Arc<dyn ResourceProvider>>,
    prompts: Vec<Arc<dyn Prompt>>,
    redactor: Arc<Redactor>,
    notifier: Notifier,
    keepalive: Duration,
    tasks: TaskConfig,
    skills: Option<Arc<SkillCatalog>>,
    replicas: Option<Arc<dyn Replicas>>,
    refused_calls: Option<Arc<dyn RefusedCalls>>,
}

impl McpServerBuilder {
    /// How clients authenticate. With a bearer token, the token also keys session ids
    /// and sealed state, so both survive a restart.
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// A second bearer token whose holder may only read: tools annotated read-only,
    /// resources and prompts. Only with [`Auth::Bearer`].
    pub fn read_only_token(mut self, token: Option<&str>) -> Self {
        self.read_only_token = token.map(|t| sha2::Sha256::digest(t.as_bytes()).into());
        self
    }

    /// The secret keying session ids and MRTR state (usually the bearer token).
    pub fn signing_secret(mut self, secret: Option<String>) -> Self {
        self.secret = secret;
        self
    }

    /// Guidance for clients on using the server (`instructions` of `initialize` and
    /// `server/discover`).
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.info.instructions = text.into();
        self
    }

    /// The human-readable name in `serverInfo` (default: the server's name).
    pub fn title(mut self, text: impl Into<String>) -> Self {
        self.info.title = text.into();
        self
    }

    /// `Origin` values allowed besides loopback ones, each exact
    /// (`https://tool.example`).
    pub fn allowed_origins(mut self, origins: Vec<String>) -> Self {
        self.allowed_origins = origins;
        self
    }

    /// `Host` names (without port) allowed besides loopback ones.
    pub fn allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = hosts;
        self
    }

    /// The largest request body accepted, in bytes; a larger one is refused with 413
    /// (default: 4 MiB).
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// How long a request body may take to arrive in full.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// How many legacy sessions are kept, for how long, and what their streams keep.
    pub fn sessions(mut self, config: SessionConfig) -> Self {
        self.sessions = config;
        self
    }

    /// Adds tools to serve; [`build`](Self::build) refuses two with the same name.
    pub fn tools(mut self, tools: Vec<Arc<dyn Tool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Adds a provider of resources to serve.
    pub fn resources(mut self, provider: Arc<dyn ResourceProvider>) -> Self {
        self.resources.push(provider);
        self
    }

    /// Adds prompts to serve; [`build`](Self::build) refuses two with the same name.
    pub fn prompts(mut self, prompts: Vec<Arc<dyn Prompt>>) -> Self {
        self.prompts.extend(prompts);
        self
    }

    /// The redactor results pass through; shared, so the app can use the same one.
    pub fn redactor(mut self, redactor: Arc<Redactor>) -> Self {
        self.redactor = redactor;
        self
    }

    /// Use an existing notifier (so changes can be reported before the server exists).
    pub fn notifier(mut self, notifier: Notifier) -> Self {
        self.notifier = notifier;
        self
    }

    /// The other replicas sharing this server's state (the task store, the session
    /// ledger): every change is announced to them (see [`Replicas`]).
    pub fn replicas(mut self, replicas: Arc<dyn Replicas>) -> Self {
        self.replicas = Some(replicas);
        self
    }

    /// Where tasks are kept and how they are paced (default: in memory, one hour).
    pub fn tasks(mut self, config: TaskConfig) -> Self {
        self.tasks = config;
        self
    }

    /// Serves the Agent Skills in `dir` (one folder per skill, each with a `SKILL.md`)
    /// through the Skills extension and as `skill://` resources.
    pub fn skills_dir(self, dir: std::path::PathBuf) -> Self {
        self.skills(Arc::new(SkillFolder::load(dir)))
    }

    /// Serves the skills of `folder`, a live view the application may share (the bot's
    /// `list_skills` reads the same one).
    pub fn skills(mut self, folder: Arc<SkillFolder>) -> Self {
        let catalog = Arc::new(SkillCatalog::new(folder));
        self.resources.push(catalog.clone());
        self.skills = Some(catalog);
        self
    }

    /// Tells `refused` of the `tools/call`s refused before any tool ran.
    pub fn refused_calls(mut self, refused: Arc<dyn RefusedCalls>) -> Self {
        self.refused_calls = Some(refused);
        self
    }

    /// How often idle SSE streams get a keep-alive comment.
    pub fn keepalive(mut self, period: Duration) -> Self {
        self.keepalive = period;
        self
    }

    /// The server; an error names a tool or prompt that cannot be served.
    pub fn build(self) -> Result<McpServer, SetupError> {
        let secret = self.secret.as_deref();
        let tools = ToolSet::new(self.tools)?.with_refused_calls(self.refused_calls);
        let prompts = PromptSet::new(self.prompts)?;
        if let Some(replicas) = self.replicas {
            self.notifier.relay_to(replicas);
        }
        let tasks = tasks::TaskEngine::new(self.tasks, self.notifier.clone(), secret);
        Ok(McpServer {
            inner: Arc::new_cyclic(|this| ServerInner {
                info: self.info,
                tools,
                resources: self.resources,
                prompts,
                skills: self.skills,
                memo: methods::Memo::default(),
                sessions: session::Sessions::new(secret, self.sessions, self.notifier.clone()),
                notifier: self.notifier,
                tasks,
                sealer: Arc::new(SealingKey::new(secret, "mrtr-state")),
                redactor: self.redactor,
                guard: GuardConfig {
                    auth: self.auth,
                    read_only_token: self.read_only_token,
                    allowed_origins: self.allowed_origins,
                    allowed_hosts: self.allowed_hosts,
                    token_warnings: Default::default(),
                },
                limits: http::Limits {
                    max_body_bytes: self.max_body_bytes,
                    body_timeout: self.body_timeout,
                    keepalive: self.keepalive,
                },
                shutdown: tokio::sync::watch::channel(false).0,
                this: this.clone(),
            }),
        })
    }
}

/// A built MCP server; cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<ServerInner>,
}

impl McpServer {
    /// A builder for a server with this name and version, every other setting at its
    /// default; until [`auth`](McpServerBuilder::auth) is set, it answers 500 to all.
    pub fn builder(name: &str, version: &str) -> McpServerBuilder {
        McpServerBuilder {
            info: ServerInfo {
                name: name.to_string(),
                version: version.to_string(),
                title: name.to_string(),
                instructions: String::new(),
                cache_ttl_ms: 1000,
            },
            auth: Auth::Misconfigured,
            read_only_token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_body_bytes: 4 * 1024 * 1024,
            body_timeout: Duration::from_secs(30),
            sessions: SessionConfig::default(),
            secret: None,
            tools: Vec::new(),
            resources: Vec::new(),
            prompts: Vec::new(),
            redactor: Arc::default(),
            notifier: Notifier::default(),
            keepalive: Duration::from_secs(15),
            tasks: TaskConfig::default(),
            skills: None,
            replicas: None,
            refused_calls: None,
        }
    }

    /// `/mcp` with its own guards, plus JSON 404s for OAuth discovery probes.
    pub fn router(&self) -> Router {
        // Every `/mcp` handler runs the guard first (the 405 for other methods too), and
        // only `/mcp` has them: a guard around the router would also answer the merged
        // app's 404 fallback, so a mistyped path would answer 401 instead of 404. Each
        // also redacts its error answers on their way out ([`porthole_core::redact::redact_error`]).
        let mcp = Router::new()
            .route(
                "/mcp",
                post(http::handle_post)
                    .get(http::handle_get)
                    .delete(http::handle_delete)
                    .fallback(http::handle_other),
            )
            .with_state(self.inner.clone());
        Router::new()
            .merge(mcp)
            .route("/.well-known/{*probe}", any(oauth_discovery_not_found))
    }

    /// Ends every open SSE stream (GET streams, subscriptions, replies in flight), so a
    /// graceful HTTP shutdown does not wait for clients that never hang up.
    pub fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// The server's notifier, through which the application reports changes to clients.
    pub fn notifier(&self) -> Notifier {
        self.inner.notifier.clone()
    }

    /// How many legacy sessions are live in this process.
    pub fn live_sessions(&self) -> usize {
        self.inner.sessions.live_count()
    }

    /// How many tools the server serves.
    pub fn tool_count(&self) -> usize {
        self.inner.tools.len()
    }

    /// Start-up, before serving: unfinished tasks this server ran before it restarted,
    /// and those of replicas whose lease ran out, were cut short; they become `failed`
    /// with the reason. Returns how many.
    pub async fn recover_tasks(&self) -> Result<usize, StoreFailure> {
        self.inner.tasks.recover(true).await
    }

    /// Re-reads the skills folder every `period` when it changed, and tells clients the
    /// resource list changed. Does nothing without a skills folder.
    pub fn spawn_skills_watch(&self, period: Duration) -> Option<tokio::task::JoinHandle<()>> {
        let catalog = self.inner.skills.clone()?;
        let notifier = self.inner.notifier.clone();
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            loop {
                tick.tick().await;
                if catalog.refresh().await {
                    tracing::info!(target: "porthole::mcp::skills", "the skills folder changed; skills re-read");
                    notifier.send(Change::ResourcesListChanged);
                }
            }
        }))
    }

    /// Evicts idle sessions (and forgets expired tasks) every
    /// [`SessionConfig::sweep_interval`] (half the idle timeout, at most 30 s), and keeps
    /// the leases of running tasks (see [`TaskConfig::lease_renewal`]), until the runtime
    /// stops.
    pub fn spawn_housekeeping(&self) -> tokio::task::JoinHandle<()> {
        let inner = self.inner.clone();
        let period = inner.sessions.sweep_interval();
        tokio::spawn(async move {
            let sweep = async {
                let mut tick = tokio::time::interval(period);
                loop {
                    tick.tick().await;
                    inner.sessions.evict_idle().await;
                    inner.tasks.purge_expired().await;
                }
            };
            tokio::join!(sweep, inner.tasks.keep_leases());
        })
    }
}

/// Clients probe OAuth metadata before connecting; a JSON 404 tells them there is
/// none, so a bearer-token client connects without detours.
async fn oauth_discovery_not_found() -> (StatusCode, axum::Json<serde_json::Value>) {
    (
        StatusCode::NOT_FOUND,
        axum::Json(serde_json::json!({
            "error": "not_found",
            "error_description": "This server uses a static bearer token (Authorization: Bearer <MCP_SERVER_SECRET>), not OAuth."
        })),
    )
}

/// The README's mount example, compiled by `cargo test --doc` so it cannot drift.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeMountExample;
