//! What the trace writer collects between two writes: the spans off the channel, the
//! flushes waiting for them, and, kept apart, the newest `/mcp` tool calls' spans.
//!
//! The calls are kept in a ring of `TRACE_MAX_MCP_CALLS`: a call that finds it full
//! pushes the oldest one out. That one is never written: at least as many newer calls
//! follow it in the same write, and the count prune of that write would delete its row
//! (it keeps the highest row ids, given in arrival order). So a client calling tools
//! flat out costs a row for each call the store will still hold, not one for each call,
//! and the table ends as writing every row and then pruning would leave it. A call
//! pushed out is still exported when an exporter is configured.

use std::collections::VecDeque;

use super::WriterMessage;
use crate::model::{MCP_CALL_SOURCE, SpanRecord};

/// A flush waiting for the write it closes: answered then, and with `export`, once the
/// exporter has delivered that write's spans too.
pub(super) type Flush = (tokio::sync::oneshot::Sender<()>, bool);

pub(super) struct Gather {
    /// The spans to store, in arrival order, the `/mcp` tool calls' aside.
    pub(super) spans: Vec<SpanRecord>,
    /// The newest `/mcp` tool calls' spans, oldest first, at most `keep_calls` (still in
    /// the boxes they came in: a call pushed out is dropped without being moved).
    pub(super) calls: VecDeque<Box<SpanRecord>>,
    /// Calls pushed out of `calls`, kept only to be exported (empty when nothing is).
    pub(super) export_only: Vec<SpanRecord>,
    /// How many calls were pushed out.
    pub(super) superseded: u64,
    pub(super) flushes: Vec<Flush>,
    keep_calls: usize,
    exporting: bool,
}

impl Gather {
    pub(super) fn new(keep_calls: usize, exporting: bool) -> Gather {
        Gather {
            spans: Vec::new(),
            calls: VecDeque::new(),
            export_only: Vec::new(),
            superseded: 0,
            flushes: Vec::new(),
            keep_calls,
            exporting,
        }
    }

    /// Puts a message from the channel where it belongs.
    pub(super) fn take(&mut self, message: WriterMessage) {
        let span = match message {
            WriterMessage::Span(span) => span,
            WriterMessage::Flush { done, export } => return self.flushes.push((done, export)),
        };
        if !(span.is_root && span.source.as_deref() == Some(MCP_CALL_SOURCE)) {
            return self.spans.push(*span);
        }
        self.calls.push_back(span);
        if self.calls.len() > self.keep_calls
            && let Some(oldest) = self.calls.pop_front()
        {
            self.superseded += 1;
            if self.exporting {
                self.export_only.push(*oldest);
            }
        }
    }

    /// How many spans it holds.
    pub(super) fn len(&self) -> usize {
        self.spans.len() + self.calls.len() + self.export_only.len()
    }

    /// Whether it holds no span and no flush.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0 && self.flushes.is_empty()
    }

    /// The roots of turns and of `/mcp` tool calls it took (those pushed out included),
    /// for the count limits.
    pub(super) fn roots(&self) -> (usize, usize) {
        let turns = self.spans.iter().filter(|s| s.is_root).count();
        (turns, self.calls.len() + self.superseded as usize)
    }

    /// The spans to store, the turns' first, then the calls in arrival order.
    pub(super) fn into_parts(self) -> (Vec<SpanRecord>, Vec<SpanRecord>, Vec<Flush>) {
        let Gather {
            mut spans,
            calls,
            export_only,
            flushes,
            ..
        } = self;
        spans.extend(calls.into_iter().map(|call| *call));
        (spans, export_only, flushes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn span(id: &str, is_root: bool, source: Option<&str>) -> Box<SpanRecord> {
        let span = json!({"span_id": id, "root_span_id": id, "is_root": is_root,
            "source": source, "kind": "tool", "name": "n", "start_us": 0, "duration_us": 0});
        Box::new(serde_json::from_value(span).unwrap())
    }

    fn ids(spans: &[SpanRecord]) -> Vec<&str> {
        spans.iter().map(|s| s.span_id.as_str()).collect()
    }

    fn gathered(keep: usize, exporting: bool) -> Gather {
        let mut gather = Gather::new(keep, exporting);
        for (id, root, source) in [
            ("a", true, Some(MCP_CALL_SOURCE)),
            ("t", true, Some("web")),
            ("b", true, Some(MCP_CALL_SOURCE)),
            ("u", false, None),
            ("c", true, Some(MCP_CALL_SOURCE)),
            ("d", true, Some(MCP_CALL_SOURCE)),
        ] {
            gather.take(WriterMessage::Span(span(id, root, source)));
        }
        gather
    }

    #[test]
    fn only_the_newest_calls_are_stored_and_the_others_counted() {
        let gather = gathered(2, false);
        assert_eq!(gather.superseded, 2);
        assert_eq!(gather.roots(), (1, 4), "one turn, four calls taken");
        let (stored, export_only, _) = gather.into_parts();
        assert_eq!(
            ids(&stored),
            ["t", "u", "c", "d"],
            "turns first, then calls in order"
        );
        assert!(export_only.is_empty(), "nothing exports them: dropped");
    }

    #[test]
    fn calls_within_the_cap_are_all_stored_and_pushed_out_ones_still_exported() {
        let gather = gathered(4, true);
        assert_eq!(gather.superseded, 0);
        assert_eq!(ids(&gather.into_parts().0), ["t", "u", "a", "b", "c", "d"]);

        let gather = gathered(1, true);
        assert_eq!(gather.len(), 6, "every span is held, to be exported");
        let (stored, export_only, _) = gather.into_parts();
        assert_eq!(ids(&stored), ["t", "u", "d"]);
        assert_eq!(ids(&export_only), ["a", "b", "c"]);
    }
}
