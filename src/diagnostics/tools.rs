//! The bot's tool system: `list_tools`, `get_tool_schema`, `run_tool` and
//! `toggle_tool`.

use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed, mcp_exec};
use crate::bot::stats::CallStats;
use crate::mcp::{Annotations, CallToolResult, Outcome, RequestContext, TaskSupport, ToolSpec};
use crate::model::ToolSource;

pub(super) struct ListTools;

#[derive(Deserialize, JsonSchema)]
pub(super) struct ListToolsArgs {
    /// Only tools from this source
    source: Option<ToolSource>,
    // The design lists each tool "with name, description, and input schema"; `false`
    // gives a shorter list.
    #[serde(default = "included")]
    include_schemas: bool,
}

fn included() -> bool {
    true
}

impl DiagnosticTool for ListTools {
    type Args = ListToolsArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_tools",
            "List the bot's tools",
            "Lists every tool the bot's agents can use, grouped by source (native, user, mcp), with description, \
             required roles, internal/enabled flags, usage stats (invocations, errors, mean and p95 latency) and \
             input schema. Set include_schemas to false for a shorter list; get_tool_schema gives one tool's.",
        )
        .output_of::<ToolGroups>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, args: ListToolsArgs, _: &RequestContext) -> Answer {
        let mut groups = ToolGroups::default();
        for tool in d.bot.tools.all() {
            let source = tool.def.source;
            if args.source.is_some_and(|s| s != source) {
                continue;
            }
            let group = match source {
                ToolSource::Native => &mut groups.native,
                ToolSource::User => &mut groups.user,
                ToolSource::Mcp => &mut groups.mcp,
            };
            group.push(ListedTool {
                input_schema: args
                    .include_schemas
                    .then(|| Value::clone(&tool.def.input_schema)),
                name: tool.def.name,
                description: tool.def.description,
                required_roles: tool.def.required_roles,
                internal: tool.def.internal,
                read_only: tool.def.read_only,
                enabled: tool.enabled,
                stats: tool.stats,
            });
            groups.total += 1;
        }
        Ok(done(json!(groups)))
    }
}

/// `list_tools`' answer: the tools by source.
#[derive(Default, Serialize, JsonSchema)]
struct ToolGroups {
    total: usize,
    native: Vec<ListedTool>,
    user: Vec<ListedTool>,
    mcp: Vec<ListedTool>,
}

/// A bot tool as `list_tools` lists it.
#[derive(Serialize, JsonSchema)]
struct ListedTool {
    name: String,
    description: String,
    /// The caller needs one of these roles; empty means anyone.
    required_roles: Vec<String>,
    /// Hidden from the model; admins only.
    internal: bool,
    /// Only reads: a whole-turn replay may run it (`replay_turn`, tools: read_only).
    read_only: bool,
    enabled: bool,
    stats: CallStats,
    /// Its input's JSON Schema (left out with include_schemas: false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input_schema: Option<Value>,
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

pub(super) struct GetToolSchema;

#[derive(Deserialize, JsonSchema)]
pub(super) struct NameArgs {
    /// Tool name, e.g. calculator, user.my_tool or mcp.files__read
    #[schemars(length(min = 1), extend("x-aliases" = ["tool_name"]))]
    name: String,
}

impl DiagnosticTool for GetToolSchema {
    type Args = NameArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "get_tool_schema",
            "Get a tool's input schema",
            "The JSON Schema of one bot tool's input, plus its source, flags and description. Use before run_tool.",
        )
        .output_of::<ToolSchema>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, args: NameArgs, _: &RequestContext) -> Answer {
        match d.bot.tools.get(d.bot.tools.canonical_name(&args.name)) {
            Some(tool) => Ok(done(json!(ToolSchema {
                input_schema: Value::clone(&tool.def.input_schema),
                name: tool.def.name,
                source: tool.def.source,
                description: tool.def.description,
                required_roles: tool.def.required_roles,
                internal: tool.def.internal,
                read_only: tool.def.read_only,
                enabled: tool.enabled,
            }))),
            None => Ok(unknown_tool(d, &args.name)),
        }
    }
}

/// `get_tool_schema`'s answer.
#[derive(Serialize, JsonSchema)]
struct ToolSchema {
    name: String,
    source: ToolSource,
    description: String,
    /// The JSON Schema its arguments must match.
    input_schema: Value,
    /// The caller needs one of these roles; empty means anyone.
    required_roles: Vec<String>,
    /// Hidden from the model; admins only.
    internal: bool,
    /// Only reads: a whole-turn replay may run it.
    read_only: bool,
    enabled: bool,
}

