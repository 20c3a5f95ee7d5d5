//! What the trace tools answer, as types: a span's summary, a node of a span tree, a
//! listed trace, a listed LLM call, one span in full, and the answers made of them. The
//! tools' output schemas are derived from these (`output_of`), so each says what its
//! answer holds; `trace_view` builds them from stored spans.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::bot::store::TraceCounts;
use crate::model::SpanKind;

/// How a span, or a trace, ended.
// Its variants carry no doc comments: with them the derived schema would be a `oneOf`
// of constants, not an `enum`.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Error,
}

impl Status {
    /// `Error` when something failed.
    pub fn of(failed: bool) -> Status {
        if failed { Status::Error } else { Status::Ok }
    }
}

/// What a span is and how long it took, without its payloads, its own status or token
/// counts: what a listed trace says of its root beside the trace's own figures.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SpanFacts {
    pub span_id: String,
    pub kind: SpanKind,
    pub name: String,
    /// RFC 3339, UTC
    pub started_at: String,
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// LLM calls: the model
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tool calls: the tool
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Roots: what started the trace (web, send_message, task, run_tool, mcp, replay…)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// LLM calls: when the first token came, after the request was sent
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>")]
    pub time_to_first_token_ms: Option<Value>,
    /// LLM calls: why the model stopped
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub finish_reason: Option<Value>,
    /// LLM calls: the provider
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub provider: Option<Value>,
}

/// One span without its payloads: what it was, when, how long, what it cost, how it
/// ended.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SpanSummary {
    #[serde(flatten)]
    pub facts: SpanFacts,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    /// LLM calls: the tools the model asked for, by name
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<String>>")]
    pub tool_calls: Option<Vec<Value>>,
}

/// A span in a span tree, with the spans it started.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SpanNode {
    #[serde(flatten)]
    pub summary: SpanSummary,
    /// The spans this one started, in start order
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<SpanNode>,
}

/// An LLM call as `get_llm_calls` lists it: its summary and its trace.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LlmCallRow {
    #[serde(flatten)]
    pub summary: SpanSummary,
    pub trace_id: String,
}

/// A trace as `list_traces` lists it: its root, and figures over the whole trace.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TraceRow {
    #[serde(flatten)]
    pub root: SpanFacts,
    pub trace_id: String,
    /// error when any span failed
    pub status: Status,
    pub root_status: Status,
    #[serde(flatten)]
    pub counts: TraceCounts,
    /// The caller's span (traceparent), when there was one
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_parent_span_id: Option<String>,
}

/// One span with its payloads.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FullSpan {
    #[serde(flatten)]
    pub summary: SpanSummary,
    pub trace_id: String,
    /// `null` for a trace's root
    pub parent_span_id: Option<String>,
    /// Everything else the span recorded: request, response, arguments, result,
    /// provider, timings
    pub attributes: Map<String, Value>,
    /// The attributes cut to keep the answer within max_bytes
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_by_max_bytes: Option<Vec<String>>,
}

/// `list_traces`' answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TracePage {
    /// Newest first
    pub traces: Vec<TraceRow>,
    /// Pass as cursor for the next page; null on the last
    pub next_cursor: Option<String>,
}

/// `get_llm_calls`' answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LlmCallPage {
    /// Newest first
    pub calls: Vec<LlmCallRow>,
    /// Pass as cursor for the next page; null on the last
    pub next_cursor: Option<String>,
}

/// `get_trace`'s answer (and the `porthole://traces/{id}` resource's): the span tree,
/// or the one span asked for in full.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TraceAnswer {
    pub trace_id: String,
    /// The roots, each with its `children`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spans: Option<Vec<SpanNode>>,
    /// Spans in the trace, those left out by max_bytes included
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_count: Option<usize>,
    /// What max_bytes left out
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// The span asked for (`span_id`), in full
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span: Option<FullSpan>,
}

/// `last_error`'s answer: the newest failure, and the MCP servers failing now.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct LastFailure {
    pub found: bool,
    /// What failed: a step of a turn (its span's kind), a task or an MCP server
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["turn", "llm", "tool", "agent", "task", "mcp_server"]))]
    pub kind: Option<String>,
    /// Its error, as recorded
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Option<String>>,
    /// The failed step: the turn's first failure, the cause of the rest
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span: Option<SpanSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// How the turn itself ended
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_error: Option<Option<String>>,
    /// The turn's span tree
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<Vec<SpanNode>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<FailedTask>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerFailure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_servers_failing_now: Option<Vec<ServerFailure>>,
}

/// A scheduled task whose last run failed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FailedTask {
    pub id: i64,
    pub name: String,
    pub last_run: Option<String>,
}

/// An MCP server the bot uses that is failing.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ServerFailure {
    pub name: String,
    pub state: String,
    pub error: Option<String>,
    /// When its outage began (RFC 3339)
    pub since: Option<String>,
}

/// `get_trace_stats`' answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TraceStats {
    /// By model name
    pub models: Vec<ModelFigures>,
    /// By tool name
    pub tools: Vec<ToolFigures>,
    /// The since asked for
    pub since: Option<String>,
}

/// Calls, errors and latency of one model or tool.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Figures {
    pub count: usize,
    pub errors: u64,
    #[schemars(range(min = 0, max = 1))]
    pub error_rate: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

/// One model's figures.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ModelFigures {
    pub model: String,
    #[serde(flatten)]
    pub figures: Figures,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// One tool's figures.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ToolFigures {
    pub tool: String,
    #[serde(flatten)]
    pub figures: Figures,
}
