//! Start-up wiring: configuration → services → router → serve, and a clean shutdown.
//! `main` calls [`start`]; integration tests call it too, on port 0.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

use crate::bot::{Bot, TracingWebLogSink, WebLogSink};
use crate::config::Config;
use crate::diagnostics::{self, Diagnostics, LogFilterControl};
use crate::logs::buffer::LogBuffer;
use crate::logs::file::LogFile;
use crate::logs::journal::LogJournal;
use crate::mcp::{Auth, McpServer, SessionConfig, TaskConfig};

/// A bot that is serving. Dropping it does not stop it; call [`RunningApp::shutdown`].
pub struct RunningApp {
    pub addr: SocketAddr,
    pub bot: Arc<Bot>,
    pub mcp: Option<McpServer>,
    shutdown: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    scheduler: Option<tokio::task::JoinHandle<()>>,
}

impl RunningApp {
    /// The base URL, e.g. `http://127.0.0.1:3000`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting connections, lets in-flight requests finish, stops the scheduler.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        self.wait().await;
    }

    /// Resolves when a shutdown was requested and everything stopped, the traces of
    /// the last turns stored and exported (a bounded wait for the collector).
    pub async fn wait(self) {
        let _ = self.server.await;
        if let Some(s) = self.scheduler {
            let _ = s.await;
        }
        self.bot.tracer.flush_export().await;
    }

    pub fn shutdown_handle(&self) -> watch::Sender<bool> {
        self.shutdown.clone()
    }
}

/// What the process's logging setup hands to the app.
#[derive(Default, Clone)]
pub struct Logging {
    /// The buffer the process's tracing layer feeds (MCP enabled); a fresh one is made
    /// when `None`, e.g. in tests that install no layer.
    pub buffer: Option<Arc<LogBuffer>>,
    /// The reloadable filter, for the `set_log_level` tool.
    pub filter: Option<Arc<dyn LogFilterControl>>,
    /// The log file the process writes (`LOG_FILE`), for `server_log`.
    pub file: Option<Arc<LogFile>>,
    /// The journal the process's tracing layer feeds with warnings, errors and audit
    /// records (MCP enabled); the app writes it to the store. A fresh, unfed one is made
    /// when `None`, so `server_log` still reads what earlier runs stored.
    pub journal: Option<Arc<LogJournal>>,
}

/// `/mcp` tasks kept in the bot's database (so results outlive a restart).
fn task_config(bot: &Bot) -> TaskConfig {
    TaskConfig {
        store: Arc::new(diagnostics::StoredTasks::new(
            bot.store.clone(),
            bot.config.replica_id.clone(),
        )),
        ttl: bot.config.mcp.task_ttl,
        ..TaskConfig::default()
    }
}

/// Before serving: tasks a shutdown cut short now read `failed` with the reason.
async fn recover_mcp_tasks(server: &McpServer) -> anyhow::Result<()> {
    match server.recover_tasks().await {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            "{n} MCP task(s) were still running when the bot stopped; they now read `failed` with the reason"
        ),
        Err(e) => return Err(anyhow::anyhow!("cannot read the MCP tasks: {e}")),
    }
    Ok(())
}

/// How `/mcp` checks tokens: the bearer secret, or (said loudly) none at all, or a
/// refusal of every request when the secret is missing.
fn mcp_auth(c: &crate::config::McpServerConfig) -> Auth {
    match (&c.secret, c.auth_disabled) {
        (_, true) => {
            tracing::warn!(
                "MCP_SERVER_AUTH_DISABLED=true: /mcp accepts requests WITHOUT a token. Any program on this machine can read \
                 the bot's logs, database and config, run its tools and send it messages. Use only on a single-user machine."
            );
            Auth::Disabled
        }
        (Some(secret), false) => Auth::bearer(secret),
        (None, false) => {
            tracing::error!(
                "MCP_SERVER_ENABLED=true but MCP_SERVER_SECRET is not set: /mcp will answer 500 \"Server misconfigured\". \
                 Run `cargo run --release -- token` to create one, then restart."
            );
            Auth::Misconfigured
        }
    }
}

