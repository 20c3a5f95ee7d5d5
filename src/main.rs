//! The `porthole` binary.
//!
//! - `porthole` — reads configuration, sets up logging, runs the bot until Ctrl-C or
//!   SIGTERM;
//! - `porthole token` — creates `MCP_SERVER_SECRET` in `.env` if it is absent and prints
//!   the `claude mcp add` line to connect with it;
//! - `porthole token --print` — prints the secret alone, read as the bot reads it, which
//!   is what the connect line's `$(…)` runs: the line works in any shell, pasted anywhere.

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use std::sync::{Arc, Mutex};

use porthole::app::Logging;
use porthole::bot::store::StoreError;
use porthole::bot::{BotError, WEB_CONSOLE_TARGET};
use porthole::config::Config;
use porthole::diagnostics::LogFilterControl;
use porthole::env_file::EnvFile;
use porthole::logs::buffer::LogBuffer;
use porthole::logs::file::LogFile;
use porthole::logs::journal::LogJournal;
use porthole::logs::redaction::{RedactedStdout, redact_logs_with};
use porthole::mcp::McpServer;
use porthole::redact::Redactor;
use std::net::SocketAddr;
use std::path::Path;

const USAGE: &str = "usage: porthole [token [--print] | --help]

  porthole                run the bot (configuration from the environment and .env)
  porthole token          add a random MCP_SERVER_SECRET to .env (if absent) and print
                          the command that connects Claude Code
  porthole token --print  print MCP_SERVER_SECRET alone, as the bot reads it";

/// How a user runs the binary from the repository (what every printed hint says).
const RUN_TOKEN: &str = "cargo run --release -- token";

/// mimalloc instead of glibc's allocator: the request path allocates many small JSON
/// values, and glibc `malloc`/`free` were a quarter of the server's time under load
/// (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Every so often, freed memory goes back to the OS. mimalloc purges freed pages only
/// when later allocator activity comes along, so after a burst (10,000 sessions
/// evicted at once) RSS stayed 40 % above where it started. Purging at once on every
/// free costs 7 % of throughput under load; a sweep every few seconds costs nothing
/// measurable (docs/performance.md).
fn return_freed_memory_periodically() {
    tokio::spawn(async {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(10));
        loop {
            tick.tick().await;
            // SAFETY: asks the allocator to release what it can; no pointers involved.
            unsafe { libmimalloc_sys::mi_collect(true) };
        }
    });
}

#[tokio::main]
async fn main() -> ExitCode {
    return_freed_memory_periodically();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => run().await,
        ["token"] => token(),
        ["token", "--print"] => print_token(),
        ["-h" | "--help" | "help"] => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        ["token", other, ..] => {
            eprintln!("porthole: `token` takes only `--print`, not `{other}`\n\n{USAGE}");
            ExitCode::from(2)
        }
        [command @ ("-h" | "--help" | "help"), _, ..] => {
            eprintln!("porthole: `{command}` takes no arguments\n\n{USAGE}");
            ExitCode::from(2)
        }
        [other, ..] => {
            eprintln!("porthole: unknown command `{other}`\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The configuration from `.env` and the environment: a `.env` line that cannot be read
/// and a value that cannot be used are both configuration errors (exit code 2).
fn read_config() -> Result<Config, String> {
    let env_file = EnvFile::load(Path::new(".env")).map_err(|e| e.to_string())?;
    Config::from_env(&env_file).map_err(|e| e.to_string())
}

async fn run() -> ExitCode {
    porthole::serve::raise_open_file_limit();
    let config = match read_config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("porthole: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = EnvFilter::try_new(&config.log_filter).unwrap_or_else(|e| {
        eprintln!(
            "porthole: RUST_LOG={:?} is invalid ({e}); using `info`",
            config.log_filter
        );
        EnvFilter::new("info")
    });
    // The log buffer exists only with MCP enabled: disabled MCP costs nothing.
    let buffer = config
        .mcp
        .enabled
        .then(|| LogBuffer::new(config.mcp.log_buffer_size));
    // So is the journal that keeps warnings, errors and audit records in the database.
    let journal = config.mcp.enabled.then(LogJournal::new);
    let log_file = match &config.log_file {
        None => None,
        Some(path) => match LogFile::open(path, config.log_file_max_bytes) {
            Ok(file) => Some(file),
            Err(e) => {
                eprintln!(
                    "porthole: LOG_FILE={} cannot be opened for writing: {e}; fix the path or unset LOG_FILE",
                    path.display()
                );
                return ExitCode::from(2);
            }
        },
    };
    // Until the bot knows every secret (its MCP servers' and user tools' too), the log
    // redacts those of the configuration.
    redact_logs_with(Arc::new(Redactor::new(config.secret_values())));
    let initial_filter = filter.to_string();
    let (filter, reload) = tracing_subscriber::reload::Layer::new(filter);
    tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(RedactedStdout))
        .with(
            buffer
                .as_ref()
                .map(|b| b.layer().skipping(WEB_CONSOLE_TARGET)),
        )
        .with(log_file.as_ref().map(|f| f.layer(WEB_CONSOLE_TARGET)))
        .with(journal.as_ref().map(|j| j.layer(WEB_CONSOLE_TARGET)))
        .init();
    let logging = Logging {
        buffer,
        filter: Some(Arc::new(ReloadableFilter {
            handle: reload,
            current: Mutex::new(initial_filter),
        })),
        file: log_file,
        journal,
    };

    let app = match porthole::app::start(config, logging).await {
        Ok(app) => app,
        Err(e) => return start_failed(&e),
    };
    if let Some(server) = &app.mcp {
        announce_mcp(&app.bot.config, app.addr, server);
    }
    let stop = app.shutdown_handle();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        let _ = stop.send(true);
    });
    app.wait().await;
    tracing::info!("stopped");
    ExitCode::SUCCESS
}

