//! Runtime configuration: environment variables (and `.env`) → one typed [`Config`].
//!
//! Every variable has a default, listed in `.env.example` and the README. A bad value
//! stops start-up with an error that names the variable and says what is allowed, so a
//! typo never silently falls back to a default.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::env_file::EnvFile;
use crate::model::ConversationLimits;
use crate::tool_filter::ToolFilter;

mod error;

pub use error::ConfigError;

/// Which LLM backend answers chat messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmProviderKind {
    /// No model: replies honestly that none is configured; slash commands still work.
    Offline,
    /// Any OpenAI-compatible chat completions API (OpenAI, Ollama, llama.cpp, vLLM).
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
}

impl LlmProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Offline => "offline",
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub provider: LlmProviderKind,
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub timeout: Duration,
}

/// Settings of the `/mcp` endpoint. Read by `main`/`app`, never by the `bot` layer.
#[derive(Debug, Clone)]
pub struct McpServerConfig {
    pub enabled: bool,
    pub secret: Option<String>,
    /// A second token that may only read (read-only tools, resources, prompts).
    pub read_only_secret: Option<String>,
    pub auth_disabled: bool,
    pub log_buffer_size: usize,
    pub max_body_bytes: usize,
    pub body_timeout: Duration,
    pub max_sessions: usize,
    pub session_idle: Duration,
    pub session_max_age: Duration,
    /// What each SSE stream keeps for a client that reconnects with `Last-Event-ID`
    /// (`MCP_STREAM_BACKLOG_EVENTS`, `MCP_STREAM_BACKLOG_BYTES`, `MCP_STREAM_RESUME_SECS`).
    pub stream_limits: crate::mcp::session::StreamLimits,
    /// `MCP_TASK_TTL_SECS`: how long a `/mcp` task and its result are kept when the
    /// client names no ttl (2026-07-28 tasks never do).
    pub task_ttl: Duration,
    pub allowed_origins: Vec<String>,
    pub allowed_hosts: Vec<String>,
    pub send_message_timeout: Duration,
    pub db_query_readonly: bool,
    /// `MCP_TOOLS_INCLUDE`/`MCP_TOOLS_EXCLUDE`: which diagnostics tools `/mcp` serves.
    pub tools_filter: ToolFilter,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub host: IpAddr,
    pub port: u16,
    /// Most open HTTP connections at once (lowered to fit the open-file limit).
    pub http_max_connections: usize,
    /// How long a request's headers may take to arrive; also closes idle keep-alives.
    pub http_header_timeout: Duration,
    pub database_path: String,
    /// `DATABASE_URL`: a `postgres://` URL; when set, the store is PostgreSQL and
    /// `DATABASE_PATH` is not used. Holds a password: never shown unredacted.
    pub database_url: Option<String>,
    /// `PORTHOLE_REPLICA_ID`: names this process among replicas sharing one database
    /// (default: hostname and process id).
    pub replica_id: String,
    /// `CONVERSATION_MAX_COUNT`/`CONVERSATION_MAX_AGE_SECS`: how much chat history the
    /// store keeps (by default all of it).
    pub conversations: ConversationLimits,
    pub llm: LlmConfig,
    pub agent_max_steps: usize,
    pub tool_timeout: Duration,
    pub workspace_dir: PathBuf,
    pub user_tools_dir: PathBuf,
    pub skills_dir: PathBuf,
    pub mcp_servers_config: PathBuf,
    pub scheduler_enabled: bool,
    pub web_console_forwarding: bool,
    /// Extra `Host` names the web page, `/api` and `/ws` answer to (`*` = any).
    pub web_allowed_hosts: Vec<String>,
    /// Extra browser origins allowed to call `/api` and open `/ws`.
    pub web_allowed_origins: Vec<String>,
    pub log_filter: String,
    /// Also write the log (JSON lines) here; `server_log` reads it back.
    pub log_file: Option<PathBuf>,
    /// Size at which the log file is rotated to `<LOG_FILE>.1`.
    pub log_file_max_bytes: u64,
    /// `LOG_DB_MAX_EVENTS`: warnings, errors and audit records kept in the database
    /// (with MCP enabled), newest first.
    pub log_db_max_events: usize,
    /// `LLM_TOOLS_INCLUDE`/`LLM_TOOLS_EXCLUDE`: which bot tools the LLM is offered.
    pub llm_tools_filter: ToolFilter,
    pub mcp: McpServerConfig,
    pub trace: TraceConfig,
    /// The `.env` file's values of secret-named variables (`MY_SERVICE_PASSWORD=…`),
    /// redacted by value like the environment's (`Config::from_env` fills it).
    pub env_file_secrets: Vec<String>,
}

