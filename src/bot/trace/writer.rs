//! The background side of tracing: takes finished spans off the channel, removes
//! secrets, cuts large payloads (marking where), stores them in batches, hands them to
//! the exporter, and keeps the stored traces within their count and age limits.
//!
//! Nothing here runs on a turn's path: the writer has a thread of its own ([`spawn`]). A
//! slow database or collector only makes the channel fill up, and the tracer then drops
//! (and counts) new spans instead of waiting.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::sync::mpsc::{self, error::TryRecvError};
use tokio::time::{Instant, sleep_until};

use super::call::CallRecord;
use super::calls_behind::CallsBehind;
use super::gather::{Gather, NewestCalls, Spans, is_mcp_call};
use super::tool_sets::StoredToolSets;
use super::{Counters, TOOL_DEFINITIONS, TOOLS_HASH, TraceSettings, WriterMessage};
use crate::bot::retention::Pruning;
use crate::bot::store::{Prune, Store, TurnRows};
use crate::cpu_time::thread_cpu_time;
use crate::model::SpanRecord;
use crate::redact::Redactor;

/// At most this many spans are gathered for one write. The writer takes spans off the
/// channel whenever it fills, so a write may hold several channels' worth; `/mcp` tool
/// calls beyond `TRACE_MAX_MCP_CALLS` are not held at all ([`Gather`]), so this bounds
/// the memory of a flood of spans of turns, or of calls when they are exported.
const BATCH: usize = 4 * super::CHANNEL_CAPACITY;
/// How many `/mcp` calls' spans one transaction stores. The writer shares the CPU with
/// the requests and turns it records: between two transactions it lets them run (a
/// thread yield), so none waits behind a whole write of thousands of rows. Under a flood
/// of calls the requests' p99 follows the length of one transaction (docs/performance.md
/// section 1: 256 here doubled it, 8 did not lower it).
const WRITE_CHUNK: usize = 32;
/// How many spans of turns one transaction stores. Real turns wait seconds for the model
/// and leave a few spans per gather; only a flood of turns fills it, and then a larger
/// transaction rewrites fewer pages per turn (at 256 rather than 32, about 4 µs less of
/// the writer's CPU per turn flat out: docs/performance.md section 6).
const TURN_WRITE_CHUNK: usize = 256;
/// How many messages the writer takes off the channel before it lets the others run.
const TAKE_CHUNK: usize = 256;
/// How long the writer lets spans gather after the first one arrives, unless a flush or
/// a filling channel wakes it: one wake-up and one store transaction for the spans of
/// many turns, instead of one per turn competing with the turns for the CPU. A commit
/// writes every page its transaction touched, and consecutive turns share pages (the
/// last leaves of the indexes), so a longer gather writes fewer pages per turn: at 250 ms, half the commit's cost per turn of 50 ms
/// (docs/performance.md §6). Readers never wait for it: the trace tools flush first.
const GATHER: Duration = Duration::from_millis(250);
/// How long a flush that asks for export waits for the collector.
const EXPORT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Receives every stored span (already redacted and cut), for export elsewhere. It must
/// return at once: queue the spans and deliver them on its own time.
#[async_trait::async_trait]
pub trait SpanExporter: Send + Sync {
    fn export(&self, spans: &[SpanRecord]);
    /// Spans it had to give up on (collector down, slow, refusing, queue full).
    fn dropped(&self) -> u64;
    /// Waits until what was queued before has been delivered (or given up on), at
    /// most `timeout` (shutdown, tests).
    async fn flush(&self, timeout: Duration);
}

/// Runs `writer` on a thread of its own, with a runtime of its own for its waits and
/// its store calls: the spans it takes off the channel, redacts and stores never hold up
/// the bot's runtime, and the kernel shares the CPU between them (the writer yields
/// between chunks of its work, so no request waits behind a whole write). The thread
/// ends when the tracer, and with it the channel, is gone.
pub(super) fn spawn(
    writer: Writer,
    receiver: mpsc::Receiver<WriterMessage>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("porthole-trace-store")
        .build()?;
    std::thread::Builder::new()
        .name("porthole-trace-writer".into())
        .spawn(move || runtime.block_on(writer.run(receiver)))?;
    Ok(())
}

