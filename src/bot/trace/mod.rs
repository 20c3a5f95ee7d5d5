//! Turn traces: what the model saw and did, step by step.
//!
//! One trace per turn (a web message, `send_message`, a scheduled task, `run_tool`, a
//! replay), and one of a single span per other `/mcp` `tools/call` (source
//! [`MCP_CALL_SOURCE`](crate::model::MCP_CALL_SOURCE), kept under its own cap).
//! Spans nest: the turn → each LLM call → each tool call → worker agents the supervisor
//! delegated to, with their own LLM and tool calls. Ids are W3C trace-context ids; a
//! caller's `traceparent` makes our root its child ([`TraceScope::root`]).
//!
//! Recording is cheap on the turn's path: a [`Span`] collects its fields in memory and,
//! when it ends (or is dropped because the turn was cancelled), is handed to a bounded
//! channel with `try_send`. An `/mcp` tool call's span is a [`CallSpan`] of plain values
//! ([`call`]), which waits in the ring of the newest calls when nothing exports spans
//! ([`gather`]). The background [`writer`] gathers spans for a moment, then
//! redacts secrets, cuts large payloads, stores them and exports them, many turns at a
//! time; a full channel drops the span and counts it rather than waiting. [`Tracer::disabled`] makes every span a no-op.

mod call;
mod calls_behind;
mod gather;
mod llm_call;
mod otel;
mod tool_sets;
mod writer;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::bot::store::Store;
use crate::model::{McpRequest, SpanKind, SpanRecord, ToolDef};
use crate::redact::Redactor;
use crate::trace_context::{TraceParent, new_span_id, new_trace_id};
use call::CallRecord;
use gather::NewestCalls;
use tool_sets::StoredToolSets;

pub use crate::bot::store::TOOLS_HASH;
pub use call::CallSpan;
pub use llm_call::traced_chat;
pub use otel::{OtlpExporter, OtlpSettings};
pub use writer::{SpanExporter, cut_payload};

/// The attribute an LLM span carries the tool definitions it offered in, until the
/// writer stores each distinct set once ([`Store::put_tool_sets`]) and puts its hash in
/// [`TOOLS_HASH`] instead (a span whose set is stored already gets the hash at once:
/// [`tool_sets`]).
pub const TOOL_DEFINITIONS: &str = "tool_definitions";

/// The attribute a failed span names what failed in (OpenTelemetry's `error.type`: for
/// an `/mcp` tool call, `tool_error` or the JSON-RPC error code).
pub const ERROR_TYPE: &str = "error.type";

/// Limits of what is kept, from the configuration.
#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// `TRACE_MAX_TURNS`: traces kept; the oldest go first.
    pub max_turns: usize,
    /// `TRACE_MAX_MCP_CALLS`: traces of `/mcp` tool calls ([`MCP_CALL_SOURCE`](crate::model::MCP_CALL_SOURCE)) kept,
    /// counted apart from `max_turns`.
    pub max_mcp_calls: usize,
    /// `TRACE_MAX_AGE_SECS`: traces older than this are deleted.
    pub max_age: Duration,
    /// `TRACE_MAX_PAYLOAD_BYTES`: each payload attribute is cut to this size.
    pub max_payload_bytes: usize,
}

/// What travels through the channel to the writer.
enum WriterMessage {
    Span(Box<SpanRecord>),
    /// Answered once everything sent before it is stored (and, with `export`,
    /// delivered to the exporter's collector or given up on).
    Flush {
        done: oneshot::Sender<()>,
        export: bool,
    },
}

/// Spans waiting for the writer; beyond this, new spans are dropped and counted.
const CHANNEL_CAPACITY: usize = 4096;

/// Counters for `health`.
#[derive(Debug, Default, Serialize, Clone, Copy, PartialEq, schemars::JsonSchema)]
pub struct TraceCounters {
    pub spans_recorded: u64,
    /// Dropped because the writer fell behind (the channel was full).
    pub spans_dropped: u64,
    /// Spans the exporter could not deliver (collector down, slow, or refusing).
    pub spans_export_dropped: u64,
    pub store_errors: u64,
    /// CPU time the writer has spent on its threads, in µs: redacting and cutting
    /// spans, handing them to the exporter, and storing them (on PostgreSQL, the
    /// server's share is not in it). What recording costs the machine besides the
    /// turns' own path (docs/performance.md §6).
    pub writer_cpu_us: u64,
    /// Spans of `/mcp` tool calls not written because the same batch held more than
    /// `TRACE_MAX_MCP_CALLS` newer calls: the cap would have deleted their rows in the
    /// transaction that wrote them (exported all the same).
    pub mcp_calls_superseded: u64,
}

