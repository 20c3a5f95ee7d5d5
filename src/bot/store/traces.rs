//! Turn traces in the store: one row per span in `trace_spans`. A turn is the spans
//! that share a `root_span_id` (its root has `is_root = 1`); a trace id may hold several
//! turns when a caller reuses its trace for many requests. Written in batches by the
//! trace writer and kept within a count (of turns) and an age.
//!
//! Rows arrive already redacted and cut by the writer; this module only stores and
//! reads them. Pages run newest first and continue from an opaque `start_us:span_id`
//! cursor, so rows written meanwhile neither repeat nor vanish.

use rusqlite::{Connection, params, params_from_iter, types::Value as SqlValue};
use serde::Serialize;
use serde_json::{Map, Value};

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
    /// Stores finished spans in one transaction (a span stored twice keeps its last
    /// copy). With `limits` = (traces to keep, cutoff in µs), the same transaction then
    /// keeps the newest traces and deletes every span that started before the cutoff.
    pub async fn append_spans(
        &self,
        spans: Vec<SpanRecord>,
        limits: Option<(usize, i64)>,
    ) -> Result<(), StoreError> {
        self.call(move |c| {
            let tx = c.transaction()?;
            {
                let mut insert = tx.prepare_cached(&format!(
                    "INSERT OR REPLACE INTO trace_spans ({SPAN_COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
                ))?;
                for s in &spans {
                    insert.execute(params![
                        s.trace_id,
                        s.span_id,
                        s.parent_span_id,
                        s.is_root,
                        s.kind.as_str(),
                        s.name,
                        s.source,
                        s.conversation_id,
                        s.start_us,
                        s.duration_us,
                        s.error,
                        s.model,
                        s.tool,
                        s.input_tokens,
                        s.output_tokens,
                        serde_json::to_string(&s.attributes).unwrap_or_default(),
                        s.root_span_id,
                    ])?;
                }
            }
            if let Some((max_traces, cutoff_us)) = limits {
                prune(&tx, max_traces, cutoff_us)?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Traces, newest first, with their counts.
    pub async fn list_traces(&self, query: SpanQuery) -> Result<Page<TraceSummary>, StoreError> {
        self.call(move |c| {
            let mut filter = Filter::new("r");
            filter.push("r.is_root = 1", None);
            filter.common(&query);
            if let Some(id) = &query.conversation_id {
                filter.push("r.conversation_id = ?", Some(id.clone().into()));
            }
            if let Some(source) = &query.source {
                filter.push("r.source = ?", Some(source.clone().into()));
            }
            match query.status.as_deref() {
                Some("error") => filter.push(FAILED_TRACE, None),
                Some(_) => filter.push(&format!("NOT {FAILED_TRACE}"), None),
                None => {}
            }
            let sql = format!(
                "SELECT {}, (SELECT json_object('spans', count(*), 'llm', sum(kind = 'llm'), \
                 'tool', sum(kind = 'tool'), 'failed', sum(error IS NOT NULL), \
                 'in', total(input_tokens), 'out', total(output_tokens)) \
                 FROM trace_spans s WHERE s.root_span_id = r.span_id) \
                 FROM trace_spans r WHERE {} ORDER BY r.start_us DESC, r.span_id DESC LIMIT {}",
                prefixed("r"),
                filter.clauses.join(" AND "),
                query.limit + 1
            );
            let items = filter.run(c, &sql, |r| {
                let root = span_from_row(r)?;
                let counts: Value =
                    serde_json::from_str(&r.get::<_, String>(17)?).unwrap_or_default();
                let count = |k: &str| counts[k].as_f64().unwrap_or(0.0) as i64;
                Ok(TraceSummary {
                    spans: count("spans"),
                    llm_calls: count("llm"),
                    tool_calls: count("tool"),
                    failed_spans: count("failed"),
                    input_tokens: count("in"),
                    output_tokens: count("out"),
                    root,
                })
            })?;
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
        self.call(move |c| {
            let mut filter = Filter::new("r");
            filter.push("r.kind = ?", Some(kind.as_str().to_string().into()));
            filter.common(&query);
            if let Some(model) = &query.model {
                filter.push("r.model = ?", Some(model.clone().into()));
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
            let items = filter.run(c, &sql, span_from_row)?;
            Ok(page(items, query.limit, |s| s))
        })
        .await
    }

    /// Every span of one trace, in start order.
    pub async fn trace_spans(&self, trace_id: &str) -> Result<Vec<SpanRecord>, StoreError> {
        let trace_id = trace_id.to_string();
        self.call(move |c| {
            let mut statement = c.prepare(&format!(
                "SELECT {SPAN_COLUMNS} FROM trace_spans WHERE trace_id = ?1 ORDER BY start_us, span_id"
            ))?;
            let rows = statement
                .query_map(params![trace_id], span_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// One span by id.
    pub async fn span(&self, span_id: &str) -> Result<Option<SpanRecord>, StoreError> {
        let span_id = span_id.to_string();
        self.call(move |c| {
            let mut statement = c.prepare(&format!(
                "SELECT {SPAN_COLUMNS} FROM trace_spans WHERE span_id = ?1"
            ))?;
            let mut rows = statement.query_map(params![span_id], span_from_row)?;
            Ok(rows.next().transpose()?)
        })
        .await
    }

    /// The LLM and tool spans since `since_us`, oldest first, without their payloads
    /// (for the per-model and per-tool statistics).
    pub async fn step_spans_since(&self, since_us: i64) -> Result<Vec<SpanRecord>, StoreError> {
        self.call(move |c| {
            let mut statement = c.prepare(
                "SELECT trace_id, span_id, parent_span_id, is_root, kind, name, source, conversation_id, \
                 start_us, duration_us, error, model, tool, input_tokens, output_tokens, '{}', root_span_id \
                 FROM trace_spans WHERE kind IN ('llm', 'tool') AND start_us >= ?1 ORDER BY start_us",
            )?;
            let rows = statement
                .query_map(params![since_us], span_from_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// The most recent failed span, if any.
    pub async fn last_failed_span(&self) -> Result<Option<SpanRecord>, StoreError> {
        self.call(move |c| {
            let mut statement = c.prepare(&format!(
                "SELECT {SPAN_COLUMNS} FROM trace_spans WHERE error IS NOT NULL \
                 ORDER BY start_us + duration_us DESC LIMIT 1"
            ))?;
            let mut rows = statement.query_map([], span_from_row)?;
            Ok(rows.next().transpose()?)
        })
        .await
    }
}

/// Keeps the newest `max_traces` turns and deletes every span that started before
/// `cutoff_us`.
fn prune(tx: &rusqlite::Transaction, max_traces: usize, cutoff_us: i64) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM trace_spans WHERE root_span_id IN (SELECT span_id FROM trace_spans \
         WHERE is_root = 1 ORDER BY start_us DESC LIMIT -1 OFFSET ?1)",
        params![max_traces as i64],
    )?;
    tx.execute(
        "DELETE FROM trace_spans WHERE start_us < ?1",
        params![cutoff_us],
    )?;
    Ok(())
}

/// A trace with a failed span anywhere in it.
const FAILED_TRACE: &str =
    "EXISTS (SELECT 1 FROM trace_spans f WHERE f.root_span_id = r.span_id AND f.error IS NOT NULL)";

/// The span columns qualified by a table alias.
fn prefixed(alias: &str) -> String {
    SPAN_COLUMNS
        .split(", ")
        .map(|c| format!("{alias}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// WHERE clauses with their positional values, built up one filter at a time.
struct Filter {
    alias: &'static str,
    clauses: Vec<String>,
    values: Vec<SqlValue>,
}

impl Filter {
    fn new(alias: &'static str) -> Filter {
        Filter {
            alias,
            clauses: Vec::new(),
            values: Vec::new(),
        }
    }

    fn push(&mut self, clause: &str, value: Option<SqlValue>) {
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
            self.values.push(span.clone().into());
        }
    }

    fn run<T>(
        &self,
        c: &Connection,
        sql: &str,
        read: impl FnMut(&rusqlite::Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        let mut statement = c.prepare(sql)?;
        let rows = statement
            .query_map(params_from_iter(self.values.iter()), read)?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
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

fn span_from_row(r: &rusqlite::Row) -> rusqlite::Result<SpanRecord> {
    let attributes: String = r.get(15)?;
    let attributes = match serde_json::from_str::<Value>(&attributes) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    Ok(SpanRecord {
        trace_id: r.get(0)?,
        span_id: r.get(1)?,
        parent_span_id: r.get(2)?,
        is_root: r.get(3)?,
        kind: SpanKind::parse(&r.get::<_, String>(4)?),
        name: r.get(5)?,
        source: r.get(6)?,
        conversation_id: r.get(7)?,
        start_us: r.get(8)?,
        duration_us: r.get(9)?,
        error: r.get(10)?,
        model: r.get(11)?,
        tool: r.get(12)?,
        input_tokens: r.get(13)?,
        output_tokens: r.get(14)?,
        attributes,
        root_span_id: r.get(16)?,
    })
}
