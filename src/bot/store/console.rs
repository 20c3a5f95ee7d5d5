//! `db_query`'s console: one SQL statement of any kind, as the user wrote it, on
//! whichever backend the store opened (`sqlite/console.rs`, `postgres/console.rs`: each
//! says how it keeps read-only mode read-only), and what both report back.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::{Store, StoreError};

/// The outcome of one arbitrary SQL statement ([`Store::run_sql`]).
#[derive(Debug, Clone, Serialize)]
pub struct SqlOutcome {
    pub columns: Vec<String>,
    /// Rows as JSON: integers and reals as numbers, text as strings, NULL as null,
    /// blobs as `{"base64": "…"}`.
    pub rows: Vec<Vec<Value>>,
    /// More rows existed than the limit (or the byte budget) allowed.
    pub truncated: bool,
    /// For statements that change data: how many rows they changed.
    pub rows_affected: Option<usize>,
    pub last_insert_rowid: Option<i64>,
}

/// What a statement would do, found by compiling it (nothing runs).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatementSummary {
    /// The statement's first keyword, comments skipped (`DELETE`, `PRAGMA`, `WITH`…).
    pub kind: String,
    /// Whether SQLite says the statement leaves the database unchanged.
    pub read_only: bool,
    /// Each change it would make, e.g. `DELETE on messages`, `ATTACH 'x.db'`.
    pub writes: Vec<String>,
}

/// The most bytes of row values a statement's answer gathers, counted as the database
/// hands them over (before they become JSON). `db_query` answers with at most 1 MiB, so
/// rows beyond this are never sent; without a bound, a statement that makes large values
/// row after row (`zeroblob`, `repeat`) filled memory before the answer was cut.
pub(super) const MAX_ROW_BYTES: usize = 2 * 1024 * 1024;

/// The rows of one answer, gathered up to a row limit and [`MAX_ROW_BYTES`].
pub(super) struct GatheredRows {
    rows: Vec<Vec<Value>>,
    limit: usize,
    bytes: usize,
}

impl GatheredRows {
    pub(super) fn new(limit: usize) -> GatheredRows {
        GatheredRows {
            rows: Vec::new(),
            limit,
            bytes: 0,
        }
    }

    /// Whether a row of `row_bytes` (its values' sizes as the database holds them) may
    /// be added, before it is turned into JSON; when not, the answer is truncated. A
    /// row larger than the whole budget is never converted: the answer then holds the
    /// rows before it, or none.
    pub(super) fn has_room_for(&self, row_bytes: usize) -> bool {
        self.rows.len() < self.limit && self.bytes.saturating_add(row_bytes) <= MAX_ROW_BYTES
    }

    pub(super) fn push(&mut self, row: Vec<Value>, row_bytes: usize) {
        self.bytes += row_bytes;
        self.rows.push(row);
    }

    /// The rows, and whether more were left out (`truncated`).
    pub(super) fn into_outcome(self, columns: Vec<String>, truncated: bool) -> SqlOutcome {
        SqlOutcome {
            columns,
            rows: self.rows,
            truncated,
            rows_affected: None,
            last_insert_rowid: None,
        }
    }
}

/// One statement for the console, with how to run it (see [`Store::run_sql`]).
pub(super) struct SqlRequest {
    pub(super) sql: String,
    pub(super) params: Vec<Value>,
    pub(super) limit: usize,
    pub(super) read_only: bool,
    pub(super) timeout: Duration,
}

impl Store {
    /// Runs one SQL statement of any kind with positional parameters. Rows stream and
    /// stop at `limit` or [`MAX_ROW_BYTES`] (so a huge table is never loaded whole).
    /// With `read_only`, only reading is allowed and nothing outlives the call. A
    /// statement running longer than `timeout` is interrupted.
    pub async fn run_sql(
        &self,
        sql: &str,
        params: Vec<Value>,
        limit: usize,
        read_only: bool,
        timeout: Duration,
    ) -> Result<SqlOutcome, StoreError> {
        let request = SqlRequest {
            sql: sql.to_string(),
            params,
            limit,
            read_only,
            timeout,
        };
        self.db.run_sql(request).await
    }

    /// Compiles `sql` (nothing runs) and says what it would change.
    pub async fn describe_statement(&self, sql: &str) -> Result<StatementSummary, StoreError> {
        self.db.describe_statement(sql).await
    }
}

/// The first keyword of a statement, after whitespace and comments.
pub(super) fn statement_kind(sql: &str) -> String {
    let mut rest = sql;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("--") {
            rest = after.split_once('\n').map_or("", |(_, next)| next);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, next)| next);
        } else {
            break;
        }
    }
    rest.split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_kind_skips_comments() {
        assert_eq!(
            statement_kind("  -- hi\n/* long */ delete from x"),
            "DELETE"
        );
        assert_eq!(statement_kind("PRAGMA x"), "PRAGMA");
        assert_eq!(statement_kind("/* never closed"), "");
    }

    #[tokio::test]
    async fn summaries_name_what_a_statement_writes() {
        for store in crate::bot::store::test_stores() {
            summaries_name_writes(store).await;
        }
    }

    async fn summaries_name_writes(store: Store) {
        let padded = format!(
            "/* {} */ DELETE FROM messages WHERE id > 0",
            "x".repeat(2000)
        );
        let summary = store.describe_statement(&padded).await.unwrap();
        assert_eq!(summary.kind, "DELETE");
        assert!(!summary.read_only);
        assert_eq!(summary.writes, vec!["DELETE on messages".to_string()]);
        let read = store
            .describe_statement("SELECT * FROM tasks")
            .await
            .unwrap();
        assert!(read.read_only && read.writes.is_empty());
    }
}
