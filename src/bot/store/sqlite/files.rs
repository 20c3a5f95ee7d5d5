//! The bot's two SQLite files: `DATABASE_PATH` for everything but traces, and the
//! traces' own file beside it (`data/porthole.db` → `data/porthole.traces.db`), each
//! with its own writer connection.
//!
//! SQLite lets one connection at a time write a file. With traces in the bot's file, a
//! turn's writes queued behind the trace writer's batches, and behind the WAL
//! checkpoints its pages set off; with a file each, neither waits for the other
//! (docs/performance.md §6). The bot's connection attaches the traces file as the schema
//! `traces`, so SQL (`db_query`, `porthole://db/schema`) still finds `trace_turns` and
//! `trace_spans` by their bare names.
//!
//! `:memory:` gets a named in-memory database with a shared cache in place of the traces
//! file: the only kind of in-memory database two connections can both open.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;

use super::StoreError;
use super::connection::WriterConnection;
use super::schema::{MIGRATIONS, TRACE_MIGRATIONS, configure, migrate};

/// The two connections and where the traces are.
pub(super) struct SqliteFiles {
    /// Everything but traces; the traces file attached as `traces`.
    pub(super) main: WriterConnection,
    /// The trace writer's, and every trace read's.
    pub(super) traces: WriterConnection,
    /// The traces file's path; for `:memory:`, the shared in-memory database's URI.
    pub(super) traces_location: String,
}

/// The traces file for a database file: `.traces` before the extension
/// (`porthole.db` → `porthole.traces.db`), or after a name that has none.
pub(super) fn traces_file(path: &str) -> String {
    let file = Path::new(path);
    match (file.file_stem(), file.extension()) {
        (Some(stem), Some(extension)) => file
            .with_file_name(format!(
                "{}.traces.{}",
                stem.to_string_lossy(),
                extension.to_string_lossy()
            ))
            .to_string_lossy()
            .into_owned(),
        _ => format!("{path}.traces"),
    }
}

/// A name no other store in this process uses, for a `:memory:` store's traces.
fn shared_memory_uri() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "file:porthole-traces-{}-{}?mode=memory&cache=shared",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl SqliteFiles {
    /// Opens (and creates, and migrates) both files. Errors name the file at fault and
    /// what to do about it.
    pub(super) fn open(path: &str) -> Result<SqliteFiles, StoreError> {
        let in_memory = path == ":memory:";
        if !in_memory
            && let Some(parent) = Path::new(path).parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|e| {
                open_error(
                    path,
                    format!(
                        "cannot create folder {}: {e}; set DATABASE_PATH to a writable location",
                        parent.display()
                    ),
                )
            })?;
        }
        let mut main = open_configured(
            path,
            "the file may be corrupt or not a SQLite database (move it aside or set DATABASE_PATH)",
        )?;

        let traces_location = if in_memory {
            shared_memory_uri()
        } else {
            traces_file(path)
        };
        let mut traces = open_configured(
            &traces_location,
            "it holds only traces: move it aside and the bot starts a new one",
        )?;
        migrate(&mut traces, TRACE_MIGRATIONS)
            .map_err(|e| open_error(&traces_location, format!("migration failed: {e}")))?;

        attach_traces(&main, &traces_location)
            .map_err(|e| open_error(&traces_location, format!("cannot attach it: {e}")))?;
        if in_memory {
            // A shared cache locks by table, and a reader that meets the trace writer's
            // lock fails at once (no busy timeout applies); reading without those locks
            // lets `db_query` read traces while they are written.
            main.pragma_update(None, "read_uncommitted", true)?;
        }
        migrate(&mut main, MIGRATIONS)
            .map_err(|e| open_error(path, format!("migration failed: {e}")))?;
        let thread_error = |e: std::io::Error| {
            open_error(
                path,
                format!("cannot start the thread of its connection: {e}"),
            )
        };
        Ok(SqliteFiles {
            main: WriterConnection::start(main, "sqlite-main").map_err(thread_error)?,
            traces: WriterConnection::start(traces, "sqlite-traces").map_err(thread_error)?,
            traces_location,
        })
    }
}

