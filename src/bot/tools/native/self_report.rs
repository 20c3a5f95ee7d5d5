//! The two tools the bot reports on itself with: `list_available_tools` (only what
//! the caller's roles allow) and `get_bot_status` (uptime, model, memory, agents, MCP
//! servers, tool usage; never a secret).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{NativeTool, StatusSources, native, read_only};
use crate::bot::tools::{ToolCall, ToolHandler};
use crate::model::ToolSource;

pub(super) fn list_available_tools() -> NativeTool {
    read_only(native(
        "list_available_tools",
        "Lists the tools you may use, given your roles: name, source, description, required roles. \
         Call it when the user asks what you can do.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ListAvailableTool,
    ))
}

pub(super) fn get_bot_status(status: StatusSources) -> NativeTool {
    read_only(native(
        "get_bot_status",
        "Reports the bot's own status: uptime, the LLM provider and model, memory use and limits, agents, \
         connected MCP servers with invocations, errors and latency per server and per tool, and tool usage. \
         Call it when the user asks how you are doing or what state you are in.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        BotStatusTool(status),
    ))
}

struct ListAvailableTool;

#[async_trait]
impl ToolHandler for ListAvailableTool {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let tools: Vec<Value> = call
            .runner
            .available_to(call.ctx)
            .into_iter()
            .map(|t| {
                json!({
                    "name": t.def.name,
                    "source": t.def.source,
                    "description": t.def.description,
                    "required_roles": t.def.required_roles,
                })
            })
            .collect();
        Ok(json!({"roles": call.ctx.roles, "tools": tools}))
    }
}

struct BotStatusTool(StatusSources);

#[async_trait]
impl ToolHandler for BotStatusTool {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let tools = call.runner.all();
        // Usage of the tools this caller may know of: a chat user's turn does not learn
        // the names of the admins' tools from it.
        let usage: Vec<Value> = tools
            .iter()
            .filter(|t| t.stats.invocations > 0 && call.ctx.may_see(&t.def))
            .map(|t| {
                json!({
                    "name": t.def.name,
                    "invocations": t.stats.invocations,
                    "errors": t.stats.errors,
                    "mean_ms": t.stats.mean_ms,
                    "p95_ms": t.stats.p95_ms,
                })
            })
            .collect();
        let count = |source: ToolSource| tools.iter().filter(|t| t.def.source == source).count();
        let mut mcp_servers = (self.0.mcp_servers)();
        if !call.ctx.is_admin() {
            // A last error may come from anyone's call (an admin's `run_tool` naming a
            // private file): a chat user's turn gets the counts, not the text, as the
            // page's `/api/tools` does.
            clear_last_errors(&mut mcp_servers);
            keep_tools_it_may_see(&mut mcp_servers, &call);
        }
        let agents = self.0.workers.agents(call.ctx);
        let mut status = json!({
            "uptime_secs": self.0.started.elapsed().as_secs(),
            "llm": {"provider": self.0.llm_provider, "model": self.0.llm_model},
            "memory": {"resident_bytes": crate::bot::resident_memory_bytes()},
            "settings": self.0.settings,
            "agents": agents,
            "mcp_servers": mcp_servers,
            "tools": {
                "total": tools.len(),
                "native": count(ToolSource::Native),
                "user": count(ToolSource::User),
                "mcp": count(ToolSource::Mcp),
                "usage": usage,
            },
        });
        let marked = status["agents"].as_array().is_some_and(|agents| {
            agents
                .iter()
                .any(|a| a["written_by"] == crate::bot::tools::provenance::CHAT_USER)
        });
        if marked {
            status["note"] = crate::bot::tools::provenance::CHAT_USER_NOTE.into();
        }
        Ok(status)
    }
}

/// Leaves in each MCP server's `tools` only those the caller may know of: a server whose
/// `requiredRoles` the caller lacks keeps its counts, not its tools' names.
fn keep_tools_it_may_see(servers: &mut Value, call: &ToolCall<'_>) {
    let Some(servers) = servers.as_array_mut() else {
        return;
    };
    for server in servers {
        let prefix =
            crate::bot::tools::mcp_tool_prefix(server["name"].as_str().unwrap_or_default());
        if let Some(tools) = server.get_mut("tools").and_then(Value::as_array_mut) {
            tools.retain(|tool| {
                let name = format!("{prefix}{}", tool["name"].as_str().unwrap_or_default());
                call.runner
                    .get(&name)
                    .is_some_and(|tool| call.ctx.may_see(&tool.def))
            });
        }
    }
}

/// Sets every `last_error` in `value` (a server's, its stats', each tool's) to null.
fn clear_last_errors(value: &mut Value) {
    match value {
        Value::Object(members) => {
            for (key, member) in members.iter_mut() {
                if key == "last_error" {
                    *member = Value::Null;
                } else {
                    clear_last_errors(member);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clear_last_errors),
        _ => {}
    }
}