/// Turn traces: what is kept, and where spans are exported (OpenTelemetry).
#[derive(Debug, Clone)]
pub struct TraceConfig {
    /// `TRACE_ENABLED`: record turn traces at all.
    pub enabled: bool,
    /// `TRACE_MAX_TURNS`: traces kept in the store; the oldest go first.
    pub max_turns: usize,
    /// `TRACE_MAX_MCP_CALLS`: traces of `/mcp` tool calls (source `mcp`) kept, apart
    /// from the turns, so a busy MCP client never pushes the bot's turns out.
    pub max_mcp_calls: usize,
    /// `TRACE_MAX_AGE_SECS`: traces older than this are deleted.
    pub max_age: Duration,
    /// `TRACE_MAX_PAYLOAD_BYTES`: each request, response, argument or result kept up to
    /// this size, marked where cut.
    pub max_payload_bytes: usize,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: the OTLP/HTTP collector's base URL (spans go to
    /// `{endpoint}/v1/traces`); `None` exports nothing.
    pub otlp_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_HEADERS`: `name=value` pairs, comma-separated (secret).
    pub otlp_headers: Vec<(String, String)>,
    /// `OTEL_SERVICE_NAME` (default `porthole`); also the Phoenix project name.
    pub service_name: String,
    /// `REPLAY_MAX_PER_MINUTE`: provider calls replays (`replay_llm_call`, the page's
    /// Replay button) may make in any minute; they spend tokens.
    pub replay_max_per_minute: u32,
}

/// Reads variables from a lookup function so tests can pass a plain map.
struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl Vars<'_> {
    fn raw(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    fn string(&self, name: &str, default: &str) -> String {
        self.raw(name).unwrap_or_else(|| default.to_string())
    }

    fn bool(&self, name: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(ConfigError {
                    variable: name,
                    value: v,
                    allowed: "use true or false (also accepted: yes/no, on/off, 1/0)".into(),
                }),
            },
        }
    }

    fn number<T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy>(
        &self,
        name: &'static str,
        default: T,
        min: T,
        max: T,
    ) -> Result<T, ConfigError> {
        match self.raw(name) {
            None => Ok(default),
            Some(v) => match v.parse::<T>() {
                Ok(n) if n >= min && n <= max => Ok(n),
                _ => Err(ConfigError {
                    variable: name,
                    value: v,
                    allowed: format!("a whole number from {min} to {max}"),
                }),
            },
        }
    }

    /// A limit that `0` (or leaving it unset) switches off: `None`, or a whole number in
    /// `min..=max`. `off` says what `0` means, for the error message.
    fn optional_limit(
        &self,
        name: &'static str,
        min: u64,
        max: u64,
        off: &str,
    ) -> Result<Option<u64>, ConfigError> {
        match self.raw(name) {
            None => Ok(None),
            Some(v) => match v.parse::<u64>() {
                Ok(0) => Ok(None),
                Ok(n) if n >= min && n <= max => Ok(Some(n)),
                _ => Err(ConfigError {
                    variable: name,
                    value: v,
                    allowed: format!("0 ({off}) or a whole number from {min} to {max}"),
                }),
            },
        }
    }

    /// A whole number of seconds in `min..=max`.
    fn seconds(
        &self,
        name: &'static str,
        default: u64,
        min: u64,
        max: u64,
    ) -> Result<Duration, ConfigError> {
        Ok(Duration::from_secs(self.number(name, default, min, max)?))
    }

    /// An include/exclude pair of comma-separated tool-name globs; a bad pattern is
    /// reported against the variable that holds it.
    fn tool_filter(
        &self,
        include: &'static str,
        exclude: &'static str,
    ) -> Result<ToolFilter, ConfigError> {
        let patterns = |variable: &'static str| {
            let list = self.list(variable);
            ToolFilter::check_patterns(&list).map_err(|allowed| ConfigError {
                variable,
                value: self.raw(variable).unwrap_or_default(),
                allowed,
            })?;
            Ok(list)
        };
        Ok(ToolFilter::from_checked(
            patterns(include)?,
            patterns(exclude)?,
        ))
    }

    fn list(&self, name: &str) -> Vec<String> {
        self.raw(name)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Config {
    /// Reads the environment, with `env_file` (the working directory's `.env`) behind it:
    /// a variable set in the real environment wins.
    pub fn from_env(env_file: &EnvFile) -> Result<Self, ConfigError> {
        let mut config = Self::from_lookup(&|name| env_file.lookup(name))?;
        config.env_file_secrets = env_file.secret_values();
        Ok(config)
    }

    /// Builds a config from an explicit map (tests, embedding).
    pub fn from_map(map: &HashMap<String, String>) -> Result<Self, ConfigError> {
        Self::from_lookup(&|name| map.get(name).cloned())
    }

    fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let vars = Vars { lookup };
        let host_text = vars.string("HOST", "127.0.0.1");
        let host = host_text.parse::<IpAddr>().map_err(|_| ConfigError {
            variable: "HOST",
            value: host_text.clone(),
            allowed: "an IP address such as 127.0.0.1 or ::1".into(),
        })?;

        let llm = llm_config(&vars)?;
        let mcp = mcp_config(&vars)?;

        Ok(Config {
            host,
            port: vars.number("PORT", 3000u16, 0, u16::MAX)?,
            http_max_connections: vars.number(
                "HTTP_MAX_CONNECTIONS",
                16_384usize,
                16,
                1_000_000,
            )?,
            http_header_timeout: vars.seconds("HTTP_HEADER_TIMEOUT_SECS", 10, 1, 3600)?,
            database_path: vars.string("DATABASE_PATH", "data/porthole.db"),
            database_url: database_url(&vars)?,
            replica_id: vars
                .raw("PORTHOLE_REPLICA_ID")
                .unwrap_or_else(|| format!("{}-{}", hostname(), std::process::id())),
            conversations: conversation_limits(&vars)?,
            llm,
            agent_max_steps: vars.number("AGENT_MAX_STEPS", 8usize, 1, 100)?,
            tool_timeout: vars.seconds("TOOL_TIMEOUT_SECS", 30, 1, 3600)?,
            workspace_dir: vars.string("WORKSPACE_DIR", "workspace").into(),
            user_tools_dir: vars.string("USER_TOOLS_DIR", "user-tools").into(),
            skills_dir: vars.string("SKILLS_DIR", "skills").into(),
            mcp_servers_config: vars.string("MCP_SERVERS_CONFIG", "mcp.json").into(),
            scheduler_enabled: vars.bool("SCHEDULER_ENABLED", true)?,
            web_console_forwarding: vars.bool("WEB_CONSOLE_FORWARDING", false)?,
            web_allowed_hosts: vars.list("WEB_ALLOWED_HOSTS"),
            web_allowed_origins: vars.list("WEB_ALLOWED_ORIGINS"),
            log_filter: vars.string("RUST_LOG", "info"),
            log_file: vars.raw("LOG_FILE").map(PathBuf::from),
            log_file_max_bytes: vars.number(
                "LOG_FILE_MAX_BYTES",
                10 * 1024 * 1024u64,
                64 * 1024,
                10 * 1024 * 1024 * 1024,
            )?,
            log_db_max_events: vars.number("LOG_DB_MAX_EVENTS", 10_000usize, 100, 10_000_000)?,
            llm_tools_filter: vars.tool_filter("LLM_TOOLS_INCLUDE", "LLM_TOOLS_EXCLUDE")?,
            mcp,
            trace: trace_config(&vars)?,
            env_file_secrets: Vec::new(),
        })
    }

    /// Every secret value this process knows, for redaction by value.
    pub fn secret_values(&self) -> Vec<String> {
        let mut secrets: Vec<String> = [
            self.llm.api_key.clone(),
            self.mcp.secret.clone(),
            self.mcp.read_only_secret.clone(),
        ]
        .into_iter()
        .flatten()
        .collect();
        secrets.extend(self.trace.otlp_headers.iter().map(|(_, v)| v.clone()));
        secrets.extend(self.env_file_secrets.iter().cloned());
        secrets.extend(
            self.database_url
                .as_deref()
                .and_then(crate::redact::url_password),
        );
        secrets
    }

    /// What the store opens: `DATABASE_URL` when set, otherwise `DATABASE_PATH`.
    pub fn database_location(&self) -> &str {
        self.database_url.as_deref().unwrap_or(&self.database_path)
    }

    /// `DATABASE_URL` with its password redacted, if set.
    pub fn database_url_redacted(&self) -> Option<String> {
        self.database_url.as_deref().map(crate::redact::redact_url)
    }
}

/// `DATABASE_URL`: a PostgreSQL URL or nothing. A bad value is reported without the
/// password it may carry.
fn database_url(vars: &Vars) -> Result<Option<String>, ConfigError> {
    let Some(url) = vars.raw("DATABASE_URL") else {
        return Ok(None);
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Some(url));
    }
    Err(ConfigError {
        variable: "DATABASE_URL",
        value: url,
        allowed: "a PostgreSQL URL such as postgres://user:password@127.0.0.1:5432/porthole \
                  (leave it unset to use the SQLite file DATABASE_PATH)"
            .into(),
    })
}

/// `CONVERSATION_MAX_COUNT` and `CONVERSATION_MAX_AGE_SECS`. Both default to 0, which
/// keeps everything: the store is the user's chat history, and nothing of it goes unless
/// they ask. The age has the traces' floor of a minute, so no conversation can expire
/// between a user's message and the next.
fn conversation_limits(vars: &Vars) -> Result<ConversationLimits, ConfigError> {
    let max_count = vars.optional_limit(
        "CONVERSATION_MAX_COUNT",
        1,
        1_000_000_000,
        "keep every conversation",
    )?;
    let max_age = vars.optional_limit(
        "CONVERSATION_MAX_AGE_SECS",
        60,
        10 * 365 * 24 * 3600,
        "keep conversations of any age",
    )?;
    Ok(ConversationLimits {
        max_count: max_count.map(|n| n as usize),
        max_age: max_age.map(Duration::from_secs),
    })
}

/// This machine's name, for the default replica id and `health`/`list_agents`
/// (`unknown-host` if it has none). Read once: it names the replica for the life of
/// the process, and reading a file on every `list_agents` call cost a syscall each.
pub fn hostname() -> &'static str {
    static HOSTNAME: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|name| name.trim().to_string())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "unknown-host".to_string())
    });
    &HOSTNAME
}

/// `LLM_*`: the provider, where it is and which model.
fn llm_config(vars: &Vars) -> Result<LlmConfig, ConfigError> {
    let provider = match vars.raw("LLM_PROVIDER") {
        None if vars.raw("LLM_BASE_URL").is_some() || vars.raw("LLM_API_KEY").is_some() => {
            LlmProviderKind::OpenAi
        }
        None => LlmProviderKind::Offline,
        Some(v) => match v.to_ascii_lowercase().as_str() {
            "offline" => LlmProviderKind::Offline,
            "openai" => LlmProviderKind::OpenAi,
            "anthropic" => LlmProviderKind::Anthropic,
            _ => {
                return Err(ConfigError {
                    variable: "LLM_PROVIDER",
                    value: v,
                    allowed: "one of offline, openai, anthropic".into(),
                });
            }
        },
    };
    let (default_url, default_model) = match provider {
        LlmProviderKind::Offline => ("", "none"),
        LlmProviderKind::OpenAi => ("https://api.openai.com/v1", "gpt-4o-mini"),
        LlmProviderKind::Anthropic => ("https://api.anthropic.com", "claude-sonnet-4-5"),
    };
    let base_url = vars.string("LLM_BASE_URL", default_url);
    if provider != LlmProviderKind::Offline
        && !(base_url.starts_with("http://") || base_url.starts_with("https://"))
    {
        return Err(ConfigError {
            variable: "LLM_BASE_URL",
            value: base_url,
            allowed: "an http:// or https:// URL".into(),
        });
    }
    let llm = LlmConfig {
        provider,
        base_url: base_url.trim_end_matches('/').to_string(),
        api_key: vars.raw("LLM_API_KEY"),
        model: vars.string("LLM_MODEL", default_model),
        timeout: vars.seconds("LLM_TIMEOUT_SECS", 120, 1, 3600)?,
    };
    Ok(llm)
}

/// The `/mcp` endpoint's settings (`MCP_*`, `DB_QUERY_READONLY`).
fn mcp_config(vars: &Vars) -> Result<McpServerConfig, ConfigError> {
    let secret = vars.raw("MCP_SERVER_SECRET");
    if let Some(s) = &secret
        && s.len() < 16
    {
        return Err(ConfigError {
            variable: "MCP_SERVER_SECRET",
            value: "(hidden)".into(),
            allowed: "at least 16 characters; generate one with `cargo run --release -- token` or `openssl rand -hex 32`".into(),
        });
    }
    let read_only_secret = vars.raw("MCP_SERVER_READONLY_SECRET");
    if let Some(s) = &read_only_secret
        && (s.len() < 16 || Some(s) == secret.as_ref())
    {
        return Err(ConfigError {
            variable: "MCP_SERVER_READONLY_SECRET",
            value: "(hidden)".into(),
            allowed: "at least 16 characters, different from MCP_SERVER_SECRET; generate one with `openssl rand -hex 32`".into(),
        });
    }
    let mcp = McpServerConfig {
        read_only_secret,
        enabled: vars.bool("MCP_SERVER_ENABLED", false)?,
        secret,
        auth_disabled: vars.bool("MCP_SERVER_AUTH_DISABLED", false)?,
        log_buffer_size: vars.number("MCP_LOG_BUFFER_SIZE", 1000usize, 10, 1_000_000)?,
        max_body_bytes: vars.number(
            "MCP_MAX_BODY_BYTES",
            4 * 1024 * 1024usize,
            1024,
            256 * 1024 * 1024,
        )?,
        body_timeout: vars.seconds("MCP_BODY_TIMEOUT_SECS", 30, 1, 3600)?,
        max_sessions: vars.number("MCP_MAX_SESSIONS", 1000usize, 1, 1_000_000)?,
        session_idle: vars.seconds("MCP_SESSION_IDLE_SECS", 3600, 1, 7 * 24 * 3600)?,
        session_max_age: vars.seconds("MCP_SESSION_MAX_AGE_SECS", 24 * 3600, 60, 30 * 24 * 3600)?,
        stream_limits: crate::mcp::session::StreamLimits {
            backlog_events: vars.number("MCP_STREAM_BACKLOG_EVENTS", 128usize, 1, 100_000)?,
            backlog_bytes: vars.number(
                "MCP_STREAM_BACKLOG_BYTES",
                1_048_576usize,
                1024,
                1 << 30,
            )?,
            resume_window: vars.seconds("MCP_STREAM_RESUME_SECS", 120, 0, 3600)?,
        },
        task_ttl: vars.seconds("MCP_TASK_TTL_SECS", 3600, 10, 7 * 24 * 3600)?,
        allowed_origins: vars.list("MCP_ALLOWED_ORIGINS"),
        allowed_hosts: vars.list("MCP_ALLOWED_HOSTS"),
        send_message_timeout: vars.seconds("MCP_SEND_MESSAGE_TIMEOUT_SECS", 300, 1, 3600)?,
        db_query_readonly: vars.bool("DB_QUERY_READONLY", false)?,
        tools_filter: vars.tool_filter("MCP_TOOLS_INCLUDE", "MCP_TOOLS_EXCLUDE")?,
    };
    Ok(mcp)
}

fn trace_config(vars: &Vars) -> Result<TraceConfig, ConfigError> {
    let otlp_endpoint = vars.raw("OTEL_EXPORTER_OTLP_ENDPOINT");
    if let Some(url) = &otlp_endpoint
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(ConfigError {
            variable: "OTEL_EXPORTER_OTLP_ENDPOINT",
            value: url.clone(),
            allowed: "an http:// or https:// URL of an OTLP/HTTP collector, such as http://127.0.0.1:6006".into(),
        });
    }
    Ok(TraceConfig {
        enabled: vars.bool("TRACE_ENABLED", true)?,
        max_turns: vars.number("TRACE_MAX_TURNS", 1000usize, 1, 1_000_000)?,
        max_mcp_calls: vars.number("TRACE_MAX_MCP_CALLS", 1000usize, 1, 1_000_000)?,
        max_age: vars.seconds("TRACE_MAX_AGE_SECS", 7 * 24 * 3600, 60, 365 * 24 * 3600)?,
        max_payload_bytes: vars.number(
            "TRACE_MAX_PAYLOAD_BYTES",
            32 * 1024usize,
            256,
            16 * 1024 * 1024,
        )?,
        otlp_endpoint: otlp_endpoint.map(|u| u.trim_end_matches('/').to_string()),
        otlp_headers: otlp_headers(vars)?,
        service_name: vars.string("OTEL_SERVICE_NAME", "porthole"),
        replay_max_per_minute: vars.number("REPLAY_MAX_PER_MINUTE", 30u32, 1, 10_000)?,
    })
}

/// `OTEL_EXPORTER_OTLP_HEADERS`: `name=value,name=value`; values may be percent-encoded
/// spaces (`%20`) as the OpenTelemetry specification allows. The values are never echoed.
fn otlp_headers(vars: &Vars) -> Result<Vec<(String, String)>, ConfigError> {
    let Some(text) = vars.raw("OTEL_EXPORTER_OTLP_HEADERS") else {
        return Ok(Vec::new());
    };
    text.split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = name.trim();
            let valid_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
            if !valid_name || value.trim().is_empty() {
                return Err(ConfigError {
                    variable: "OTEL_EXPORTER_OTLP_HEADERS",
                    value: "(hidden)".into(),
                    allowed: "comma-separated name=value pairs, such as api_key=abc,x-team=llm"
                        .into(),
                });
            }
            Ok((name.to_string(), value.trim().replace("%20", " ")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_map(&map)
    }

    #[test]
    fn defaults_are_offline_on_loopback() {
        let c = config(&[]).unwrap();
        assert_eq!(c.host.to_string(), "127.0.0.1");
        assert_eq!(c.port, 3000);
        assert_eq!(c.llm.provider, LlmProviderKind::Offline);
        assert!(!c.mcp.enabled);
        assert_eq!(c.mcp.log_buffer_size, 1000);
    }

    #[test]
    fn secret_named_values_of_the_env_file_are_known_secrets() {
        let env_file =
            EnvFile::parse("MY_SERVICE_PASSWORD=dotenvpw-55667788\nGREETING=hello-there-friend\n")
                .unwrap();
        let secrets = Config::from_env(&env_file).unwrap().secret_values();
        assert!(
            secrets.contains(&"dotenvpw-55667788".to_string()),
            "{secrets:?}"
        );
        assert!(!secrets.contains(&"hello-there-friend".to_string()));
    }

    #[test]
    fn a_refused_value_is_shown_without_the_secret_it_holds() {
        for (variable, value, secret) in [
            (
                "DATABASE_URL",
                "host=db password=kvpassXYZ98765",
                "kvpassXYZ98765",
            ),
            ("DATABASE_URL", "mysql://u:dbpass-4455@h/db", "dbpass-4455"),
            ("LLM_BASE_URL", "ftp://u:llmurlpass-77@h", "llmurlpass-77"),
        ] {
            let e = config(&[(variable, value)]).unwrap_err();
            assert_eq!(e.variable, variable);
            for shown in [e.to_string(), format!("{e:?}")] {
                assert!(!shown.contains(secret), "{shown}");
                assert!(shown.contains("[REDACTED]"), "{shown}");
            }
        }
    }

    #[test]
    fn task_ttl_defaults_to_an_hour_and_says_its_range() {
        assert_eq!(config(&[]).unwrap().mcp.task_ttl, Duration::from_secs(3600));
        let e = config(&[("MCP_TASK_TTL_SECS", "5")]).unwrap_err();
        assert_eq!(e.variable, "MCP_TASK_TTL_SECS");
        assert!(e.to_string().contains("10"), "{e}");
    }

    #[test]
    fn tool_filters_are_comma_separated_globs() {
        let c = config(&[
            ("LLM_TOOLS_INCLUDE", "calculator, mcp.files__*"),
            ("MCP_TOOLS_EXCLUDE", "db_query,run_*"),
        ])
        .unwrap();
        assert!(c.llm_tools_filter.allows("mcp.files__read"));
        assert!(!c.llm_tools_filter.allows("current_time"));
        assert!(!c.mcp.tools_filter.allows("run_tool"));
        assert!(c.mcp.tools_filter.allows("health"));
        let err = config(&[("MCP_TOOLS_EXCLUDE", "db query")]).unwrap_err();
        assert_eq!(err.variable, "MCP_TOOLS_EXCLUDE");
        assert!(err.to_string().contains("wildcards"), "{err}");
    }

    #[test]
    fn bad_values_name_the_variable() {
        let err = config(&[("PORT", "eighty")]).unwrap_err();
        assert_eq!(err.variable, "PORT");
        assert!(err.to_string().contains("0 to 65535"), "{err}");
        let err = config(&[("MCP_SERVER_ENABLED", "maybe")]).unwrap_err();
        for accepted in ["true or false", "yes/no", "on/off", "1/0"] {
            assert!(err.to_string().contains(accepted), "{err}");
        }
        let err = config(&[("LLM_PROVIDER", "gpt")]).unwrap_err();
        assert!(err.to_string().contains("offline, openai, anthropic"));
    }

    #[test]
    fn short_secret_is_rejected_without_echoing_it() {
        let err = config(&[("MCP_SERVER_SECRET", "hunter2")]).unwrap_err();
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn trace_settings_are_checked() {
        let c = config(&[]).unwrap();
        assert_eq!(c.trace.max_turns, 1000);
        assert_eq!(c.trace.max_mcp_calls, 1000);
        let e = config(&[("TRACE_MAX_MCP_CALLS", "0")]).unwrap_err();
        assert_eq!(e.variable, "TRACE_MAX_MCP_CALLS");
        assert!(c.trace.otlp_endpoint.is_none());
        let e = config(&[("TRACE_MAX_PAYLOAD_BYTES", "10")]).unwrap_err();
        assert_eq!(e.variable, "TRACE_MAX_PAYLOAD_BYTES");
        let e = config(&[("REPLAY_MAX_PER_MINUTE", "0")]).unwrap_err();
        assert_eq!(e.variable, "REPLAY_MAX_PER_MINUTE");
        let e = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")]).unwrap_err();
        assert_eq!(e.variable, "OTEL_EXPORTER_OTLP_ENDPOINT");
        let e = config(&[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")]).unwrap_err();
        assert_eq!(e.value, "(hidden)");
        let c = config(&[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer%20tok-123456789,x-team=a",
        )])
        .unwrap();
        assert_eq!(c.trace.otlp_headers[0].1, "Bearer tok-123456789");
        assert!(
            c.secret_values()
                .contains(&"Bearer tok-123456789".to_string())
        );
    }

    #[test]
    fn conversation_limits_default_to_keeping_everything() {
        let c = config(&[]).unwrap();
        assert_eq!(c.conversations, ConversationLimits::default());
        let c = config(&[
            ("CONVERSATION_MAX_COUNT", "0"),
            ("CONVERSATION_MAX_AGE_SECS", "0"),
        ])
        .unwrap();
        assert_eq!(c.conversations, ConversationLimits::default());
        let c = config(&[
            ("CONVERSATION_MAX_COUNT", "5000"),
            ("CONVERSATION_MAX_AGE_SECS", "2592000"),
        ])
        .unwrap();
        assert_eq!(c.conversations.max_count, Some(5000));
        assert_eq!(
            c.conversations.max_age,
            Some(Duration::from_secs(2_592_000))
        );
    }

    #[test]
    fn bad_conversation_limits_name_the_variable_and_the_off_switch() {
        for (variable, value, allowed) in [
            (
                "CONVERSATION_MAX_COUNT",
                "-1",
                "0 (keep every conversation) or a whole number from 1 to 1000000000",
            ),
            ("CONVERSATION_MAX_COUNT", "lots", "from 1 to 1000000000"),
            (
                "CONVERSATION_MAX_COUNT",
                "1000000001",
                "from 1 to 1000000000",
            ),
            (
                "CONVERSATION_MAX_AGE_SECS",
                "30",
                "0 (keep conversations of any age) or a whole number from 60 to 315360000",
            ),
            ("CONVERSATION_MAX_AGE_SECS", "7d", "from 60 to 315360000"),
        ] {
            let err = config(&[(variable, value)]).unwrap_err();
            assert_eq!(err.variable, variable);
            assert_eq!(err.value, value);
            assert!(err.to_string().contains(allowed), "{err}");
        }
    }

    #[test]
    fn base_url_implies_openai_compatible() {
        let c = config(&[("LLM_BASE_URL", "http://127.0.0.1:11434/v1/")]).unwrap();
        assert_eq!(c.llm.provider, LlmProviderKind::OpenAi);
        assert_eq!(c.llm.base_url, "http://127.0.0.1:11434/v1");
    }
}
