//! OpenTelemetry export of turn traces: each stored span also goes, as an SDK
//! `SpanData`, to the `opentelemetry-otlp` exporter (OTLP/HTTP, protobuf), with the
//! GenAI semantic conventions (`gen_ai.operation.name`, `gen_ai.request.model`,
//! `gen_ai.usage.input_tokens`…), the MCP ones for turns started over `/mcp`, and the
//! OpenInference names Arize Phoenix shows (`openinference.span.kind`, `input.value`…).
//!
//! The trace writer hands batches over with `try_send` to a bounded queue; one
//! background task exports them one batch at a time, each under a timeout. A collector
//! that is down, slow or refusing only costs the batches it drops, which are counted
//! (`health` → `traces.counters.spans_export_dropped`); a turn never waits for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind as OtelKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, StringValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::SpanExporter;
use crate::model::{SpanKind, SpanRecord};

/// Batches waiting for the collector; beyond this, new batches are dropped and counted.
const QUEUE_BATCHES: usize = 64;
/// How long one export may take before it counts as failed.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how spans are exported (from `OTEL_*`).
#[derive(Debug, Clone)]
pub struct OtlpSettings {
    /// Base URL; spans go to `{endpoint}/v1/traces`.
    pub endpoint: String,
    pub headers: Vec<(String, String)>,
    pub service_name: String,
}

enum Job {
    Batch(Vec<SpanData>),
    Flush(oneshot::Sender<()>),
}

/// Exports spans over OTLP/HTTP in the background.
pub struct OtlpExporter {
    queue: mpsc::Sender<Job>,
    dropped: Arc<AtomicU64>,
    scope: InstrumentationScope,
}

