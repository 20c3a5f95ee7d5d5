//! Configuration and management: `list_mcp_servers`, `toggle_mcp_server`,
//! `toggle_tool`, `list_tasks`, `run_task`, `list_skills`, `get_config`.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Diagnostics, done, failed, object_schema, output_schema};
use crate::bot::tasks::RunAs;
use crate::config::Config;
use crate::mcp::{
    Annotations, CallToolResult, Outcome, RequestContext, RpcError, TaskSupport, Tool, ToolSpec,
};
use crate::redact::REDACTED;

pub fn tools(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ListMcpServers(d.clone())),
        Arc::new(ToggleMcpServer(d.clone())),
        Arc::new(ToggleTool(d.clone())),
        Arc::new(ListTasks(d.clone())),
        Arc::new(RunTask(d.clone())),
        Arc::new(ListSkills(d.clone())),
        Arc::new(GetConfig(d.clone())),
    ]
}

struct ListMcpServers(Arc<Diagnostics>);

#[async_trait]
impl Tool for ListMcpServers {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_mcp_servers".into(),
            title: Some("List the bot's MCP servers".into()),
            description: "The MCP servers the bot itself connects to (from MCP_SERVERS_CONFIG): name, transport (stdio/http/sse), \
                          enabled, connection state, protocol version, tool count, last error, and call stats per server and per tool."
                .into(),
            input_schema: object_schema(json!({}), &[]),
            output_schema: Some(output_schema(
                json!({"servers": {"type": "array", "items": {"type": "object"}}, "config_file": {"type": "string"}}),
                &["servers"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        _args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let bot = &self.0.bot;
        Ok(done(json!({
            "servers": bot.mcp_host.servers(),
            "config_file": bot.config.mcp_servers_config.display().to_string(),
        })))
    }
}

struct ToggleTool(Arc<Diagnostics>);

#[async_trait]
impl Tool for ToggleTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "toggle_tool".into(),
            title: Some("Enable or disable a bot tool".into()),
            description: "Enables or disables one of the bot's tools (native, user or mcp, by its full name as list_tools \
                          shows it) at runtime. A disabled tool is neither offered to the model nor callable. The choice is \
                          saved in the bot's database and survives a restart; MCP clients are told the tool list changed."
                .into(),
            input_schema: object_schema(
                json!({
                    "name": {"type": "string", "minLength": 1, "description": "Tool name, e.g. calculator or mcp.files__read"},
                    "enabled": {"type": "boolean", "description": "true to enable, false to disable"}
                }),
                &["name", "enabled"],
            ),
            output_schema: Some(output_schema(
                json!({"tool": {"type": "object"}, "saved": {"type": "boolean"}}),
                &["tool", "saved"],
            )),
            annotations: Annotations {
                read_only: false,
                destructive: true,
                idempotent: true,
                open_world: false,
            },
        }
    }

    async fn call(
        &self,
        args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: ToggleArgs = args_or_error!("toggle_tool", args);
        match self.0.bot.set_tool_enabled(&args.name, args.enabled).await {
            Ok(tool) => Ok(done(json!({
                "tool": {"name": tool.def.name, "source": tool.def.source, "enabled": tool.enabled},
                "saved": true,
            }))),
            Err(e) => Ok(failed(e)),
        }
    }
}

struct ToggleMcpServer(Arc<Diagnostics>);

#[derive(Deserialize)]
struct ToggleArgs {
    name: String,
    enabled: bool,
}

#[async_trait]
impl Tool for ToggleMcpServer {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "toggle_mcp_server".into(),
            title: Some("Enable or disable an MCP server".into()),
            description: "Enables (connects) or disables (disconnects) one of the bot's MCP servers at runtime. Its tools \
                          appear in or vanish from the bot's tool list, and MCP clients are told the tool list changed."
                .into(),
            input_schema: object_schema(
                json!({
                    "name": {"type": "string", "minLength": 1, "description": "Server name from list_mcp_servers"},
                    "enabled": {"type": "boolean"}
                }),
                &["name", "enabled"],
            ),
            output_schema: Some(output_schema(json!({"server": {"type": "object"}}), &["server"])),
            annotations: Annotations {
                idempotent: true,
                ..Annotations::DESTRUCTIVE
            },
        }
    }

    async fn call(
        &self,
        args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: ToggleArgs = args_or_error!("toggle_mcp_server", args);
        match self
            .0
            .bot
            .mcp_host
            .set_enabled(&args.name, args.enabled)
            .await
        {
            Ok(status) => Ok(done(json!({"server": status}))),
            Err(e) => Ok(failed(e)),
        }
    }
}

