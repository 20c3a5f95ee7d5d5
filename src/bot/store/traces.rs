//! Turn traces in the store: one row per span in `trace_spans`. A turn is the spans
//! that share a `root_span_id` (its root has `is_root = 1`); a trace id may hold several
//! turns when a caller reuses its trace for many requests. Written in batches by the
//! trace writer and kept within a count (of turns) and an age.
//!
//! Rows arrive already redacted and cut by the writer; this module only stores and
//! reads them. Pages run newest first and continue from an opaque `start_us:span_id`
//! cursor, so rows written meanwhile neither repeat nor vanish.

use rusqlite::params_from_iter;
use serde::Serialize;
use serde_json::{Map, Value};

use super::rows::{Bound, RowRead};
use super::{Store, StoreError};
use crate::bot::trace::{SpanKind, SpanRecord};

/// The columns of `trace_spans`, in the order [`span_from_row`] reads them.
const SPAN_COLUMNS: &str = "trace_id, span_id, parent_span_id, is_root, kind, name, source, \
    conversation_id, start_us, duration_us, error, model, tool, input_tokens, output_tokens, attributes, \
    root_span_id";

/// Which traces (or spans) a page holds.
#[derive(Debug, Clone, Default)]
pub struct SpanQuery {
    pub conversation_id: Option<String>,
    /// `ok` or `error`.
    pub status: Option<String>,
    pub since_us: Option<i64>,
    pub min_duration_us: Option<i64>,
    /// Roots: what started the trace.
    pub source: Option<String>,
    /// LLM spans: the model.
    pub model: Option<String>,
    /// Continue after this `(start_us, span_id)`.
    pub after: Option<(i64, String)>,
    pub limit: usize,
}

/// What [`Store::append_spans`] deletes in the transaction that stores the spans.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prune {
    /// Keep this many turns, the newest; the others go, spans and all.
    pub keep_turns: Option<usize>,
    /// Delete every span that started before this (µs since the epoch).
    pub before_us: Option<i64>,
}

/// A trace as listed: its root span and what happened under it.
#[derive(Debug, Clone, Serialize)]
pub struct TraceSummary {
    #[serde(flatten)]
    pub root: SpanRecord,
    pub spans: i64,
    pub llm_calls: i64,
    pub tool_calls: i64,
    /// Spans that failed anywhere in the trace.
    pub failed_spans: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

impl TraceSummary {
    /// `error` when any step of the trace failed.
    pub fn status(&self) -> &'static str {
        if self.failed_spans > 0 { "error" } else { "ok" }
    }
}

/// A page of rows and the cursor for the next one.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<(i64, String)>,
}

