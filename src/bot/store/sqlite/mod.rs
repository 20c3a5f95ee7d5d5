//! The SQLite backend, the embedded default (`DATABASE_PATH`): no server to install.
//!
//! SQLite calls block, so they never run on an async worker thread: each call hands a
//! closure to its file's writer connection, which runs on a thread of its own
//! ([`connection`]). One writer connection per file keeps writes serialised (SQLite
//! allows one writer anyway); traces have a file and a connection of their own, so
//! turns never queue behind the trace writer ([`files`]). WAL mode and a busy timeout
//! let readers from other processes (or `db_query`'s read-only connection, see
//! [`console`]) proceed alongside.
//!
//! This file runs the SQL the facade shares with PostgreSQL; `connection` is a file's
//! writer connection, `files` the two files, and `conversations`, `console` and `schema`
//! what this backend does its own way (their twins are in `postgres/`).

mod connection;
mod console;
mod conversations;
mod files;
mod schema;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, Statement, params_from_iter};
use serde::Serialize;

use super::backend::{Backend, Dialect, QueryThen, Sql};
use super::rows::{Bound, FromRow};
use super::{StoreError, schedule, traces};
use crate::cpu_time::thread_cpu_time;
pub use connection::WriterWaits;
use files::SqliteFiles;
pub(super) use schema::MIGRATIONS;

/// How long a statement waits for another connection's lock before giving up.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

static SQLITE: Dialect = Dialect {
    name: "sqlite",
    shared_by_replicas: false,
    like: "LIKE",
    upsert_turn: traces::UPSERT_TURN_SQLITE,
    claim_due: schedule::CLAIM_DUE_SQLITE,
};

/// How many `db_query` statements run at once on read-only connections of their own
/// (each a blocking-pool thread and a connection with its page cache); more wait their
/// turn, within their time limit, without holding a thread ([`console`]).
const OWN_CONNECTIONS: usize = 4;

/// The SQLite store: the bot's file and the traces' file, each with its writer.
pub(super) struct Sqlite {
    /// `DATABASE_PATH`, or `:memory:`.
    path: String,
    files: SqliteFiles,
    /// Turns on a read-only connection of a statement's own ([`OWN_CONNECTIONS`]).
    own_connections: Arc<tokio::sync::Semaphore>,
}

/// The most memory SQLite may hold in this process, every connection together. The
/// bot's own statements need a few MiB (page caches); the bound is for `db_query`, whose
/// values are capped one by one (64 MiB) but not in number: a row of many large values
/// (`SELECT randomblob(6e7), randomblob(6e7), …`) now fails as "out of memory" rather
/// than taking the machine's. It is a backstop, shared by every connection: a statement
/// that reaches it makes the bot's own writes fail meanwhile too.
pub(super) const SQLITE_HEAP_LIMIT: i64 = 1024 * 1024 * 1024;

impl Sqlite {
    /// Opens (and creates, and migrates) the files at `path`; `:memory:` gives a private
    /// in-memory database.
    pub(super) fn open(path: &str) -> Result<Sqlite, StoreError> {
        static HEAP_LIMIT: std::sync::Once = std::sync::Once::new();
        // SAFETY: sets a process-wide number SQLite reads on each allocation.
        HEAP_LIMIT.call_once(|| unsafe {
            rusqlite::ffi::sqlite3_hard_heap_limit64(SQLITE_HEAP_LIMIT);
        });
        Ok(Sqlite {
            path: path.to_string(),
            files: SqliteFiles::open(path)?,
            own_connections: Arc::new(tokio::sync::Semaphore::new(OWN_CONNECTIONS)),
        })
    }

    /// Runs `f` with the bot's writer connection, on its thread.
    pub(super) async fn call<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        self.on(false, f).await
    }

    /// Runs `f` with the writer connection of the traces file (`traces`) or of the bot's.
    async fn on<R, F>(&self, traces: bool, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let connection = if traces {
            &self.files.traces
        } else {
            &self.files.main
        };
        connection.run(f).await
    }

    /// Runs a shared query and reads its rows.
    pub(super) async fn query<T: FromRow>(
        &self,
        sql: Sql,
        values: Vec<Bound>,
    ) -> Result<Vec<T>, StoreError> {
        self.on(sql.traces, move |c| {
            with_statement(c, &sql, |statement| {
                statement
                    .query_map(params_from_iter(values.iter()), |r| T::from_row(r))?
                    .collect()
            })
            .map_err(StoreError::from)
        })
        .await
    }

    /// See `Database::query_then`.
    pub(super) async fn query_then<T: FromRow>(
        &self,
        work: QueryThen<T>,
    ) -> Result<Vec<T>, StoreError> {
        self.on(work.query.traces, move |c| {
            let tx = c.transaction()?;
            let rows: Vec<T> = with_statement(&tx, &work.query, |statement| {
                statement
                    .query_map(params_from_iter(work.values.iter()), |r| T::from_row(r))?
                    .collect()
            })?;
            for row in &rows {
                let values = (work.values_of)(row);
                with_statement(&tx, &work.then, |s| s.execute(params_from_iter(values)))?;
            }
            tx.commit()?;
            Ok(rows)
        })
        .await
    }
}