pub(super) struct Writer {
    pub(super) store: Store,
    pub(super) wake: Arc<Notify>,
    pub(super) redactor: Arc<Redactor>,
    pub(super) settings: TraceSettings,
    pub(super) exporter: Option<Arc<dyn SpanExporter>>,
    pub(super) counters: Arc<Counters>,
    /// The tool sets stored so far (a set is stored once), shared with the turns' path.
    pub(super) tool_sets: Arc<StoredToolSets>,
    /// The `/mcp` tool calls kept on the turns' path, taken once per gather.
    pub(super) calls: Option<Arc<NewestCalls<CallRecord>>>,
}

impl Writer {
    pub(super) async fn run(self, mut receiver: mpsc::Receiver<WriterMessage>) {
        let mut pruning = CountPruning::new(&self.settings);
        let mut cpu_counted = thread_cpu_time();
        let mut calls_behind = CallsBehind::default();
        // What arrived while the last write was storing: the start of the next gather.
        let mut next = self.new_gather();
        loop {
            let mut gather = std::mem::replace(&mut next, self.new_gather());
            let mut closed = false;
            if gather.is_empty() {
                // Idle: the first span, the first `/mcp` call kept on the turns' path, or
                // the time to look at the calls waiting there.
                let look = calls_behind.next_look();
                tokio::select! {
                    message = receiver.recv() => match message {
                        Some(message) => gather.take(message),
                        None => closed = true,
                    },
                    // Mostly the ring's first call; a flush or a filling channel wakes it
                    // too, and then a look at an empty ring writes nothing.
                    () = self.wake.notified() => calls_behind.arrived(Instant::now()),
                    () = sleep_until(look.unwrap_or_else(Instant::now)), if look.is_some() => {}
                }
            }
            if !closed && !gather.is_empty() {
                closed = self.gather(&mut receiver, &mut gather).await;
            }
            if let Some(calls) = &self.calls {
                let forced = closed || !gather.flushes.is_empty();
                if calls_behind.due(forced, calls.pushes(), Instant::now()) {
                    gather.take_calls(calls, CallRecord::into_span);
                    calls_behind.written();
                }
            }
            if gather.is_empty() {
                if closed {
                    break;
                }
                continue;
            }
            let (turn_roots, call_roots) = gather.roots();
            let due = pruning.due(turn_roots, call_roots, !gather.flushes.is_empty());
            self.counters
                .mcp_calls_superseded
                .fetch_add(gather.superseded, Ordering::Relaxed);
            let (spans, export_only, flushes) = gather.into_parts();
            let storing = self
                .write(spans, export_only, due, (&mut receiver, &mut next))
                .await;
            let writer_thread = thread_cpu_time();
            let cpu = writer_thread.saturating_sub(cpu_counted) + storing;
            cpu_counted = writer_thread;
            self.counters.writer_cpu_us.fetch_add(
                u64::try_from(cpu.as_micros()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            if flushes.iter().any(|(_, export)| *export)
                && let Some(exporter) = &self.exporter
            {
                exporter.flush(EXPORT_FLUSH_TIMEOUT).await;
            }
            for (done, _) in flushes {
                let _ = done.send(());
            }
            if closed && next.is_empty() {
                break;
            }
        }
    }

    fn new_gather(&self) -> Gather {
        Gather::new(self.settings.max_mcp_calls, self.exporter.is_some())
    }

    /// Takes what the channel holds whenever a filling channel wakes the writer, until
    /// the gather is over, `BATCH` spans are held, or a reader flushes. Returns whether
    /// the channel closed (the tracer is gone).
    async fn gather(
        &self,
        receiver: &mut mpsc::Receiver<WriterMessage>,
        gather: &mut Gather,
    ) -> bool {
        let deadline = Instant::now() + GATHER;
        loop {
            if take_queued(receiver, gather) {
                return true;
            }
            if !gather.flushes.is_empty() || gather.len() >= BATCH || Instant::now() >= deadline {
                return false;
            }
            tokio::select! {
                () = sleep_until(deadline) => {}
                () = self.wake.notified() => {}
            }
        }
    }

    /// Exports `export_only`, then stores `spans` a chunk per transaction, pruning as
    /// `due` says (the `/mcp` calls' cap with every chunk; the turns' cap and the age
    /// limit with the last). Between two transactions it takes what the channel holds
    /// into `next`, so that a long write under full load never lets the channel fill up
    /// and drop spans. Returns the CPU time the store's thread spent.
    async fn write(
        &self,
        spans: Spans,
        export_only: Spans,
        due: CountsDue,
        (receiver, next): (&mut mpsc::Receiver<WriterMessage>, &mut Gather),
    ) -> Duration {
        if self.exporter.is_some() {
            let mut export_only = export_only.into_iter();
            while export_only.len() > 0 {
                self.prepare_and_export(&mut unboxed(&mut export_only, WRITE_CHUNK));
            }
        }
        let prune = Prune {
            keep_turns: due.turns.then_some(self.settings.max_turns),
            keep_mcp_calls: due.mcp_calls.then_some(self.settings.max_mcp_calls),
            before_us: Some(
                chrono::Utc::now().timestamp_micros()
                    - i64::try_from(self.settings.max_age.as_micros()).unwrap_or(i64::MAX),
            ),
        };
        // The `/mcp` calls' cap is applied with each chunk, so that a flood of calls
        // deletes as it writes, a few rows at a time; the turns' cap and the age, whose
        // statements walk many rows, once, with the last chunk. A flush with nothing new
        // still applies them.
        let each_chunk = Prune {
            keep_turns: None,
            before_us: None,
            ..prune
        };
        let mut storing = Duration::ZERO;
        let mut spans = spans.into_iter();
        loop {
            let length = chunk_length(spans.as_slice());
            let chunk = unboxed(&mut spans, length);
            let last = spans.len() == 0;
            storing += self
                .store_chunk(chunk, if last { prune } else { each_chunk })
                .await;
            std::thread::yield_now();
            // A closed channel is seen again by the next gather.
            take_queued(receiver, next);
            if last {
                return storing;
            }
        }
    }

    /// Redacts and cuts `chunk`, hands it to the exporter, and stores it (with the tool
    /// sets its LLM calls offered) in one transaction that also applies `prune`.
    async fn store_chunk(&self, mut chunk: Vec<SpanRecord>, prune: Prune) -> Duration {
        let mut tool_sets = BTreeMap::new();
        for span in &mut chunk {
            if let Some((hash, set)) = take_tool_set(span, &self.redactor) {
                tool_sets.insert(hash, set);
            }
        }
        self.prepare_and_export(&mut chunk);
        let turns = TurnRows::of(&chunk);
        drop(chunk);
        self.store_tool_sets(tool_sets).await;
        match self.store.append_turns(turns, prune).await {
            Ok(cpu) => cpu,
            Err(error) => {
                self.counters.store_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "cannot store turn traces; they are lost, the bot goes on");
                Duration::ZERO
            }
        }
    }
}

impl Writer {
    /// Redacts and cuts `spans` ([`prepare`]), then hands them to the exporter, if any.
    fn prepare_and_export(&self, spans: &mut [SpanRecord]) {
        for span in spans.iter_mut() {
            prepare(span, &self.redactor, self.settings.max_payload_bytes);
        }
        if let Some(exporter) = &self.exporter {
            exporter.export(spans);
        }
    }

