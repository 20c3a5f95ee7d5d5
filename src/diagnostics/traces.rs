//! Turn traces over MCP: `list_traces` (newest first, filtered, paged), `get_trace` (the
//! span tree, or one span in full) and `last_error` ("what just broke?" in one call:
//! the latest failure of a turn, tool, task or MCP server, with its trace).
//!
//! Every tool first waits for the trace writer to store what it holds, so a trace is
//! complete as soon as its turn has answered. Payloads were redacted before storage;
//! the `mcp` layer redacts results once more on the way out.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::trace_shapes::{FailedTask, LastFailure, ServerFailure, TraceAnswer, TracePage};
use super::trace_view::{
    AnswerBudget, MAX_MAX_BYTES, Paging, StatusFilter, full_span, span_summary, span_tree,
    trace_page,
};
use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed};
use crate::bot::mcp_client::McpServerStatus;
use crate::bot::store::{SpanQuery, Task};
use crate::mcp::{Annotations, CallToolResult, Outcome, RequestContext, ToolSpec};
use crate::model::SpanRecord;
use crate::trace_context::{is_span_id, is_trace_id};

pub(super) fn store_failed(e: impl std::fmt::Display) -> Outcome<CallToolResult> {
    failed(format!("cannot read the traces from the database: {e}"))
}

pub(super) struct ListTraces;

#[derive(Deserialize, JsonSchema)]
pub(super) struct ListTracesArgs {
    /// Only this conversation's traces
    #[schemars(length(min = 1), extend("x-aliases" = ["conversationId"]))]
    conversation_id: Option<String>,
    status: Option<StatusFilter>,
    /// Only traces at least this long
    #[schemars(range(min = 0))]
    min_duration_ms: Option<f64>,
    /// Only traces started this way; without it, every source but mcp (the /mcp tool calls)
    #[schemars(extend("enum" = ["web", "send_message", "task", "run_tool", "replay", "mcp"]))]
    source: Option<String>,
    /// Only traces started by /mcp calls of this client (its clientInfo name, e.g.
    /// claude-code)
    #[schemars(length(min = 1, max = 200))]
    client: Option<String>,
    /// Only traces started by the /mcp call the caller gave this id (claudecode/toolUseId,
    /// vscode.requestId, vscode.conversationId)
    #[schemars(length(min = 1, max = 200))]
    caller_id: Option<String>,
    #[serde(flatten)]
    paging: Paging,
}

impl DiagnosticTool for ListTraces {
    type Args = ListTracesArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_traces",
            "List turn traces",
            "Lists the bot's turn traces (one per web message, send_message, scheduled task, run_tool or replay), newest first: \
             trace_id, source, conversation, status (error when any step failed), duration, LLM and tool call counts, tokens. \
             Every other /mcp tools/call leaves a one-span trace of source `mcp`, listed only with source=\"mcp\". \
             Filter by conversation, status, since, min_duration_ms or source; page with `cursor` = the previous `next_cursor`. \
             client and caller_id find the work a client's call started (its /mcp call's span and, for send_message, the turn): \
             client is the name its clientInfo gave (\"claude-code\"), caller_id one of its own ids for the call \
             (Claude Code's claudecode/toolUseId, VS Code's vscode.conversationId or vscode.requestId); either lists \
             source mcp too. Open one with get_trace.",
        )
        .output_of::<TracePage>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, args: ListTracesArgs, _: &RequestContext) -> Answer {
        let query = match args.paging.query() {
            Ok(paged) => SpanQuery {
                conversation_id: args.conversation_id,
                status: args.status.map(|s| s.as_str().to_string()),
                min_duration_us: args.min_duration_ms.map(|ms| (ms * 1000.0) as i64),
                source: args.source,
                client: args.client,
                caller_id: args.caller_id,
                ..paged
            },
            Err(e) => return Ok(failed(e)),
        };
        d.bot.tracer.flush().await;
        match d.bot.store.list_traces(query).await {
            Ok(page) => Ok(done(json!(trace_page(&page)))),
            Err(e) => Ok(store_failed(e)),
        }
    }
}

pub(super) struct GetTrace;

