//! Turn traces in the store: one row per turn in `trace_turns`, its spans a JSON array,
//! and `trace_spans` a view with one row per span for SQL (`db_query`) and the
//! statistics (migration 12). On SQLite they live in a file of their own, read and
//! written through its connection (see `sqlite/files.rs`). A turn is the
//! spans that share a `root_span_id` (its root has `is_root`); a trace id may hold
//! several turns when a caller reuses its trace for many requests. Written in batches by
//! the trace writer, one statement per turn, kept within their counts and an age
//! (`trace_retention`: the turns and the `/mcp` tool calls' traces each by their own).
//!
//! A batch may hold part of a turn: spans that end after their turn's root has been
//! stored (a cancelled child) or before it (the batch closed while the turn went on).
//! Each part is merged into the turn's row, which is complete once its root is in.
//!
//! Rows arrive already redacted and cut by the writer; this module only stores and
//! reads them. Pages run newest first and continue from an opaque `start_us:span_id`
//! cursor, so rows written meanwhile neither repeat nor vanish.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use super::backend::Sql;
use super::rows::{Bound, FromRow, RowRead};
use super::trace_filter::{Filter, trace_filter};
use super::trace_retention::{NOT_AN_MCP_CALL, Prune};
use super::{Store, StoreError};
use crate::model::{SpanKind, SpanRecord};

/// Which traces (or spans) a page holds.
#[derive(Debug, Clone, Default)]
pub struct SpanQuery {
    pub conversation_id: Option<String>,
    /// `ok` or `error`.
    pub status: Option<String>,
    pub since_us: Option<i64>,
    pub min_duration_us: Option<i64>,
    /// Roots: what started the trace; `None` lists every source but the `/mcp` tool
    /// calls' (`mcp`), which are listed only when asked for by name.
    pub source: Option<String>,
    /// LLM spans: the model.
    pub model: Option<String>,
    /// Roots: what the caller said about itself on the `/mcp` call that started the
    /// trace, its client's name (`mcp.client.name`) and one of its own ids for the call
    /// (`claudecode/toolUseId`, `vscode.conversationId`, `vscode.requestId`). Either
    /// lists `mcp` calls too when no source is named.
    pub client: Option<String>,
    pub caller_id: Option<String>,
    /// Continue after this `(start_us, span_id)`.
    pub after: Option<(i64, String)>,
    pub limit: usize,
}

impl SpanQuery {
    /// Whether `span` is of `kind` and passes this query's span filters (not the
    /// conversation: a turn's, matched on its row).
    pub fn selects(&self, kind: SpanKind, s: &SpanRecord) -> bool {
        s.kind == kind
            && self
                .model
                .as_ref()
                .is_none_or(|m| s.model.as_ref() == Some(m))
            && match self.status.as_deref() {
                Some("error") => s.error.is_some(),
                Some(_) => s.error.is_none(),
                None => true,
            }
            && self.since_us.is_none_or(|since| s.start_us >= since)
            && self.min_duration_us.is_none_or(|min| s.duration_us >= min)
            && self
                .after
                .as_ref()
                .is_none_or(|(start, id)| (s.start_us, s.span_id.as_str()) < (*start, id.as_str()))
    }
}

/// A trace as listed: its root span and what happened under it.
#[derive(Debug, Clone, Serialize)]
pub struct TraceSummary {
    #[serde(flatten)]
    pub root: SpanRecord,
    #[serde(flatten)]
    pub counts: TraceCounts,
}

/// What happened under a trace's root, counted over all its spans.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct TraceCounts {
    pub spans: i64,
    pub llm_calls: i64,
    /// Tool calls in the trace
    pub tool_calls: i64,
    /// Spans that failed anywhere in the trace
    pub failed_spans: i64,
    /// Over the trace's LLM calls
    pub input_tokens: i64,
    pub output_tokens: i64,
}

impl TraceSummary {
    /// The summary of a turn from its spans; `None` while its root has not arrived.
    fn of_turn(spans: Vec<SpanRecord>) -> Option<TraceSummary> {
        let count = |kind: SpanKind| spans.iter().filter(|s| s.kind == kind).count() as i64;
        let tokens = |read: fn(&SpanRecord) -> Option<i64>| spans.iter().filter_map(read).sum();
        Some(TraceSummary {
            counts: TraceCounts {
                spans: spans.len() as i64,
                llm_calls: count(SpanKind::Llm),
                tool_calls: count(SpanKind::Tool),
                failed_spans: spans.iter().filter(|s| s.error.is_some()).count() as i64,
                input_tokens: tokens(|s| s.input_tokens),
                output_tokens: tokens(|s| s.output_tokens),
            },
            root: spans.iter().find(|s| s.is_root)?.clone(),
        })
    }