#[derive(Default)]
struct Counters {
    recorded: AtomicU64,
    dropped: AtomicU64,
    store_errors: AtomicU64,
    writer_cpu_us: AtomicU64,
    mcp_calls_superseded: AtomicU64,
}

/// Starts spans and hands finished ones to the background writer.
pub struct Tracer {
    sender: Option<mpsc::Sender<WriterMessage>>,
    /// Ends the writer's wait for more spans early (a flush, a channel filling up).
    wake: Arc<Notify>,
    counters: Arc<Counters>,
    exporter: Option<Arc<dyn SpanExporter>>,
    /// The tool sets the writer has stored, named by hash in the LLM spans that offer them.
    tool_sets: Arc<StoredToolSets>,
    /// Where `/mcp` tool calls' spans wait for the writer when nothing exports them
    /// (`None`: they go through the channel like the others).
    calls: Option<Arc<NewestCalls<CallRecord>>>,
}

impl Tracer {
    /// A tracer that records nothing (tests, embedding without a store).
    pub fn disabled() -> Arc<Tracer> {
        Arc::new(Tracer {
            sender: None,
            wake: Arc::default(),
            counters: Arc::default(),
            exporter: None,
            tool_sets: Arc::default(),
            calls: None,
        })
    }

    /// Starts the background writer on a thread of its own ([`writer::spawn`]) and
    /// returns the tracer that feeds it; a tracer that records nothing when that thread
    /// cannot be started.
    pub fn start(
        store: Store,
        redactor: Arc<Redactor>,
        settings: TraceSettings,
        exporter: Option<Arc<dyn SpanExporter>>,
    ) -> Arc<Tracer> {
        let (sender, receiver) = mpsc::channel(CHANNEL_CAPACITY);
        let counters = Arc::new(Counters::default());
        let wake = Arc::new(Notify::new());
        let tool_sets = Arc::new(StoredToolSets::default());
        let calls = exporter
            .is_none()
            .then(|| Arc::new(NewestCalls::new(settings.max_mcp_calls)));
        let writer = writer::Writer {
            calls: calls.clone(),
            wake: wake.clone(),
            store,
            redactor,
            settings,
            exporter: exporter.clone(),
            counters: counters.clone(),
            tool_sets: tool_sets.clone(),
        };
        if let Err(error) = writer::spawn(writer, receiver) {
            tracing::error!(%error, "cannot start the trace writer's thread; turns are not traced");
            return Tracer::disabled();
        }
        Arc::new(Tracer {
            sender: Some(sender),
            wake,
            counters,
            exporter,
            tool_sets,
            calls,
        })
    }

    /// Whether spans are also exported (OpenTelemetry).
    pub fn is_exporting(&self) -> bool {
        self.exporter.is_some()
    }

    pub fn counters(&self) -> TraceCounters {
        TraceCounters {
            spans_recorded: self.counters.recorded.load(Ordering::Relaxed),
            spans_dropped: self.counters.dropped.load(Ordering::Relaxed),
            spans_export_dropped: self.exporter.as_ref().map_or(0, |e| e.dropped()),
            store_errors: self.counters.store_errors.load(Ordering::Relaxed),
            writer_cpu_us: self.counters.writer_cpu_us.load(Ordering::Relaxed),
            mcp_calls_superseded: self.counters.mcp_calls_superseded.load(Ordering::Relaxed),
        }
    }

    /// Waits until every span finished before this call is stored (readers call it so
    /// a trace is complete right after its turn returns). Returns at once when off.
    pub async fn flush(&self) {
        self.flush_with(false).await;
    }

    /// Like [`Tracer::flush`], and also waits (a bounded time) until the exporter has
    /// delivered those spans (shutdown, tests).
    pub async fn flush_export(&self) {
        self.flush_with(true).await;
    }

    async fn flush_with(&self, export: bool) {
        let Some(sender) = &self.sender else { return };
        let (done, wait) = oneshot::channel();
        if sender
            .send(WriterMessage::Flush { done, export })
            .await
            .is_ok()
        {
            self.wake.notify_one();
            let _ = wait.await;
        }
    }

    /// A scope that starts a new trace from `source`, as the child of `remote` when a
    /// caller sent its `traceparent`.
    pub fn root(
        self: &Arc<Self>,
        source: impl Into<Cow<'static, str>>,
        remote: Option<TraceParent>,
    ) -> TraceScope {
        TraceScope {
            tracer: self.sender.is_some().then(|| self.clone()),
            parent: Parent::Root {
                source: source.into(),
                remote,
                attributes: Vec::new(),
                mcp_request: None,
            },
        }
    }