/// Attaches the traces file to `conn` as the schema `traces`, unless it is attached
/// already: after a `DETACH traces` through `db_query`'s write mode, SQL and the schema
/// description find the traces again at once, not after a restart.
pub(super) fn attach_traces(conn: &Connection, location: &str) -> rusqlite::Result<()> {
    let attached: bool = conn.query_row(
        "SELECT count(*) FROM pragma_database_list WHERE name = 'traces'",
        [],
        |r| r.get(0),
    )?;
    if !attached {
        conn.execute("ATTACH DATABASE ?1 AS traces", [location])?;
    }
    Ok(())
}

fn open_error(path: &str, reason: String) -> StoreError {
    StoreError::Open {
        path: path.to_string(),
        reason,
    }
}

/// Opens a connection with the store's settings; `if_unreadable` says what to do when
/// the file is not a database.
fn open_configured(path: &str, if_unreadable: &str) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(|e| {
        open_error(
            path,
            format!("{e}; check that DATABASE_PATH points to a writable file"),
        )
    })?;
    configure(&conn).map_err(|e| open_error(path, format!("{e}; {if_unreadable}")))?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::schema::MIGRATIONS;
    use super::*;
    use crate::bot::store::backend_tests::span;
    use crate::bot::store::{Prune, Store};
    use crate::model::SpanKind;

    const TIMEOUT: Duration = Duration::from_secs(10);

    async fn has_conversation(store: &Store, id: &str) -> bool {
        store.get_conversation(id).await.unwrap().is_some()
    }

    async fn count(store: &Store, sql: &str) -> i64 {
        let outcome = store.run_sql(sql, vec![], 1, true, TIMEOUT).await.unwrap();
        outcome.rows[0][0].as_i64().unwrap()
    }

    /// SQL sees the traces by their bare names, reads them in read-only mode, and may
    /// not change them (or attach anything) there.
    async fn traces_reached_by_sql(store: Store) {
        let spans = vec![
            span("t1", "r1", "r1", SpanKind::Turn, 1_000),
            span("t1", "l1", "r1", SpanKind::Llm, 1_100),
        ];
        store.append_spans(spans, Prune::default()).await.unwrap();
        assert_eq!(count(&store, "SELECT count(*) FROM trace_turns").await, 1);
        assert_eq!(count(&store, "SELECT count(*) FROM trace_spans").await, 2);
        for refused in [
            "DELETE FROM trace_turns",
            "DETACH traces",
            "ATTACH DATABASE 'elsewhere.db' AS other",
        ] {
            let error = store
                .run_sql(refused, vec![], 1, true, TIMEOUT)
                .await
                .unwrap_err();
            assert!(error.to_string().contains("not"), "{refused}: {error}");
        }
        assert_eq!(count(&store, "SELECT count(*) FROM trace_spans").await, 2);
        let schema = store.describe_schema().await.unwrap();
        let listed = |name: &str| {
            schema["tables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .map(|t| t["rows"].clone())
        };
        assert_eq!(listed("trace_turns"), Some(1.into()));
        assert_eq!(listed("trace_spans"), Some(2.into()));
        store
            .run_sql("DELETE FROM trace_turns", vec![], 1, false, TIMEOUT)
            .await
            .unwrap();
        assert!(store.trace_spans("t1").await.unwrap().is_empty());
        store
            .run_sql("DETACH traces", vec![], 1, false, TIMEOUT)
            .await
            .unwrap();
        assert_eq!(count(&store, "SELECT count(*) FROM trace_turns").await, 0);
        store.describe_schema().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sql_reaches_traces_in_their_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bot.db");
        let store = Store::open(path.to_str().unwrap()).unwrap();
        traces_reached_by_sql(store.clone()).await;
        let file = store.traces_file().unwrap();
        assert_eq!(
            file.path,
            dir.path().join("bot.traces.db").to_str().unwrap()
        );
        assert!(file.size_bytes.unwrap() > 0, "{file:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sql_reaches_traces_in_memory() {
        let store = Store::open(":memory:").unwrap();
        traces_reached_by_sql(store.clone()).await;
        let other = Store::open(":memory:").unwrap();
        assert_eq!(
            count(&other, "SELECT count(*) FROM trace_turns").await,
            0,
            "each in-memory store has traces of its own"
        );
        assert_eq!(store.traces_file().unwrap().path, ":memory:");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_bots_writes_never_wait_for_the_trace_writer() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("bot.db").to_str().unwrap()).unwrap();
        let (holding, held) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let holder = store.clone();
        let trace_batch = tokio::spawn(async move {
            let sqlite = holder.db.sqlite().unwrap();
            sqlite
                .on(true, move |c| {
                    let tx = c.transaction()?;
                    tx.execute("DELETE FROM trace_turns", [])?;
                    holding.send(()).unwrap();
                    released.recv().unwrap();
                    tx.commit()?;
                    Ok(())
                })
                .await
        });
        tokio::task::spawn_blocking(move || held.recv().unwrap())
            .await
            .unwrap();
        // The trace writer holds its connection and a write transaction on its file;
        // the bot's own write goes through all the same.
        let conversation =
            tokio::time::timeout(TIMEOUT, store.create_conversation("during a batch"))
                .await
                .expect("the bot's write waited for the trace writer's transaction")
                .unwrap();
        assert!(has_conversation(&store, &conversation.id).await);
        assert_eq!(store.writer_waits().unwrap().count, 0);
        release.send(()).unwrap();
        trace_batch.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deleted_traces_file_comes_back_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bot.db");
        let store = Store::open(path.to_str().unwrap()).unwrap();
        let conversation = store.create_conversation("kept").await.unwrap();
        let spans = vec![span("t1", "r1", "r1", SpanKind::Turn, 1_000)];
        store.append_spans(spans, Prune::default()).await.unwrap();
        drop(store);
        for file in ["bot.traces.db", "bot.traces.db-wal", "bot.traces.db-shm"] {
            let _ = std::fs::remove_file(dir.path().join(file));
        }
        let store = Store::open(path.to_str().unwrap()).unwrap();
        assert!(store.trace_spans("t1").await.unwrap().is_empty());
        assert_eq!(count(&store, "SELECT count(*) FROM trace_spans").await, 0);
        assert!(has_conversation(&store, &conversation.id).await);
    }

    #[test]
    fn a_corrupt_traces_file_is_named_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bot.db");
        std::fs::write(dir.path().join("bot.traces.db"), vec![0x42u8; 8192]).unwrap();
        let text = Store::open(path.to_str().unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(text.contains("bot.traces.db"), "{text}");
        assert!(text.contains("move it aside"), "{text}");
    }

    /// Migration 13 copies traces over and drops them from the bot's file; when the copy
    /// committed but the drop did not, running it again does not copy twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn traces_move_to_their_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let turn = "INSERT INTO trace_turns (trace_id, root_span_id, has_root, start_us, \
            duration_us, end_us, failed, span_ids, spans) \
            VALUES ('t1', 'r1', 1, 1000, 100, 1100, 0, 'r1', \
            '[{\"span_id\":\"r1\",\"is_root\":true,\"kind\":\"turn\",\"name\":\"turn\",\"start_us\":1000,\"duration_us\":100}]')";
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&MIGRATIONS[..12].join("\n")).unwrap();
            conn.pragma_update(None, "user_version", 12).unwrap();
            conn.execute(turn, []).unwrap();
            let mut copied = Connection::open(traces_file(path.to_str().unwrap())).unwrap();
            migrate(&mut copied, TRACE_MIGRATIONS).unwrap();
            copied.execute(turn, []).unwrap();
        }
        let store = Store::open(path.to_str().unwrap()).unwrap();
        let spans = store.trace_spans("t1").await.unwrap();
        assert_eq!(spans.len(), 1, "{spans:?}");
        assert_eq!(count(&store, "SELECT count(*) FROM trace_turns").await, 1);
        let left: i64 = store
            .call(|c| {
                Ok(c.query_row(
                    "SELECT count(*) FROM main.sqlite_master WHERE name LIKE 'trace%'",
                    [],
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap();
        assert_eq!(left, 0);
    }

    #[test]
    fn the_traces_file_sits_beside_the_database() {
        assert_eq!(traces_file("data/porthole.db"), "data/porthole.traces.db");
        assert_eq!(traces_file("/tmp/x.sqlite3"), "/tmp/x.traces.sqlite3");
        assert_eq!(traces_file("bot"), "bot.traces");
        assert_eq!(traces_file("dir.d/bot"), "dir.d/bot.traces");
    }
}