/// Tells a newcomer, once, how to connect Claude Code. Never prints the token. An
/// endpoint that cannot serve (enabled without a secret) is not called ready.
fn announce_mcp(config: &Config, addr: SocketAddr, server: &McpServer) {
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    let url = format!("http://{host}:{}/mcp", addr.port());
    if config.mcp.secret.is_some() || config.mcp.auth_disabled {
        tracing::info!(tools = server.tool_count(), "MCP endpoint ready at {url}");
    }
    println!("{}", connect_instructions(config, &url));
}

/// The one `claude mcp add` line the banner and `token` print. The token is read when
/// the line runs, by `token --print` in the bot's folder, so the line works pasted in
/// any shell (none needs `MCP_SERVER_SECRET` exported) and the screen never shows it.
fn claude_mcp_add(url: &str) -> String {
    format!(
        "claude mcp add --transport http porthole {url} --header \"Authorization: Bearer $({RUN_TOKEN_PRINT})\""
    )
}

/// What start-up prints about `/mcp`: the `claude mcp add` line when the endpoint can
/// be used, and what to set instead when it is enabled without a secret (then every
/// request answers 500, so a connect line would only lead to errors).
fn connect_instructions(config: &Config, url: &str) -> String {
    match (&config.mcp.secret, config.mcp.auth_disabled) {
        (_, true) => format!(
            "\nPorthole MCP endpoint: {url} (authentication is DISABLED)\nConnect Claude Code with:\n  \
             claude mcp add --transport http porthole {url}\n"
        ),
        (Some(_), false) => format!(
            "\nPorthole MCP endpoint: {url}\nConnect Claude Code from this folder (the token is read from .env by `token --print`):\n  {}\n",
            claude_mcp_add(url)
        ),
        (None, false) => format!(
            "\nPorthole MCP endpoint: {url} is NOT usable yet: MCP_SERVER_ENABLED=true but MCP_SERVER_SECRET is not set, \
             so every /mcp request answers 500 \"Server misconfigured\".\n\
             To fix it, run `{RUN_TOKEN}`, which writes a new MCP_SERVER_SECRET to .env,\n\
             or set MCP_SERVER_SECRET yourself (at least 16 characters, e.g. `openssl rand -hex 32`); then restart the bot.\n"
        ),
    }
}

/// The command the connect line runs for its token. "From this folder", the banner and
/// `token` say: `$(…)` reads that folder's `.env`, and `claude mcp add` keeps a server
/// for the folder it runs in unless told `--scope user`.
const RUN_TOKEN_PRINT: &str = "cargo run -q --release -- token --print";

/// The `set_log_level` tool's handle on the subscriber's filter.
struct ReloadableFilter<S> {
    handle: tracing_subscriber::reload::Handle<EnvFilter, S>,
    current: Mutex<String>,
}

impl<S: 'static> LogFilterControl for ReloadableFilter<S> {
    fn current(&self) -> String {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set(&self, filter: &str) -> Result<(), String> {
        let parsed = EnvFilter::try_new(filter).map_err(|e| e.to_string())?;
        self.handle.reload(parsed).map_err(|e| e.to_string())?;
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = filter.to_string();
        Ok(())
    }
}

/// Says why start-up failed: a value that cannot be used is a configuration error
/// (exit code 2), as for every variable; anything else is a failure (1).
fn start_failed(e: &anyhow::Error) -> ExitCode {
    if matches!(
        e.downcast_ref::<BotError>(),
        Some(BotError::Store(StoreError::BadUrl { .. }))
    ) {
        eprintln!("porthole: configuration error: {e}");
        return ExitCode::from(2);
    }
    tracing::error!("start-up failed: {e:#}");
    ExitCode::FAILURE
}