struct ListTasks(Arc<Diagnostics>);

#[async_trait]
impl Tool for ListTasks {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_tasks".into(),
            title: Some("List scheduled tasks".into()),
            description: "The bot's scheduled tasks: id, name, description, cron schedule (UTC), action (a prompt or a tool call), \
                          enabled, status (idle, running, ok, error, interrupted), last run, next run and last result."
                .into(),
            input_schema: object_schema(json!({}), &[]),
            output_schema: Some(output_schema(
                json!({"tasks": {"type": "array", "items": {"type": "object"}}}),
                &["tasks"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        _args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        match self.0.bot.tasks.list().await {
            Ok(tasks) => Ok(done(json!({"tasks": tasks}))),
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}

struct RunTask(Arc<Diagnostics>);

#[derive(Deserialize)]
struct RunTaskArgs {
    id: i64,
}

#[async_trait]
impl Tool for RunTask {
    /// Long work: a client that supports tasks gets a handle to poll.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "run_task".into(),
            title: Some("Run a task now".into()),
            description: "Runs a scheduled task immediately, whatever its schedule, waits for it, records the run \
                          (status, last result, next run) and returns the outcome. Get ids from list_tasks."
                .into(),
            input_schema: object_schema(
                json!({"id": {"type": "integer", "minimum": 1, "description": "Task id from list_tasks"}}),
                &["id"],
            ),
            output_schema: Some(output_schema(
                json!({"task_id": {"type": "integer"}, "status": {"type": "string"}, "result": {"type": "string"}}),
                &["task_id", "status", "result"],
            )),
            annotations: Annotations::DESTRUCTIVE,
        }
    }

    async fn call(
        &self,
        args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: RunTaskArgs = args_or_error!("run_task", args);
        ctx.progress(0.0, Some(1.0), Some("task started"));
        let run = self.0.bot.tasks.run_now(args.id, RunAs::Admin).await;
        ctx.progress(1.0, Some(1.0), Some("task finished"));
        match run {
            Ok(run) => Ok(done(json!(run))),
            Err(e) => Ok(failed(format!("{e}; call list_tasks for valid ids"))),
        }
    }
}

struct ListSkills(Arc<Diagnostics>);

#[async_trait]
impl Tool for ListSkills {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_skills".into(),
            title: Some("List skills".into()),
            description:
                "The skills the bot loaded from SKILLS_DIR: name, description and source file."
                    .into(),
            input_schema: object_schema(json!({}), &[]),
            output_schema: Some(output_schema(
                json!({"skills": {"type": "array", "items": {"type": "object"}}, "skills_dir": {"type": "string"}}),
                &["skills"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        _args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let bot = &self.0.bot;
        Ok(done(json!({
            "skills": bot.skills,
            "skills_dir": bot.config.skills_dir.display().to_string(),
        })))
    }
}

struct GetConfig(Arc<Diagnostics>);

/// `[REDACTED]` when a secret is set, null when not: says whether it is configured
/// without saying what it is.
fn secret(value: &Option<String>) -> Value {
    value
        .as_ref()
        .map(|_| json!(REDACTED))
        .unwrap_or(Value::Null)
}

#[async_trait]
impl Tool for GetConfig {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "get_config".into(),
            title: Some("Runtime configuration".into()),
            description: "The bot's runtime configuration (from the environment and .env): server, database, LLM provider \
                          and model, agent and tool limits, folders, scheduler, MCP endpoint settings. Every secret is redacted."
                .into(),
            input_schema: object_schema(json!({}), &[]),
            output_schema: Some(output_schema(
                json!({"server": {"type": "object"}, "llm": {"type": "object"}, "mcp_server": {"type": "object"}}),
                &["server", "llm", "mcp_server"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        _args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        Ok(done(config_snapshot(&self.0.bot.config)))
    }
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
                         "replica_id": c.replica_id},
            "llm": {"provider": c.llm.provider.as_str(), "base_url": c.llm.base_url, "model": c.llm.model,
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
