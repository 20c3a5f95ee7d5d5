//! The typed-arguments helper every diagnostics tool is written with.
//!
//! A [`DiagnosticTool`] is its argument type, its spec and its work: the input schema
//! is derived from the argument type, and `run` receives the arguments parsed into it
//! (`mcp::arguments`, the parse every typed tool shares), with the [`Diagnostics`] it
//! works on. [`adapt`] makes one an `mcp::Tool`.
//!
//! Every call is a span of its own (a trace with source `mcp`, the child of the caller's
//! `traceparent`) carrying the MCP semantic conventions, unless the tool starts a trace
//! itself ([`DiagnosticTool::starts_a_trace`]). The span is handed to the trace writer
//! when the call ends, like every span: nothing is stored on the request's path, and the
//! span's constant parts (source, name, the tool's name, the request's attributes) are
//! not copied per call (see `tests/it/allocations.rs`).

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Diagnostics;
use crate::bot::trace::{CallSpan, Tracer};
use crate::mcp::{
    CallToolResult, Outcome, RefusedCalls, RequestContext, RpcError, TaskSupport, Tool, ToolSpec,
    arguments,
};
use crate::model::McpRequest;
use crate::redact::Redactor;
use crate::text::elide_middle;

/// What a tool's work comes to: a finished result (a tool error included), a request for
/// more input, or a protocol error.
pub(super) type Answer = Result<Outcome<CallToolResult>, RpcError>;

pub(super) trait DiagnosticTool: Send + Sync + 'static {
    /// The arguments; the input schema is derived from this type
    /// ([`ToolSpec::input_of`]), so a spec never writes one.
    type Args: DeserializeOwned + JsonSchema + Send;

    /// How the tool is listed. `d` is there for the few specs that depend on the
    /// settings (`db_query` says whether it runs read-only).
    fn spec(&self, d: &Diagnostics) -> ToolSpec;

    /// Whether calls may run as tasks; see [`Tool::task_support`].
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Forbidden
    }

    /// Whether the tool records its call as the root of a trace it starts itself (a
    /// turn, a run of a bot tool), so the call needs no span of its own.
    fn starts_a_trace(&self) -> bool {
        false
    }

    /// The work, written `async fn run(…) -> Answer` (the future must be `Send`, as
    /// every tool call may run on another thread).
    fn run(
        &self,
        d: &Diagnostics,
        args: Self::Args,
        ctx: &RequestContext,
    ) -> impl Future<Output = Answer> + Send;
}

/// The arguments of a tool that takes none.
#[derive(Deserialize, JsonSchema)]
pub(super) struct NoArgs {}

/// `tool` as an `mcp::Tool` over `d`.
pub(super) fn adapt(d: &Arc<Diagnostics>, tool: impl DiagnosticTool) -> Arc<dyn Tool> {
    let name = tool.spec(d).name.into();
    Arc::new(Adapted {
        d: d.clone(),
        tool,
        name,
    })
}

struct Adapted<T> {
    d: Arc<Diagnostics>,
    tool: T,
    /// The tool's name, for its argument errors and shared by its spans (the spec is
    /// built only when listed).
    name: Arc<str>,
}

impl<T: DiagnosticTool> Adapted<T> {
    async fn run(&self, args: Value, ctx: &RequestContext) -> Answer {
        match arguments(&self.name, args) {
            Ok(args) => self.tool.run(&self.d, args, ctx).await,
            Err(refused) => Ok(Outcome::Complete(refused)),
        }
    }

    /// The span of one `tools/call`: the root of a trace of source `mcp` (the child of
    /// the caller's `traceparent`), with the MCP semantic conventions of the request.
    /// Its arguments are not recorded (they are the caller's, and may hold anything).
    fn call_span(&self, ctx: &RequestContext) -> Option<CallSpan> {
        if self.tool.starts_a_trace() {
            return None;
        }
        Some(start_call_span(&self.d.bot.tracer, self.name.clone(), ctx))
    }
}

/// The span of one `tools/call` of `tool`: the root of a trace of source `mcp` (the
/// child of the caller's `traceparent`), with the MCP semantic conventions of the request.
fn start_call_span(tracer: &Arc<Tracer>, tool: Arc<str>, ctx: &RequestContext) -> CallSpan {
    CallSpan::start(tracer, tool, ctx.trace_parent(), mcp_request(ctx))
}

/// Records the `tools/call`s refused before a tool ran (an unknown tool, arguments its
/// schema rejects) as the calls the tools run are recorded: a failed `mcp` span each, so
/// a client's mistakes show in `list_traces` with `source: "mcp"` whatever they were.
/// The tool's name and the error are the caller's text, of any length: they are
/// redacted, then cut (in that order, so no cut splits a secret the redactor would know).
pub(super) struct RefusedCallSpans {
    pub(super) tracer: Arc<Tracer>,
    pub(super) redactor: Arc<Redactor>,
}

/// The longest tool name (what `valid_tool_name` allows) and refusal a span keeps.
const REFUSED_NAME_CHARS: usize = 64;
const REFUSED_ERROR_CHARS: usize = 1000;

impl RefusedCalls for RefusedCallSpans {
    fn refused(&self, tool: &str, ctx: &RequestContext, answer: &Answer) {
        let shown = |text: &str, max: usize| elide_middle(&self.redactor.redact_text(text), max);
        let tool = shown(tool, REFUSED_NAME_CHARS);
        let span = start_call_span(&self.tracer, tool.into(), ctx);
        match answer {
            Err(e) => span.fail(e.code.to_string(), shown(&e.message, REFUSED_ERROR_CHARS)),
            _ => end_call_span(span, answer),
        }
    }
}

/// The request `ctx` answers, for the span of the work it starts. The session id is
/// left out: it is a credential.
pub(super) fn mcp_request(ctx: &RequestContext) -> McpRequest {
    McpRequest {
        method: "tools/call",
        protocol_version: ctx.era.version(),
        request_id: ctx.request_id.clone(),
        caller: ctx.caller_tag(),
    }
}

/// Ends a `tools/call` span as its answer went: a tool error or a protocol error
/// fails it, with `error.type` saying which (`tool_error`, or the JSON-RPC error code).
fn end_call_span(span: CallSpan, answer: &Answer) {
    match answer {
        Ok(Outcome::Complete(result)) if result.is_error => {
            let text = result.content.first().and_then(|c| c["text"].as_str());
            span.fail("tool_error", text.unwrap_or("tool error"));
        }
        Err(e) => span.fail(e.code.to_string(), e.message.as_str()),
        Ok(_) => span.end(),
    }
}

#[async_trait]
impl<T: DiagnosticTool> Tool for Adapted<T> {
    fn spec(&self) -> ToolSpec {
        self.tool.spec(&self.d).input_of::<T::Args>()
    }

    fn task_support(&self) -> TaskSupport {
        self.tool.task_support()
    }

    async fn call(&self, args: Value, ctx: &RequestContext) -> Answer {
        let span = self.call_span(ctx);
        let answer = self.run(args, ctx).await;
        if let Some(span) = span {
            end_call_span(span, &answer);
        }
        answer
    }
}
