//! Which of a server's listed tools the bot offers, and keeping the runner in step
//! with the server's list: names and schemas are checked, the allow/exclude lists
//! applied, and only what changed is re-registered so unchanged tools keep their
//! stats and their enabled state.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::connection::Conn;
use super::jsonrpc::{self, ParamHeader};
use super::server::{RegisteredTool, ServerEntry};
use super::tool::McpTool;
use crate::bot::lock;
use crate::model::{ToolDef, ToolSource};

/// The tools to offer, by the server's names, with their `x-mcp-header` annotations.
type WantedTools = BTreeMap<String, (RegisteredTool, Vec<ParamHeader>)>;

impl ServerEntry {
    /// Lists the server's tools and brings the runner up to date: new and changed
    /// tools are registered, vanished ones removed, unchanged ones left alone (their
    /// stats and enabled state survive). Returns how many are registered.
    pub(super) async fn refresh_tools(self: &Arc<Self>, conn: &Conn) -> Result<usize, String> {
        let listed = conn
            .list_tools()
            .await
            .map_err(|e| format!("`tools/list` failed: {e}"))?;
        let wanted = self.select_tools(listed);

        let mut registered = lock(&self.registered);
        let prefix = self.prefix();
        let gone: Vec<String> = registered
            .keys()
            .filter(|name| !wanted.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            registered.remove(&name);
            // Also removes tools whose names extend this one; they are re-added below.
            self.runner.unregister_prefix(&format!("{prefix}{name}"));
        }
        for (name, (tool, param_headers)) in wanted {
            let full_name = format!("{prefix}{name}");
            if registered.get(&name) == Some(&tool) && self.runner.get(&full_name).is_some() {
                continue;
            }
            let def = ToolDef {
                name: full_name,
                source: ToolSource::Mcp,
                description: tool.description.clone(),
                input_schema: tool.schema.clone().into(),
                required_roles: self.config.required_roles.clone(),
                internal: false,
                read_only: false,
            };
            let handler = Arc::new(McpTool::new(self, name.clone(), param_headers));
            match self.runner.register(def, handler) {
                Ok(()) => {
                    registered.insert(name, tool);
                }
                Err(e) => {
                    tracing::warn!(server = %self.name(), tool = %name, "skipping MCP tool: {e}")
                }
            }
        }
        Ok(registered.len())
    }

    /// The listed tools this client will offer, after the allow/exclude lists and
    /// sanity checks, with their `x-mcp-header` annotations.
    fn select_tools(&self, listed: Vec<Value>) -> WantedTools {
        let server = self.name();
        let mut wanted = BTreeMap::new();
        for tool in listed {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                tracing::warn!(server, "skipping an MCP tool without a name");
                continue;
            };
            if !valid_tool_name(name) {
                tracing::warn!(
                    server,
                    tool = name,
                    "skipping MCP tool: its name must be 1-128 characters from A-Z, a-z, 0-9, `_`, `-`, `.` and `/`"
                );
                continue;
            }
            if !self.config.tool_wanted(name) {
                tracing::debug!(
                    server,
                    tool = name,
                    "MCP tool left out by allowedTools/excludedTools"
                );
                continue;
            }
            let schema = match tool.get("inputSchema") {
                None | Some(Value::Null) => json!({"type": "object"}),
                Some(schema) => schema.clone(),
            };
            if let Err(e) = jsonschema::validator_for(&schema) {
                tracing::warn!(
                    server,
                    tool = name,
                    "skipping MCP tool: its input schema does not compile: {e}"
                );
                continue;
            }
            let param_headers = match jsonrpc::param_headers(&schema) {
                Ok(headers) => headers,
                Err(e) => {
                    tracing::warn!(server, tool = name, "skipping MCP tool: {e}");
                    continue;
                }
            };
            let text = ["description", "title"]
                .iter()
                .find_map(|key| tool.get(*key).and_then(Value::as_str))
                .filter(|text| !text.trim().is_empty())
                .unwrap_or(name);
            let registered = RegisteredTool {
                description: format!("[{server}] {text}"),
                schema,
            };
            if wanted
                .insert(name.to_string(), (registered, param_headers))
                .is_some()
            {
                tracing::warn!(
                    server,
                    tool = name,
                    "the MCP server lists this tool twice; using the last one"
                );
            }
        }
        wanted
    }
}

/// MCP tool names: 1-128 characters of `[A-Za-z0-9_./-]`.
fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
}
