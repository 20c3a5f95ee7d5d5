//! Log capture: a `tracing` layer that copies every event into a bounded ring buffer,
//! and the queries the log tools run over it.
//!
//! The layer never awaits and takes its lock only to push a finished record (the
//! formatting happens before). Records get a sequence number, so a client can ask for
//! "everything since my last call". Lines caused by the MCP endpoint's own work
//! (targets under [`MCP_TARGET`]) are marked, so queries can keep them apart from the
//! application's lines. Lines that do not come from `tracing` (a browser's console)
//! arrive through [`LogBuffer::push_web`] with source `web`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

use super::read_logs::LogLine;

/// The target prefix of the MCP endpoint's own log lines (whatever crate logs them).
pub const MCP_TARGET: &str = "porthole::mcp";

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogSource {
    /// The process's own `tracing` events.
    Server,
    /// A browser's console, forwarded ([`LogBuffer::push_web`]).
    Web,
}

impl LogSource {
    /// `server` or `web`, as lines show it.
    pub fn as_str(self) -> &'static str {
        match self {
            LogSource::Server => "server",
            LogSource::Web => "web",
        }
    }
}

/// A log line's message (or one field's value) longer than this many bytes is cut to
/// [`MAX_LINE_CHARS`] characters, its middle left out: 1,000 lines stay a few MiB.
const MAX_LINE_BYTES: usize = 16 * 1024;
const MAX_LINE_CHARS: usize = 8 * 1024;

/// One log line.
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// Its number in the buffer: later lines have larger ones.
    pub seq: u64,
    /// Microseconds since the Unix epoch.
    pub time_us: i64,
    /// Its level.
    pub level: Level,
    /// The `tracing` target (a module path, or `browser`).
    pub target: String,
    /// The message.
    pub message: String,
    /// Structured fields other than the message, as `key=value` text.
    pub fields: Vec<(Cow<'static, str>, String)>,
    /// Where it came from.
    pub source: LogSource,
    /// Emitted by the MCP endpoint's own work.
    pub from_mcp: bool,
}

impl LogRecord {
    /// Its time in RFC 3339, UTC, to the millisecond.
    pub fn timestamp(&self) -> String {
        Utc.timestamp_micros(self.time_us)
            .single()
            .unwrap_or_default()
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// The line as the log tools return it (and the log file keeps it).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(LogLine::from(self)).unwrap_or_default()
    }

