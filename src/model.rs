//! The ground floor's shared model: the plain types every layer passes around — who
//! speaks in a conversation ([`Role`]), a message as stored ([`Message`]) and about to be
//! stored ([`NewMessage`]), the tool calls a model asks for ([`ToolCall`]) and the tools
//! it is offered ([`ToolDef`]), one finished trace span ([`SpanRecord`]) and how much
//! chat history to keep ([`ConversationLimits`]).
//!
//! They are data, not services: nothing here imports from `bot`, `mcp` or
//! `diagnostics`, so the store, the LLM providers, the tool runner, the tracer and the
//! configuration can all use them without pointing at each other.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who a message is from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// The role stored as `text`; anything unknown reads as the assistant's.
    pub fn parse(text: &str) -> Role {
        match text {
            "system" => Role::System,
            "user" => Role::User,
            "tool" => Role::Tool,
            _ => Role::Assistant,
        }
    }
}

/// A tool call requested by the model, stored with the assistant message that made it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A stored message of a conversation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Message {
    pub id: i64,
    pub conversation_id: String,
    pub role: Role,
    pub content: String,
    pub tool_calls: Option<Vec<ToolCall>>,
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
    pub created_at: String,
}

/// A message about to be stored.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub role: Role,
    pub content: String,
    pub tool_calls: Option<Vec<ToolCall>>,
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
}

impl NewMessage {
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        NewMessage {
            role,
            content: content.into(),
            tool_calls: None,
            tool_call_id: None,
            name: None,
        }
    }

    /// The tool calls as the JSON text the store keeps.
    pub fn tool_calls_json(&self) -> Option<String> {
        self.tool_calls
            .as_ref()
            .map(|calls| serde_json::to_string(calls).unwrap_or_default())
    }
}

/// Where a tool comes from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ToolSource {
    Native,
    User,
    Mcp,
}

impl ToolSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolSource::Native => "native",
            ToolSource::User => "user",
            ToolSource::Mcp => "mcp",
        }
    }
}

/// The description of a tool, as listed to callers.
#[derive(Debug, Clone, Serialize)]
pub struct ToolDef {
    pub name: String,
    pub source: ToolSource,
    pub description: String,
    /// Shared, not copied: the tools offered to the model are cloned for every turn, and
    /// a turn's trace recognises a tool set it stored before by these pointers first.
    pub input_schema: std::sync::Arc<Value>,
    /// The caller needs at least one of these roles; empty means anyone.
    pub required_roles: Vec<String>,
    /// Hidden from the LLM; callable by admins only.
    pub internal: bool,
    /// Only reads: changes nothing in the bot or outside it, so a whole-turn replay
    /// may run it (`replay_turn` with `tools: "read_only"`). Native tools say so
    /// themselves; user tools and MCP servers' tools never count as read-only (a
    /// script's effects are unknown, and a server's own hints are not trusted).
    pub read_only: bool,
}

/// What a span stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SpanKind {
    /// A whole turn: a user message answered by the supervisor.
    Turn,
    /// One request to the language model.
    Llm,
    /// One tool call.
    Tool,
    /// A worker agent the supervisor delegated to.
    Agent,
}

impl SpanKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SpanKind::Turn => "turn",
            SpanKind::Llm => "llm",
            SpanKind::Tool => "tool",
            SpanKind::Agent => "agent",
        }
    }

    pub fn parse(text: &str) -> SpanKind {
        match text {
            "turn" => SpanKind::Turn,
            "llm" => SpanKind::Llm,
            "agent" => SpanKind::Agent,
            _ => SpanKind::Tool,
        }
    }
}