    /// Stores the tool sets not stored before, ahead of the spans that name them, then
    /// remembers them, so the next LLM calls that offer them name them by hash at once.
    async fn store_tool_sets(&self, sets: BTreeMap<String, TakenSet>) {
        let new: Vec<(String, TakenSet)> = sets
            .into_iter()
            .filter(|(hash, _)| !self.tool_sets.is_stored(hash))
            .collect();
        if new.is_empty() {
            return;
        }
        let rows = new
            .iter()
            .map(|(hash, set)| (hash.clone(), set.text.clone()))
            .collect();
        match self.store.put_tool_sets(rows).await {
            Ok(()) => {
                for (hash, set) in new {
                    self.tool_sets.remember(set.offered, hash);
                }
            }
            Err(error) => {
                self.counters.store_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "cannot store the tool definitions of LLM calls");
            }
        }
    }
}

/// How many of `spans` (the turns' first, then the `/mcp` calls: [`Gather::into_parts`])
/// the next transaction stores: up to [`TURN_WRITE_CHUNK`] spans of turns, else up to
/// [`WRITE_CHUNK`] calls.
fn chunk_length(spans: &[Box<SpanRecord>]) -> usize {
    let turn_spans = spans
        .iter()
        .take(TURN_WRITE_CHUNK)
        .take_while(|span| !is_mcp_call(span))
        .count();
    if turn_spans > 0 {
        turn_spans
    } else {
        WRITE_CHUNK.min(spans.len())
    }
}

