//! The SQLite console behind `db_query` (the twin of `postgres/console.rs`): one statement
//! of any kind, rows streamed up to a limit, a time limit, and a read-only mode that
//! SQLite itself enforces.
//!
//! Read-only means that nothing a statement does outlives its call:
//! - it runs on a connection of its own, opened read-only and closed when the call ends,
//!   never on the bot's writer connection (whose settings would otherwise stay changed),
//!   with the traces file attached as on the writer (see `files`); a `:memory:` database
//!   has no second connection, so there the writer is used, under the same authorizer;
//! - an authorizer, consulted while the statement compiles (before anything runs),
//!   allows only reading: `SELECT`, reading tables, functions other than those that reach
//!   outside the database, and PRAGMAs that only report. `ATTACH`/`DETACH`,
//!   transactions, savepoints, temporary tables, `VACUUM` and every write are refused.
//!
//! Full mode runs every statement on the bot's writer connection, which the rest of the
//! store takes turns on, except a plain read of what every connection sees: that runs on
//! a read-only connection of its own, so a long `SELECT` holds nothing up (see
//! [`reader_for`] for when a read stays on the writer).
//!
//! `describe_statement` compiles a statement without running it and says what it
//! would write, so `db_query` can show the user exactly that before a write.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use super::files::attach_traces;
use super::{BUSY_TIMEOUT, Sqlite};
use crate::bot::store::StoreError;
use crate::bot::store::backend::Console;
use crate::bot::store::console::{
    GatheredRows, SqlOutcome, SqlRequest, StatementSummary, statement_kind,
};

/// PRAGMAs that only report, allowed in read-only mode without a value.
const REPORTING_PRAGMAS: &[&str] = &[
    "application_id",
    "collation_list",
    "compile_options",
    "data_version",
    "database_list",
    "encoding",
    "foreign_keys",
    "freelist_count",
    "function_list",
    "journal_mode",
    "module_list",
    "page_count",
    "page_size",
    "pragma_list",
    "schema_version",
    "table_list",
    "user_version",
];

/// PRAGMAs whose argument names a table or index to describe: allowed with one.
const DESCRIBING_PRAGMAS: &[&str] = &[
    "foreign_key_check",
    "foreign_key_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "quick_check",
    "table_info",
    "table_list",
    "table_xinfo",
];

/// Functions that reach outside the database (files, extensions, raw pointers).
const OUTSIDE_FUNCTIONS: &[&str] = &[
    "load_extension",
    "readfile",
    "writefile",
    "edit",
    "fts3_tokenizer",
];

/// Largest string or blob a console statement may build (`zeroblob(1e12)`), in either
/// mode: the bot's own connection allows SQLite's default of 1 GB.
const CONSOLE_MAX_LENGTH: i32 = 64 * 1024 * 1024;

/// The read-only authorizer's rule: what a statement may do without changing anything.
fn read_only_rule(context: AuthContext<'_>) -> Authorization {
    let allowed = match context.action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => true,
        AuthAction::Function { function_name } => !OUTSIDE_FUNCTIONS
            .iter()
            .any(|f| f.eq_ignore_ascii_case(function_name)),
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let name = pragma_name.to_ascii_lowercase();
            match pragma_value {
                None => {
                    REPORTING_PRAGMAS.contains(&name.as_str())
                        || DESCRIBING_PRAGMAS.contains(&name.as_str())
                }
                Some(_) => DESCRIBING_PRAGMAS.contains(&name.as_str()),
            }
        }
        _ => false,
    };
    if allowed {
        Authorization::Allow
    } else {
        Authorization::Deny
    }
}

