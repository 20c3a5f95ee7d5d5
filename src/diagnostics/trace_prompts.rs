//! Traces in prompts: `explain_failed_turn` (one failed turn laid out step by step from
//! its trace), and the trace digests `diagnose_recent_errors` and
//! `explain_conversation` add when traces exist.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::Diagnostics;
use crate::bot::store::SpanQuery;
use crate::mcp::{
    Outcome, Prompt, PromptArgument, PromptMessages, PromptSpec, RequestContext, RpcError,
};
use crate::model::SpanRecord;
use crate::text::elide_middle;
use crate::trace_context::is_trace_id;

/// Each payload shown in a prompt is cut to about this many characters.
const PAYLOAD_CHARS: usize = 600;

pub struct ExplainFailedTurn(pub Arc<Diagnostics>);

#[async_trait]
impl Prompt for ExplainFailedTurn {
    fn spec(&self) -> PromptSpec {
        PromptSpec {
            name: "explain_failed_turn".into(),
            title: Some("Explain a failed turn".into()),
            description: "Lays out one turn's trace (the latest failed one unless trace_id is given): every LLM call with what it \
                          was sent and answered, every tool call with arguments and result, timings and errors, and asks why it failed."
                .into(),
            arguments: vec![PromptArgument {
                name: "trace_id".into(),
                description: "The trace to explain (completes from recent failed traces); default: the latest failed one"
                    .into(),
                required: false,
            }],
        }
    }

    async fn get(
        &self,
        args: &Map<String, Value>,
        _ctx: &RequestContext,
    ) -> Result<Outcome<PromptMessages>, RpcError> {
        let bot = &self.0.bot;
        bot.tracer.flush().await;
        let trace_id = match args.get("trace_id").and_then(Value::as_str) {
            Some(id) if !is_trace_id(id) => {
                return Err(RpcError::invalid_params(format!(
                    "`{id}` is not a trace id (32 lowercase hex digits); use completion or list_traces"
                )));
            }
            Some(id) => id.to_string(),
            None => match failed_trace_ids(&self.0, 1).await.into_iter().next() {
                Some(id) => id,
                None => {
                    return Err(RpcError::invalid_params(
                        "no failed turn is stored; pass a trace_id from list_traces",
                    ));
                }
            },
        };
        let spans = bot
            .store
            .trace_spans(&trace_id)
            .await
            .map_err(|e| RpcError::internal(e.to_string()))?;
        if spans.is_empty() {
            return Err(RpcError::invalid_params(format!(
                "no trace `{trace_id}` (never existed or pruned); call list_traces"
            )));
        }
        let body = format!(
            "Explain why this turn of the Porthole bot failed: which step failed first, its cause (read the request and response), \
             whether later steps were consequences, and what to change (configuration, tool, prompt). Use get_trace and \
             get_llm_call for more detail.\n\nTrace {trace_id}:\n{}",
            render_trace(&spans, true)
        );
        Ok(Outcome::Complete(PromptMessages::user_text(body)))
    }

    async fn complete(&self, argument: &str, value: &str) -> Vec<String> {
        if argument != "trace_id" {
            return Vec::new();
        }
        failed_trace_ids(&self.0, 100)
            .await
            .into_iter()
            .filter(|id| id.starts_with(value))
            .collect()
    }
}

async fn failed_trace_ids(d: &Diagnostics, limit: usize) -> Vec<String> {
    let query = SpanQuery {
        status: Some("error".into()),
        limit,
        ..SpanQuery::default()
    };
    d.bot
        .store
        .list_traces(query)
        .await
        .map(|page| page.items.into_iter().map(|t| t.root.trace_id).collect())
        .unwrap_or_default()
}

/// The traces matching `query` as text, one span a line (with payloads when asked);
/// `None` when there are none.
pub async fn trace_digest(d: &Diagnostics, query: SpanQuery, payloads: bool) -> Option<String> {
    d.bot.tracer.flush().await;
    let page = d.bot.store.list_traces(query).await.ok()?;
    let mut out = Vec::new();
    for trace in page.items {
        let spans = d
            .bot
            .store
            .trace_spans(&trace.root.trace_id)
            .await
            .unwrap_or_default();
        out.push(format!(
            "Trace {} ({}):\n{}",
            trace.root.trace_id,
            trace.status(),
            render_trace(&spans, payloads)
        ));
    }
    (!out.is_empty()).then(|| out.join("\n"))
}

/// A trace as indented lines: kind, name, duration, tokens, status; with `payloads`,
/// the LLM request's last message, the response and tool arguments and results.
fn render_trace(spans: &[SpanRecord], payloads: bool) -> String {
    let depth_of = |span: &SpanRecord| {
        let mut depth = 0;
        let mut parent = span.parent_span_id.as_deref();
        while let Some(p) = parent.and_then(|p| spans.iter().find(|s| s.span_id == p)) {
            depth += 1;
            parent = p.parent_span_id.as_deref();
            if depth > 32 {
                break;
            }
        }
        depth
    };
    let mut lines = Vec::new();
    for span in spans {
        let indent = "  ".repeat(depth_of(span) + 1);
        let tokens = match (span.input_tokens, span.output_tokens) {
            (None, None) => String::new(),
            (i, o) => format!(
                ", tokens {}→{}",
                i.unwrap_or_default(),
                o.unwrap_or_default()
            ),
        };
        let status = match &span.error {
            Some(e) => format!("FAILED: {e}"),
            None => "ok".into(),
        };
        lines.push(format!(
            "{indent}- {} `{}` span {} ({:.1} ms{tokens}): {status}",
            span.kind.as_str(),
            span.name,
            span.span_id,
            span.duration_us as f64 / 1000.0
        ));
        if payloads {
            for key in ["input", "arguments", "response", "result", "output"] {
                if let Some(value) = span.attributes.get(key) {
                    let text = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    lines.push(format!(
                        "{indent}    {key}: {}",
                        elide_middle(&text, PAYLOAD_CHARS)
                    ));
                }
            }
            if let Some(Value::Array(messages)) = span.attributes.get("request")
                && let Some(last) = messages.last()
            {
                lines.push(format!(
                    "{indent}    last message sent: {}",
                    elide_middle(&last.to_string(), PAYLOAD_CHARS)
                ));
            }
        }
    }
    lines.join("\n")
}
