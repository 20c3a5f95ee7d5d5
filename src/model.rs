//! The ground floor's shared model: the plain types every layer passes around — who
//! speaks in a conversation ([`Role`]), a message as stored ([`Message`]) and about to be
//! stored ([`NewMessage`]), the tool calls a model asks for ([`ToolCall`]) and the tools
//! it is offered ([`ToolDef`]), one finished trace span ([`SpanRecord`]) and how much
//! chat history to keep ([`ConversationLimits`]).
//!
//! They are data, not services: nothing here imports from `bot`, `mcp` or
//! `diagnostics`, so the store, the LLM providers, the tool runner, the tracer and the
//! configuration can all use them without pointing at each other.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who a message is from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A stored message of a conversation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
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
    pub input_schema: Value,
    /// The caller needs at least one of these roles; empty means anyone.
    pub required_roles: Vec<String>,
    /// Hidden from the LLM; callable by admins only.
    pub internal: bool,
}

/// What a span stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    pub name: String,
    /// Roots only: what started the trace (`web`, `send_message`, `task`, `run_tool`…).
    pub source: Option<String>,
    pub conversation_id: Option<String>,
    /// Start, in microseconds since the Unix epoch.
    pub start_us: i64,
    pub duration_us: i64,
    pub error: Option<String>,
    /// LLM spans: the model; tool spans: the tool's name.
    pub model: Option<String>,
    pub tool: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// Everything else: request, response, arguments, result, provider, timings.
    #[serde(default)]
    pub attributes: Map<String, Value>,
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