/// Builds the `/mcp` server over the bot's services.
async fn build_mcp(
    bot: &Arc<Bot>,
    buffer: Arc<LogBuffer>,
    logging: Logging,
) -> anyhow::Result<McpServer> {
    let c = &bot.config.mcp;
    let auth = mcp_auth(c);
    let replicas = diagnostics::link_replicas(bot).await;
    let ledger = diagnostics::StoredSessionLedger::load(bot.store.clone(), c.session_max_age)
        .await
        .map_err(|e| anyhow::anyhow!("cannot read the ended MCP sessions: {e}"))?;
    let journal = logging.journal.unwrap_or_else(LogJournal::new);
    diagnostics::spawn_journal_writer(bot, &journal);
    let diagnostics = Diagnostics::new(
        bot.clone(),
        buffer,
        logging.filter,
        logging.file,
        journal,
        diagnostics::Settings {
            db_query_readonly: c.db_query_readonly,
            send_message_timeout: c.send_message_timeout,
            statement_timeout: std::time::Duration::from_secs(30),
        },
    );
    let mut builder = McpServer::builder("porthole", env!("CARGO_PKG_VERSION"));
    if let Some(link) = &replicas {
        builder = builder.replicas(link.seam());
    }
    let server = builder
        .title("Porthole")
        .instructions(
            "Diagnostics for the running Porthole bot: read its logs (server_log, web_log, health), its database \
             (db_query, list_conversations, list_messages), its tools, agents, tasks, skills and configuration, and talk \
             to it (send_message). Results are live. Secrets are redacted.",
        )
        .auth(auth)
        .read_only_token(c.read_only_secret.as_deref())
        .signing_secret(c.secret.clone())
        .allowed_origins(c.allowed_origins.clone())
        .allowed_hosts(c.allowed_hosts.clone())
        .max_body_bytes(c.max_body_bytes)
        .body_timeout(c.body_timeout)
        .sessions(SessionConfig {
            max_sessions: c.max_sessions,
            idle_timeout: c.session_idle,
            max_age: c.session_max_age,
            ledger: Some(Arc::new(ledger)),
            streams: c.stream_limits,
        })
        .tasks(task_config(bot))
        .skills(bot.skills.clone())
        .redactor(bot.redactor.clone())
        .tools(offered_mcp_tools(&diagnostics, &c.tools_filter))
        .resources(diagnostics::resources(&diagnostics))
        .prompts(diagnostics::prompts(&diagnostics))
        .refused_calls(diagnostics::refused_calls(&diagnostics))
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the MCP server: {e}"))?;
    let _ = diagnostics.server.set(server.clone());
    recover_mcp_tasks(&server).await?;

    diagnostics::forward_tool_changes(bot, server.notifier());
    diagnostics::forward_conversation_changes(bot, server.notifier());
    if let Some(link) = replicas {
        link.apply_to(server.clone());
    }
    Ok(server)
}

/// The diagnostics tools `/mcp` serves: those `MCP_TOOLS_INCLUDE`/`MCP_TOOLS_EXCLUDE`
/// let through. An include pattern that matches nothing is most likely a typo, so it
/// is named in a warning.
fn offered_mcp_tools(
    diagnostics: &Arc<Diagnostics>,
    filter: &crate::tool_filter::ToolFilter,
) -> Vec<Arc<dyn crate::mcp::Tool>> {
    let all = diagnostics::tools(diagnostics);
    if filter.is_empty() {
        return all;
    }
    let names: Vec<String> = all.iter().map(|t| t.spec().name).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for pattern in filter.unmatched_includes(&names) {
        tracing::warn!(
            pattern,
            "MCP_TOOLS_INCLUDE pattern matches no diagnostics tool; check its spelling (see docs/tools.md)"
        );
    }
    let offered: Vec<_> = all
        .into_iter()
        .filter(|t| filter.allows(&t.spec().name))
        .collect();
    tracing::info!(
        offered = offered.len(),
        of = names.len(),
        "MCP_TOOLS_INCLUDE/MCP_TOOLS_EXCLUDE trim the tools /mcp serves"
    );
    if offered.is_empty() {
        tracing::warn!("MCP_TOOLS_INCLUDE/MCP_TOOLS_EXCLUDE leave /mcp with no tools at all");
    }
    offered
}