/// Prepares `sql` (from the connection's cache when its text is fixed) and hands the
/// statement to `f`.
fn with_statement<R>(
    c: &Connection,
    sql: &Sql,
    f: impl FnOnce(&mut Statement<'_>) -> rusqlite::Result<R>,
) -> rusqlite::Result<R> {
    if sql.fixed {
        let mut statement = c.prepare_cached(&sql.text)?;
        f(&mut statement)
    } else {
        f(&mut c.prepare(&sql.text)?)
    }
}

#[async_trait]
impl Backend for Sqlite {
    fn dialect(&self) -> &'static Dialect {
        &SQLITE
    }

    async fn execute(&self, sql: Sql, values: Vec<Bound>) -> Result<u64, StoreError> {
        self.on(sql.traces, move |c| {
            let changed = with_statement(c, &sql, |s| s.execute(params_from_iter(values.iter())))?;
            Ok(changed as u64)
        })
        .await
    }

    async fn execute_all(
        &self,
        statements: Vec<(Sql, Vec<Bound>)>,
    ) -> Result<Duration, StoreError> {
        let traces = statements.first().is_some_and(|(sql, _)| sql.traces);
        self.on(traces, move |c| {
            let started = thread_cpu_time();
            let tx = c.transaction()?;
            for (sql, values) in &statements {
                with_statement(&tx, sql, |s| s.execute(params_from_iter(values.iter())))?;
            }
            tx.commit()?;
            Ok(thread_cpu_time() - started)
        })
        .await
    }

    async fn insert_after(
        &self,
        guard: (Sql, Vec<Bound>),
        insert: (Sql, Vec<Bound>),
    ) -> Result<Option<i64>, StoreError> {
        self.on(guard.0.traces, move |c| {
            let tx = c.transaction()?;
            let changed = with_statement(&tx, &guard.0, |s| {
                s.execute(params_from_iter(guard.1.iter()))
            })?;
            if changed == 0 {
                return Ok(None);
            }
            let id = with_statement(&tx, &insert.0, |s| {
                s.query_row(params_from_iter(insert.1.iter()), |r| r.get(0))
            })?;
            tx.commit()?;
            Ok(Some(id))
        })
        .await
    }

    fn writer_waits(&self) -> Option<WriterWaits> {
        Some(self.files.main.waits())
    }

    fn traces_file(&self) -> Option<TracesFile> {
        let in_memory = self.path == ":memory:";
        Some(TracesFile {
            path: if in_memory {
                ":memory:"
            } else {
                &self.files.traces_location
            }
            .to_string(),
            size_bytes: (!in_memory)
                .then(|| file_and_wal_size(&self.files.traces_location))
                .flatten(),
            writer_waits: self.files.traces.waits(),
        })
    }

    fn file_size(&self) -> Option<u64> {
        if self.path == ":memory:" {
            return None;
        }
        file_and_wal_size(&self.path)
    }
}

/// A SQLite file's size with its WAL, in bytes.
fn file_and_wal_size(path: &str) -> Option<u64> {
    let main = std::fs::metadata(path).ok()?.len();
    let wal = std::fs::metadata(format!("{path}-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    Some(main + wal)
}

/// The SQLite traces file as `health` shows it (`Store::traces_file`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TracesFile {
    pub path: String,
    pub size_bytes: Option<u64>,
    pub writer_waits: WriterWaits,
}

/// A SQLite error in words that say what to do about it. The failed statement (or
/// transaction) wrote nothing.
pub(super) fn explain(error: &rusqlite::Error) -> String {
    use rusqlite::ErrorCode;
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => format!(
            "the database is locked by another connection or process (waited {} s): {error}; \
             retry, or stop whatever holds DATABASE_PATH open for writing",
            BUSY_TIMEOUT.as_secs()
        ),
        Some(ErrorCode::DiskFull) => format!(
            "the database or the disk it is on is full: {error}; \
             free some space and retry"
        ),
        Some(ErrorCode::ReadOnly) => format!(
            "the database cannot be written: {error}; \
             check the permissions of DATABASE_PATH and its folder"
        ),
        _ => format!("database error: {error}"),
    }
}