    /// `error` when any step of the trace failed.
    pub fn status(&self) -> &'static str {
        if self.counts.failed_spans > 0 {
            "error"
        } else {
            "ok"
        }
    }
}

/// A page of rows and the cursor for the next one.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<(i64, String)>,
}

impl Store {
    /// Stores finished spans in one transaction, one row per turn (merged into the
    /// turn's row when part of it is stored already), then deletes what `prune` says in
    /// the same one. Returns the CPU time the store's thread spent on it, as
    /// [`Store::append_turns`] does.
    pub async fn append_spans(
        &self,
        spans: Vec<SpanRecord>,
        prune: Prune,
    ) -> Result<Duration, StoreError> {
        self.append_turns(TurnRows::of(&spans), prune).await
    }

    /// Stores turn rows made beforehand ([`TurnRows::of`]: the trace writer makes them
    /// before it takes the traces' writer connection, so readers queue less for it),
    /// then prunes, in one transaction. Returns the CPU time the store's thread spent
    /// on it (SQLite; zero on PostgreSQL, whose work is done by its server).
    pub async fn append_turns(
        &self,
        turns: TurnRows,
        prune: Prune,
    ) -> Result<Duration, StoreError> {
        let upsert = self.db.dialect().upsert_turn;
        let mut statements: Vec<(Sql, Vec<Bound>)> = turns
            .0
            .into_iter()
            .map(|values| (Sql::fixed(upsert).on_traces(), values))
            .collect();
        statements.extend(prune.statements());
        self.db.execute_all(statements).await
    }

    /// Traces, newest first, with their counts.
    pub async fn list_traces(&self, query: SpanQuery) -> Result<Page<TraceSummary>, StoreError> {
        let filter = trace_filter(&query);
        let sql = format!(
            "SELECT {TURN_COLUMNS} FROM trace_turns r WHERE {} \
             ORDER BY r.start_us DESC, r.root_span_id DESC LIMIT {}",
            filter.clauses.join(" AND "),
            query.limit + 1
        );
        let turns = self.read_turns(sql, filter.values).await?;
        let items = turns
            .into_iter()
            .filter_map(|t| TraceSummary::of_turn(t.spans))
            .collect();
        Ok(page(items, query.limit, |t| &t.root))
    }

    /// Spans of one kind across traces, newest first (`get_llm_calls`).
    pub async fn list_spans(
        &self,
        kind: SpanKind,
        query: SpanQuery,
    ) -> Result<Page<SpanRecord>, StoreError> {
        let wanted = |s: &SpanRecord| query.selects(kind, s);
        let items = self
            .newest_spans("1 = 1", query.since_us, query.limit + 1, wanted, |s| {
                s.start_us
            })
            .await?;
        Ok(page(items, query.limit, |s| s))
    }

    /// Every span of one trace, in start order.
    pub async fn trace_spans(&self, trace_id: &str) -> Result<Vec<SpanRecord>, StoreError> {
        let sql = format!("SELECT {TURN_COLUMNS} FROM trace_turns r WHERE r.trace_id = ?");
        let mut spans: Vec<SpanRecord> = self
            .read_turns(sql, vec![trace_id.into()])
            .await?
            .into_iter()
            .flat_map(|t| t.spans)
            .collect();
        spans.sort_by(|a, b| (a.start_us, &a.span_id).cmp(&(b.start_us, &b.span_id)));
        self.name_offered_tools(&mut spans).await?;
        Ok(spans)
    }

    /// One span by id: the turn that lists it in `span_ids` (a scan of that short
    /// column, not of every turn's JSON), then the span in it.
    pub async fn span(&self, span_id: &str) -> Result<Option<SpanRecord>, StoreError> {
        let sql = format!("SELECT {TURN_COLUMNS} FROM trace_turns r WHERE r.span_ids LIKE ?");
        let turns = self
            .read_turns(sql, vec![format!("%{span_id}%").into()])
            .await?;
        let found = turns
            .into_iter()
            .flat_map(|t| t.spans)
            .find(|s| s.span_id == span_id);
        let Some(mut span) = found else {
            return Ok(None);
        };
        self.name_offered_tools(std::slice::from_mut(&mut span))
            .await?;
        Ok(Some(span))
    }

