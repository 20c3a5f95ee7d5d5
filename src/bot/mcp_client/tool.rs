//! Calling one MCP tool: the runner's handler for it ([`McpTool`]), the call routed to
//! the server's live connection with its timeout, the result or failure put in words,
//! and every call counted in the server's stats, also one abandoned midway.

use std::sync::{Arc, Weak};
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::jsonrpc::{CallError, ParamHeader};
use super::server::ServerEntry;
use crate::bot::lock;
use crate::bot::tools::{ToolCall, ToolHandler};

impl ServerEntry {
    pub(super) async fn call_tool(
        &self,
        tool: &str,
        arguments: Value,
        param_headers: &[ParamHeader],
    ) -> Result<Value, String> {
        let record = CallRecord {
            entry: self,
            tool,
            started: Instant::now(),
            done: false,
        };
        // MCP's `tools/call` carries arguments as an object: anything else is the
        // model's mistake to hear about, not a call to send without them.
        if !(arguments.is_object() || arguments.is_null()) {
            return record.finish(Err(format!(
                "`{tool}` takes its arguments as a JSON object of named values; call it again with one"
            )));
        }
        let Some(conn) = self.current_conn() else {
            return record.finish(Err(self.unavailable()));
        };
        let server = self.name();
        let outcome = conn.call_tool(tool, arguments, param_headers).await;
        let result = match outcome {
            Ok(result) => tool_result(server, tool, result),
            Err(CallError::Timeout(limit)) => Err(format!(
                "MCP server `{server}` did not answer `{tool}` within {} ms",
                limit.as_millis()
            )),
            Err(CallError::Lost(reason)) => Err(format!(
                "MCP server `{server}` was lost during `{tool}`: {reason}; reconnecting"
            )),
            Err(e @ CallError::Rpc { .. }) => {
                Err(format!("MCP server `{server}` rejected `{tool}`: {e}"))
            }
            Err(CallError::Protocol(problem)) => Err(format!(
                "MCP server `{server}` failed on `{tool}`: {problem}"
            )),
        };
        record.finish(result)
    }
}

/// Turns a `tools/call` result into the handler's value, or its error text.
fn tool_result(server: &str, tool: &str, result: Value) -> Result<Value, String> {
    let content = match result.get("content") {
        Some(Value::Array(blocks)) => blocks.clone(),
        _ => Vec::new(),
    };
    let text = content
        .iter()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if result["isError"] == json!(true) {
        return Err(if text.trim().is_empty() {
            format!("`{tool}` on MCP server `{server}` reported an error without a message")
        } else {
            text
        });
    }
    Ok(json!({
        "content": content,
        "isError": false,
        "structuredContent": result.get("structuredContent").cloned().unwrap_or(Value::Null),
        "text": text,
    }))
}

/// Records a call's latency and outcome, also when the call is abandoned midway
/// (the runner's own timeout dropped it).
struct CallRecord<'a> {
    entry: &'a ServerEntry,
    tool: &'a str,
    started: Instant,
    done: bool,
}

impl CallRecord<'_> {
    fn finish(mut self, result: Result<Value, String>) -> Result<Value, String> {
        self.done = true;
        self.save(result.as_ref().err().map(String::as_str));
        result
    }

    fn save(&self, error: Option<&str>) {
        lock(&self.entry.stats).record(self.tool, self.started.elapsed(), error);
    }
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.save(Some("the call was abandoned before the server answered"));
        }
    }
}

/// The runner's handler for one MCP tool.
pub(super) struct McpTool {
    /// Weak, so a registered tool does not keep a removed server alive.
    entry: Weak<ServerEntry>,
    /// The server's own name for the tool.
    tool: String,
    param_headers: Vec<ParamHeader>,
}

impl McpTool {
    pub(super) fn new(
        entry: &Arc<ServerEntry>,
        tool: String,
        param_headers: Vec<ParamHeader>,
    ) -> Self {
        McpTool {
            entry: Arc::downgrade(entry),
            tool,
            param_headers,
        }
    }
}

#[async_trait]
impl ToolHandler for McpTool {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let Some(entry) = self.entry.upgrade() else {
            return Err("the MCP host has shut down".into());
        };
        entry
            .call_tool(&self.tool, call.args, &self.param_headers)
            .await
    }
}
