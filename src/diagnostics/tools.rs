//! The bot's tool system: `list_tools`, `get_tool_schema`, `run_tool`.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Diagnostics, done, failed, object_schema, output_schema};
use crate::bot::tools::{ADMIN_ROLE, ExecContext, ToolSource};
use crate::mcp::{
    Annotations, CallToolResult, Outcome, RequestContext, RpcError, TaskSupport, Tool, ToolSpec,
};

pub fn tools(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ListTools(d.clone())),
        Arc::new(GetToolSchema(d.clone())),
        Arc::new(RunTool(d.clone())),
    ]
}

struct ListTools(Arc<Diagnostics>);

#[derive(Deserialize)]
struct ListToolsArgs {
    source: Option<String>,
    #[serde(default)]
    include_schemas: bool,
}

#[async_trait]
impl Tool for ListTools {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_tools".into(),
            title: Some("List the bot's tools".into()),
            description: "Lists every tool the bot's agents can use, grouped by source (native, user, mcp), with description, \
                          required roles, internal/enabled flags and usage stats (invocations, errors, mean and p95 latency). \
                          Set include_schemas for input schemas, or use get_tool_schema for one tool."
                .into(),
            input_schema: object_schema(
                json!({
                    "source": {"type": "string", "enum": ["native", "user", "mcp"], "description": "Only tools from this source"},
                    "include_schemas": {"type": "boolean", "default": false}
                }),
                &[],
            ),
            output_schema: Some(output_schema(
                json!({
                    "total": {"type": "integer"},
                    "native": {"type": "array"}, "user": {"type": "array"}, "mcp": {"type": "array"}
                }),
                &["total", "native", "user", "mcp"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: ListToolsArgs = args_or_error!("list_tools", args);
        let mut groups = json!({"native": [], "user": [], "mcp": []});
        let mut total = 0;
        for tool in self.0.bot.tools.all() {
            let source = tool.def.source.as_str();
            if args.source.as_deref().is_some_and(|s| s != source) {
                continue;
            }
            let mut entry = json!({
                "name": tool.def.name,
                "description": tool.def.description,
                "required_roles": tool.def.required_roles,
                "internal": tool.def.internal,
                "enabled": tool.enabled,
                "stats": tool.stats,
            });
            if args.include_schemas {
                entry["input_schema"] = tool.def.input_schema.clone();
            }
            if let Some(list) = groups[source].as_array_mut() {
                list.push(entry);
                total += 1;
            }
        }
        groups["total"] = json!(total);
        Ok(done(groups))
    }
}

/// "unknown tool" with the closest names, shared by the two tools that take a name.
fn unknown_tool(d: &Diagnostics, name: &str) -> Outcome<CallToolResult> {
    let similar = d.bot.tools.similar_names(name);
    let hint = if similar.is_empty() {
        "call list_tools to see every tool".to_string()
    } else {
        format!("did you mean {}?", similar.join(", "))
    };
    failed(format!("the bot has no tool named `{name}`; {hint}"))
}

struct GetToolSchema(Arc<Diagnostics>);

#[derive(Deserialize)]
struct NameArgs {
    name: String,
}

#[async_trait]
impl Tool for GetToolSchema {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "get_tool_schema".into(),
            title: Some("Get a tool's input schema".into()),
            description: "The JSON Schema of one bot tool's input, plus its source, flags and description. Use before run_tool."
                .into(),
            input_schema: object_schema(
                json!({"name": {"type": "string", "minLength": 1, "description": "Tool name, e.g. calculator or mcp.files__read"}}),
                &["name"],
            ),
            output_schema: Some(output_schema(
                json!({"name": {"type": "string"}, "source": {"type": "string"}, "input_schema": {"type": "object"}}),
                &["name", "source", "input_schema"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: NameArgs = args_or_error!("get_tool_schema", args);
        match self.0.bot.tools.get(&args.name) {
            Some(tool) => Ok(done(json!({
                "name": tool.def.name,
                "source": tool.def.source,
                "description": tool.def.description,
                "input_schema": tool.def.input_schema,
                "required_roles": tool.def.required_roles,
                "internal": tool.def.internal,
                "enabled": tool.enabled,
            }))),
            None => Ok(unknown_tool(&self.0, &args.name)),
        }
    }
}

struct RunTool(Arc<Diagnostics>);

#[derive(Deserialize)]
struct RunToolArgs {
    tool_name: String,
    #[serde(default)]
    parameters: Value,
}

#[async_trait]
impl Tool for RunTool {
    /// Long work: a client that supports tasks gets a handle to poll.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "run_tool".into(),
            title: Some("Run a bot tool".into()),
            description: "Executes any bot tool (native, user or mcp, internal ones included) directly with \
                          specific parameters, bypassing the agent loop, as an admin. Use list_tools to discover the tools and \
                          get_tool_schema for parameter details; the parameters are validated against that schema. Returns the \
                          tool's raw result. `name` and `arguments` are accepted for `tool_name` and `parameters`."
                .into(),
            input_schema: object_schema(
                json!({
                    "tool_name": {"type": "string", "minLength": 1, "x-aliases": ["name"],
                                  "description": "Full tool name (e.g. 'calculator', 'user.my_tool', 'mcp.github__list_repos')"},
                    "parameters": {"type": "object", "x-aliases": ["arguments"], "default": {},
                                   "description": "Tool input parameters as a JSON object"}
                }),
                &["tool_name"],
            ),
            output_schema: Some(output_schema(
                json!({"tool": {"type": "string"}, "result": {}, "duration_ms": {"type": "number"}}),
                &["tool", "result"],
            )),
            annotations: Annotations::DESTRUCTIVE,
        }
    }

    async fn call(
        &self,
        args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: RunToolArgs = args_or_error!("run_tool", args);
        let runner = &self.0.bot.tools;
        let name = args.tool_name;
        if runner.get(&name).is_none() {
            return Ok(unknown_tool(&self.0, &name));
        }
        let mut exec = ExecContext::new(&[ADMIN_ROLE]);
        exec.correlation_id = format!("mcp-{}", exec.correlation_id);
        exec.trace = super::mcp_trace(&self.0, "run_tool", ctx);
        let started = Instant::now();
        let parameters = if args.parameters.is_null() {
            json!({})
        } else {
            args.parameters
        };
        match runner.call(&name, parameters, &exec).await {
            Ok(result) => Ok(done(json!({
                "tool": name,
                "source": runner.get(&name).map(|t| t.def.source).unwrap_or(ToolSource::Native),
                "result": result,
                "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
            }))),
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}