pub(super) struct RunTool;

#[derive(Deserialize, JsonSchema)]
pub(super) struct RunToolArgs {
    /// Full tool name (e.g. 'calculator', 'user.my_tool', 'mcp.github__list_repos')
    #[schemars(length(min = 1), extend("x-aliases" = ["name"]))]
    tool_name: String,
    /// Tool input parameters as a JSON object
    #[serde(default)]
    #[schemars(extend("x-aliases" = ["arguments"]))]
    parameters: Map<String, Value>,
}

impl DiagnosticTool for RunTool {
    type Args = RunToolArgs;

    /// The run of the bot tool is the trace (`mcp_exec`).
    fn starts_a_trace(&self) -> bool {
        true
    }

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "run_tool",
            "Run a bot tool",
            "Executes any bot tool (native, user or mcp, internal ones included) directly with \
             specific parameters, bypassing the agent loop, as an admin. Use list_tools to discover the tools and \
             get_tool_schema for parameter details; the parameters are validated against that schema. Returns the \
             tool's raw result. `name` and `arguments` are accepted for `tool_name` and `parameters`.",
        )
        .output_of::<ToolRun>()
        .annotations(Annotations::DESTRUCTIVE)
    }

    /// Long work: a client that supports tasks gets a handle to poll.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    async fn run(&self, d: &Diagnostics, args: RunToolArgs, ctx: &RequestContext) -> Answer {
        let runner = &d.bot.tools;
        let name = runner.canonical_name(&args.tool_name).to_string();
        if runner.get(&name).is_none() {
            return Ok(unknown_tool(d, &name));
        }
        let exec = mcp_exec(d, "run_tool", ctx);
        let started = Instant::now();
        match runner
            .call(&name, Value::Object(args.parameters), &exec)
            .await
        {
            Ok(result) => Ok(done(json!(ToolRun {
                source: runner
                    .get(&name)
                    .map(|t| t.def.source)
                    .unwrap_or(ToolSource::Native),
                tool: name,
                result,
                duration_ms: started.elapsed().as_secs_f64() * 1000.0,
            }))),
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}

/// `run_tool`'s answer.
#[derive(Serialize, JsonSchema)]
struct ToolRun {
    /// The tool's full name.
    tool: String,
    source: ToolSource,
    /// What the tool returned, as it returned it
    result: Value,
    duration_ms: f64,
}

pub(super) struct ToggleTool;

/// `toggle_tool`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub(super) struct ToggleToolArgs {
    /// Tool name, e.g. calculator or mcp.files__read
    #[schemars(length(min = 1))]
    name: String,
    /// true to enable, false to disable
    enabled: bool,
}

impl DiagnosticTool for ToggleTool {
    type Args = ToggleToolArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "toggle_tool",
            "Enable or disable a bot tool",
            "Enables or disables one of the bot's tools (native, user or mcp, by its full name as list_tools \
             shows it) at runtime. A disabled tool is neither offered to the model nor callable. The choice is \
             saved in the bot's database and survives a restart; MCP clients are told the tool list changed.",
        )
        .output_of::<ToggledTool>()
        .annotations(Annotations {
            idempotent: true,
            ..Annotations::DESTRUCTIVE
        })
    }

    async fn run(&self, d: &Diagnostics, args: ToggleToolArgs, _: &RequestContext) -> Answer {
        let name = d.bot.tools.canonical_name(&args.name);
        match d.bot.set_tool_enabled(name, args.enabled).await {
            Ok(tool) => Ok(done(json!(ToggledTool {
                tool: ToolState {
                    name: tool.def.name,
                    source: tool.def.source,
                    enabled: tool.enabled,
                },
                saved: true,
            }))),
            Err(e) => Ok(failed(e)),
        }
    }
}

/// `toggle_tool`'s answer: the tool as it is now.
#[derive(Serialize, JsonSchema)]
struct ToggledTool {
    tool: ToolState,
    /// Kept in the bot's database: it survives a restart
    saved: bool,
}

/// A tool's name, source and whether it is enabled.
#[derive(Serialize, JsonSchema)]
struct ToolState {
    name: String,
    source: ToolSource,
    enabled: bool,
}