/// Makes sure `.env` enables MCP with a usable secret: keeps an existing one (from
/// `.env` or the environment, read and checked as the bot reads them), otherwise writes
/// a new random one (an empty or too short one is replaced); replaces every
/// `MCP_SERVER_ENABLED` assignment, however it is written (an earlier `false` would
/// win over an appended `true`). The result is checked as the bot will read it before
/// it is written, atomically; a `.env` the bot could not read is refused untouched.
fn token() -> ExitCode {
    let path = Path::new(".env");
    let env_file = match EnvFile::load(path) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("porthole: {e}; fix that line, then run `{RUN_TOKEN}` again");
            return ExitCode::from(2);
        }
    };
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    let keeps_secret = Config::from_env(&env_file).is_ok_and(|c| c.mcp.secret.is_some());
    let new_secret = (!keeps_secret).then(|| porthole::text::hex(&rand::random::<[u8; 32]>()));
    let text = with_mcp_enabled(&existing, new_secret.as_deref());
    // What the bot will read from the new file (the environment still wins).
    let config = match EnvFile::parse(&text)
        .map_err(|(line, reason)| format!("line {line}: {reason}"))
        .and_then(|file| Config::from_env(&file).map_err(|e| e.to_string()))
    {
        Ok(config) => config,
        Err(e) => {
            eprintln!(
                "porthole: configuration error: {e}; .env was left as it was (a variable set in \
                 the environment wins over .env: fix or unset it there), then run `{RUN_TOKEN}` again"
            );
            return ExitCode::from(2);
        }
    };
    let temporary = Path::new(".env.porthole-tmp");
    let written = write_private(temporary, &text).and_then(|_| std::fs::rename(temporary, path));
    if let Err(e) = written {
        eprintln!("porthole: cannot write .env: {e}");
        return ExitCode::FAILURE;
    }
    let url = format!("http://127.0.0.1:{}/mcp", config.port);
    let what = if new_secret.is_some() {
        "Wrote MCP_SERVER_ENABLED=true and a new MCP_SERVER_SECRET to .env."
    } else {
        "MCP_SERVER_SECRET is already set (in .env or the environment); kept it and made sure MCP_SERVER_ENABLED=true."
    };
    println!(
        "{what}\nStart the bot (cargo run --release), then connect Claude Code from this folder with:\n  {}",
        claude_mcp_add(&url)
    );
    ExitCode::SUCCESS
}

/// `token --print`: the secret alone on standard output, read from `.env` and the
/// environment exactly as the bot reads them (`export`, spaces, quotes, CRLF), for the
/// connect line's `$(…)` and for scripts. Nothing on standard output when there is none,
/// so a `$(…)` around it never captures an error message as a token.
fn print_token() -> ExitCode {
    match read_config() {
        Ok(config) => match &config.mcp.secret {
            Some(secret) => {
                println!("{secret}");
                ExitCode::SUCCESS
            }
            None => {
                eprintln!(
                    "porthole: no MCP_SERVER_SECRET in .env or the environment; run `{RUN_TOKEN}` to create one"
                );
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("porthole: configuration error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `.env` text with every `MCP_SERVER_ENABLED` assignment (and, when a new secret is
/// given, every `MCP_SERVER_SECRET` one) taken out, whole lines as the reader sees
/// them, then `MCP_SERVER_ENABLED=true` and the new secret appended.
fn with_mcp_enabled(existing: &str, new_secret: Option<&str>) -> String {
    let replaced = |name: &str| {
        name == "MCP_SERVER_ENABLED" || (new_secret.is_some() && name == "MCP_SERVER_SECRET")
    };
    // The caller loaded this text already, so it parses.
    let dropped: Vec<std::ops::Range<usize>> = porthole::env_file::assignments(existing)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| replaced(&a.name))
        .map(|a| a.lines)
        .collect();
    let mut lines: Vec<&str> = existing
        .lines()
        .enumerate()
        .filter(|(index, _)| !dropped.iter().any(|range| range.contains(index)))
        .map(|(_, line)| line)
        .collect();
    lines.push("MCP_SERVER_ENABLED=true");
    let secret_line = new_secret.map(|secret| format!("MCP_SERVER_SECRET={secret}"));
    lines.extend(secret_line.as_deref());
    lines.join("\n") + "\n"
}

/// Writes a new file only its owner can read (0600 on Unix): `.env` holds the token and
/// API keys. A file left at `path` by an earlier run (or planted there) is removed
/// first, so the write never follows a link or keeps another file's permissions.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(text.as_bytes())
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