    /// Reads back a line written by [`LogRecord::to_json`] (the log file's format).
    pub fn from_json(value: &Value) -> Option<LogRecord> {
        let source = match value["source"].as_str()? {
            "web" => LogSource::Web,
            _ => LogSource::Server,
        };
        let target = value["target"].as_str()?.to_string();
        Some(LogRecord {
            seq: value["seq"].as_u64()?,
            time_us: value["time_us"].as_i64()?,
            level: parse_level(value["level"].as_str()?)?,
            from_mcp: target.starts_with(MCP_TARGET),
            target,
            message: value["message"].as_str()?.to_string(),
            fields: value["fields"]
                .as_object()
                .map(|f| {
                    f.iter()
                        .map(|(k, v)| {
                            (
                                Cow::Owned(k.clone()),
                                v.as_str().unwrap_or_default().to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            source,
        })
    }

    /// Approximate size of the line as returned (for byte budgets).
    pub fn weight(&self) -> usize {
        96 + self.target.len()
            + self.message.len()
            + self
                .fields
                .iter()
                .map(|(k, v)| k.len() + v.len() + 6)
                .sum::<usize>()
    }
}

/// Lower-case level name as MCP clients see it.
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

/// Parses `trace|debug|info|warn|warning|error` (and browser `log`, which means info).
pub fn parse_level(text: &str) -> Option<Level> {
    match text.to_ascii_lowercase().as_str() {
        "trace" => Some(Level::TRACE),
        "debug" => Some(Level::DEBUG),
        "info" | "log" => Some(Level::INFO),
        "warn" | "warning" => Some(Level::WARN),
        "error" => Some(Level::ERROR),
        _ => None,
    }
}

/// Severity as a number that grows with importance (tracing's `Level` order is reversed).
fn severity(level: Level) -> u8 {
    match level {
        Level::TRACE => 0,
        Level::DEBUG => 1,
        Level::INFO => 2,
        Level::WARN => 3,
        Level::ERROR => 4,
    }
}

/// Which lines a query wants.
#[derive(Debug, Clone)]
pub struct LogQuery {
    /// Only lines at this level or above.
    pub min_level: Option<Level>,
    /// Only lines containing this text (message, target or a field).
    pub grep: Option<String>,
    /// Match `grep` ignoring case.
    pub case_insensitive: bool,
    /// Only lines with a sequence number above this.
    pub after_seq: Option<u64>,
    /// Only lines at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only lines from this source.
    pub source: Option<LogSource>,
    /// Include lines caused by the MCP endpoint itself.
    pub include_mcp: bool,
    /// Most lines to return (the newest win).
    pub limit: usize,
    /// Stop adding lines once their size passes this many bytes.
    pub byte_budget: Option<usize>,
    /// Bytes already used by lines from another reader (counts against the budget).
    pub bytes_used: usize,
}

impl Default for LogQuery {
    fn default() -> Self {
        LogQuery {
            min_level: None,
            grep: None,
            case_insensitive: false,
            after_seq: None,
            since: None,
            source: None,
            include_mcp: false,
            limit: 50,
            byte_budget: None,
            bytes_used: 0,
        }
    }
}

/// A query's answer: matching lines, oldest first, and what was left out.
#[derive(Debug, Clone)]
pub struct LogPage {
    /// The lines, oldest first.
    pub records: Vec<LogRecord>,
    /// More lines matched than the limit allowed (the oldest were left out).
    pub truncated_by_limit: bool,
    /// The byte budget cut lines (the oldest were left out).
    pub truncated_by_budget: bool,
    /// Pass as `after_seq` next time to get only newer lines.
    pub cursor: u64,
    /// Lines the buffer has dropped since start (older than its capacity).
    pub dropped: u64,
}

/// The newest lines of the process's log, in memory: the ring a [`BufferLayer`] fills.
pub struct LogBuffer {
    capacity: usize,
    records: Mutex<VecDeque<LogRecord>>,
    next_seq: AtomicU64,
}

impl LogBuffer {
    /// A buffer of the newest `capacity` lines (at least one).
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(LogBuffer {
            capacity: capacity.max(1),
            records: Mutex::new(VecDeque::with_capacity(capacity.max(1))),
            next_seq: AtomicU64::new(1),
        })
    }

    /// The most lines it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The lines it holds now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it holds no line yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sequence number the next line will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<LogRecord>> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, mut record: LogRecord) {
        // A line past the cap keeps its two ends: the buffer's size stays bounded by
        // its line count, whatever a browser or a child process writes.
        if record.message.len() > MAX_LINE_BYTES {
            record.message = porthole_core::text::elide_middle(&record.message, MAX_LINE_CHARS);
        }
        for (_, value) in record.fields.iter_mut() {
            if value.len() > MAX_LINE_BYTES {
                *value = porthole_core::text::elide_middle(value, MAX_LINE_CHARS);
            }
        }
        let mut records = self.lock();
        // Numbered under the lock so sequence order is buffer order.
        record.seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        if records.len() == self.capacity {
            records.pop_front();
        }
        records.push_back(record);
    }

    /// Records a browser console line (source `web`).
    pub fn push_web(&self, level: &str, message: &str, browser_time: Option<&str>) {
        let fields = browser_time
            .map(|t| vec![(Cow::Borrowed("browser_timestamp"), t.to_string())])
            .unwrap_or_default();
        self.push(LogRecord {
            seq: 0,
            time_us: Utc::now().timestamp_micros(),
            level: parse_level(level).unwrap_or(Level::INFO),
            target: "browser".into(),
            message: message.to_string(),
            fields,
            source: LogSource::Web,
            from_mcp: false,
        });
    }

    /// Runs a query. Newest lines win when the limit or budget cuts.
    pub fn query(&self, query: &LogQuery) -> LogPage {
        let records = self.lock();
        let cursor = records
            .back()
            .map(|r| r.seq)
            .unwrap_or(0)
            .max(query.after_seq.unwrap_or(0));
        let dropped = records.front().map(|r| r.seq - 1).unwrap_or(0);
        let (picked, truncated_by_limit, truncated_by_budget) = select(records.iter().rev(), query);
        LogPage {
            records: picked,
            truncated_by_limit,
            truncated_by_budget,
            cursor,
            dropped,
        }
    }

    /// The time of the oldest line held, if any.
    pub fn oldest_time_us(&self) -> Option<i64> {
        self.lock().front().map(|r| r.time_us)
    }

    /// The `tracing` layer feeding this buffer: every event it sees, unless
    /// [`BufferLayer::skipping`] leaves some out.
    pub fn layer(self: &Arc<Self>) -> BufferLayer {
        BufferLayer {
            buffer: self.clone(),
            skip_target: None,
        }
    }
}

/// A grep's text for a case-insensitive search: found in a line when the line,
/// lowercased, contains it lowercased, as `text.to_lowercase().contains(..)` says. An
/// ASCII line (most log lines) is searched in place by a SIMD searcher that ignores ASCII
/// case, without a lowered copy of every line the grep reads; any other line is lowered
/// whole, since a letter's lowercase form may differ in length or be ASCII (the Kelvin
/// sign's is `k`).
struct LowercasedNeedle {
    lowered: String,
    /// For ASCII lines, when the lowered needle is ASCII too (and its searcher builds).
    in_ascii: Option<aho_corasick::AhoCorasick>,
}

impl LowercasedNeedle {
    fn new(needle: &str) -> LowercasedNeedle {
        let lowered = needle.to_lowercase();
        let in_ascii = lowered
            .is_ascii()
            .then(|| {
                aho_corasick::AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build([lowered.as_str()])
                    .ok()
            })
            .flatten();
        LowercasedNeedle { lowered, in_ascii }
    }

    fn found_in(&self, text: &str) -> bool {
        match &self.in_ascii {
            Some(searcher) if text.is_ascii() => searcher.is_match(text),
            // An ASCII line lowercases to ASCII: it cannot hold a needle that is not.
            None if text.is_ascii() && !self.lowered.is_ascii() => false,
            _ => text.to_lowercase().contains(self.lowered.as_str()),
        }
    }
}

/// Picks the lines `query` wants from `newest_first` records; returns them oldest
/// first, with whether the limit or the byte budget cut older ones. Shared by the ring
/// buffer and the log file reader, whose records it takes as they are read: it stops
/// at the limit or the budget, so the rest of a file is never read.
pub fn select<R: std::borrow::Borrow<LogRecord>>(
    newest_first: impl IntoIterator<Item = R>,
    query: &LogQuery,
) -> (Vec<LogRecord>, bool, bool) {
    let needle = query.grep.as_deref();
    let lowered = needle
        .filter(|_| query.case_insensitive)
        .map(LowercasedNeedle::new);
    let since_us = query.since.map(|t| t.timestamp_micros());
    let limit = query.limit.max(1);
    let mut picked: Vec<LogRecord> = Vec::new();
    let (mut truncated_by_limit, mut truncated_by_budget) = (false, false);
    let mut used = query.bytes_used;
    for item in newest_first {
        let record: &LogRecord = item.borrow();
        if query.after_seq.is_some_and(|after| record.seq <= after) {
            break;
        }
        if since_us.is_some_and(|since| record.time_us < since) {
            break;
        }
        if query.source.is_some_and(|s| s != record.source)
            || (!query.include_mcp && record.from_mcp)
            || query
                .min_level
                .is_some_and(|min| severity(record.level) < severity(min))
        {
            continue;
        }
        let record = match &needle {
            None => Cow::Borrowed(record),
            Some(needle) => {
                let hit = |text: &str| match &lowered {
                    Some(lowered) => lowered.found_in(text),
                    None => text.contains(needle),
                };
                let hits = |r: &LogRecord| {
                    hit(&r.message) || hit(&r.target) || r.fields.iter().any(|(_, v)| hit(v))
                };
                if !hits(record) {
                    continue;
                }
                // Lines are kept as logged and redacted on the way out: the search must
                // match what the answer will show, or a caller could guess a secret a
                // line quotes one character at a time by whether the grep finds it.
                let mut shown = record.clone();
                super::redaction::redact_record(&mut shown);
                if !hits(&shown) {
                    continue;
                }
                Cow::Owned(shown)
            }
        };
        if picked.len() == limit {
            truncated_by_limit = true;
            break;
        }
        let weight = record.weight();
        if let Some(budget) = query.byte_budget
            && used + weight > budget
            && (used > 0 || !picked.is_empty())
        {
            truncated_by_budget = true;
            break;
        }
        used += weight;
        picked.push(record.into_owned());
    }
    picked.reverse();
    (picked, truncated_by_limit, truncated_by_budget)
}

/// Builds a record from a `tracing` event; `web_target` events are browser lines.
pub fn record_from_event(event: &Event<'_>, web_target: &str) -> LogRecord {
    let meta = event.metadata();
    let target = meta.target();
    let mut collector = FieldCollector {
        message: String::new(),
        fields: Vec::new(),
    };
    event.record(&mut collector);
    LogRecord {
        seq: 0,
        time_us: Utc::now().timestamp_micros(),
        level: *meta.level(),
        target: target.to_string(),
        message: collector.message,
        fields: collector.fields,
        source: if target == web_target {
            LogSource::Web
        } else {
            LogSource::Server
        },
        from_mcp: target.starts_with(MCP_TARGET),
    }
}

/// The `tracing` layer that copies every event into a [`LogBuffer`]
/// ([`LogBuffer::layer`]).
pub struct BufferLayer {
    buffer: Arc<LogBuffer>,
    skip_target: Option<&'static str>,
}

impl BufferLayer {
    /// Leaves out the events of `target`: lines that reach the buffer another way (a
    /// browser's console lines, through [`LogBuffer::push_web`]).
    pub fn skipping(mut self, target: &'static str) -> Self {
        self.skip_target = Some(target);
        self
    }
}

/// Collects an event's message and fields.
struct FieldCollector {
    message: String,
    fields: Vec<(Cow<'static, str>, String)>,
}

impl Visit for FieldCollector {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            self.fields
                .push((Cow::Borrowed(field.name()), format!("{value:?}")));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.fields
                .push((Cow::Borrowed(field.name()), value.to_string()));
        }
    }
}

impl<S: Subscriber> Layer<S> for BufferLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if self.skip_target == Some(event.metadata().target()) {
            return;
        }
        // The skipped target is the web's: no event that reaches here is a web line.
        self.buffer.push(record_from_event(
            event,
            self.skip_target.unwrap_or_default(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lowercased_search_finds_what_lowering_the_whole_text_finds() {
        let texts = [
            "Connection RESET by peer",
            "plain ascii",
            "Größe ÜBER Maß: connection reset",
            "\u{212A}elvin", // the Kelvin sign, whose lowercase is an ASCII k
            "",
        ];
        let needles = ["Connection Reset", "kelvin", "ÜBER", "", "x", "ß", "K"];
        for text in texts {
            for needle in needles {
                assert_eq!(
                    LowercasedNeedle::new(needle).found_in(text),
                    text.to_lowercase().contains(&needle.to_lowercase()),
                    "{text:?} / {needle:?}"
                );
            }
        }
    }
    use tracing_subscriber::layer::SubscriberExt;

    fn with_buffer(capacity: usize, f: impl FnOnce()) -> Arc<LogBuffer> {
        let buffer = LogBuffer::new(capacity);
        let subscriber =
            tracing_subscriber::registry().with(buffer.layer().skipping("web_console"));
        tracing::subscriber::with_default(subscriber, f);
        buffer
    }

    /// A grep matches the lines as the answer shows them: a secret a line quotes cannot
    /// be guessed by whether a search for part of it finds the line.
    #[test]
    fn a_grep_does_not_find_what_redaction_hides() {
        let buffer = with_buffer(10, || {
            tracing::info!(target: "porthole::bot", "child env OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234");
        });
        let grep = |text: &str| {
            let query = LogQuery {
                grep: Some(text.to_string()),
                ..LogQuery::default()
            };
            buffer.query(&query).records
        };
        assert!(grep("sk-proj-abc").is_empty(), "the secret's start");
        let found = grep("child env");
        assert_eq!(found.len(), 1, "the rest of the line is found");
        assert!(
            !found[0].message.contains("sk-proj"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn captures_events_with_fields_and_drops_the_oldest() {
        let buffer = with_buffer(3, || {
            for n in 0..5 {
                tracing::info!(target: "porthole::bot", n, "line {n}");
            }
            tracing::warn!(target: "web_console", "skipped: arrives through push_web");
        });
        assert_eq!(buffer.len(), 3);
        let page = buffer.query(&LogQuery::default());
        let messages: Vec<_> = page.records.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(messages, ["line 2", "line 3", "line 4"]);
        assert_eq!(
            page.records[0].fields,
            vec![(Cow::Borrowed("n"), "2".to_string())]
        );
        assert_eq!(page.dropped, 2);
    }

    #[test]
    fn a_line_past_the_cap_keeps_its_two_ends() {
        let buffer = with_buffer(10, || {
            tracing::info!(target: "porthole::bot", detail = %"d".repeat(100_000), "server");
        });
        let huge = format!("start-{}-end", "B".repeat(300_000));
        buffer.push_web("log", &huge, None);
        let page = buffer.query(&LogQuery::default());
        let web = &page.records[1].message;
        assert!(web.len() < 2 * MAX_LINE_BYTES, "{}", web.len());
        assert!(
            web.starts_with("start-") && web.ends_with("-end"),
            "the two ends stay"
        );
        assert!(web.contains("characters]"), "says what was cut");
        assert!(page.records[0].fields[0].1.len() < 2 * MAX_LINE_BYTES);
    }

    #[test]
    fn filters_by_level_grep_source_cursor_and_budget() {
        let buffer = with_buffer(100, || {
            tracing::debug!(target: "porthole::bot", "quiet detail");
            tracing::warn!(target: "porthole::bot", "Disk nearly FULL");
            tracing::error!(target: "porthole::bot", "write failed: disk full");
            tracing::info!(target: "porthole::mcp::audit", "tools/call");
        });
        buffer.push_web("warn", "probe from the page", Some("2026-01-01T00:00:00Z"));

        let q = |f: &dyn Fn(&mut LogQuery)| {
            let mut query = LogQuery::default();
            f(&mut query);
            buffer.query(&query)
        };
        assert_eq!(q(&|q| q.min_level = Some(Level::WARN)).records.len(), 3);
        let grep = q(&|q| {
            q.grep = Some("disk full".into());
            q.case_insensitive = true;
        });
        assert_eq!(
            grep.records.len(),
            1,
            "case-insensitive, but still a substring"
        );
        assert_eq!(q(&|q| q.grep = Some("FULL".into())).records.len(), 1);
        let web = q(&|q| q.source = Some(LogSource::Web));
        assert_eq!(web.records[0].message, "probe from the page");
        assert!(
            q(&|_| {}).records.iter().all(|r| !r.from_mcp),
            "MCP lines kept apart"
        );
        assert_eq!(q(&|q| q.include_mcp = true).records.len(), 5);

        let first = q(&|_| {});
        let again = q(&|q| q.after_seq = Some(first.cursor));
        assert!(again.records.is_empty());

        let tight = q(&|q| q.byte_budget = Some(10));
        assert_eq!(tight.records.len(), 1, "one line always fits");
        assert!(tight.truncated_by_budget);
        let limited = q(&|q| q.limit = 2);
        assert!(limited.truncated_by_limit);
        assert_eq!(
            limited.records.last().unwrap().message,
            "probe from the page"
        );
    }
}
