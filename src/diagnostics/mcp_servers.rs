//! The MCP servers the bot itself connects to (from `MCP_SERVERS_CONFIG`):
//! `list_mcp_servers` and `toggle_mcp_server`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done, failed};
use crate::bot::mcp_client::McpServerStatus;
use crate::mcp::{Annotations, RequestContext, ToolSpec};

pub(super) struct ListMcpServers;

impl DiagnosticTool for ListMcpServers {
    type Args = NoArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_mcp_servers",
            "List the bot's MCP servers",
            "The MCP servers the bot itself connects to (from MCP_SERVERS_CONFIG): id and name (its key in the file), transport (stdio/http/sse), \
             enabled, connection state, protocol version, tool count, last error, and call stats per server and per tool.",
        )
        .output_of::<Servers>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        Ok(done(json!(Servers {
            servers: d.bot.mcp_host.servers(),
            config_file: d.bot.config.mcp_servers_config.display().to_string(),
        })))
    }
}

/// `list_mcp_servers`' answer.
#[derive(Serialize, JsonSchema)]
struct Servers {
    servers: Vec<McpServerStatus>,
    /// MCP_SERVERS_CONFIG, the file they come from.
    config_file: String,
}

/// `toggle_mcp_server`'s answer: the server as it is now.
#[derive(Serialize, JsonSchema)]
struct Toggled {
    server: McpServerStatus,
}

/// `toggle_mcp_server`'s arguments: what to switch, and which way.
#[derive(Deserialize, JsonSchema)]
pub(super) struct ToggleArgs {
    /// Server name (or id) from list_mcp_servers
    #[schemars(length(min = 1), extend("x-aliases" = ["id"]))]
    name: String,
    enabled: bool,
}

pub(super) struct ToggleMcpServer;

impl DiagnosticTool for ToggleMcpServer {
    type Args = ToggleArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "toggle_mcp_server",
            "Enable or disable an MCP server",
            "Enables (connects) or disables (disconnects) one of the bot's MCP servers at runtime. Its tools \
             appear in or vanish from the bot's tool list, and MCP clients are told the tool list changed.",
        )
        .output_of::<Toggled>()
        .annotations(Annotations {
            idempotent: true,
            ..Annotations::DESTRUCTIVE
        })
    }

    async fn run(&self, d: &Diagnostics, args: ToggleArgs, _: &RequestContext) -> Answer {
        match d.bot.set_mcp_server_enabled(&args.name, args.enabled).await {
            Ok(status) => {
                super::replicas::announce_mcp_server_toggled(&d.bot, &args.name, args.enabled)
                    .await;
                Ok(done(json!(Toggled { server: status })))
            }
            Err(e) => Ok(failed(e)),
        }
    }
}