/// A change an authorizer action would make, in words; `None` for reads.
fn describe_write(action: &AuthAction<'_>) -> Option<String> {
    use AuthAction as A;
    Some(match action {
        A::Insert { table_name } => format!("INSERT into {table_name}"),
        A::Update { table_name, .. } => format!("UPDATE of {table_name}"),
        A::Delete { table_name } => format!("DELETE on {table_name}"),
        A::CreateTable { table_name } | A::CreateTempTable { table_name } => {
            format!("CREATE TABLE {table_name}")
        }
        A::DropTable { table_name } | A::DropTempTable { table_name } => {
            format!("DROP TABLE {table_name}")
        }
        A::AlterTable { table_name, .. } => format!("ALTER TABLE {table_name}"),
        A::CreateIndex { index_name, .. } | A::CreateTempIndex { index_name, .. } => {
            format!("CREATE INDEX {index_name}")
        }
        A::DropIndex { index_name, .. } | A::DropTempIndex { index_name, .. } => {
            format!("DROP INDEX {index_name}")
        }
        A::CreateTrigger { trigger_name, .. } | A::CreateTempTrigger { trigger_name, .. } => {
            format!("CREATE TRIGGER {trigger_name}")
        }
        A::DropTrigger { trigger_name, .. } | A::DropTempTrigger { trigger_name, .. } => {
            format!("DROP TRIGGER {trigger_name}")
        }
        A::CreateView { view_name } | A::CreateTempView { view_name } => {
            format!("CREATE VIEW {view_name}")
        }
        A::DropView { view_name } | A::DropTempView { view_name } => {
            format!("DROP VIEW {view_name}")
        }
        A::CreateVtable { table_name, .. } => format!("CREATE VIRTUAL TABLE {table_name}"),
        A::DropVtable { table_name, .. } => format!("DROP VIRTUAL TABLE {table_name}"),
        A::Attach { filename } => format!("ATTACH '{filename}'"),
        A::Detach { database_name } => format!("DETACH {database_name}"),
        A::Reindex { index_name } => format!("REINDEX {index_name}"),
        A::Analyze { table_name } => format!("ANALYZE {table_name}"),
        A::Pragma {
            pragma_name,
            pragma_value: Some(value),
        } if !DESCRIBING_PRAGMAS.contains(&pragma_name.to_ascii_lowercase().as_str()) => {
            format!("PRAGMA {pragma_name} = {value}")
        }
        _ => return None,
    })
}

fn sql_value(value: rusqlite::types::ValueRef<'_>) -> Value {
    use base64::Engine;
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => serde_json::json!({
            "base64": base64::engine::general_purpose::STANDARD.encode(b)
        }),
    }
}

/// A value's size as SQLite holds it (text and blobs; the rest is small).
fn cell_bytes(value: rusqlite::types::ValueRef<'_>) -> usize {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => bytes.len(),
        _ => 8,
    }
}

fn sql_param(value: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as Sql;
    match value {
        Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(*b as i64),
        Value::Number(n) => n
            .as_i64()
            .map(Sql::Integer)
            .unwrap_or_else(|| Sql::Real(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => Sql::Text(s.clone()),
        other => Sql::Text(other.to_string()),
    }
}

/// Functions whose answer is the connection's own state: on another connection they
/// would answer for that one (`INSERT …` then `SELECT last_insert_rowid()`).
const CONNECTION_STATE_FUNCTIONS: &[&str] = &["last_insert_rowid", "changes", "total_changes"];

/// A statement for the console, and whether its caller has stopped waiting for it.
struct Statement {
    sql: String,
    params: Vec<Value>,
    limit: usize,
    timeout: Duration,
    cancelled: Arc<AtomicBool>,
}

/// How a statement runs on a connection: [`execute_one`] or [`run_read_only`].
type Runner = fn(&mut Connection, &str, &[Value], usize) -> Result<SqlOutcome, StoreError>;

/// How many SQLite VM steps run between two looks at a statement's time limit and
/// cancellation (a look is a clock read: a few nanoseconds per thousand steps).
const STEPS_BETWEEN_CHECKS: i32 = 1_000;

impl Statement {
    /// Runs the statement on `c` with `run`, stopped at its time limit (counted from
    /// now, not from a wait for a connection) or as soon as its caller stops waiting.
    /// SQLite's progress handler stops it from inside, on the connection's own thread,
    /// so the stop can never land on what the connection runs next (on the writer,
    /// another caller's work). It is consulted while a statement is planned and run, not
    /// inside a few single steps bounded by the data (an in-memory sort, `count(*)` of a
    /// whole table), which `sqlite3_interrupt` did not stop either. The connection's
    /// settings come back afterwards, even if `run` panics: it may be the bot's writer,
    /// which serves the next caller.
    fn run_on(self, c: &mut Connection, run: Runner) -> Result<SqlOutcome, StoreError> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(StoreError::Busy(
                "the request was cancelled before the statement ran".into(),
            ));
        }
        let length = c.limit(Limit::SQLITE_LIMIT_LENGTH)?;
        c.set_limit(Limit::SQLITE_LIMIT_LENGTH, CONSOLE_MAX_LENGTH.min(length))?;
        let deadline = Instant::now() + self.timeout;
        let cancelled = Arc::clone(&self.cancelled);
        c.progress_handler(
            STEPS_BETWEEN_CHECKS,
            Some(move || cancelled.load(Ordering::Relaxed) || Instant::now() >= deadline),
        );
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            run(c, &self.sql, &self.params, self.limit)
        }));
        c.progress_handler(0, None::<fn() -> bool>);
        c.authorizer(None::<fn(AuthContext<'_>) -> Authorization>);
        let restored = c.set_limit(Limit::SQLITE_LIMIT_LENGTH, length);
        let outcome = outcome.unwrap_or_else(|panic| resume_unwind(panic));
        restored?;
        outcome
    }
}