/// The answer to a path no route serves: a JSON 404 that says where `/mcp` is (a mistyped
/// `/mcpx` or `/mcp/` is the usual cause) or, for `/mcp…` while the endpoint is off, how
/// to turn it on. An empty 404 left a client saying "endpoint not found" with no cause.
/// The path asked for is not echoed: the answer is the same for every caller.
fn not_found(mcp_on: bool) -> axum::routing::MethodRouter {
    axum::routing::any(move |uri: axum::http::Uri| async move {
        let error = if mcp_on {
            "Not Found: no route for this path; the MCP endpoint is /mcp"
        } else if uri.path().starts_with("/mcp") {
            "Not Found: the MCP endpoint is off; run `cargo run --release -- token` (it sets \
             MCP_SERVER_ENABLED=true in .env), then restart the bot"
        } else {
            "Not Found: no route for this path"
        };
        (
            axum::http::StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({ "error": error })),
        )
    })
}

/// Builds every service and starts serving on `config.host:config.port`.
pub async fn start(config: Config, logging: Logging) -> anyhow::Result<RunningApp> {
    let mcp_enabled = config.mcp.enabled;
    let buffer = mcp_enabled.then(|| {
        logging
            .buffer
            .clone()
            .unwrap_or_else(|| LogBuffer::new(config.mcp.log_buffer_size))
    });
    let sink: Arc<dyn WebLogSink> = match &buffer {
        Some(buffer) => Arc::new(diagnostics::BufferedWebLogSink::new(buffer.clone())),
        None => Arc::new(TracingWebLogSink),
    };
    let bot = Bot::build(config, sink)?;
    crate::logs::redaction::redact_logs_with(bot.redactor.clone());
    bot.restore_tool_settings().await;
    bot.connect_mcp_servers().await;
    let mut router = crate::bot::web::router(bot.clone());
    let mut mcp = None;
    if let Some(buffer) = buffer {
        let server = build_mcp(&bot, buffer, logging).await?;
        server.spawn_housekeeping();
        server.spawn_skills_watch(std::time::Duration::from_secs(2));
        router = router.merge(server.router());
        mcp = Some(server);
    }
    let router = router.fallback(not_found(mcp.is_some()));

    let bind = SocketAddr::new(bot.config.host, bot.config.port);
    let listener = tokio::net::TcpListener::bind(bind).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on {bind}: {e}; set PORT to a free port (or HOST)")
    })?;
    let addr = listener.local_addr()?;
    tracing::info!("listening on http://{addr}");

    let (shutdown, shutdown_rx) = watch::channel(false);
    let scheduler = bot
        .config
        .scheduler_enabled
        .then(|| tokio::spawn(bot.schedule.clone().run_scheduler(shutdown_rx.clone())));
    let server = tokio::spawn(serve(
        listener,
        router,
        shutdown_rx,
        mcp.clone(),
        bot.clone(),
    ));
    Ok(RunningApp {
        addr,
        bot,
        mcp,
        shutdown,
        server,
        scheduler,
    })
}

/// How long shutdown waits for open connections before it stops anyway.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves until `stop` turns true, then ends MCP streams, lets requests in flight
/// finish (up to [`SHUTDOWN_GRACE`]) and disconnects the bot's MCP servers.
async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    stop: watch::Receiver<bool>,
    mcp: Option<McpServer>,
    bot: Arc<Bot>,
) {
    let limits = crate::serve::Limits {
        max_connections: bot.config.http_max_connections,
        header_timeout: bot.config.http_header_timeout,
    };
    let mut graceful = stop.clone();
    let serving = crate::serve::serve(listener, router, limits, async move {
        let _ = graceful.wait_for(|stop| *stop).await;
        if let Some(mcp) = mcp {
            mcp.shutdown();
        }
    });
    let mut deadline = stop;
    tokio::select! {
        () = serving => {}
        _ = async {
            let _ = deadline.wait_for(|stop| *stop).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            tracing::warn!("connections still open after {} s; stopping anyway", SHUTDOWN_GRACE.as_secs());
        }
    }
    bot.mcp_host.shutdown().await;
}