    /// Hands an ended `/mcp` tool call to the ring of the newest calls, or, when spans
    /// are exported, to the writer as a span like any other.
    fn submit_call(&self, call: CallRecord) {
        let Some(calls) = &self.calls else {
            return self.submit(call.into_span());
        };
        self.counters.recorded.fetch_add(1, Ordering::Relaxed);
        if calls.push(call) {
            self.wake.notify_one();
        }
    }

    fn submit(&self, record: Box<SpanRecord>) {
        let Some(sender) = &self.sender else { return };
        match sender.try_send(WriterMessage::Span(record)) {
            Ok(()) => self.counters.recorded.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.counters.dropped.fetch_add(1, Ordering::Relaxed),
        };
        // A writer gathering spans must not let the channel fill up and drop some.
        if sender.capacity() < CHANNEL_CAPACITY / 4 {
            self.wake.notify_one();
        }
    }
}

#[derive(Debug, Clone)]
enum Parent {
    Root {
        source: Cow<'static, str>,
        remote: Option<TraceParent>,
        /// Set on the root span (what the request that started the trace was).
        attributes: Vec<(String, Value)>,
        /// The `/mcp` request that started the trace, if one did.
        mcp_request: Option<McpRequest>,
    },
    Span {
        trace_id: String,
        span_id: String,
        root_span_id: String,
    },
}

/// Where the next span goes: a new trace, or under a running span. Carried by the
/// tool-call context, so tools (and the worker agents `delegate` starts) nest under
/// the step that called them.
#[derive(Clone)]
pub struct TraceScope {
    tracer: Option<Arc<Tracer>>,
    parent: Parent,
}

impl std::fmt::Debug for TraceScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceScope")
            .field("enabled", &self.tracer.is_some())
            .field("parent", &self.parent)
            .finish()
    }
}

impl TraceScope {
    /// A scope that records nothing.
    pub fn disabled() -> TraceScope {
        TraceScope {
            tracer: None,
            parent: Parent::Root {
                source: Cow::Borrowed(""),
                remote: None,
                attributes: Vec::new(),
                mcp_request: None,
            },
        }
    }

    /// Adds an attribute to the root span this scope will start (for a scope that
    /// starts a trace; ignored under a running span).
    pub fn with_root_attribute(mut self, key: &str, value: impl Into<Value>) -> TraceScope {
        if let Parent::Root { attributes, .. } = &mut self.parent {
            attributes.push((key.to_string(), value.into()));
        }
        self
    }

    /// Names the `/mcp` request that starts this scope's trace, for its root span (for
    /// a scope that starts a trace; ignored under a running span).
    pub fn with_mcp_request(mut self, request: McpRequest) -> TraceScope {
        if let Parent::Root { mcp_request, .. } = &mut self.parent {
            *mcp_request = Some(request);
        }
        self
    }

    /// Starts a span here.
    pub fn start(&self, kind: SpanKind, name: impl Into<Cow<'static, str>>) -> Span {
        self.clone().into_span(kind, name)
    }

    /// Starts a span here and uses the scope up: its root attributes and request move
    /// into the span instead of being copied.
    fn into_span(self, kind: SpanKind, name: impl Into<Cow<'static, str>>) -> Span {
        let Some(tracer) = self.tracer else {
            return Span::noop();
        };
        let mut record = new_record(&self.parent, kind, name.into());
        if let Parent::Root {
            attributes,
            mcp_request,
            ..
        } = self.parent
        {
            record.attributes.extend(attributes);
            record.mcp_request = mcp_request;
        }
        Span::started(tracer, record)
    }
}

/// A new span's record under `parent`, with its ids and start time. It is boxed from
/// the start: it goes through the writer's channel as a box, and is moved no more.
fn new_record(parent: &Parent, kind: SpanKind, name: Cow<'static, str>) -> Box<SpanRecord> {
    let span_id = new_span_id();
    let (trace_id, parent_span_id, root_span_id, source) = match parent {
        Parent::Span {
            trace_id,
            span_id: parent,
            root_span_id,
        } => (
            trace_id.clone(),
            Some(parent.clone()),
            root_span_id.clone(),
            None,
        ),
        Parent::Root { source, remote, .. } => {
            let (trace_id, parent_span_id) = match remote {
                Some(p) => (p.trace_id.clone(), Some(p.parent_span_id.clone())),
                None => (new_trace_id(), None),
            };
            (
                trace_id,
                parent_span_id,
                span_id.clone(),
                Some(source.clone()),
            )
        }
    };
    Box::new(SpanRecord {
        trace_id,
        is_root: source.is_some(),
        span_id,
        parent_span_id,
        root_span_id,
        kind,
        name,
        source,
        conversation_id: None,
        start_us: now_us(),
        duration_us: 0,
        error: None,
        model: None,
        tool: None,
        input_tokens: None,
        output_tokens: None,
        attributes: Map::new(),
        mcp_request: None,
    })
}