/// Marks a statement cancelled when its caller stops waiting (the request cancelled,
/// the runtime shutting down): a running statement stops at its next check, and one
/// still queued never starts.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[async_trait]
impl Console for Sqlite {
    async fn run_sql(&self, request: SqlRequest) -> Result<SqlOutcome, StoreError> {
        let cancelled = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(Arc::clone(&cancelled));
        let statement = Statement {
            sql: request.sql,
            params: request.params,
            limit: request.limit,
            timeout: request.timeout,
            cancelled,
        };
        if request.read_only {
            self.run_read_only(statement).await
        } else {
            self.run_full_mode(statement).await
        }
    }

    async fn describe_statement(&self, sql: &str) -> Result<StatementSummary, StoreError> {
        let sql = sql.to_string();
        self.call(move |c| {
            let writes = Arc::new(Mutex::new(BTreeSet::new()));
            let seen = writes.clone();
            c.authorizer(Some(move |context: AuthContext<'_>| {
                if let Some(write) = describe_write(&context.action) {
                    seen.lock().unwrap_or_else(|p| p.into_inner()).insert(write);
                }
                Authorization::Allow
            }));
            let compiled = c.prepare(&sql).map(|stmt| stmt.readonly());
            c.authorizer(None::<fn(AuthContext<'_>) -> Authorization>);
            let read_only = compiled?;
            let writes = std::mem::take(&mut *writes.lock().unwrap_or_else(|p| p.into_inner()));
            Ok(StatementSummary {
                kind: statement_kind(&sql),
                read_only,
                writes: writes.into_iter().collect(),
            })
        })
        .await
    }
}

impl Sqlite {
    /// Read-only mode: on a read-only connection of its own when the database is a file;
    /// on the writer for `:memory:`, which has no second connection.
    async fn run_read_only(&self, statement: Statement) -> Result<SqlOutcome, StoreError> {
        if self.path == ":memory:" {
            return self.call(move |c| statement.run_on(c, run_read_only)).await;
        }
        let (path, traces_location) = (self.path.clone(), self.files.traces_location.clone());
        self.on_own_connection(statement.timeout, move || {
            statement.run_on(&mut open_reader(&path, &traces_location)?, run_read_only)
        })
        .await?
    }

    /// Full mode: on the bot's writer connection, which every store call takes turns on,
    /// so a long query there holds up the bot (and `tasks/get`); a query that only reads
    /// what any connection sees runs on a read-only connection of its own instead, with
    /// the same answer ([`reader_for`]).
    async fn run_full_mode(&self, mut statement: Statement) -> Result<SqlOutcome, StoreError> {
        let elsewhere = self.path != ":memory:"
            && reads_only_shared_state(&statement.sql)
            && !self
                .call(|c| Ok(writer_holds_its_own_state(c).unwrap_or(true)))
                .await?;
        if elsewhere {
            let (path, traces_location) = (self.path.clone(), self.files.traces_location.clone());
            // The statement's outcome on a reader, or the statement back for the writer.
            let on_reader = self
                .on_own_connection(statement.timeout, move || {
                    match reader_for(&path, &traces_location, &statement.sql) {
                        Some(mut own) => Ok(statement.run_on(&mut own, execute_one)),
                        None => Err(statement),
                    }
                })
                .await?;
            match on_reader {
                Ok(outcome) => return outcome,
                Err(declined) => statement = declined,
            }
        }
        let traces_location = self.files.traces_location.clone();
        self.call(move |c| {
            let outcome = statement.run_on(c, execute_one);
            // A `DETACH traces` in this statement: SQL finds the traces again at once.
            attach_traces(c, &traces_location)?;
            outcome
        })
        .await
    }