impl Store {
    /// Stores finished spans in one transaction, then deletes what `prune` says in the
    /// same one. Each span is stored once (the tracer sends a span when it ends, and
    /// span ids are random), so this is a plain insert: a span id stored twice fails the
    /// batch.
    pub async fn append_spans(
        &self,
        spans: Vec<SpanRecord>,
        prune: Prune,
    ) -> Result<(), StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.append_spans(spans, prune).await;
        }
        self.call(move |c| {
            let tx = c.transaction()?;
            {
                let mut insert = tx.prepare_cached(INSERT_SPAN)?;
                for s in &spans {
                    insert.execute(params_from_iter(span_values(s)))?;
                }
            }
            if let Some(keep) = prune.keep_turns {
                tx.prepare_cached(PRUNE_TURNS_SQLITE)?
                    .execute([keep as i64])?;
            }
            if let Some(before_us) = prune.before_us {
                tx.prepare_cached(PRUNE_OLD)?.execute([before_us])?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Traces, newest first, with their counts.
    pub async fn list_traces(&self, query: SpanQuery) -> Result<Page<TraceSummary>, StoreError> {
        let filter = trace_filter(&query);
        if let Some(pg) = self.postgres() {
            let items = pg.list_traces(&filter, query.limit + 1).await?;
            return Ok(page(items, query.limit, |t| &t.root));
        }
        self.call(move |c| {
            let sql = format!(
                "SELECT {}, (SELECT json_object('spans', count(*), 'llm', sum(kind = 'llm'), \
                 'tool', sum(kind = 'tool'), 'failed', sum(error IS NOT NULL), \
                 'in', total(input_tokens), 'out', total(output_tokens)) \
                 FROM trace_spans s WHERE {IN_TURN}) \
                 FROM trace_spans r WHERE {} ORDER BY r.start_us DESC, r.span_id DESC LIMIT {}",
                prefixed("r"),
                filter.clauses.join(" AND "),
                query.limit + 1
            );
            let mut statement = c.prepare(&sql)?;
            let items = statement
                .query_map(params_from_iter(filter.values.iter()), |r| {
                    let counts: Value =
                        serde_json::from_str(&r.get::<_, String>(17)?).unwrap_or_default();
                    let count = |k: &str| counts[k].as_f64().unwrap_or(0.0) as i64;
                    Ok(TraceSummary {
                        root: span_from_row(r)?,
                        spans: count("spans"),
                        llm_calls: count("llm"),
                        tool_calls: count("tool"),
                        failed_spans: count("failed"),
                        input_tokens: count("in"),
                        output_tokens: count("out"),
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(page(items, query.limit, |t| &t.root))
        })
        .await
    }

    /// Spans of one kind across traces, newest first (`get_llm_calls`).
    pub async fn list_spans(
        &self,
        kind: SpanKind,
        query: SpanQuery,
    ) -> Result<Page<SpanRecord>, StoreError> {
        let mut filter = Filter::new("r");
        filter.push("r.kind = ?", Some(kind.as_str().into()));
        filter.common(&query);
        if let Some(model) = &query.model {
            filter.push("r.model = ?", Some(model.as_str().into()));
        }
        match query.status.as_deref() {
            Some("error") => filter.push("r.error IS NOT NULL", None),
            Some(_) => filter.push("r.error IS NULL", None),
            None => {}
        }
        let sql = format!(
            "SELECT {} FROM trace_spans r WHERE {} ORDER BY r.start_us DESC, r.span_id DESC LIMIT {}",
            prefixed("r"),
            filter.clauses.join(" AND "),
            query.limit + 1
        );
        let items = self.read_spans(sql, filter.values).await?;
        Ok(page(items, query.limit, |s| s))
    }

    /// Every span of one trace, in start order.
    pub async fn trace_spans(&self, trace_id: &str) -> Result<Vec<SpanRecord>, StoreError> {
        let sql = format!(
            "SELECT {SPAN_COLUMNS} FROM trace_spans WHERE trace_id = ? ORDER BY start_us, span_id"
        );
        self.read_spans(sql, vec![trace_id.into()]).await
    }

    /// One span by id.
    pub async fn span(&self, span_id: &str) -> Result<Option<SpanRecord>, StoreError> {
        let sql = format!("SELECT {SPAN_COLUMNS} FROM trace_spans WHERE span_id = ?");
        Ok(self
            .read_spans(sql, vec![span_id.into()])
            .await?
            .into_iter()
            .next())
    }

    /// The LLM and tool spans since `since_us`, oldest first, without their payloads
    /// (for the per-model and per-tool statistics).
    pub async fn step_spans_since(&self, since_us: i64) -> Result<Vec<SpanRecord>, StoreError> {
        let sql = "SELECT trace_id, span_id, parent_span_id, is_root, kind, name, source, conversation_id, \
                   start_us, duration_us, error, model, tool, input_tokens, output_tokens, '{}', root_span_id \
                   FROM trace_spans WHERE kind IN ('llm', 'tool') AND start_us >= ? ORDER BY start_us";
        self.read_spans(sql.to_string(), vec![since_us.into()])
            .await
    }

    /// The most recent failed span, if any.
    pub async fn last_failed_span(&self) -> Result<Option<SpanRecord>, StoreError> {
        let sql = format!(
            "SELECT {SPAN_COLUMNS} FROM trace_spans WHERE error IS NOT NULL \
             ORDER BY start_us + duration_us DESC LIMIT 1"
        );
        Ok(self.read_spans(sql, Vec::new()).await?.into_iter().next())
    }

    /// Runs a span query (anonymous `?` placeholders) on either backend.
    async fn read_spans(
        &self,
        sql: String,
        values: Vec<Bound>,
    ) -> Result<Vec<SpanRecord>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.read_spans(&sql, &values).await;
        }
        self.call(move |c| {
            let mut statement = c.prepare(&sql)?;
            let rows = statement
                .query_map(params_from_iter(values.iter()), |r| span_from_row(r))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }
}

/// Stores a span (both backends speak it).
pub(super) const INSERT_SPAN: &str = "INSERT INTO trace_spans (trace_id, span_id, parent_span_id, \
    is_root, kind, name, source, conversation_id, start_us, duration_us, error, model, tool, \
    input_tokens, output_tokens, attributes, root_span_id) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";

/// The spans `s` of the turn whose root is `r`. A turn is looked up by its trace id and
/// root span id together: the one index `trace_spans_by_turn` serves both a trace and a
/// turn (migration 11).
pub(super) const IN_TURN: &str = "s.trace_id = r.trace_id AND s.root_span_id = r.span_id";

/// Keeps the newest `?1` turns (SQLite spells "no limit" `LIMIT -1`; PostgreSQL leaves
/// the limit out).
const PRUNE_TURNS_SQLITE: &str = "DELETE FROM trace_spans WHERE (trace_id, root_span_id) IN \
    (SELECT trace_id, span_id FROM trace_spans WHERE is_root = 1 \
    ORDER BY start_us DESC LIMIT -1 OFFSET ?1)";
pub(super) const PRUNE_TURNS_POSTGRES: &str = "DELETE FROM trace_spans WHERE (trace_id, root_span_id) IN \
    (SELECT trace_id, span_id FROM trace_spans WHERE is_root = 1 \
    ORDER BY start_us DESC OFFSET $1)";

/// Deletes every span that started before the cutoff.
pub(super) const PRUNE_OLD: &str = "DELETE FROM trace_spans WHERE start_us < ?1";

/// A span's values in the order of [`INSERT_SPAN`].
pub(super) fn span_values(s: &SpanRecord) -> Vec<Bound> {
    vec![
        s.trace_id.as_str().into(),
        s.span_id.as_str().into(),
        s.parent_span_id.as_deref().into(),
        i64::from(s.is_root).into(),
        s.kind.as_str().into(),
        s.name.as_str().into(),
        s.source.as_deref().into(),
        s.conversation_id.as_deref().into(),
        s.start_us.into(),
        s.duration_us.into(),
        s.error.as_deref().into(),
        s.model.as_deref().into(),
        s.tool.as_deref().into(),
        s.input_tokens.into(),
        s.output_tokens.into(),
        serde_json::to_string(&s.attributes)
            .unwrap_or_default()
            .into(),
        s.root_span_id.as_str().into(),
    ]
}

/// The filter of a trace listing: roots, and the query's conditions.
fn trace_filter(query: &SpanQuery) -> Filter {
    let mut filter = Filter::new("r");
    filter.push("r.is_root = 1", None);
    filter.common(query);
    if let Some(id) = &query.conversation_id {
        filter.push("r.conversation_id = ?", Some(id.as_str().into()));
    }
    if let Some(source) = &query.source {
        filter.push("r.source = ?", Some(source.as_str().into()));
    }
    // A trace with a failed span anywhere in it.
    let failed =
        format!("EXISTS (SELECT 1 FROM trace_spans s WHERE {IN_TURN} AND s.error IS NOT NULL)");
    match query.status.as_deref() {
        Some("error") => filter.push(&failed, None),
        Some(_) => filter.push(&format!("NOT {failed}"), None),
        None => {}
    }
    filter
}

/// The span columns qualified by a table alias.
pub(super) fn prefixed(alias: &str) -> String {
    SPAN_COLUMNS
        .split(", ")
        .map(|c| format!("{alias}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// WHERE clauses with their values for anonymous `?` placeholders, in order, built up
/// one filter at a time.
pub(super) struct Filter {
    alias: &'static str,
    pub(super) clauses: Vec<String>,
    pub(super) values: Vec<Bound>,
}

impl Filter {
    fn new(alias: &'static str) -> Filter {
        Filter {
            alias,
            clauses: Vec::new(),
            values: Vec::new(),
        }
    }

    fn push(&mut self, clause: &str, value: Option<Bound>) {
        self.clauses.push(clause.to_string());
        self.values.extend(value);
    }

    /// The filters every listing shares: since, minimum duration, cursor.
    fn common(&mut self, query: &SpanQuery) {
        let a = self.alias;
        if let Some(since) = query.since_us {
            self.push(&format!("{a}.start_us >= ?"), Some(since.into()));
        }
        if let Some(min) = query.min_duration_us {
            self.push(&format!("{a}.duration_us >= ?"), Some(min.into()));
        }
        if let Some((start, span)) = &query.after {
            self.clauses
                .push(format!("({a}.start_us, {a}.span_id) < (?, ?)"));
            self.values.push((*start).into());
            self.values.push(span.as_str().into());
        }
    }
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

pub(super) fn span_from_row<R: RowRead>(r: &R) -> Result<SpanRecord, R::Error> {
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
        name: r.text(5)?,
        source: r.optional_text(6)?,
        conversation_id: r.optional_text(7)?,
        start_us: r.int(8)?,
        duration_us: r.int(9)?,
        error: r.optional_text(10)?,
        model: r.optional_text(11)?,
        tool: r.optional_text(12)?,
        input_tokens: r.optional_int(13)?,
        output_tokens: r.optional_int(14)?,
        attributes,
        root_span_id: r.text(16)?,
    })
}