    /// The LLM and tool spans of turns since `since_us`, oldest first, without their
    /// payloads (for the per-model and per-tool statistics of the bot's own work: an
    /// `/mcp` tool call's trace is one span, its root, left out by its source).
    pub async fn step_spans_since(&self, since_us: i64) -> Result<Vec<SpanRecord>, StoreError> {
        let sql = "SELECT trace_id, span_id, parent_span_id, is_root, kind, name, source, conversation_id, \
                   start_us, duration_us, error, model, tool, input_tokens, output_tokens, '{}', root_span_id \
                   FROM trace_spans WHERE kind IN ('llm', 'tool') AND coalesce(source, '') <> 'mcp' \
                   AND start_us >= ? ORDER BY start_us";
        self.read_spans(sql.to_string(), vec![since_us.into()])
            .await
    }

    /// The most recent failed span (by its end), if any, of a turn: a failed `/mcp`
    /// tool call is its caller's mistake, not the bot's failure.
    pub async fn last_failed_span(&self) -> Result<Option<SpanRecord>, StoreError> {
        let newest = self
            .newest_spans(
                &format!("r.failed > 0 AND {NOT_AN_MCP_CALL}"),
                None,
                1,
                |s| s.error.is_some(),
                |s| s.start_us + s.duration_us,
            )
            .await?;
        Ok(newest.into_iter().next())
    }

    /// The newest `count` spans that `wanted` accepts, newest first by `newness` (then
    /// span id), from the turns that match `turns` (a condition on `trace_turns r`) and
    /// end at or after `since_us`. It walks the turns by `end_us`, the latest end of any
    /// of their spans, newest first, a few at a time: no span of a turn starts or ends
    /// after its `end_us`, so once `count` spans newer than the next turn's `end_us` are
    /// found, no older turn can hold a newer one and the walk stops.
    async fn newest_spans(
        &self,
        turns: &str,
        since_us: Option<i64>,
        count: usize,
        wanted: impl Fn(&SpanRecord) -> bool,
        newness: fn(&SpanRecord) -> i64,
    ) -> Result<Vec<SpanRecord>, StoreError> {
        let mut found: Vec<SpanRecord> = Vec::new();
        let mut after: Option<(i64, i64)> = None;
        loop {
            let mut filter = Filter::default();
            filter.push(turns, None);
            if let Some(since) = since_us {
                filter.push("r.end_us >= ?", Some(since.into()));
            }
            if let Some((end_us, id)) = after {
                filter.push("(r.end_us, r.id) < (?, ?)", [end_us.into(), id.into()]);
            }
            let sql = format!(
                "SELECT {TURN_COLUMNS} FROM trace_turns r WHERE {} \
                 ORDER BY r.end_us DESC, r.id DESC LIMIT {WALK_CHUNK}",
                filter.clauses.join(" AND ")
            );
            let rows = self.read_turns(sql, filter.values).await?;
            let last = rows.last().map(|t| (t.end_us, t.id));
            let more = rows.len() == WALK_CHUNK;
            found.extend(rows.into_iter().flat_map(|t| t.spans).filter(&wanted));
            found.sort_by(|a, b| (newness(b), &b.span_id).cmp(&(newness(a), &a.span_id)));
            found.truncate(count);
            let settled = found.len() == count
                && last.is_some_and(|(end_us, _)| found.iter().all(|s| newness(s) > end_us));
            if !more || settled {
                self.name_offered_tools(&mut found).await?;
                return Ok(found);
            }
            after = last;
        }
    }

    /// Runs a query for turn rows ([`TURN_COLUMNS`], anonymous `?` placeholders) on
    /// either backend. A row whose spans do not read as spans (edited by hand) is skipped.
    async fn read_turns(
        &self,
        sql: String,
        values: Vec<Bound>,
    ) -> Result<Vec<TurnRead>, StoreError> {
        let rows: Vec<TurnRow> = self.db.query(Sql::varying(sql).on_traces(), values).await?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                let mut spans: Vec<SpanRecord> = serde_json::from_str(&row.spans).ok()?;
                for span in &mut spans {
                    span.trace_id.clone_from(&row.trace_id);
                    span.root_span_id.clone_from(&row.root_span_id);
                }
                Some(TurnRead {
                    spans,
                    end_us: row.end_us,
                    id: row.id,
                })
            })
            .collect())
    }

    /// Runs a query over the `trace_spans` view (anonymous `?` placeholders) on either
    /// backend.
    async fn read_spans(
        &self,
        sql: String,
        values: Vec<Bound>,
    ) -> Result<Vec<SpanRecord>, StoreError> {
        self.db.query(Sql::varying(sql).on_traces(), values).await
    }
}