    /// Runs `f`, work on a connection of the statement's own, on tokio's blocking pool
    /// once one of the [`OWN_CONNECTIONS`](super::OWN_CONNECTIONS) turns is free. A burst
    /// of statements waits here, holding no thread, for at most `timeout`. The turn is
    /// `f`'s until it returns, even if the caller stops waiting (a cancelled request).
    async fn on_own_connection<R: Send + 'static>(
        &self,
        timeout: Duration,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, StoreError> {
        let turn = tokio::time::timeout(timeout, Arc::clone(&self.own_connections).acquire_owned())
            .await
            .map_err(|_| {
                StoreError::Busy(format!(
                    "{} other statements held every read-only connection for {} s, and this \
                     one did not run; retry when they finish",
                    super::OWN_CONNECTIONS,
                    timeout.as_secs_f64()
                ))
            })?
            .map_err(|_| StoreError::WorkerGone)?;
        tokio::task::spawn_blocking(move || {
            let outcome = f();
            drop(turn);
            outcome
        })
        .await
        .map_err(|_| StoreError::WorkerGone)
    }
}

/// A read-only connection to the database file, the traces file attached as on the
/// writer (before any authorizer, which refuses `ATTACH`; read-only too, as an attached
/// file takes its connection's flags).
fn open_reader(path: &str, traces_location: &str) -> Result<Connection, StoreError> {
    let own = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    own.busy_timeout(BUSY_TIMEOUT)?;
    attach_traces(&own, traces_location)?;
    Ok(own)
}

/// Whether a full-mode statement may read only what every connection sees: a `SELECT`,
/// `WITH` or `VALUES` naming no connection-state function. [`reader_for`] then checks how
/// SQLite compiles it.
fn reads_only_shared_state(sql: &str) -> bool {
    let lowered = sql.to_ascii_lowercase();
    matches!(statement_kind(sql).as_str(), "SELECT" | "WITH" | "VALUES")
        && !CONNECTION_STATE_FUNCTIONS
            .iter()
            .any(|f| lowered.contains(f))
}

/// A read-only connection for a full-mode statement that [`reads_only_shared_state`],
/// while the writer holds nothing of its own ([`writer_holds_its_own_state`]), if SQLite
/// compiles it as read-only there. Any doubt (the statement does not compile there, the
/// file cannot be opened) leaves it to the writer: `None`.
fn reader_for(path: &str, traces_location: &str, sql: &str) -> Option<Connection> {
    let own = open_reader(path, traces_location).ok()?;
    own.authorizer(Some(read_only_rule));
    let compiles_read_only = own.prepare(sql).is_ok_and(|stmt| stmt.readonly());
    own.authorizer(None::<fn(AuthContext<'_>) -> Authorization>);
    compiles_read_only.then_some(own)
}

/// Whether the writer connection has state no other connection shares: an open
/// transaction, a temporary table, view or trigger, or a database attached by an
/// earlier statement.
/// A query that fails counts as state of its own: the read then stays on the writer.
fn writer_holds_its_own_state(c: &Connection) -> rusqlite::Result<bool> {
    if !c.is_autocommit() {
        return Ok(true);
    }
    let (others, temp): (i64, i64) = c.query_row(
        "SELECT coalesce(sum(name NOT IN ('main', 'temp', 'traces')), 0), \
         coalesce(sum(name = 'temp'), 0) FROM pragma_database_list",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if others > 0 {
        return Ok(true);
    }
    // `temp` is listed once anything opened it (a migration's `ALTER TABLE … RENAME`
    // does); naming `temp.sqlite_master` before that would open it.
    if temp == 0 {
        return Ok(false);
    }
    let temporary: i64 =
        c.query_row("SELECT COUNT(*) FROM temp.sqlite_master", [], |r| r.get(0))?;
    Ok(temporary > 0)
}

/// Runs a statement under the read-only authorizer, refusing any statement SQLite does
/// not itself consider read-only (`VACUUM INTO`, which no authorizer action names).
fn run_read_only(
    c: &mut Connection,
    sql: &str,
    params: &[Value],
    limit: usize,
) -> Result<SqlOutcome, StoreError> {
    c.authorizer(Some(read_only_rule));
    let read_only = c.prepare(sql)?.readonly();
    let kind = statement_kind(sql);
    // SQLite calls some reporting PRAGMAs (`journal_mode`) not read-only because the
    // same PRAGMA with a value would write; the authorizer has already let through only
    // those that report, or describe a table, so a compiled PRAGMA is a read.
    if (!read_only && kind != "PRAGMA") || matches!(kind.as_str(), "VACUUM" | "BEGIN" | "SAVEPOINT")
    {
        return Err(StoreError::ReadOnly(kind));
    }
    execute_one(c, sql, params, limit)
}

fn execute_one(
    c: &mut Connection,
    sql: &str,
    params: &[Value],
    limit: usize,
) -> Result<SqlOutcome, StoreError> {
    let mut stmt = c.prepare(sql)?;
    let bound: Vec<rusqlite::types::Value> = params.iter().map(sql_param).collect();
    let columns: Vec<String> = stmt
        .column_names()
        .into_iter()
        .map(str::to_string)
        .collect();
    if columns.is_empty() {
        // The connection's last rowid is that of whatever inserted last on it (the bot's
        // own writes too): reported only for a statement that inserted, known by the
        // rowid moving or, should the new rowid equal the old, by its first word.
        let rowid_before = c.last_insert_rowid();
        let changed = stmt.execute(rusqlite::params_from_iter(bound.iter()))?;
        drop(stmt);
        let rowid = c.last_insert_rowid();
        let first_word = sql.split_whitespace().next().unwrap_or_default();
        let inserted = rowid != rowid_before
            || (changed > 0
                && ["insert", "replace"]
                    .iter()
                    .any(|w| first_word.eq_ignore_ascii_case(w)));
        return Ok(SqlOutcome {
            columns,
            rows: Vec::new(),
            truncated: false,
            rows_affected: Some(changed),
            last_insert_rowid: inserted.then_some(rowid),
        });
    }
    let mut rows = stmt.query(rusqlite::params_from_iter(bound.iter()))?;
    let mut out = GatheredRows::new(limit);
    let mut truncated = false;
    while let Some(row) = rows.next()? {
        let cells = (0..columns.len())
            .map(|i| row.get_ref(i))
            .collect::<Result<Vec<_>, _>>()?;
        let bytes = cells.iter().map(|cell| cell_bytes(*cell)).sum();
        if !out.has_room_for(bytes) {
            truncated = true;
            break;
        }
        out.push(cells.into_iter().map(sql_value).collect(), bytes);
    }
    Ok(out.into_outcome(columns, truncated))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use crate::bot::store::Store;

    const TIMEOUT: Duration = Duration::from_secs(10);

    fn file_store(dir: &tempfile::TempDir) -> Store {
        Store::open(dir.path().join("bot.db").to_str().unwrap()).unwrap()
    }

    /// A value over the console's length limit is refused in either mode (the bot's own
    /// connection allows 1 GB), and SQLite's memory in the process is bounded.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_statement_cannot_build_a_huge_value_in_either_mode() {
        let dir = tempfile::tempdir().unwrap();
        let store = file_store(&dir);
        for read_only in [true, false] {
            let refused = store
                .run_sql("SELECT zeroblob(100000000)", vec![], 1, read_only, TIMEOUT)
                .await
                .unwrap_err();
            assert!(
                refused.to_string().contains("too big"),
                "read_only {read_only}: {refused}"
            );
        }
        let fits = store
            .run_sql(
                "SELECT length(zeroblob(1000000))",
                vec![],
                1,
                false,
                TIMEOUT,
            )
            .await
            .unwrap();
        assert_eq!(fits.rows[0][0], serde_json::json!(1_000_000));
        // SAFETY: a negative argument only reads the limit.
        let limit = unsafe { rusqlite::ffi::sqlite3_hard_heap_limit64(-1) };
        assert_eq!(limit, super::super::SQLITE_HEAP_LIMIT);
    }

    /// A query that runs until its time limit stops it.
    const ENDLESS: &str = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) \
        SELECT max(i) FROM n";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_full_mode_select_leaves_the_writer_free() {
        let dir = tempfile::tempdir().unwrap();
        let store = file_store(&dir);
        store.create_conversation("during").await.unwrap();
        let long = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .run_sql(ENDLESS, vec![], 10, false, Duration::from_secs(3))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        store.create_conversation("meanwhile").await.unwrap();
        assert_eq!(store.list_conversations(5).await.unwrap().len(), 2);
        assert!(
            !long.is_finished(),
            "the store answered while the long SELECT still ran"
        );
        let stopped = long.await.unwrap().unwrap_err();
        assert!(stopped.to_string().contains("interrupt"), "{stopped}");
    }

    #[tokio::test]
    async fn full_mode_reads_still_see_the_writers_own_state() {
        let dir = tempfile::tempdir().unwrap();
        let store = file_store(&dir);
        let run = |sql: &'static str| {
            let store = store.clone();
            async move { store.run_sql(sql, vec![], 10, false, TIMEOUT).await }
        };
        run("INSERT INTO memories (key, value, updated_at) VALUES ('k', 'v', 't')")
            .await
            .unwrap();
        let rowid = run("SELECT last_insert_rowid()").await.unwrap();
        assert_ne!(rowid.rows[0][0], json!(0), "the writer's last insert");
        run("CREATE TEMP TABLE scratch AS SELECT 42 AS x")
            .await
            .unwrap();
        let scratch = run("SELECT x FROM scratch").await.unwrap();
        assert_eq!(scratch.rows, vec![vec![json!(42)]]);
        // With a temporary table on the writer, a table it might shadow is read there.
        run("CREATE TEMP TABLE memories AS SELECT 'temp' AS key")
            .await
            .unwrap();
        let shadowed = run("SELECT key FROM memories").await.unwrap();
        assert_eq!(shadowed.rows, vec![vec![json!("temp")]]);
    }