/// The next `n` spans out of their boxes: a chunk-sized block, the same size chunk
/// after chunk, where the allocator reuses its memory.
fn unboxed(spans: &mut std::vec::IntoIter<Box<SpanRecord>>, n: usize) -> Vec<SpanRecord> {
    spans.take(n).map(|span| *span).collect()
}

/// A tool set an LLM span carried in full.
struct TakenSet {
    /// The JSON text stored: the definitions with their strings redacted.
    text: String,
    /// The definitions as the span carried them, to recognise the set by later.
    offered: Value,
}

/// Takes an LLM span's tool definitions out of its attributes, their strings redacted
/// (not by key: a schema's property named `api_key` describes an argument, it holds no
/// secret), and leaves the SHA-256 of their JSON text in their place. Returns the hash
/// and the set.
fn take_tool_set(span: &mut SpanRecord, redactor: &Redactor) -> Option<(String, TakenSet)> {
    use sha2::Digest;
    let offered = span.attributes.remove(TOOL_DEFINITIONS)?;
    let mut definitions = offered.clone();
    redact_strings(&mut definitions, redactor);
    let text = definitions.to_string();
    let hash = crate::text::hex(&sha2::Sha256::digest(text.as_bytes()));
    span.attributes
        .insert(TOOLS_HASH.to_string(), Value::String(hash.clone()));
    Some((hash, TakenSet { text, offered }))
}

fn redact_strings(value: &mut Value, redactor: &Redactor) {
    match value {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(clean) = redactor.redact_text(text) {
                *text = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact_strings(v, redactor)),
        Value::Object(map) => map.values_mut().for_each(|v| redact_strings(v, redactor)),
        _ => {}
    }
}

/// Takes what the channel holds into `gather`, up to `BATCH` spans or a flush, letting
/// the other threads run every `TAKE_CHUNK` messages. Returns whether the channel closed.
fn take_queued(receiver: &mut mpsc::Receiver<WriterMessage>, gather: &mut Gather) -> bool {
    let mut taken = 0;
    while gather.len() < BATCH && gather.flushes.is_empty() {
        match receiver.try_recv() {
            Ok(message) => gather.take(message),
            Err(TryRecvError::Empty) => return false,
            Err(TryRecvError::Disconnected) => return true,
        }
        taken += 1;
        if taken % TAKE_CHUNK == 0 {
            std::thread::yield_now();
        }
    }
    false
}

/// How many turns past `TRACE_MAX_TURNS` the store may hold before the count limit is
/// applied (and as many `/mcp` tool calls' traces past `TRACE_MAX_MCP_CALLS`). Cutting
/// back finds the oldest turn to keep by walking the newest turns by id, so it costs in
/// proportion to the limit (up to 1,000,000 turns); a slack of a twentieth of the limit
/// (at least 16 turns) spreads that walk over many turns. The first batch cuts back (the
/// limit may have been lowered since the last run), and a reader's flush cuts back
/// whatever arrived since, so what it reads is within the limit; no period forces a cut
/// ([`Pruning`] with `Duration::MAX`).
fn count_slack(max_turns: usize) -> usize {
    (max_turns / 20).max(16)
}

/// The two count limits, each applied after its own slack: the turns' and the `/mcp`
/// tool calls' traces (a root whose source is
/// [`MCP_CALL_SOURCE`](crate::model::MCP_CALL_SOURCE)).
struct CountPruning {
    turns: Pruning,
    mcp_calls: Pruning,
}

/// Which count limits a write applies.
#[derive(Clone, Copy)]
struct CountsDue {
    turns: bool,
    mcp_calls: bool,
}

impl CountPruning {
    fn new(settings: &TraceSettings) -> Self {
        CountPruning {
            turns: Pruning::new(count_slack(settings.max_turns), Duration::MAX),
            mcp_calls: Pruning::new(count_slack(settings.max_mcp_calls), Duration::MAX),
        }
    }