#[derive(Deserialize, JsonSchema)]
pub(super) struct GetTraceArgs {
    /// From list_traces, last_error or send_message
    #[schemars(regex(pattern = r"^[0-9a-f]{32}$"))]
    trace_id: String,
    /// Expand this span of the trace
    #[schemars(regex(pattern = r"^[0-9a-f]{16}$"))]
    span_id: Option<String>,
    #[serde(flatten)]
    budget: AnswerBudget,
}

impl DiagnosticTool for GetTrace {
    type Args = GetTraceArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "get_trace",
            "Get a turn trace",
            "One trace as a span tree: the turn, its LLM calls (model, tokens, time to first token, finish reason), \
             tool calls and worker agents, each with start, duration, status and error. Pass span_id to expand one span \
             with its full payloads (the request messages, response, arguments, result), redacted and cut to max_bytes.",
        )
        .output_of::<TraceAnswer>()
        .annotations(Annotations::READ_ONLY)
        .max_result_size(MAX_MAX_BYTES)
    }

    async fn run(&self, d: &Diagnostics, args: GetTraceArgs, _: &RequestContext) -> Answer {
        let max_bytes = args.budget.bytes();
        Ok(trace_answer(d, &args.trace_id, args.span_id.as_deref(), max_bytes).await)
    }
}

/// `get_trace`'s answer (also the `porthole://traces/{id}` resource's content).
pub(super) async fn trace_answer(
    d: &Diagnostics,
    trace_id: &str,
    span_id: Option<&str>,
    max_bytes: usize,
) -> Outcome<CallToolResult> {
    if !is_trace_id(trace_id) {
        return failed(format!(
            "`{trace_id}` is not a trace id (32 lowercase hex digits); take one from list_traces"
        ));
    }
    if let Some(span) = span_id.filter(|s| !is_span_id(s)) {
        return failed(format!(
            "`{span}` is not a span id (16 lowercase hex digits); take one from this trace's span tree"
        ));
    }
    d.bot.tracer.flush().await;
    let spans = match d.bot.store.trace_spans(trace_id).await {
        Ok(spans) => spans,
        Err(e) => return store_failed(e),
    };
    if spans.is_empty() {
        return failed(format!(
            "no trace `{trace_id}`: it never existed or was pruned (TRACE_MAX_TURNS, TRACE_MAX_MCP_CALLS, TRACE_MAX_AGE_SECS); call list_traces"
        ));
    }
    let mut answer = TraceAnswer {
        trace_id: trace_id.to_string(),
        spans: None,
        span_count: None,
        notes: None,
        span: None,
    };
    if let Some(span_id) = span_id {
        let Some(span) = spans.iter().find(|s| s.span_id == span_id) else {
            return failed(format!(
                "trace `{trace_id}` has no span `{span_id}`; call get_trace without span_id to see its spans"
            ));
        };
        answer.span = Some(full_span(span, max_bytes));
        return done(json!(answer));
    }
    let (tree, notes) = span_tree(&spans, max_bytes);
    answer.spans = Some(tree);
    answer.span_count = Some(spans.len());
    answer.notes = (!notes.is_empty()).then_some(notes);
    done(json!(answer))
}

pub(super) struct LastError;

/// `last_error`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub(super) struct BudgetArgs {
    #[serde(flatten)]
    budget: AnswerBudget,
}