    /// A burst of statements on connections of their own takes turns: a few at a time,
    /// the others waiting without a thread (or a connection) each, and those that wait
    /// past their time limit are told why, having run nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_read_only_statements_takes_turns() {
        let dir = tempfile::tempdir().unwrap();
        let store = file_store(&dir);
        store.create_conversation("read").await.unwrap();
        let before = crate::test_support::threads();
        let burst = 200;
        let statements: Vec<_> = (0..burst)
            .map(|i| {
                let store = store.clone();
                // Every other one in full mode, which reads on its own connection too.
                let read_only = i % 2 == 0;
                tokio::spawn(async move {
                    store
                        .run_sql(ENDLESS, vec![], 10, read_only, Duration::from_millis(300))
                        .await
                })
            })
            .collect();
        let mut most = 0;
        let (mut interrupted, mut turned_away) = (0, 0);
        for statement in statements {
            most = most.max(crate::test_support::threads());
            let error = statement.await.unwrap().unwrap_err().to_string();
            if error.contains("interrupt") {
                interrupted += 1;
            } else {
                assert!(
                    error.contains("held every read-only connection") && error.contains("retry"),
                    "{error}"
                );
                turned_away += 1;
            }
        }
        assert!(
            interrupted >= super::super::OWN_CONNECTIONS,
            "{interrupted} ran"
        );
        assert!(
            turned_away > 0,
            "{interrupted} ran, none waited past its limit"
        );
        // A thread each would be 200 (tokio's blocking pool grows to 512); the margin is
        // for the tests running beside this one in the same process.
        let grown = most.saturating_sub(before);
        assert!(grown < 40, "{grown} more threads");
        // The writer was never among them, and a statement after the burst runs.
        assert_eq!(store.list_conversations(5).await.unwrap().len(), 1);
        let after = store
            .run_sql(
                "SELECT count(*) FROM conversations",
                vec![],
                1,
                true,
                TIMEOUT,
            )
            .await
            .unwrap();
        assert_eq!(after.rows, vec![vec![json!(1)]]);
    }

    /// A caller that stops waiting (a cancelled request) stops its statement: on the
    /// bot's writer, which is free again at once, and on connections of their own, whose
    /// turns come back at once (a turn is the statement's until it has stopped).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_statement_stops_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = file_store(&dir);
        let limit = Duration::from_secs(30);
        // `changes()` is the writer's own state: this one runs on the writer.
        let on_writer = format!("{ENDLESS} WHERE changes() >= 0");
        let mut callers = vec![{
            let store = store.clone();
            tokio::spawn(async move { store.run_sql(&on_writer, vec![], 10, false, limit).await })
        }];
        for _ in 0..super::super::OWN_CONNECTIONS {
            let store = store.clone();
            callers.push(tokio::spawn(async move {
                store.run_sql(ENDLESS, vec![], 10, true, limit).await
            }));
        }
        let sqlite = store.db.sqlite().unwrap();
        for _ in 0..500 {
            if sqlite.own_connections.available_permits() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(sqlite.own_connections.available_permits(), 0, "all running");
        assert!(callers.iter().all(|c| !c.is_finished()), "still running");
        for caller in &callers {
            caller.abort();
        }
        let written = tokio::time::timeout(Duration::from_secs(5), store.create_conversation("x"))
            .await
            .expect("the writer is still busy with the cancelled statement");
        written.unwrap();
        let quick = Duration::from_secs(2);
        let after = store.run_sql("SELECT 1", vec![], 1, true, quick).await;
        assert_eq!(after.unwrap().rows, vec![vec![json!(1)]]);
        for _ in 0..100 {
            if sqlite.own_connections.available_permits() == super::super::OWN_CONNECTIONS {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the cancelled statements kept their turns");
    }
}