    /// Which limits a write applies that took `turns` roots of turns and `mcp_calls`
    /// roots of `/mcp` tool calls.
    fn due(&mut self, turns: usize, mcp_calls: usize, flushing: bool) -> CountsDue {
        CountsDue {
            turns: self.turns.due(turns, flushing),
            mcp_calls: self.mcp_calls.due(mcp_calls, flushing),
        }
    }
}

/// Gives a span its `/mcp` request's attributes, redacts every secret the process knows
/// from it, then cuts its payloads.
fn prepare(span: &mut SpanRecord, redactor: &Redactor, max_payload_bytes: usize) {
    if let Some(request) = span.mcp_request.take() {
        for (key, value) in request.attributes() {
            span.attributes.insert(key.to_string(), value);
        }
    }
    let mut attributes = Value::Object(std::mem::take(&mut span.attributes));
    redactor.redact(&mut attributes);
    if let Value::Object(map) = attributes {
        span.attributes = map;
    }
    // The error, the name, the tool and the model can hold text a caller or the model
    // chose (an unknown tool's name can be any text, of any length): redacted, and cut
    // as a payload is. The tool and model are exported as `gen_ai.tool.name` and
    // `gen_ai.request.model`.
    let clean = |text: &str| clean_text(text, redactor, max_payload_bytes);
    let mut cut = Vec::new();
    if let Some(error) = &span.error
        && let Some(clean) = clean(error)
    {
        // A cut error is marked as a cut payload is: a replay must not pass it off as
        // what the model read.
        if error.len() > max_payload_bytes {
            cut.push(Value::String("error".into()));
        }
        span.error = Some(clean);
    }
    if let Some(clean) = clean(&span.name) {
        span.name = clean.into();
    }
    if let Some(tool) = &span.tool
        && let Some(clean) = clean(tool)
    {
        span.tool = Some(clean.into());
    }
    if let Some(model) = &span.model
        && let Some(clean) = clean(model)
    {
        span.model = Some(clean);
    }
    for (key, value) in span.attributes.iter_mut() {
        if cut_payload(value, max_payload_bytes) {
            cut.push(Value::String(key.clone()));
        }
    }
    if !cut.is_empty() {
        span.attributes
            .insert("cut_attributes".into(), Value::Array(cut));
    }
}

/// Cuts `value` to about `max_bytes` of JSON text; a cut value becomes a string that
/// ends with `…[cut: kept N of M bytes]`. Returns whether it was cut.
pub fn cut_payload(value: &mut Value, max_bytes: usize) -> bool {
    let text = match &mut *value {
        Value::String(s) if s.len() > max_bytes => std::mem::take(s),
        Value::String(_) | Value::Null | Value::Bool(_) | Value::Number(_) => return false,
        // Most payloads fit: count their JSON text's length without making it.
        other if json_length(other) <= max_bytes => return false,
        other => serde_json::to_string(&*other).unwrap_or_default(),
    };
    *value = Value::String(cut_text(&text, max_bytes));
    true
}

/// `text`'s first `max_bytes` (at a character's boundary), marked as cut.
fn cut_text(text: &str, max_bytes: usize) -> String {
    let mut end = max_bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[cut: kept {end} of {} bytes]", &text[..end], text.len())
}

/// `text` redacted and cut to `max_bytes`, when either changes it.
fn clean_text(text: &str, redactor: &Redactor, max_bytes: usize) -> Option<String> {
    let redacted = redactor.redact_text(text);
    if redacted.len() > max_bytes {
        return Some(cut_text(&redacted, max_bytes));
    }
    match redacted {
        std::borrow::Cow::Owned(clean) => Some(clean),
        std::borrow::Cow::Borrowed(_) => None,
    }
}