impl DiagnosticTool for LastError {
    type Args = BudgetArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "last_error",
            "What just broke?",
            "The most recent failure anywhere in the bot, by time: a failed step of a turn (LLM call, tool call, worker agent), \
             a scheduled task, or an MCP server the bot uses (timed from when its outage began), with the failed span \
             and its trace's span tree. A failed /mcp tool call (a caller's bad db_query, say; list_traces source=mcp) \
             is the caller's mistake, not the bot's failure, and is not counted. \
             Returns found=false when nothing has failed.",
        )
        .output_of::<LastFailure>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, args: BudgetArgs, _: &RequestContext) -> Answer {
        let max_bytes = args.budget.bytes();
        let bot = &d.bot;
        bot.tracer.flush().await;
        let span = match bot.store.last_failed_span().await {
            Ok(span) => span,
            Err(e) => return Ok(store_failed(e)),
        };
        let tasks = bot.schedule.list().await.unwrap_or_default();
        let task = tasks
            .iter()
            .filter(|t| t.status == "error")
            .max_by(|a, b| a.last_run.cmp(&b.last_run));
        let servers: Vec<McpServerStatus> = bot
            .mcp_host
            .servers()
            .into_iter()
            .filter(|s| s.state == "failed" || (s.enabled && s.last_error.is_some()))
            .collect();
        let server = servers
            .iter()
            .max_by_key(|s| s.last_error_at.as_deref().and_then(millis));
        let span_time = span.as_ref().map(|s| (s.start_us + s.duration_us) / 1000);
        let task_time = task.and_then(|t| t.last_run.as_deref()).and_then(millis);
        let server_time = server.and_then(|s| s.last_error_at.as_deref().and_then(millis));
        let newest = [
            (task_time, task.map(Failure::Task)),
            (span_time, span.as_ref().map(Failure::Span)),
            (server_time, server.map(Failure::Server)),
        ]
        .into_iter()
        .filter_map(|(time, failure)| Some((time, failure?)))
        .reduce(|newest, next| if next.0 > newest.0 { next } else { newest });
        let mut answer = match newest.map(|(_, failure)| failure) {
            Some(Failure::Span(span)) => failed_turn(d, span, max_bytes).await,
            Some(Failure::Task(task)) => LastFailure {
                found: true,
                kind: Some("task".into()),
                error: Some(task.last_result.clone()),
                task: Some(FailedTask {
                    id: task.id,
                    name: task.name.clone(),
                    last_run: task.last_run.clone(),
                }),
                hint: Some("list_traces with source=task shows the task's trace".into()),
                ..LastFailure::default()
            },
            Some(Failure::Server(server)) => LastFailure {
                found: true,
                kind: Some("mcp_server".into()),
                error: Some(server.last_error.clone()),
                server: Some(server_failure(server)),
                ..LastFailure::default()
            },
            None => LastFailure::default(),
        };
        if !servers.is_empty() {
            answer.mcp_servers_failing_now = Some(servers.iter().map(server_failure).collect());
        }
        Ok(done(json!(answer)))
    }
}

/// A failure `last_error` can report; the newest of them by time wins. Times compare
/// to the millisecond, a task's precision; on a tie, the first in this order: a task
/// ends after the turn it ran (which may have failed within the same millisecond),
/// and a failed span explains more than a server's status.
enum Failure<'a> {
    Span(&'a SpanRecord),
    Task(&'a Task),
    Server(&'a McpServerStatus),
}

fn server_failure(server: &McpServerStatus) -> ServerFailure {
    ServerFailure {
        name: server.name.clone(),
        state: server.state.to_string(),
        error: server.last_error.clone(),
        since: server.last_error_at.clone(),
    }
}

/// An RFC 3339 time in ms since the epoch.
fn millis(time: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(time)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// The latest failed turn: its first failure (the cause; later failures, the turn's
/// own included, usually follow from it) and the turn's span tree.
async fn failed_turn(d: &Diagnostics, latest: &SpanRecord, max_bytes: usize) -> LastFailure {
    let turn: Vec<SpanRecord> = d
        .bot
        .store
        .trace_spans(&latest.trace_id)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.root_span_id == latest.root_span_id)
        .collect();
    let cause = turn
        .iter()
        .filter(|s| s.error.is_some())
        .min_by_key(|s| s.start_us + s.duration_us)
        .unwrap_or(latest);
    let mut answer = LastFailure {
        found: true,
        kind: Some(cause.kind.as_str().into()),
        error: Some(cause.error.clone()),
        span: Some(span_summary(cause)),
        trace_id: Some(cause.trace_id.clone()),
        turn_error: Some(
            turn.iter()
                .find(|s| s.is_root)
                .and_then(|r| r.error.clone()),
        ),
        ..LastFailure::default()
    };
    let used = serde_json::to_string(&answer).map_or(0, |text| text.len());
    let budget = max_bytes.saturating_sub(used).max(1024);
    answer.trace = Some(span_tree(&turn, budget).0);
    answer
}
