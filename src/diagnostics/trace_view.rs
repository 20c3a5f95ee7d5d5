//! How traces are shown to MCP clients: compact span summaries, the span tree, byte
//! budgets (the shapes themselves are `trace_shapes`'), paging (cursors and `since`
//! values) and the arguments that ask for them.
//! Shared by `traces` and `llm_calls`, so every trace tool speaks the same shapes.

use chrono::{DateTime, SecondsFormat, Utc};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};

use super::trace_shapes::{
    FullSpan, SpanFacts, SpanNode, SpanSummary, Status, TracePage, TraceRow,
};
use crate::bot::store::{Page, SpanQuery, TraceSummary};
use crate::bot::trace::cut_payload;
use crate::mcp::default_of;
use crate::model::SpanRecord;

/// The default and largest byte budgets of the trace tools.
pub const DEFAULT_MAX_BYTES: usize = 32 * 1024;
pub const MAX_MAX_BYTES: usize = 1024 * 1024;

/// `max_bytes`, the answer's byte budget, as every trace tool takes it (flattened into
/// each tool's arguments).
#[derive(Deserialize, JsonSchema)]
pub struct AnswerBudget {
    /// Approximate size budget of the answer; larger payloads are cut and marked
    #[serde(default = "default_of::<DEFAULT_MAX_BYTES>")]
    #[schemars(range(min = 1024, max = MAX_MAX_BYTES))]
    max_bytes: usize,
}

impl AnswerBudget {
    /// The byte budget asked for, within bounds.
    pub fn bytes(&self) -> usize {
        self.max_bytes.clamp(1024, MAX_MAX_BYTES)
    }
}

/// `since`, as every tool that filters by start time takes it (flattened into each
/// tool's arguments).
#[derive(Deserialize, JsonSchema)]
pub struct SinceFilter {
    /// Only what started at or after this: an ISO 8601 time (UTC when it has no offset),
    /// or an age such as 30s, 15m, 2h, 7d
    #[schemars(length(min = 1))]
    pub since: Option<String>,
}

impl SinceFilter {
    /// The time asked for, as µs since the epoch; `None` when none was.
    pub fn micros(&self) -> Result<Option<i64>, String> {
        self.since.as_deref().map(parse_since).transpose()
    }
}

/// `since`: an ISO 8601 time, or an age such as `30s`, `15m`, `2h`, `7d`, as µs since
/// the epoch.
pub fn parse_since(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if let Some(time) = crate::text::parse_iso8601(text) {
        return Ok(time.timestamp_micros());
    }
    let split = text.len().saturating_sub(1);
    let (number, unit) = (text.get(..split), text.get(split..));
    let seconds_per_unit = match unit {
        Some("s") => 1,
        Some("m") => 60,
        Some("h") => 3600,
        Some("d") => 86_400,
        _ => 0,
    };
    let seconds = number
        .and_then(|n| n.parse::<i64>().ok())
        .and_then(|n| n.checked_mul(seconds_per_unit))
        .filter(|s| seconds_per_unit > 0 && (0..=3650 * 86_400).contains(s));
    match seconds {
        Some(seconds) => Ok(Utc::now().timestamp_micros() - seconds * 1_000_000),
        _ => Err(format!(
            "`since` must be an ISO 8601 time such as 2026-01-31T12:00:00Z or an age such as 30s, 15m, 2h or 7d, not `{text}`"
        )),
    }
}

/// A page cursor as the client sees it: `start_us:span_id`.
pub fn encode_cursor(next: &Option<(i64, String)>) -> Option<String> {
    next.as_ref().map(|(start, span)| format!("{start}:{span}"))
}

pub fn decode_cursor(text: &str) -> Result<(i64, String), String> {
    text.split_once(':')
        .and_then(|(start, span)| Some((start.parse::<i64>().ok()?, span.to_string())))
        .filter(|(_, span)| crate::trace_context::is_span_id(span))
        .ok_or_else(|| {
            format!("`cursor` `{text}` is not one this tool gave out; pass the `next_cursor` of the previous page, or leave it out")
        })
}

/// Only what ended this way
// Its variants carry no doc comments: with them the derived schema would be a `oneOf`
// of constants, not an `enum`.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum StatusFilter {
    Ok,
    Error,
}

impl StatusFilter {
    /// The status as spans record it.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusFilter::Ok => "ok",
            StatusFilter::Error => "error",
        }
    }
}

/// Paging through a listing: `since`, `limit` and `cursor`, as every listing tool of
/// spans takes them (flattened into each tool's own arguments).
#[derive(Deserialize, JsonSchema)]
pub struct Paging {
    #[serde(flatten)]
    since: SinceFilter,
    #[serde(default = "default_of::<20>")]
    #[schemars(range(min = 1, max = 200))]
    limit: usize,
    /// `next_cursor` of the previous page
    #[schemars(length(min = 1))]
    cursor: Option<String>,
}

impl Paging {
    /// The query for this page, checked; each tool adds its own filters.
    pub fn query(&self) -> Result<SpanQuery, String> {
        Ok(SpanQuery {
            since_us: self.since.micros()?,
            after: self.cursor.as_deref().map(decode_cursor).transpose()?,
            limit: self.limit.clamp(1, 200),
            ..SpanQuery::default()
        })
    }
}