/// A span as its turn's row stores it: without the ids the row holds (trace, root) and
/// without its empty fields, so a turn's row stays small (a stored turn of a root and
/// an LLM call is about a third shorter; see docs/performance.md §6).
#[derive(Serialize)]
struct StoredSpan<'a> {
    span_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_span_id: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    is_root: bool,
    kind: SpanKind,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation_id: Option<&'a str>,
    start_us: i64,
    duration_us: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    attributes: &'a Map<String, Value>,
}

impl<'a> StoredSpan<'a> {
    fn of(s: &'a SpanRecord) -> StoredSpan<'a> {
        StoredSpan {
            span_id: &s.span_id,
            parent_span_id: s.parent_span_id.as_deref(),
            is_root: s.is_root,
            kind: s.kind,
            name: &s.name,
            source: s.source.as_deref(),
            conversation_id: s.conversation_id.as_deref(),
            start_us: s.start_us,
            duration_us: s.duration_us,
            error: s.error.as_deref(),
            model: s.model.as_deref(),
            tool: s.tool.as_deref(),
            input_tokens: s.input_tokens,
            output_tokens: s.output_tokens,
            attributes: &s.attributes,
        }
    }
}

/// What [`Store::read_turns`] reads of a turn row: its spans as text (PostgreSQL keeps
/// them as `jsonb`), when its last span ended, its row id.
const TURN_COLUMNS: &str = "CAST(r.spans AS TEXT), r.end_us, r.id, r.trace_id, r.root_span_id";

/// A turn row as either backend hands it back: [`TURN_COLUMNS`].
struct TurnRow {
    spans: String,
    end_us: i64,
    id: i64,
    trace_id: String,
    root_span_id: String,
}

impl FromRow for TurnRow {
    fn from_row<R: RowRead>(r: &R) -> Result<TurnRow, R::Error> {
        Ok(TurnRow {
            spans: r.text(0)?,
            end_us: r.int(1)?,
            id: r.int(2)?,
            trace_id: r.text(3)?,
            root_span_id: r.text(4)?,
        })
    }
}

/// A turn row as read.
struct TurnRead {
    spans: Vec<SpanRecord>,
    end_us: i64,
    id: i64,
}

/// How many turns [`Store::newest_spans`] reads per statement.
const WALK_CHUNK: usize = 32;

/// Stores a turn, or merges a part of it into its row: the turn's own fields come from
/// its root (the part that has one), its spans are appended and its failures added up.
/// The two backends differ only in how the spans arrive and how two arrays join.
macro_rules! upsert_turn {
    ($spans:literal, $joined:literal) => {
        concat!(
            "INSERT INTO trace_turns (trace_id, root_span_id, has_root, start_us, duration_us, \
             end_us, conversation_id, source, failed, span_ids, spans) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ",
            $spans,
            ") ON CONFLICT (trace_id, root_span_id) DO UPDATE SET \
             has_root = CASE WHEN excluded.has_root = 1 THEN 1 ELSE trace_turns.has_root END, \
             start_us = CASE WHEN excluded.has_root = 1 THEN excluded.start_us \
               WHEN trace_turns.has_root = 1 OR trace_turns.start_us < excluded.start_us \
               THEN trace_turns.start_us ELSE excluded.start_us END, \
             duration_us = CASE WHEN excluded.has_root = 1 THEN excluded.duration_us \
               ELSE trace_turns.duration_us END, \
             end_us = CASE WHEN excluded.end_us > trace_turns.end_us THEN excluded.end_us \
               ELSE trace_turns.end_us END, \
             conversation_id = coalesce(trace_turns.conversation_id, excluded.conversation_id), \
             source = coalesce(trace_turns.source, excluded.source), \
             failed = trace_turns.failed + excluded.failed, \
             span_ids = trace_turns.span_ids || ' ' || excluded.span_ids, \
             spans = ",
            $joined
        )
    };
}

/// SQLite keeps the spans as JSON text: two arrays of objects join by dropping the
/// first's `]` and the second's `[`.
pub(super) const UPSERT_TURN_SQLITE: &str = upsert_turn!(
    "?11",
    "substr(trace_turns.spans, 1, length(trace_turns.spans) - 1) || ',' || substr(excluded.spans, 2)"
);
pub(super) const UPSERT_TURN_POSTGRES: &str =
    upsert_turn!("?11::text::jsonb", "trace_turns.spans || excluded.spans");

/// The rows a batch of spans makes, one per turn, ready to store: each holds the values
/// of [`UPSERT_TURN_SQLITE`] in order (the turn's fields, its span ids, then its spans as
/// a JSON array).
pub struct TurnRows(pub(super) Vec<Vec<Bound>>);

impl TurnRows {
    pub fn of(spans: &[SpanRecord]) -> TurnRows {
        let mut turns: Vec<Vec<&SpanRecord>> = Vec::new();
        let mut index: HashMap<(&str, &str), usize> = HashMap::new();
        for span in spans {
            let key = (span.trace_id.as_str(), span.root_span_id.as_str());
            let at = *index.entry(key).or_insert_with(|| {
                turns.push(Vec::new());
                turns.len() - 1
            });
            turns[at].push(span);
        }
        TurnRows(turns.iter().map(|turn| turn_row(turn)).collect())
    }
}

/// The row of one turn's spans (all, or the part in this batch), never empty.
fn turn_row(turn: &[&SpanRecord]) -> Vec<Bound> {
    let root = turn.iter().find(|s| s.is_root);
    let first = turn[0];
    let start_us = root.map_or_else(
        || turn.iter().map(|s| s.start_us).min().unwrap_or_default(),
        |r| r.start_us,
    );
    let end_us = turn
        .iter()
        .map(|s| s.start_us + s.duration_us)
        .max()
        .unwrap_or_default();
    let conversation_id = root
        .and_then(|r| r.conversation_id.as_deref())
        .or_else(|| turn.iter().find_map(|s| s.conversation_id.as_deref()));
    let failed = turn.iter().filter(|s| s.error.is_some()).count() as i64;
    let span_ids: Vec<&str> = turn.iter().map(|s| s.span_id.as_str()).collect();
    let spans: Vec<StoredSpan> = turn.iter().map(|s| StoredSpan::of(s)).collect();
    vec![
        first.trace_id.as_str().into(),
        first.root_span_id.as_str().into(),
        i64::from(root.is_some()).into(),
        start_us.into(),
        root.map_or(0, |r| r.duration_us).into(),
        end_us.into(),
        conversation_id.into(),
        root.and_then(|r| r.source.as_deref()).into(),
        failed.into(),
        span_ids.join(" ").into(),
        serde_json::to_string(&spans).unwrap_or_default().into(),
    ]
}

/// Keeps `limit` items; the cursor points after the last one kept when more exist.
fn page<T>(mut items: Vec<T>, limit: usize, span: impl Fn(&T) -> &SpanRecord) -> Page<T> {
    let more = items.len() > limit;
    items.truncate(limit);
    let next = more
        .then(|| {
            items
                .last()
                .map(|t| (span(t).start_us, span(t).span_id.clone()))
        })
        .flatten();
    Page { items, next }
}

/// A span from a row of the `trace_spans` view, its columns in the view's order.
impl FromRow for SpanRecord {
    fn from_row<R: RowRead>(r: &R) -> Result<SpanRecord, R::Error> {
        let attributes = match serde_json::from_str::<Value>(&r.text(15)?) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        Ok(SpanRecord {
            trace_id: r.text(0)?,
            span_id: r.text(1)?,
            parent_span_id: r.optional_text(2)?,
            is_root: r.flag(3)?,
            kind: SpanKind::parse(&r.text(4)?),
            name: r.text(5)?.into(),
            source: r.optional_text(6)?.map(Cow::Owned),
            conversation_id: r.optional_text(7)?,
            start_us: r.int(8)?,
            duration_us: r.int(9)?,
            error: r.optional_text(10)?,
            model: r.optional_text(11)?,
            tool: r.optional_text(12)?.map(Arc::from),
            input_tokens: r.optional_int(13)?,
            output_tokens: r.optional_int(14)?,
            attributes,
            root_span_id: r.text(16)?,
            mcp_request: None,
        })
    }
}
