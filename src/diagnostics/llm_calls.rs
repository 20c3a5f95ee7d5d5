//! LLM calls and their cost over MCP: `get_llm_calls` (across traces, filtered by
//! model, status and time, newest first, paged), `get_llm_call` (one call's full request
//! and response, redacted, within a byte budget) and `get_trace_stats` (per model and
//! per tool: count, error rate, p50/p95 latency, tokens in and out).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::trace_shapes::{
    Figures, FullSpan, LlmCallPage, LlmCallRow, ModelFigures, ToolFigures, TraceStats,
};
use super::trace_view::{
    AnswerBudget, MAX_MAX_BYTES, Paging, SinceFilter, StatusFilter, encode_cursor, full_span,
    percentile, span_summary,
};
use super::traces::store_failed;
use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed};
use crate::bot::store::SpanQuery;
use crate::mcp::{Annotations, RequestContext, ToolSpec};
use crate::model::{SpanKind, SpanRecord};
use crate::trace_context::is_span_id;

pub(super) struct GetLlmCalls;

#[derive(Deserialize, JsonSchema)]
pub(super) struct GetLlmCallsArgs {
    /// Only calls to this model
    #[schemars(length(min = 1))]
    model: Option<String>,
    status: Option<StatusFilter>,
    #[serde(flatten)]
    paging: Paging,
}

impl DiagnosticTool for GetLlmCalls {
    type Args = GetLlmCallsArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "get_llm_calls",
            "List LLM calls",
            "The bot's requests to its language model across all traces, newest first: model, status, error, duration, \
             time to first token, tokens in/out, finish reason, the tools it asked for, and the trace it belongs to. \
             Filter by model, status or since; page with `cursor`. Open one with get_llm_call.",
        )
        .output_of::<LlmCallPage>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, args: GetLlmCallsArgs, _: &RequestContext) -> Answer {
        let query = match args.paging.query() {
            Ok(paged) => SpanQuery {
                status: args.status.map(|s| s.as_str().to_string()),
                model: args.model,
                ..paged
            },
            Err(e) => return Ok(failed(e)),
        };
        d.bot.tracer.flush().await;
        match d.bot.store.list_spans(SpanKind::Llm, query).await {
            Ok(page) => Ok(done(json!(LlmCallPage {
                calls: page
                    .items
                    .iter()
                    .map(|span| LlmCallRow {
                        summary: span_summary(span),
                        trace_id: span.trace_id.clone(),
                    })
                    .collect(),
                next_cursor: encode_cursor(&page.next),
            }))),
            Err(e) => Ok(store_failed(e)),
        }
    }
}

pub(super) struct GetLlmCall;

#[derive(Deserialize, JsonSchema)]
pub(super) struct GetLlmCallArgs {
    /// From get_llm_calls or get_trace
    #[schemars(regex(pattern = r"^[0-9a-f]{16}$"))]
    span_id: String,
    #[serde(flatten)]
    budget: AnswerBudget,
}

impl DiagnosticTool for GetLlmCall {
    type Args = GetLlmCallArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "get_llm_call",
            "Get one LLM call",
            "One request to the language model in full: the messages it was sent (system prompt included), the tools \
             offered, the parameters, the response text and tool calls, finish reason, tokens and timings, or the error \
             and its cause. Secrets are redacted; payloads are cut to max_bytes and marked where cut.",
        )
        .output_of::<FullSpan>()
        .annotations(Annotations::READ_ONLY)
        .max_result_size(MAX_MAX_BYTES)
    }

    async fn run(&self, d: &Diagnostics, args: GetLlmCallArgs, _: &RequestContext) -> Answer {
        if !is_span_id(&args.span_id) {
            return Ok(failed(format!(
                "`{}` is not a span id (16 lowercase hex digits); take one from get_llm_calls",
                args.span_id
            )));
        }
        let max_bytes = args.budget.bytes();
        d.bot.tracer.flush().await;
        match d.bot.store.span(&args.span_id).await {
            Ok(Some(span)) if span.kind == SpanKind::Llm => {
                Ok(done(json!(full_span(&span, max_bytes))))
            }
            Ok(Some(span)) => Ok(failed(format!(
                "span `{}` is a {} span, not an LLM call; use get_trace with trace_id {} and span_id to expand it",
                args.span_id,
                span.kind.as_str(),
                span.trace_id
            ))),
            Ok(None) => Ok(failed(format!(
                "no LLM call `{}`: it never existed or its trace was pruned; call get_llm_calls",
                args.span_id
            ))),
            Err(e) => Ok(store_failed(e)),
        }
    }
}

