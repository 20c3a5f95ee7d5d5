//! The WHERE clauses of the trace listings, shared by both backends: `list_traces`'
//! filters on a turn's row (conversation, source, status, duration, time, the caller's
//! client and ids), with their values for anonymous `?` placeholders.

use super::rows::Bound;
use super::trace_retention::NOT_AN_MCP_CALL;
use super::traces::SpanQuery;

/// The filter of a trace listing: turns whose root is stored, and the query's
/// conditions, on the columns of `trace_turns`.
pub(super) fn trace_filter(query: &SpanQuery) -> Filter {
    let mut filter = Filter::default();
    filter.push("r.has_root = 1", None);
    if let Some(since) = query.since_us {
        filter.push("r.start_us >= ?", Some(since.into()));
    }
    if let Some(min) = query.min_duration_us {
        filter.push("r.duration_us >= ?", Some(min.into()));
    }
    if let Some((start, root)) = &query.after {
        filter.push(
            "(r.start_us, r.root_span_id) < (?, ?)",
            [(*start).into(), root.as_str().into()],
        );
    }
    if let Some(id) = &query.conversation_id {
        filter.push("r.conversation_id = ?", Some(id.as_str().into()));
    }
    let by_caller = query.client.is_some() || query.caller_id.is_some();
    match &query.source {
        Some(source) => filter.push("r.source = ?", Some(source.as_str().into())),
        None if by_caller => {}
        None => filter.push(NOT_AN_MCP_CALL, None),
    }
    // The turn's spans are JSON: a value is found as the whole JSON string it is there
    // (PostgreSQL's JSONB text puts a space after a key's colon, SQLite's text none).
    if let Some(client) = &query.client {
        let key = format!("\"{}\":", crate::trace_context::CLIENT_NAME);
        let value = json_string_pattern(client);
        filter.push(
            "(CAST(r.spans AS TEXT) LIKE ? ESCAPE '\\' OR CAST(r.spans AS TEXT) LIKE ? ESCAPE '\\')",
            [
                format!("%{}{value}%", like_escaped(&key)).into(),
                format!("%{} {value}%", like_escaped(&key)).into(),
            ],
        );
    }
    if let Some(id) = &query.caller_id {
        filter.push(
            "CAST(r.spans AS TEXT) LIKE ? ESCAPE '\\'",
            Some(format!("%{}%", json_string_pattern(id)).into()),
        );
    }
    match query.status.as_deref() {
        Some("error") => filter.push("r.failed > 0", None),
        Some(_) => filter.push("r.failed = 0", None),
        None => {}
    }
    filter
}

/// `text` as a JSON string (quotes and escapes) made safe inside a `LIKE … ESCAPE '\'`
/// pattern.
fn json_string_pattern(text: &str) -> String {
    like_escaped(&serde_json::Value::from(text).to_string())
}

/// `text` with `LIKE`'s wildcards (and the escape itself) escaped by `\`.
fn like_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// WHERE clauses with their values for anonymous `?` placeholders, in order, built up
/// one condition at a time.
#[derive(Default)]
pub(super) struct Filter {
    pub(super) clauses: Vec<String>,
    pub(super) values: Vec<Bound>,
}

impl Filter {
    pub(super) fn push(&mut self, clause: &str, values: impl IntoIterator<Item = Bound>) {
        self.clauses.push(clause.to_string());
        self.values.extend(values);
    }
}