/// The length of `value`'s JSON text, counted as it is written out, not kept.
fn json_length(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a `Value` cannot fail, and the counter never refuses bytes.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_count_limit_is_applied_after_a_slack_of_turns_and_on_every_flush() {
        let mut pruning = Pruning::new(count_slack(1_000), Duration::MAX);
        assert_eq!(count_slack(1_000), 50, "a twentieth of the limit");
        assert!(pruning.due(1, false), "the first batch cuts back");
        assert!(!pruning.due(49, false), "within the slack: no cut");
        assert!(pruning.due(1, false), "the slack is used up");
        assert!(!pruning.due(0, true), "nothing new: nothing to cut");
        assert!(pruning.due(1, true), "a reader's flush cuts what waited");
        assert_eq!(count_slack(2), 16, "at least 16 turns");
    }

    #[test]
    fn mcp_calls_and_turns_use_up_their_own_slack() {
        let settings = TraceSettings {
            max_turns: 1_000,
            max_mcp_calls: 1_000,
            max_age: Duration::from_secs(60),
            max_payload_bytes: 1024,
        };
        let mut pruning = CountPruning::new(&settings);
        let first = pruning.due(1, 1, false);
        assert!(first.turns && first.mcp_calls, "the first batch cuts both");
        let flat_out = pruning.due(0, 50, false);
        assert!(flat_out.mcp_calls, "a slack of MCP calls cuts them");
        assert!(!flat_out.turns, "and leaves the turns' count alone");
    }

    #[test]
    fn turns_are_stored_in_larger_transactions_than_mcp_calls() {
        use super::super::gather::tests::span;
        let turn_span = span("s", false, Some("web"));
        let call = span("c", true, Some(crate::model::MCP_CALL_SOURCE));
        let spans = |turns: usize, calls: usize| -> Spans {
            let turns = std::iter::repeat_n(turn_span.clone(), turns);
            turns
                .chain(std::iter::repeat_n(call.clone(), calls))
                .collect()
        };
        assert_eq!(chunk_length(&spans(300, 100)), TURN_WRITE_CHUNK);
        assert_eq!(
            chunk_length(&spans(40, 100)),
            40,
            "the turns' spans, then the calls"
        );
        assert_eq!(chunk_length(&spans(0, 100)), WRITE_CHUNK);
        assert_eq!(chunk_length(&spans(0, 5)), 5);
        assert_eq!(
            chunk_length(&[]),
            0,
            "a flush with nothing new: one empty chunk"
        );
    }

    #[test]
    fn payloads_over_the_limit_are_cut_and_marked() {
        let mut long = json!("é".repeat(100));
        assert!(cut_payload(&mut long, 11));
        let text = long.as_str().unwrap();
        assert!(text.starts_with("éééé"), "{text}");
        assert!(text.ends_with("…[cut: kept 10 of 200 bytes]"), "{text}");

        let mut object = json!({"messages": ["a".repeat(50)]});
        assert!(cut_payload(&mut object, 20));
        assert!(object.as_str().unwrap().contains("[cut: kept 20 of"));

        let mut small = json!({"a": 1});
        assert!(!cut_payload(&mut small, 20));
        assert_eq!(small, json!({"a": 1}));

        let exact = json!(["abc", {"é": 1}]);
        let text = serde_json::to_string(&exact).unwrap();
        assert_eq!(json_length(&exact), text.len());
        let mut fits = exact.clone();
        assert!(
            !cut_payload(&mut fits, text.len()),
            "exactly at the limit: kept"
        );
        assert!(cut_payload(&mut fits, text.len() - 1), "one byte over: cut");
    }

    /// A span's error and names are text a caller chose, of any length: redacted and cut
    /// like a payload, so one call with a huge unknown tool name stores no huge span.
    #[test]
    fn errors_and_names_are_redacted_and_cut_too() {
        let redactor = Redactor::new(["hunter2-secret".to_string()]);
        let mut record = crate::bot::trace::gather::tests::span("s", true, Some("mcp"));
        record.error = Some(format!(
            "Unknown tool: hunter2-secret{}",
            "x".repeat(100_000)
        ));
        record.tool = Some("t".repeat(100_000).into());
        record.name = "tool hunter2-secret".into();
        prepare(&mut record, &redactor, 1_000);
        let error = record.error.unwrap();
        assert!(error.len() < 1_100, "{}", error.len());
        assert!(
            error.contains("[REDACTED]") && !error.contains("hunter2"),
            "{error}"
        );
        assert!(error.ends_with("bytes]"), "says it was cut");
        assert!(record.tool.unwrap().len() < 1_100);
        assert_eq!(record.name, "tool [REDACTED]");
    }
}