/// Microseconds since the Unix epoch (read once per span: no calendar conversion).
fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
        })
}

struct LiveSpan {
    tracer: Arc<Tracer>,
    record: Box<SpanRecord>,
    started: Instant,
}

/// A running span. Setters are no-ops when tracing is off. Dropping a span that was
/// not ended records it as cancelled, so a stopped turn still leaves its trace.
pub struct Span {
    live: Option<LiveSpan>,
}

const CANCELLED: &str =
    "cancelled: the work stopped before this step finished (client gone or timeout)";

impl Span {
    pub fn noop() -> Span {
        Span { live: None }
    }

    fn started(tracer: Arc<Tracer>, record: Box<SpanRecord>) -> Span {
        Span {
            live: Some(LiveSpan {
                tracer,
                record,
                started: Instant::now(),
            }),
        }
    }

    /// Whether this span records anything (skip building costly attributes if not).
    pub fn is_recording(&self) -> bool {
        self.live.is_some()
    }

    /// The scope for spans under this one.
    pub fn scope(&self) -> TraceScope {
        match &self.live {
            None => TraceScope::disabled(),
            Some(live) => TraceScope {
                tracer: Some(live.tracer.clone()),
                parent: Parent::Span {
                    trace_id: live.record.trace_id.clone(),
                    span_id: live.record.span_id.clone(),
                    root_span_id: live.record.root_span_id.clone(),
                },
            },
        }
    }

    /// Ids of this span (trace id, span id), when recording.
    pub fn ids(&self) -> Option<(&str, &str)> {
        self.live
            .as_ref()
            .map(|l| (l.record.trace_id.as_str(), l.record.span_id.as_str()))
    }

    /// Records the tools an LLM call offered: by the hash of their definitions when the
    /// writer has stored that set already, else in full for the writer to store.
    pub(super) fn set_tools_offered(&mut self, tools: &[ToolDef]) {
        let Some(live) = &mut self.live else { return };
        let attributes = &mut live.record.attributes;
        match live.tracer.tool_sets.hash_of(tools) {
            Some(hash) => attributes.insert(TOOLS_HASH.into(), Value::String(hash)),
            None => attributes.insert(TOOL_DEFINITIONS.into(), tool_sets::definitions(tools)),
        };
    }

    fn with(&mut self, f: impl FnOnce(&mut SpanRecord)) {
        if let Some(live) = &mut self.live {
            f(&mut live.record);
        }
    }

    pub fn set_attribute(&mut self, key: &str, value: impl Into<Value>) {
        let value = value.into();
        self.with(|r| {
            r.attributes.insert(key.to_string(), value);
        });
    }

    pub fn set_conversation(&mut self, id: &str) {
        self.with(|r| r.conversation_id = Some(id.to_string()));
    }

    pub fn set_model(&mut self, model: &str) {
        self.with(|r| r.model = Some(model.to_string()));
    }

    pub fn set_tool(&mut self, tool: impl Into<Arc<str>>) {
        let tool = tool.into();
        self.with(|r| r.tool = Some(tool));
    }

    pub fn set_tokens(&mut self, input: Option<u64>, output: Option<u64>) {
        self.with(|r| {
            r.input_tokens = input.map(|n| n as i64);
            r.output_tokens = output.map(|n| n as i64);
        });
    }

    /// Ends the span as a success.
    pub fn end(mut self) {
        self.finish(None);
    }

    /// Ends the span as a failure with `error` (the message and its causes).
    pub fn fail(mut self, error: impl Into<String>) {
        self.finish(Some(error.into()));
    }

    fn finish(&mut self, error: Option<String>) {
        if let Some(mut live) = self.live.take() {
            live.record.duration_us = live.started.elapsed().as_micros() as i64;
            live.record.error = error;
            live.tracer.submit(live.record);
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if self.live.is_some() {
            self.finish(Some(CANCELLED.to_string()));
        }
    }
}