/// One finished span, as stored and exported.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SpanRecord {
    /// Left out of a span stored in its turn's row (the row holds it), hence the default.
    #[serde(default)]
    pub trace_id: String,
    pub span_id: String,
    /// The parent span; for a root, the caller's span from its `traceparent` (if any).
    pub parent_span_id: Option<String>,
    /// The first span of the trace inside this process.
    #[serde(default)]
    pub is_root: bool,
    /// The turn this span belongs to: its root's span id (a caller may reuse one trace
    /// id for many requests; each is a turn of its own, kept and pruned as one).
    #[serde(default)]
    pub root_span_id: String,
    pub kind: SpanKind,
    /// Most spans are named by a constant (`tools/call`, `turn`): no copy per span.
    pub name: Cow<'static, str>,
    /// Roots only: what started the trace (`web`, `send_message`, `task`, `run_tool`,
    /// `mcp`…), a constant.
    pub source: Option<Cow<'static, str>>,
    pub conversation_id: Option<String>,
    /// Start, in microseconds since the Unix epoch.
    pub start_us: i64,
    pub duration_us: i64,
    pub error: Option<String>,
    /// LLM spans: the model; tool spans: the tool's name.
    pub model: Option<String>,
    /// Shared with the tool's own record of its name (an `/mcp` tool), not copied per call.
    pub tool: Option<Arc<str>>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// Everything else: request, response, arguments, result, provider, timings.
    #[serde(default)]
    pub attributes: Map<String, Value>,
    /// Roots of work an `/mcp` request started: the request, kept as it is while the span
    /// runs; the trace writer makes it the span's `mcp.*` and `jsonrpc.*` attributes
    /// ([`McpRequest::attributes`]), off the request's path.
    #[serde(skip)]
    pub mcp_request: Option<McpRequest>,
}

/// The source of the trace every `/mcp` `tools/call` makes (the tools that start a turn
/// aside): kept under a cap of its own (`TRACE_MAX_MCP_CALLS`), listed only when asked
/// for, and never `last_error`'s answer.
pub const MCP_CALL_SOURCE: &str = "mcp";

/// The source of a replay's trace (`replay_llm_calls`, the page's Replay button).
pub const REPLAY_SOURCE: &str = "replay";

/// The `/mcp` request a root span answers, as the OpenTelemetry MCP semantic conventions
/// name it. The session id is not part of it: it is a credential.
#[derive(Debug, Clone, PartialEq)]
pub struct McpRequest {
    /// `mcp.method.name` (`tools/call`).
    pub method: &'static str,
    /// `mcp.protocol.version`.
    pub protocol_version: &'static str,
    /// `jsonrpc.request.id`, as the client sent it (a number or a string).
    pub request_id: Value,
    /// What the caller said about itself: `mcp.client.name`, `mcp.client.version` and
    /// its own ids for the call (`claudecode/toolUseId`, `vscode.conversationId`, …).
    pub caller: Option<Arc<crate::trace_context::CallerTag>>,
}

impl McpRequest {
    /// The span attributes it stands for: the request id as text (a string id as it
    /// is, without JSON quotes), then what the caller said about itself.
    pub fn attributes(&self) -> impl Iterator<Item = (&'static str, Value)> + '_ {
        let id = match &self.request_id {
            Value::String(id) => id.clone(),
            other => other.to_string(),
        };
        let caller = self.caller.iter().flat_map(|tag| tag.attributes());
        [
            ("mcp.method.name", self.method.into()),
            ("mcp.protocol.version", self.protocol_version.into()),
            ("jsonrpc.request.id", id.into()),
        ]
        .into_iter()
        .chain(caller.map(|(key, value)| (*key, Value::String(value.clone()))))
    }
}

impl SpanRecord {
    pub fn status(&self) -> &'static str {
        if self.error.is_some() { "error" } else { "ok" }
    }
}

/// How much chat history to keep. The default keeps all of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConversationLimits {
    /// Keep the newest this many conversations by last activity (`None`: all).
    pub max_count: Option<usize>,
    /// Delete conversations whose last activity is older than this (`None`: never).
    pub max_age: Option<Duration>,
}

impl ConversationLimits {
    /// Whether any limit is set (otherwise nothing is ever pruned).
    pub fn is_set(&self) -> bool {
        self.max_count.is_some() || self.max_age.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_id_is_text_as_the_client_sent_it() {
        let id_of = |request_id: Value| {
            let request = McpRequest {
                method: "tools/call",
                protocol_version: "2025-11-25",
                request_id,
                caller: None,
            };
            request.attributes().nth(2).unwrap().1
        };
        assert_eq!(id_of(Value::from(7)), "7");
        assert_eq!(id_of(Value::from("call-7")), "call-7", "no JSON quotes");
    }
}