pub(super) struct GetTraceStats;

#[derive(Deserialize, JsonSchema)]
pub(super) struct SinceArgs {
    #[serde(flatten)]
    since: SinceFilter,
}

impl DiagnosticTool for GetTraceStats {
    type Args = SinceArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "get_trace_stats",
            "LLM and tool statistics from traces",
            "Per model and per tool, over the stored traces (or those since `since`): call count, errors, error rate, \
             p50 and p95 latency in ms, and tokens in/out (models). The bot's own work: the traces of /mcp tool calls \
             (source mcp) are not counted.",
        )
        .output_of::<TraceStats>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, args: SinceArgs, _: &RequestContext) -> Answer {
        let since_us = match args.since.micros() {
            Ok(s) => s,
            Err(e) => return Ok(failed(e)),
        };
        d.bot.tracer.flush().await;
        let spans = match d
            .bot
            .store
            .step_spans_since(since_us.unwrap_or(i64::MIN))
            .await
        {
            Ok(spans) => spans,
            Err(e) => return Ok(store_failed(e)),
        };
        let (models, tools) = group_stats(&spans);
        Ok(done(json!(TraceStats {
            models,
            tools,
            since: args.since.since,
        })))
    }
}

/// Figures for one model or tool.
#[derive(Default)]
struct Group {
    durations_ms: Vec<f64>,
    errors: u64,
    input_tokens: i64,
    output_tokens: i64,
}

impl Group {
    fn into_figures(mut self) -> Figures {
        self.durations_ms.sort_by(f64::total_cmp);
        let count = self.durations_ms.len();
        Figures {
            count,
            errors: self.errors,
            error_rate: if count == 0 {
                0.0
            } else {
                self.errors as f64 / count as f64
            },
            p50_ms: percentile(&self.durations_ms, 50.0),
            p95_ms: percentile(&self.durations_ms, 95.0),
        }
    }
}

/// Per-model (LLM spans) and per-tool (tool spans) figures, each sorted by name.
fn group_stats(spans: &[SpanRecord]) -> (Vec<ModelFigures>, Vec<ToolFigures>) {
    let mut models: BTreeMap<String, Group> = BTreeMap::new();
    let mut tools: BTreeMap<String, Group> = BTreeMap::new();
    for span in spans {
        let (groups, name) = match span.kind {
            SpanKind::Llm => (&mut models, span.model.as_deref()),
            SpanKind::Tool => (&mut tools, span.tool.as_deref()),
            _ => continue,
        };
        let group = groups
            .entry(name.unwrap_or("(unknown)").to_string())
            .or_default();
        group.durations_ms.push(span.duration_us as f64 / 1000.0);
        group.errors += u64::from(span.error.is_some());
        group.input_tokens += span.input_tokens.unwrap_or(0);
        group.output_tokens += span.output_tokens.unwrap_or(0);
    }
    (
        models
            .into_iter()
            .map(|(model, g)| ModelFigures {
                model,
                input_tokens: g.input_tokens,
                output_tokens: g.output_tokens,
                figures: g.into_figures(),
            })
            .collect(),
        tools
            .into_iter()
            .map(|(tool, g)| ToolFigures {
                tool,
                figures: g.into_figures(),
            })
            .collect(),
    )
}