fn time_text(us: i64) -> String {
    DateTime::<Utc>::from_timestamp_micros(us)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// What `span` is and how long it took ([`SpanFacts`]).
fn span_facts(span: &SpanRecord) -> SpanFacts {
    let attribute = |key: &str| span.attributes.get(key).cloned();
    SpanFacts {
        span_id: span.span_id.clone(),
        kind: span.kind,
        name: span.name.to_string(),
        started_at: time_text(span.start_us),
        duration_ms: span.duration_us as f64 / 1000.0,
        error: span.error.clone(),
        model: span.model.clone(),
        tool: span.tool.as_deref().map(str::to_string),
        source: span.source.as_deref().map(str::to_string),
        conversation_id: span.conversation_id.clone(),
        time_to_first_token_ms: attribute("time_to_first_token_ms"),
        finish_reason: attribute("finish_reason"),
        provider: attribute("provider"),
    }
}

/// One span without its payloads: what it was, when, how long, what it cost, how it ended.
pub fn span_summary(span: &SpanRecord) -> SpanSummary {
    let tool_calls = span
        .attributes
        .get("response")
        .and_then(|r| r["tool_calls"].as_array())
        .filter(|calls| !calls.is_empty())
        .map(|calls| calls.iter().map(|c| c["name"].clone()).collect());
    SpanSummary {
        facts: span_facts(span),
        status: Status::of(span.error.is_some()),
        input_tokens: span.input_tokens,
        output_tokens: span.output_tokens,
        tool_calls,
    }
}

/// A trace as listed.
fn trace_row(trace: &TraceSummary) -> TraceRow {
    TraceRow {
        root: span_facts(&trace.root),
        trace_id: trace.root.trace_id.clone(),
        status: Status::of(trace.counts.failed_spans > 0),
        root_status: Status::of(trace.root.error.is_some()),
        counts: trace.counts,
        remote_parent_span_id: trace.root.parent_span_id.clone(),
    }
}

/// A page of traces with its cursor.
pub fn trace_page(page: &Page<TraceSummary>) -> TracePage {
    TracePage {
        traces: page.items.iter().map(trace_row).collect(),
        next_cursor: encode_cursor(&page.next),
    }
}

/// The span tree of a trace within `max_bytes`: spans in start order are kept while
/// they fit; the rest are counted and named in a note.
pub fn span_tree(spans: &[SpanRecord], max_bytes: usize) -> (Vec<SpanNode>, Vec<String>) {
    let mut kept = Vec::new();
    let mut used = 0;
    for span in spans {
        let summary = span_summary(span);
        let size = serde_json::to_string(&summary).map_or(0, |text| text.len());
        if used + size > max_bytes && !kept.is_empty() {
            break;
        }
        used += size;
        kept.push((span, summary));
    }
    let mut notes = Vec::new();
    if kept.len() < spans.len() {
        notes.push(format!(
            "{} later spans left out by max_bytes; raise max_bytes or pass span_id to expand one span",
            spans.len() - kept.len()
        ));
    }
    let ids: HashSet<&str> = kept.iter().map(|(s, _)| s.span_id.as_str()).collect();
    let mut children: HashMap<String, Vec<SpanNode>> = HashMap::new();
    let mut roots = Vec::new();
    // Children are attached after their parents, so walk backwards (latest first).
    for (span, summary) in kept.into_iter().rev() {
        let mut mine = children.remove(&span.span_id).unwrap_or_default();
        mine.reverse();
        let node = SpanNode {
            summary,
            children: mine,
        };
        match span.parent_span_id.as_deref().filter(|p| ids.contains(p)) {
            Some(parent) => children.entry(parent.to_string()).or_default().push(node),
            None => roots.push(node),
        }
    }
    roots.reverse();
    (roots, notes)
}

/// One span with its payloads (request, response, arguments, result), each cut so the
/// whole fits `max_bytes`. Says which attributes were cut.
pub fn full_span(span: &SpanRecord, max_bytes: usize) -> FullSpan {
    let mut attributes = span.attributes.clone();
    let total: usize = attributes.values().map(|v| v.to_string().len()).sum();
    let mut cut_by_max_bytes = None;
    if total > max_bytes {
        let share = (max_bytes / attributes.len().max(1)).max(64);
        let mut cut = Vec::new();
        for (key, attribute) in attributes.iter_mut() {
            if cut_payload(attribute, share) {
                cut.push(key.clone());
            }
        }
        cut_by_max_bytes = Some(cut);
    }
    FullSpan {
        summary: span_summary(span),
        trace_id: span.trace_id.clone(),
        parent_span_id: span.parent_span_id.clone(),
        attributes,
        cut_by_max_bytes,
    }
}

/// Nearest-rank percentile of sorted values (`p` in 0..=100).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_times_and_ages() {
        assert_eq!(
            parse_since("2026-01-31T12:00:00Z").unwrap(),
            1_769_860_800_000_000
        );
        let hour_ago = parse_since("1h").unwrap();
        let now = Utc::now().timestamp_micros();
        assert!((now - hour_ago - 3_600_000_000).abs() < 5_000_000);
        for bad in [
            "",
            "h",
            "5w",
            "-1h",
            "yesterday",
            "99999999999d",
            "9223372036854775807d",
        ] {
            assert!(parse_since(bad).unwrap_err().contains("ISO 8601"), "{bad}");
        }
    }

    #[test]
    fn cursors_round_trip_and_refuse_strangers() {
        let cursor = encode_cursor(&Some((42, "00f067aa0ba902b7".into()))).unwrap();
        assert_eq!(
            decode_cursor(&cursor).unwrap(),
            (42, "00f067aa0ba902b7".to_string())
        );
        assert!(decode_cursor("42").is_err());
        assert!(decode_cursor("x:00f067aa0ba902b7").is_err());
        assert!(decode_cursor("1:zz").is_err());
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), 50.0);
        assert_eq!(percentile(&values, 95.0), 95.0);
        assert_eq!(percentile(&[], 95.0), 0.0);
    }
}