impl OtlpExporter {
    /// Builds the exporter and starts its task on the current tokio runtime. The
    /// error says what is wrong with the settings.
    pub fn start(settings: &OtlpSettings) -> Result<Arc<OtlpExporter>, String> {
        let client = crate::http_client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the HTTP client for OTLP export: {e}"))?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_endpoint(format!("{}/v1/traces", settings.endpoint))
            .with_timeout(EXPORT_TIMEOUT)
            .with_headers(settings.headers.iter().cloned().collect::<HashMap<_, _>>())
            .build()
            .map_err(|e| {
                format!("cannot build the OTLP exporter for OTEL_EXPORTER_OTLP_ENDPOINT: {e}")
            })?;
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name(settings.service_name.clone())
                .with_attribute(KeyValue::new(
                    "openinference.project.name",
                    settings.service_name.clone(),
                ))
                .build(),
        );
        let (queue, mut jobs) = mpsc::channel(QUEUE_BATCHES);
        let dropped = Arc::new(AtomicU64::new(0));
        let counter = dropped.clone();
        tokio::spawn(async move {
            while let Some(job) = jobs.recv().await {
                match job {
                    Job::Batch(batch) => {
                        let size = batch.len() as u64;
                        let sent =
                            tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(batch)).await;
                        if !matches!(sent, Ok(Ok(()))) {
                            counter.fetch_add(size, Ordering::Relaxed);
                            tracing::debug!(spans = size, "OTLP export failed; spans dropped");
                        }
                    }
                    Job::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        Ok(Arc::new(OtlpExporter {
            queue,
            dropped,
            scope: InstrumentationScope::builder("porthole")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }))
    }
}

#[async_trait]
impl SpanExporter for OtlpExporter {
    fn export(&self, spans: &[SpanRecord]) {
        let batch: Vec<SpanData> = spans
            .iter()
            .filter_map(|s| span_data(s, &self.scope))
            .collect();
        let size = batch.len() as u64;
        if self.queue.try_send(Job::Batch(batch)).is_err() {
            self.dropped.fetch_add(size, Ordering::Relaxed);
        }
    }

    fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    async fn flush(&self, timeout: Duration) {
        let (done, wait) = oneshot::channel();
        let queued = async {
            if self.queue.send(Job::Flush(done)).await.is_ok() {
                let _ = wait.await;
            }
        };
        let _ = tokio::time::timeout(timeout, queued).await;
    }
}

/// A stored span as OpenTelemetry `SpanData`; `None` for ids that are not W3C ids.
fn span_data(span: &SpanRecord, scope: &InstrumentationScope) -> Option<SpanData> {
    let trace_id = TraceId::from_hex(&span.trace_id).ok()?;
    let span_id = SpanId::from_hex(&span.span_id).ok()?;
    let parent_span_id = span
        .parent_span_id
        .as_deref()
        .and_then(|p| SpanId::from_hex(p).ok())
        .unwrap_or(SpanId::INVALID);
    let start_time = SystemTime::UNIX_EPOCH + Duration::from_micros(span.start_us.max(0) as u64);
    Some(SpanData {
        span_context: SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id,
        parent_span_is_remote: span.is_root && parent_span_id != SpanId::INVALID,
        span_kind: if span.kind == SpanKind::Llm {
            OtelKind::Client
        } else if span.is_root && span.source.is_some() {
            OtelKind::Server
        } else {
            OtelKind::Internal
        },
        name: span.name.clone(),
        start_time,
        end_time: start_time + Duration::from_micros(span.duration_us.max(0) as u64),
        attributes: attributes(span),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: match &span.error {
            Some(e) => Status::error(e.clone()),
            None => Status::Ok,
        },
        instrumentation_scope: scope.clone(),
    })
}

/// A JSON attribute as text: strings as they are, anything else as JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A text field of a span as the exporter's own `String`.
fn owned(text: &Option<impl AsRef<str>>) -> Option<String> {
    text.as_ref().map(|t| t.as_ref().to_string())
}

/// Puts `value`, when there is one, under each of `keys`: the GenAI and the
/// OpenInference conventions often name the same thing twice.
fn put(out: &mut Vec<KeyValue>, keys: &[&'static str], value: Option<String>) {
    if let Some(value) = value {
        for key in keys {
            out.push(KeyValue::new(*key, value.clone()));
        }
    }
}

/// The GenAI, MCP and OpenInference attributes of a span.
fn attributes(span: &SpanRecord) -> Vec<KeyValue> {
    let attr = |key: &str| span.attributes.get(key);
    let mut out = vec![KeyValue::new("porthole.span.kind", span.kind.as_str())];
    let (operation, openinference_kind) = match span.kind {
        SpanKind::Turn | SpanKind::Agent => ("invoke_agent", "AGENT"),
        SpanKind::Llm => ("chat", "LLM"),
        SpanKind::Tool => ("execute_tool", "TOOL"),
    };
    put(&mut out, &["gen_ai.operation.name"], Some(operation.into()));
    put(
        &mut out,
        &["openinference.span.kind"],
        Some(openinference_kind.into()),
    );
    let conversation = span.conversation_id.clone();
    put(
        &mut out,
        &["gen_ai.conversation.id", "session.id"],
        conversation,
    );
    put(&mut out, &["porthole.source"], owned(&span.source));
    let error_type = span.error.as_ref().map(|_| {
        let kind = attr(super::ERROR_TYPE).or_else(|| attr("error_kind"));
        kind.map_or_else(|| "error".to_string(), text)
    });
    put(&mut out, &["error.type"], error_type);
    kind_attributes(span, &mut out);
    // Turns started over /mcp: the MCP semantic conventions of the request, and the ids
    // the caller gave its call (so a backend finds "what did this tool use do").
    if span.is_root {
        for (key, value) in &span.attributes {
            let caller_id = crate::trace_context::CALLER_ID_KEYS.contains(&key.as_str());
            if key.starts_with("mcp.") || key.starts_with("jsonrpc.") || caller_id {
                out.push(KeyValue::new(key.clone(), text(value)));
            }
        }
        // The MCP tool that started a turn (`send_message`); a `run_tool` root is the
        // tool call itself and names its own tool.
        if span.kind == SpanKind::Turn && attr("mcp.method.name").is_some() {
            put(&mut out, &["gen_ai.tool.name"], owned(&span.source));
        }
    }
    usage_attributes(span, &mut out);
    out
}

/// What each kind of span says about its work: model and messages, tool and call,
/// agent and task.
fn kind_attributes(span: &SpanRecord, out: &mut Vec<KeyValue>) {
    let attr = |key: &str| span.attributes.get(key).map(text);
    match span.kind {
        SpanKind::Llm => {
            put(
                out,
                &["gen_ai.provider.name", "gen_ai.system"],
                attr("provider"),
            );
            put(
                out,
                &["gen_ai.request.model", "llm.model_name"],
                span.model.clone(),
            );
            put(
                out,
                &["gen_ai.input.messages", "input.value"],
                attr("request"),
            );
            put(
                out,
                &["gen_ai.output.messages", "output.value"],
                attr("response"),
            );
        }
        SpanKind::Tool => {
            put(out, &["gen_ai.tool.name", "tool.name"], owned(&span.tool));
            put(
                out,
                &["gen_ai.tool.call.arguments", "input.value"],
                attr("arguments"),
            );
            put(
                out,
                &["gen_ai.tool.call.result", "output.value"],
                attr("result"),
            );
        }
        SpanKind::Turn | SpanKind::Agent => {
            let agent = if span.kind == SpanKind::Turn {
                "Porthole".to_string()
            } else {
                span.name.to_string()
            };
            put(out, &["gen_ai.agent.name"], Some(agent));
            put(out, &["gen_ai.agent.id"], attr("agent_id"));
            put(
                out,
                &["input.value"],
                attr("input").or_else(|| attr("task")),
            );
            put(
                out,
                &["output.value"],
                attr("output").or_else(|| attr("answer")),
            );
        }
    }
}

/// Finish reason, time to first token and token counts (GenAI and OpenInference names).
fn usage_attributes(span: &SpanRecord, out: &mut Vec<KeyValue>) {
    let attr = |key: &str| span.attributes.get(key);
    if let Some(reason) = attr("finish_reason").and_then(Value::as_str) {
        out.push(KeyValue::new(
            "gen_ai.response.finish_reasons",
            opentelemetry::Value::Array(vec![StringValue::from(reason.to_string())].into()),
        ));
    }
    if let Some(ms) = attr("time_to_first_token_ms").and_then(Value::as_f64) {
        out.push(KeyValue::new(
            "gen_ai.server.time_to_first_token",
            ms / 1000.0,
        ));
    }
    for (key, value) in [
        ("gen_ai.usage.input_tokens", span.input_tokens),
        ("gen_ai.usage.output_tokens", span.output_tokens),
        ("llm.token_count.prompt", span.input_tokens),
        ("llm.token_count.completion", span.output_tokens),
    ] {
        if let Some(n) = value {
            out.push(KeyValue::new(key, n));
        }
    }
}
