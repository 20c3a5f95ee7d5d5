//! The bot's runtime configuration: `get_config`, and the redacted snapshot it and the
//! `porthole://config` resource show.

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
        .output(
            json!({"server": {"type": "object"}, "llm": {"type": "object"}, "mcp_server": {"type": "object"}}),
            &["server", "llm", "mcp_server"],
        )
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        Ok(done(config_snapshot(&d.bot.config)))
    }
}

/// `[REDACTED]` when a secret is set, null when not: says whether it is configured
/// without saying what it is.
fn secret(value: &Option<String>) -> Value {
    value
        .as_ref()
        .map(|_| json!(REDACTED))
        .unwrap_or(Value::Null)
}

/// The runtime configuration as JSON, every secret redacted (`get_config`, `porthole://config`).
pub(super) fn config_snapshot(c: &Config) -> Value {
    let mcp = &c.mcp;
    json!({
            "server": {"host": c.host.to_string(), "port": c.port, "log_filter": c.log_filter,
                       "log_file": c.log_file.as_ref().map(|p| p.display().to_string()),
                       "log_file_max_bytes": c.log_file_max_bytes,
                       "web_console_forwarding": c.web_console_forwarding},
            "database": {"path": c.database_path, "url": c.database_url_redacted(),
                         "replica_id": c.replica_id,
                         "conversation_max_count": c.conversations.max_count,
                         "conversation_max_age_secs": c.conversations.max_age.map(|age| age.as_secs())},
            "llm": {"provider": c.llm.provider.as_str(), "base_url": crate::redact::redact_url(&c.llm.base_url), "model": c.llm.model,
                    "api_key": secret(&c.llm.api_key), "timeout_secs": c.llm.timeout.as_secs()},
            "agents": {"max_steps": c.agent_max_steps},
            "tools": {"timeout_secs": c.tool_timeout.as_secs(),
                      "workspace_dir": c.workspace_dir.display().to_string(),
                      "user_tools_dir": c.user_tools_dir.display().to_string(),
                      "mcp_servers_config": c.mcp_servers_config.display().to_string()},
            "skills": {"dir": c.skills_dir.display().to_string()},
            "scheduler": {"enabled": c.scheduler_enabled},
            "mcp_server": {"enabled": mcp.enabled, "secret": secret(&mcp.secret), "read_only_secret": secret(&mcp.read_only_secret), "auth_disabled": mcp.auth_disabled,
                           "log_buffer_size": mcp.log_buffer_size, "max_body_bytes": mcp.max_body_bytes, "body_timeout_secs": mcp.body_timeout.as_secs(),
                           "max_sessions": mcp.max_sessions, "session_idle_secs": mcp.session_idle.as_secs(),
                           "allowed_origins": mcp.allowed_origins, "allowed_hosts": mcp.allowed_hosts,
                           "send_message_timeout_secs": mcp.send_message_timeout.as_secs(),
                           "db_query_readonly": mcp.db_query_readonly},
    })
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
