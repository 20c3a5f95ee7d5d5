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
//!
//! When nothing exports, a call's span does not even travel to the writer: the turn's
//! path keeps it in [`NewestCalls`], the same ring, and drops the one it pushes out
//! there; the writer takes the ring whole when [`calls_behind`](super::calls_behind) says
//! (a reader's flush, a pause in the calls, the oldest call's 30 s). A client calling tools
//! flat out then costs the writer one write every 30 s, not one per full channel.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::WriterMessage;
use crate::model::{MCP_CALL_SOURCE, SpanRecord};

/// A flush waiting for the write it closes: answered then, and with `export`, once the
/// exporter has delivered that write's spans too.
pub(super) type Flush = (tokio::sync::oneshot::Sender<()>, bool);

/// Spans stay in the boxes they came in until the writer stores them a chunk at a time:
/// a gather of thousands of spans is then a list of pointers, not a list of whole spans
/// that doubles as it grows. A large block is fresh memory each time, and the kernel
/// zeroes a fresh (huge) page before handing it over: under the bot's allocator that
/// growth took a third of the writer thread's time (docs/performance.md, section 6).
pub(super) type Spans = Vec<Box<SpanRecord>>;

pub(super) struct Gather {
    /// The spans to store, in arrival order, the `/mcp` tool calls' aside.
    pub(super) spans: Spans,
    /// The newest `/mcp` tool calls' spans, oldest first, at most `keep_calls` (still in
    /// the boxes they came in: a call pushed out is dropped without being moved).
    pub(super) calls: VecDeque<Box<SpanRecord>>,
    /// Calls pushed out of `calls`, kept only to be exported (empty when nothing is).
    pub(super) export_only: Spans,
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
        if !is_mcp_call(&span) {
            return self.spans.push(span);
        }
        self.keep_call(span);
    }

    /// Takes the calls `ring` kept, as spans, and counts those it pushed out.
    pub(super) fn take_calls<T>(
        &mut self,
        ring: &NewestCalls<T>,
        into_span: impl Fn(T) -> Box<SpanRecord>,
    ) {
        self.superseded += ring.drain(|call| self.keep_call(into_span(call)));
    }

    fn keep_call(&mut self, span: Box<SpanRecord>) {
        self.calls.push_back(span);
        if self.calls.len() > self.keep_calls
            && let Some(oldest) = self.calls.pop_front()
        {
            self.superseded += 1;
            if self.exporting {
                self.export_only.push(oldest);
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
    pub(super) fn into_parts(self) -> (Spans, Spans, Vec<Flush>) {
        let Gather {
            mut spans,
            calls,
            export_only,
            flushes,
            ..
        } = self;
        spans.extend(calls);
        (spans, export_only, flushes)
    }
}

/// Whether `span` is the one span of an `/mcp` tool call's trace.
pub(super) fn is_mcp_call(span: &SpanRecord) -> bool {
    span.is_root && span.source.as_deref() == Some(MCP_CALL_SOURCE)
}

/// The most calls each of [`NewestCalls`]'s lists has room for from the start (memory
/// the system hands over only as it is written).
const PREALLOCATED_CALLS: usize = 1024;

/// The newest `/mcp` tool calls' records ([`CallRecord`](super::call::CallRecord)),
/// kept on the turns' path until the writer takes them (when nothing exports spans: an
/// exported call must reach the writer even when it will not be stored).
pub(super) struct NewestCalls<T> {
    keep: usize,
    ring: Mutex<Ring<T>>,
    /// The list the last take emptied, kept for the next: two lists take turns, so the
    /// turns' path does not grow a fresh one, doubling, after every take.
    spare: Mutex<VecDeque<T>>,
}

/// What the ring's lock guards.
struct Ring<T> {
    /// The calls, oldest first.
    calls: VecDeque<T>,
    /// How many were pushed out since the last take.
    pushed_out: u64,
    /// How many were pushed since start-up: the writer reads whether calls still come.
    pushes: u64,
}

impl<T> NewestCalls<T> {
    pub(super) fn new(keep: usize) -> NewestCalls<T> {
        // Made to size once: a flood fills the ring to `keep` between two takes.
        let list = || VecDeque::with_capacity(keep.min(PREALLOCATED_CALLS));
        NewestCalls {
            keep,
            ring: Mutex::new(Ring {
                calls: list(),
                pushed_out: 0,
                pushes: 0,
            }),
            spare: Mutex::new(list()),
        }
    }

    /// Keeps `call`, pushing the oldest out past the cap. Returns whether the ring was
    /// empty (the writer, idle, must be woken to take it).
    pub(super) fn push(&self, call: T) -> bool {
        let mut ring = crate::bot::lock(&self.ring);
        ring.pushes += 1;
        let was_empty = ring.calls.is_empty();
        ring.calls.push_back(call);
        let pushed_out = if ring.calls.len() > self.keep {
            ring.pushed_out += 1;
            ring.calls.pop_front()
        } else {
            None
        };
        drop(ring);
        // The call pushed out, if any, is freed here, outside the lock.
        drop(pushed_out);
        was_empty
    }

    /// How many calls were pushed since start-up.
    pub(super) fn pushes(&self) -> u64 {
        crate::bot::lock(&self.ring).pushes
    }

    /// Hands the calls kept since the last take to `each`, oldest first, and returns
    /// how many were pushed out meanwhile. The ring is swapped for the spare list
    /// under its lock, and emptied outside it.
    pub(super) fn drain(&self, each: impl FnMut(T)) -> u64 {
        let mut spare = crate::bot::lock(&self.spare);
        let (mut taken, superseded) = {
            let mut ring = crate::bot::lock(&self.ring);
            let taken = std::mem::replace(&mut ring.calls, std::mem::take(&mut *spare));
            (taken, std::mem::take(&mut ring.pushed_out))
        };
        taken.drain(..).for_each(each);
        *spare = taken;
        superseded
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    pub(in crate::bot::trace) fn span(
        id: &str,
        is_root: bool,
        source: Option<&str>,
    ) -> Box<SpanRecord> {
        let span = json!({"span_id": id, "root_span_id": id, "is_root": is_root,
            "source": source, "kind": "tool", "name": "n", "start_us": 0, "duration_us": 0});
        Box::new(serde_json::from_value(span).unwrap())
    }

    fn ids(spans: &[Box<SpanRecord>]) -> Vec<&str> {
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
    fn calls_kept_on_the_turns_path_join_the_gather_under_the_same_cap() {
        let newest = NewestCalls::new(2);
        assert!(
            newest.push(span("a", true, Some(MCP_CALL_SOURCE))),
            "was empty"
        );
        assert!(!newest.push(span("b", true, Some(MCP_CALL_SOURCE))));
        newest.push(span("c", true, Some(MCP_CALL_SOURCE)));
        let mut gather = Gather::new(2, false);
        gather.take(WriterMessage::Span(span("t", true, Some("web"))));
        gather.take_calls(&newest, |call| call);
        assert_eq!(gather.superseded, 1, "a was pushed out");
        assert_eq!(gather.roots(), (1, 3));
        assert_eq!(ids(&gather.into_parts().0), ["t", "b", "c"]);
        assert_eq!(newest.drain(|_| panic!("taken whole")), 0);

        let mut gather = gathered(2, false);
        newest.push(span("e", true, Some(MCP_CALL_SOURCE)));
        gather.take_calls(&newest, |call| call);
        assert_eq!(ids(&gather.into_parts().0), ["t", "u", "d", "e"]);
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
