//! The span of one `/mcp` `tools/call`: a trace of a single span (source
//! [`MCP_CALL_SOURCE`]), recorded for every call a client makes, so its cost is paid on
//! every request.
//!
//! A [`CallSpan`] therefore keeps what it records in a [`CallRecord`] of plain values
//! (ids as numbers, the tool's shared name, the request) and makes no heap allocation
//! of its own. When nothing exports spans, the record waits in the ring of the newest
//! calls ([`NewestCalls`](super::gather::NewestCalls)) as it is, and one a flood pushes
//! out is dropped as cheaply as it was made; only the calls the writer takes become
//! [`SpanRecord`]s, the ids written out as hex then. With an exporter, every call must
//! reach the writer, so it becomes a span at once.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use super::{CANCELLED, ERROR_TYPE, Tracer, now_us};
use crate::model::{MCP_CALL_SOURCE, McpRequest, SpanKind, SpanRecord};
use crate::trace_context::TraceParent;

/// What the span of one `tools/call` recorded.
pub(super) struct CallRecord {
    /// The caller's span from its `traceparent`, whose trace this call joins.
    remote: Option<TraceParent>,
    /// A version 7 uuid (time first): this call's own trace, without a `traceparent`.
    trace_id: u128,
    span_id: u64,
    start_us: i64,
    duration_us: i64,
    tool: Arc<str>,
    request: McpRequest,
    /// What failed, for a call that failed.
    error: Option<String>,
    /// Its `error.type` (`tool_error`, or the JSON-RPC error code); none for a call
    /// cancelled before it ended.
    error_type: Option<String>,
}

impl CallRecord {
    /// The span it stands for, as every other span is stored and exported.
    pub(super) fn into_span(self) -> Box<SpanRecord> {
        let span_id = crate::text::hex(&self.span_id.to_be_bytes());
        let (trace_id, parent_span_id) = match self.remote {
            Some(remote) => (remote.trace_id, Some(remote.parent_span_id)),
            None => (
                uuid::Uuid::from_u128(self.trace_id).simple().to_string(),
                None,
            ),
        };
        let mut attributes = Map::new();
        if let Some(kind) = self.error_type {
            attributes.insert(ERROR_TYPE.into(), Value::String(kind));
        }
        Box::new(SpanRecord {
            trace_id,
            is_root: true,
            root_span_id: span_id.clone(),
            span_id,
            parent_span_id,
            kind: SpanKind::Tool,
            name: "tools/call".into(),
            source: Some(MCP_CALL_SOURCE.into()),
            conversation_id: None,
            start_us: self.start_us,
            duration_us: self.duration_us,
            error: self.error,
            model: None,
            tool: Some(self.tool),
            input_tokens: None,
            output_tokens: None,
            attributes,
            mcp_request: Some(self.request),
        })
    }
}

/// A running `tools/call` span. Dropping it unended records it as cancelled.
pub struct CallSpan {
    live: Option<(Arc<Tracer>, CallRecord, Instant)>,
}

impl CallSpan {
    /// The span of a call of `tool` answering `request`, in the caller's trace when it
    /// sent a `traceparent` (`remote`); a no-op when `tracer` records nothing.
    pub fn start(
        tracer: &Arc<Tracer>,
        tool: Arc<str>,
        remote: Option<TraceParent>,
        request: McpRequest,
    ) -> CallSpan {
        if tracer.sender.is_none() {
            return CallSpan { live: None };
        }
        let record = CallRecord {
            remote,
            trace_id: uuid::Uuid::now_v7().as_u128(),
            span_id: crate::trace_context::new_span_bits(),
            start_us: now_us(),
            duration_us: 0,
            tool,
            request,
            error: None,
            error_type: None,
        };
        CallSpan {
            live: Some((tracer.clone(), record, Instant::now())),
        }
    }

    /// Ends the span as a success.
    pub fn end(mut self) {
        self.finish(None, None);
    }

    /// Ends the span as a failure: `kind` is its `error.type` (`tool_error`, or the
    /// JSON-RPC error code), `message` what failed.
    pub fn fail(mut self, kind: impl Into<String>, message: impl Into<String>) {
        self.finish(Some(kind.into()), Some(message.into()));
    }

    fn finish(&mut self, error_type: Option<String>, error: Option<String>) {
        if let Some((tracer, mut record, started)) = self.live.take() {
            record.duration_us = i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX);
            record.error_type = error_type;
            record.error = error;
            tracer.submit_call(record);
        }
    }
}

impl Drop for CallSpan {
    fn drop(&mut self) {
        if self.live.is_some() {
            self.finish(None, Some(CANCELLED.into()));
        }
    }
}
