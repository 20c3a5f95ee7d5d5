//! The bot's runtime configuration: `get_config`, and the redacted snapshot it and the
//! `porthole://config` resource show.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done};
use crate::config::Config;
use crate::mcp::{Annotations, RequestContext, ToolSpec};
use crate::redact::REDACTED;

pub(super) struct GetConfig;

impl DiagnosticTool for GetConfig {
    type Args = NoArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "get_config",
            "Runtime configuration",
            "The bot's runtime configuration (from the environment and .env): server, database, LLM provider \
             and model, agent and tool limits, folders, scheduler, MCP endpoint settings. Every secret is redacted.",
        )
        .output_of::<ConfigSnapshot>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        Ok(done(config_snapshot(&d.bot.config)))
    }
}

/// `[REDACTED]` when a secret is set, null when not: says whether it is configured
/// without saying what it is.
fn secret(value: &Option<String>) -> Option<&'static str> {
    value.as_ref().map(|_| REDACTED)
}

/// The runtime configuration, every secret redacted (`get_config`, `porthole://config`).
#[derive(Serialize, JsonSchema)]
pub(super) struct ConfigSnapshot {
    server: ServerSettings,
    database: DatabaseSettings,
    llm: LlmSettings,
    agents: AgentSettings,
    tools: ToolSettings,
    skills: SkillSettings,
    scheduler: SchedulerSettings,
    mcp_server: McpServerSettings,
}

#[derive(Serialize, JsonSchema)]
struct ServerSettings {
    host: String,
    port: u16,
    /// `RUST_LOG` syntax.
    log_filter: String,
    log_file: Option<String>,
    log_file_max_bytes: u64,
    web_console_forwarding: bool,
}

#[derive(Serialize, JsonSchema)]
struct DatabaseSettings {
    /// The SQLite file (when `url` is not set).
    path: String,
    /// `DATABASE_URL`, its password redacted.
    url: Option<String>,
    replica_id: String,
    conversation_max_count: Option<usize>,
    conversation_max_age_secs: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct LlmSettings {
    provider: &'static str,
    /// A password in it redacted.
    base_url: String,
    model: String,
    /// `[REDACTED]` when set, null when not.
    api_key: Option<&'static str>,
    timeout_secs: u64,
}

#[derive(Serialize, JsonSchema)]
struct AgentSettings {
    max_steps: usize,
}

#[derive(Serialize, JsonSchema)]
struct ToolSettings {
    timeout_secs: u64,
    workspace_dir: String,
    user_tools_dir: String,
    mcp_servers_config: String,
}

#[derive(Serialize, JsonSchema)]
struct SkillSettings {
    dir: String,
}

#[derive(Serialize, JsonSchema)]
struct SchedulerSettings {
    enabled: bool,
}

#[derive(Serialize, JsonSchema)]
struct McpServerSettings {
    enabled: bool,
    /// `[REDACTED]` when set, null when not.
    secret: Option<&'static str>,
    /// `[REDACTED]` when set, null when not.
    read_only_secret: Option<&'static str>,
    auth_disabled: bool,
    log_buffer_size: usize,
    max_body_bytes: usize,
    body_timeout_secs: u64,
    max_sessions: usize,
    session_idle_secs: u64,
    allowed_origins: Vec<String>,
    allowed_hosts: Vec<String>,
    send_message_timeout_secs: u64,
    db_query_readonly: bool,
}

/// The runtime configuration as JSON, every secret redacted (`get_config`, `porthole://config`).
pub(super) fn config_snapshot(c: &Config) -> Value {
    json!(snapshot(c))
}

fn snapshot(c: &Config) -> ConfigSnapshot {
    let mcp = &c.mcp;
    let path = |p: &std::path::Path| p.display().to_string();
    ConfigSnapshot {
        server: ServerSettings {
            host: c.host.to_string(),
            port: c.port,
            log_filter: c.log_filter.clone(),
            log_file: c.log_file.as_deref().map(path),
            log_file_max_bytes: c.log_file_max_bytes,
            web_console_forwarding: c.web_console_forwarding,
        },
        database: DatabaseSettings {
            path: c.database_path.clone(),
            url: c.database_url_redacted(),
            replica_id: c.replica_id.clone(),
            conversation_max_count: c.conversations.max_count,
            conversation_max_age_secs: c.conversations.max_age.map(|age| age.as_secs()),
        },
        llm: LlmSettings {
            provider: c.llm.provider.as_str(),
            base_url: crate::redact::redact_url(&c.llm.base_url),
            model: c.llm.model.clone(),
            api_key: secret(&c.llm.api_key),
            timeout_secs: c.llm.timeout.as_secs(),
        },
        agents: AgentSettings {
            max_steps: c.agent_max_steps,
        },
        tools: ToolSettings {
            timeout_secs: c.tool_timeout.as_secs(),
            workspace_dir: path(&c.workspace_dir),
            user_tools_dir: path(&c.user_tools_dir),
            mcp_servers_config: path(&c.mcp_servers_config),
        },
        skills: SkillSettings {
            dir: path(&c.skills_dir),
        },
        scheduler: SchedulerSettings {
            enabled: c.scheduler_enabled,
        },
        mcp_server: McpServerSettings {
            enabled: mcp.enabled,
            secret: secret(&mcp.secret),
            read_only_secret: secret(&mcp.read_only_secret),
            auth_disabled: mcp.auth_disabled,
            log_buffer_size: mcp.log_buffer_size,
            max_body_bytes: mcp.max_body_bytes,
            body_timeout_secs: mcp.body_timeout.as_secs(),
            max_sessions: mcp.max_sessions,
            session_idle_secs: mcp.session_idle.as_secs(),
            allowed_origins: mcp.allowed_origins.clone(),
            allowed_hosts: mcp.allowed_hosts.clone(),
            send_message_timeout_secs: mcp.send_message_timeout.as_secs(),
            db_query_readonly: mcp.db_query_readonly,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A password written into `LLM_BASE_URL` (a proxy's user and password) is not shown.
    #[test]
    fn a_password_in_the_llm_base_url_is_redacted() {
        let vars: HashMap<String, String> = [
            ("LLM_PROVIDER", "openai"),
            ("LLM_API_KEY", "sk-test-0123456789abcdef"),
            (
                "LLM_BASE_URL",
                "https://proxy-user:hunter2-pass@llm.example/v1",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let config = Config::from_map(&vars).unwrap();
        let snapshot = config_snapshot(&config);
        let shown = snapshot["llm"]["base_url"].as_str().unwrap();
        assert_eq!(shown, "https://proxy-user:[REDACTED]@llm.example/v1");
        assert!(!snapshot.to_string().contains("hunter2-pass"), "{snapshot}");
    }
}
