//! The bot's store: one module owns every SQL statement the bot runs, on one of two
//! backends that no caller outside this module tells apart: SQLite (the embedded default,
//! `DATABASE_PATH`, in [`sqlite`]) or PostgreSQL (`DATABASE_URL=postgres://…`, for
//! several replicas sharing one database, in [`postgres`]). The backend is chosen once,
//! when the store opens ([`Store::open`]); [`backend`] is the seam between them and this
//! facade.
//!
//! This file holds the facade's types and its handle; each kind of record has its own
//! file (`conversations`, `schedule` for the scheduler's jobs, `memories`,
//! `tool_settings`, `log_events`, `ended_sessions`, `mcp_tasks` for the MCP Tasks
//! extension, `traces`, `tool_sets`), written once for both backends in SQL they share; `retention`
//! says how long conversations are kept (and which a turn holds), `console` is
//! `db_query`'s, `schema` the schema version, and `rows` what both backends share to run
//! that SQL. What a backend does its own way sits in `sqlite/` and `postgres/`, in files
//! of the same name.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use chrono::{SecondsFormat, Utc};
use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{Message, NewMessage, ToolCall};
use crate::redact::Redactor;

mod backend;
mod console;
mod conversations;
mod ended_sessions;
mod log_events;
mod mcp_tasks;
mod memories;
mod postgres;
mod replay_sets;
mod retention;
mod rows;
mod schedule;
mod schema;
mod sqlite;
mod tool_sets;
mod tool_settings;
mod trace_filter;
mod trace_retention;
mod traces;

use backend::Database;
pub use console::{SqlOutcome, StatementSummary};
pub use conversations::{ADMIN_CONVERSATION_PREFIX, is_admin_conversation};
pub use mcp_tasks::StoredTaskRow;
pub use memories::{Memory, MemoryScope};
pub use postgres::{Change, fresh_schema_url};
pub use replay_sets::ReplaySet;
pub use retention::ConversationHold;
pub use schedule::TaskLimits;
pub use schema::schema_version;
pub use sqlite::{TracesFile, WriterWaits};
pub use tool_sets::{TOOLS_HASH, TOOLS_OFFERED};
pub use trace_retention::Prune;
pub use traces::{Page, SpanQuery, TraceCounts, TraceSummary, TurnRows};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database at {path}: {reason}")]
    Open { path: String, reason: String },
    /// `DATABASE_URL` cannot be used as written (a configuration error, exit code 2).
    #[error("DATABASE_URL={path} cannot be used: {reason}")]
    BadUrl { path: String, reason: String },
    #[error("{}", sqlite::explain(.0))]
    Sqlite(#[from] rusqlite::Error),
    /// A PostgreSQL error, already put in words that say what to do (see [`postgres`]).
    #[error("{0}")]
    Postgres(String),
    #[error("{0}")]
    NotFound(String),
    /// A uniqueness rule was broken (e.g. a task name already taken).
    #[error("{0}")]
    Conflict(String),
    #[error("the database worker stopped unexpectedly")]
    WorkerGone,
    /// Too much at once: waited its time limit for a turn and did not run.
    #[error("{0}")]
    Busy(String),
    /// A statement that would change something, refused in read-only mode.
    #[error("a {0} statement is not allowed here: read-only mode runs only statements that read")]
    ReadOnly(String),
    /// A stored value the bot wrote cannot be read back (changed by hand, say).
    #[error("{0}")]
    Unreadable(String),
}

/// How many conversation changes wait for a slow listener before the oldest go.
const CONVERSATION_CHANGES: usize = 256;

/// The current time as RFC 3339 UTC with milliseconds, the one timestamp format we store.
pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A conversation: its id, title, times and how many messages it holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Conversation {
    pub id: String,
    // `None` only where someone set it so by hand (`db_query`), as the design documents
    // suggest for simulating a corrupted state; the bot itself always gives a title.
    /// The bot always gives one; null only when set so by hand.
    pub title: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub message_count: i64,
}

/// The error both backends give for a message to a conversation that is not there.
fn no_such_conversation(id: &str) -> StoreError {
    StoreError::NotFound(format!("conversation {id} does not exist"))
}

/// A page of messages and whether more exist beyond it in the direction read.
#[derive(Debug, Clone, Serialize)]
pub struct MessagePage {
    pub messages: Vec<Message>,
    pub has_more: bool,
}

impl MessagePage {
    /// A page from `messages` read in page order with one more than `limit`: the extra
    /// one only says there is more, and is dropped from the far end of the page (the
    /// newest after an `after` cursor, the oldest otherwise). Both backends read so.
    ///
    /// A page also stops short of [`MESSAGE_PAGE_BYTES`] of message text (it always
    /// holds one message): a thousand long messages would otherwise make one small
    /// request a reply of gigabytes. The messages it leaves out are the far end's, so
    /// the cursor taken from the page reads them next.
    pub(super) fn from_one_extra(mut messages: Vec<Message>, limit: usize, after: bool) -> Self {
        // Counted from the page's near end: its start after an `after` cursor, its
        // newest message otherwise.
        let fit = if after {
            fitting(messages.iter())
        } else {
            fitting(messages.iter().rev())
        };
        let keep = limit.min(fit);
        let has_more = messages.len() > keep;
        if after {
            messages.truncate(keep);
        } else {
            messages.drain(..messages.len() - keep.min(messages.len()));
        }
        MessagePage { messages, has_more }
    }
}

/// The most message text (contents, tool calls' arguments) one page of messages holds.
pub const MESSAGE_PAGE_BYTES: usize = 4 << 20;

/// How many of `messages`, counted in this order, fit [`MESSAGE_PAGE_BYTES`]; at least
/// one.
fn fitting<'a>(messages: impl Iterator<Item = &'a Message>) -> usize {
    let size = |m: &Message| {
        let calls = m.tool_calls.iter().flatten();
        let call_size = |c: &ToolCall| c.name.len() + c.arguments.to_string().len();
        m.content.len() + calls.map(call_size).sum::<usize>()
    };
    let mut total = 0;
    let fit = messages
        .take_while(|m| {
            total += size(m);
            total <= MESSAGE_PAGE_BYTES
        })
        .count();
    fit.max(1)
}

/// Which messages of a conversation to read. Cursors are message ids.
#[derive(Debug, Clone, Copy, Default)]
pub struct MessageQuery {
    pub limit: usize,
    pub before: Option<i64>,
    pub after: Option<i64>,
}

/// A scheduled task.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Task {
    pub id: i64,
    pub name: String,
    pub description: String,
    /// A cron expression, UTC.
    pub schedule: String,
    /// What it does: `{"prompt": …}` or `{"tool": …, "arguments": …}`.
    pub action: Value,
    pub enabled: bool,
    pub status: String,
    pub last_run: Option<String>,
    pub next_run: Option<String>,
    pub last_result: Option<String>,
    pub created_at: String,
    /// `user` or `admin`: whose rights the task runs with.
    pub run_as: String,
}

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
    /// The SQLite path, or the PostgreSQL URL with its password redacted.
    path: Arc<str>,
    /// The conversations turns hold, for retention (see [`retention`]).
    activity: Arc<retention::ConversationActivity>,
    /// What conversations are stored through, once the bot knows its secrets
    /// ([`Store::redact_conversations_with`]).
    conversation_redactor: Arc<OnceLock<Arc<Redactor>>>,
    /// The id of each conversation a message was added to, as it happens
    /// ([`Store::subscribe_conversation_changes`]).
    conversation_changes: tokio::sync::broadcast::Sender<Arc<str>>,
}

impl Store {
    /// Opens the database and runs pending migrations: a `postgres://` or
    /// `postgresql://` URL connects to PostgreSQL, anything else is a SQLite file
    /// (created if needed); `:memory:` gives a private in-memory SQLite database.
    pub fn open(location: &str) -> Result<Store, StoreError> {
        let (db, path) = if postgres::is_postgres_url(location) {
            let postgres = postgres::Postgres::open(location)?;
            let path = postgres.display_url().into();
            (Database::Postgres(Box::new(postgres)), path)
        } else {
            (
                Database::Sqlite(sqlite::Sqlite::open(location)?),
                location.into(),
            )
        };
        Ok(Store {
            db: Arc::new(db),
            path,
            activity: Arc::default(),
            conversation_redactor: Arc::default(),
            conversation_changes: tokio::sync::broadcast::channel(CONVERSATION_CHANGES).0,
        })
    }

    /// Hears the id of every conversation a message is added to from now on (for
    /// `/mcp` resource subscriptions). A receiver that falls behind loses the oldest.
    pub fn subscribe_conversation_changes(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.conversation_changes.subscribe()
    }

    /// From now on, messages, titles and scheduled runs' results are stored redacted by
    /// `redactor` (the first call counts). Tool results and replies can quote a secret (a user tool's own
    /// key, a provider echoing a header): redacting what leaves the store is not
    /// enough, since `db_query` can hand a stored value back transformed (`hex()`,
    /// `upper()`, a `substr()` per piece) past every net. What a turn holds in memory
    /// is unchanged: the model still sees a tool's result whole within its turn.
    pub fn redact_conversations_with(&self, redactor: Arc<Redactor>) {
        let _ = self.conversation_redactor.set(redactor);
    }

    /// `text` as conversations (and runs' results) store it.
    fn for_storage<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.conversation_redactor.get() {
            Some(redactor) => redactor.redact_text(text),
            None => Cow::Borrowed(text),
        }
    }

    /// Tool calls' JSON as conversations store it (arguments redacted by key too).
    fn tool_calls_for_storage(&self, message: &NewMessage) -> Option<String> {
        let (Some(redactor), Some(calls)) = (self.conversation_redactor.get(), &message.tool_calls)
        else {
            return message.tool_calls_json();
        };
        let mut calls = serde_json::to_value(calls).unwrap_or_default();
        redactor.redact(&mut calls);
        Some(calls.to_string())
    }

    /// Where the data is: the SQLite path, or the PostgreSQL URL without its password.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// How often and how long callers waited for the SQLite writer connection since
    /// start-up; `None` on PostgreSQL, whose pool has no such queue.
    pub fn writer_waits(&self) -> Option<WriterWaits> {
        self.db.writer_waits()
    }

    /// `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        self.db.dialect().name
    }

    /// Size of the database file (and its WAL) in bytes; `None` for `:memory:` and for
    /// PostgreSQL (whose size is the server's business).
    pub fn file_size(&self) -> Option<u64> {
        self.db.file_size()
    }

    /// The SQLite traces file: where it is, its size and its writer's queue; `None` on
    /// PostgreSQL, which keeps traces in its one database.
    pub fn traces_file(&self) -> Option<TracesFile> {
        self.db.traces_file()
    }

    /// Runs `f` with the bot's SQLite writer connection, on its thread (an error on
    /// PostgreSQL).
    pub async fn call<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let sqlite = self.db.sqlite().ok_or_else(|| {
            StoreError::Postgres("this operation needs the SQLite backend, not PostgreSQL".into())
        })?;
        sqlite.call(f).await
    }

    /// Whether other replicas may share this database (PostgreSQL); SQLite's file has
    /// one process.
    pub fn is_shared(&self) -> bool {
        self.backend_name() == "postgres"
    }

    /// Announces a change to every replica sharing the database (PostgreSQL
    /// `NOTIFY`); nothing to do on SQLite, whose file has one process.
    pub async fn publish_change(&self, change: Change) -> Result<(), StoreError> {
        self.db.publish_change(&change).await
    }

    /// The changes replicas announce from now on (their own included); `None` on
    /// SQLite. The first call starts a listener that reconnects by itself.
    pub fn subscribe_changes(&self) -> Option<tokio::sync::broadcast::Receiver<Change>> {
        self.db.subscribe_changes()
    }

    /// After [`Store::subscribe_changes`]: waits (at most `limit`) until the listener
    /// hears what other replicas announce; false if it could not connect in time (it
    /// keeps trying).
    pub async fn until_listening(&self, limit: std::time::Duration) -> bool {
        self.db.until_listening(limit).await
    }
}

/// For tests: the stores every backend-independent test runs against — SQLite in
/// memory always, and PostgreSQL (a fresh schema each) when `PORTHOLE_TEST_DATABASE_URL`
/// names a server. Without it the PostgreSQL half is skipped with the reason printed, or
/// fails the test under `PORTHOLE_REQUIRE_SERVICES=1` (CI), see [`crate::test_support`].
#[cfg(test)]
pub(crate) fn test_stores() -> Vec<Store> {
    let mut stores = vec![Store::open(":memory:").unwrap()];
    if let Some(url) = crate::test_support::test_database_url() {
        stores.push(Store::open(&postgres::fresh_schema_url(&url)).unwrap());
    }
    stores
}

#[cfg(test)]
mod backend_tests;

#[cfg(test)]
mod tests {
    use super::sqlite::MIGRATIONS;
    use super::*;
    use crate::model::{NewMessage, Role};
    use std::time::Duration;

    /// Callers that queue for the writer connection wait as work in its queue, not as a
    /// thread each: on tokio's blocking pool behind a mutex, this burst held a pool
    /// thread per waiting caller (up to 512).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_callers_queues_without_a_thread_each() {
        let store = Store::open(":memory:").unwrap();
        store
            .call(|c| Ok(c.execute_batch("CREATE TABLE calls (n INTEGER NOT NULL)")?))
            .await
            .unwrap();
        let before = crate::test_support::threads();
        let burst: i64 = 2_000;
        let calls: Vec<_> = (0..burst)
            .map(|n| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .call(move |c| {
                            c.execute("INSERT INTO calls (n) VALUES (?1)", [n])?;
                            // Long enough for the callers behind to pile up.
                            std::thread::sleep(Duration::from_micros(50));
                            Ok(n)
                        })
                        .await
                })
            })
            .collect();
        let mut most = 0;
        for (n, call) in (0..).zip(calls) {
            most = most.max(crate::test_support::threads());
            assert_eq!(call.await.unwrap().unwrap(), n);
        }
        let stored: i64 = store
            .call(|c| Ok(c.query_row("SELECT count(*) FROM calls", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(stored, burst, "every call ran");
        // The margin is for the tests running beside this one in the same process.
        let grown = most.saturating_sub(before);
        assert!(grown < 64, "{grown} more threads during the burst");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_that_queue_for_the_writer_connection_are_counted() {
        let store = Store::open(":memory:").unwrap();
        store.call(|_| Ok(())).await.unwrap();
        assert_eq!(
            store.writer_waits().unwrap().count,
            0,
            "a free connection is no wait"
        );

        let (holding, held) = std::sync::mpsc::channel();
        let holder = store.clone();
        let slow = tokio::spawn(async move {
            holder
                .call(move |_| {
                    holding.send(()).unwrap();
                    std::thread::sleep(Duration::from_millis(60));
                    Ok(())
                })
                .await
        });
        tokio::task::spawn_blocking(move || held.recv().unwrap())
            .await
            .unwrap();
        store.call(|_| Ok(())).await.unwrap();
        slow.await.unwrap().unwrap();

        let waits = store.writer_waits().unwrap();
        assert_eq!(waits.count, 1, "{waits:?}");
        assert!(waits.total >= Duration::from_millis(30), "{waits:?}");
        let shown = serde_json::to_value(waits).unwrap();
        assert_eq!(shown["count"], 1);
        assert!(shown["total_ms"].as_f64().unwrap() >= 30.0, "{shown}");
    }

    #[tokio::test]
    async fn migrations_run_on_fresh_and_existing_databases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/porthole.db");
        let path = path.to_str().unwrap();
        let store = Store::open(path).unwrap();
        let conversation = store.create_conversation("first").await.unwrap();
        drop(store);

        // Reopening runs no migration twice and keeps the data.
        let store = Store::open(path).unwrap();
        let version: i64 = store
            .call(|c| Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(version as usize, schema_version());
        let found = store.get_conversation(&conversation.id).await.unwrap();
        assert_eq!(found.unwrap().title.as_deref(), Some("first"));
        let mode: String = store
            .call(|c| Ok(c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[tokio::test]
    async fn upgrades_a_database_left_at_an_older_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.execute_batch(MIGRATIONS[1]).unwrap();
            conn.pragma_update(None, "user_version", 2).unwrap();
            // A memory from before memories had owners (migration 19).
            conn.execute(
                "INSERT INTO memories (key, value, updated_at) VALUES ('plan', 'old', 't')",
                [],
            )
            .unwrap();
        }
        let store = Store::open(path.to_str().unwrap()).unwrap();
        store
            .remember(MemoryScope::User, "colour", "blue")
            .await
            .unwrap();
        let found = |scope| {
            let store = store.clone();
            async move {
                let memories = store.recall(scope, "").await.unwrap();
                memories
                    .into_iter()
                    .map(|m| (m.key, m.scope))
                    .collect::<Vec<_>>()
            }
        };
        let pair = |key: &str, scope: &str| (key.to_string(), scope.to_string());
        assert_eq!(
            found(&[MemoryScope::User]).await,
            vec![pair("colour", "user")]
        );
        let mut all = found(&[MemoryScope::User, MemoryScope::Admin]).await;
        all.sort();
        assert_eq!(all, vec![pair("colour", "user"), pair("plan", "admin")]);
    }

    /// Migration 18 rebuilds `conversations` (its title may be NULL): the messages that
    /// point at a conversation stay, and the title takes NULL afterwards.
    #[tokio::test]
    async fn rebuilding_conversations_keeps_their_messages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "foreign_keys", true).unwrap();
            conn.execute_batch(&MIGRATIONS[..12].join("\n")).unwrap();
            conn.pragma_update(None, "user_version", 12).unwrap();
            conn.execute_batch(
                "INSERT INTO conversations (id, title, created_at, updated_at) VALUES ('c1', 'kept', 't', 't');
                 INSERT INTO messages (conversation_id, role, content, created_at) VALUES ('c1', 'user', 'hi', 't');",
            )
            .unwrap();
        }
        let store = Store::open(path.to_str().unwrap()).unwrap();
        let history = store.conversation_history("c1").await.unwrap();
        assert_eq!(history.len(), 1, "the message survived the rebuild");
        store
            .run_sql(
                "UPDATE conversations SET title = NULL WHERE id = 'c1'",
                vec![],
                10,
                false,
                std::time::Duration::from_secs(5),
            )
            .await
            .unwrap();
        let found = store.get_conversation("c1").await.unwrap().unwrap();
        assert_eq!((found.title, found.message_count), (None, 1));
        let cascade = store
            .run_sql(
                "DELETE FROM conversations WHERE id = 'c1'",
                vec![],
                10,
                false,
                std::time::Duration::from_secs(5),
            )
            .await;
        assert!(cascade.is_ok(), "{cascade:?}");
        assert!(
            store.conversation_history("c1").await.unwrap().is_empty(),
            "foreign keys are on again: deleting the conversation deleted its messages"
        );
    }

    /// The spans [`check_spans_moved_into_turn_rows`] expects, as rows of the old
    /// `trace_spans` table: `(span_id, root_span_id, is_root, start_us, error)`.
    pub(in crate::bot::store) const OLD_SPANS: [(&str, &str, i64, i64, Option<&str>); 3] = [
        ("r1", "r1", 1, 1_000, None),
        ("l1", "r1", 0, 1_100, Some("refused")),
        ("r2", "r2", 1, 2_000, None),
    ];

    /// Inserts [`OLD_SPANS`] into the `trace_spans` table of migrations 8 to 11 (both
    /// backends take the statement, placeholders renumbered for PostgreSQL).
    pub(in crate::bot::store) const INSERT_OLD_SPAN: &str = "INSERT INTO trace_spans \
        (span_id, trace_id, is_root, kind, name, start_us, duration_us, error, attributes, \
        root_span_id, source) VALUES (?1, 't1', ?2, ?3, ?1, ?4, 5, ?5, '{\"request\":{\"n\":1}}', ?6, 'web')";

    /// Migration 12 (one row per turn, `trace_spans` a view): the spans stored before it
    /// are still read, listed, counted and pruned after it.
    pub(in crate::bot::store) async fn check_spans_moved_into_turn_rows(store: Store) {
        let spans = store.trace_spans("t1").await.unwrap();
        assert_eq!(
            spans.iter().map(|s| s.span_id.as_str()).collect::<Vec<_>>(),
            ["r1", "l1", "r2"]
        );
        assert_eq!(spans[1].attributes["request"], serde_json::json!({"n": 1}));
        let l1 = store.span("l1").await.unwrap().unwrap();
        assert_eq!((l1.root_span_id.as_str(), l1.is_root), ("r1", false));
        assert_eq!(
            store.last_failed_span().await.unwrap().unwrap().span_id,
            "l1"
        );
        let listed = store
            .list_traces(SpanQuery {
                status: Some("error".into()),
                source: Some("web".into()),
                limit: 5,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(listed.items.len(), 1, "one of the two turns failed");
        assert_eq!(listed.items[0].root.span_id, "r1");
        assert_eq!(listed.items[0].counts.spans, 2);
        // Read-only SQL reads the turn rows and the view over their spans.
        let counted = store
            .run_sql(
                "SELECT (SELECT count(*) FROM trace_turns), (SELECT count(*) FROM trace_spans)",
                Vec::new(),
                10,
                true,
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(
            counted.rows[0],
            [2, 3],
            "one row per turn, one view row per span"
        );
        store
            .append_spans(
                Vec::new(),
                Prune {
                    keep_turns: Some(1),
                    ..Prune::default()
                },
            )
            .await
            .unwrap();
        let kept = store.trace_spans("t1").await.unwrap();
        assert_eq!(kept.len(), 1, "the older turn went, spans and all");
        assert_eq!(kept[0].span_id, "r2");
    }

    #[tokio::test]
    async fn trace_spans_survive_the_migration_to_turn_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("traced.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&MIGRATIONS[..11].join("\n")).unwrap();
            conn.pragma_update(None, "user_version", 11).unwrap();
            for (id, root, is_root, start, error) in OLD_SPANS {
                let kind = if is_root == 1 { "turn" } else { "llm" };
                conn.execute(
                    INSERT_OLD_SPAN,
                    rusqlite::params![id, is_root, kind, start, error, root],
                )
                .unwrap();
            }
        }
        let store = Store::open(path.to_str().unwrap()).unwrap();
        let trace_objects = |schema: &'static str| {
            store.call(move |c| {
                let mut s = c.prepare(&format!(
                    "SELECT name FROM {schema}.sqlite_master WHERE type = 'index' \
                     AND tbl_name = 'trace_turns' AND sql IS NOT NULL \
                     OR name IN ('trace_turns', 'trace_spans') ORDER BY name"
                ))?;
                Ok(s.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()?)
            })
        };
        assert_eq!(
            trace_objects("main").await.unwrap(),
            Vec::<String>::new(),
            "migration 13 moves traces out of the bot's file"
        );
        assert!(dir.path().join("traced.traces.db").exists());
        assert_eq!(
            trace_objects("traces").await.unwrap(),
            [
                "trace_spans",
                "trace_turns",
                "trace_turns_by_end",
                "trace_turns_by_start",
                "trace_turns_by_turn",
                "trace_turns_failed",
                "trace_turns_mcp_calls"
            ]
        );
        check_spans_moved_into_turn_rows(store).await;
    }

    #[tokio::test]
    async fn corrupt_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("corrupt.db");
        std::fs::write(&path, vec![0x42u8; 8192]).unwrap();
        let err = Store::open(path.to_str().unwrap()).err().unwrap();
        let text = err.to_string();
        assert!(text.contains("corrupt.db"), "{text}");
        assert!(text.contains("DATABASE_PATH"), "{text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_from_many_tasks_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let mut stores = test_stores();
        stores[0] = Store::open(dir.path().join("c.db").to_str().unwrap()).unwrap();
        for store in stores {
            concurrent_writes_all_land(store).await;
        }
    }

    async fn concurrent_writes_all_land(store: Store) {
        let conversation = store.create_conversation("busy").await.unwrap();
        let mut handles = Vec::new();
        for task in 0..32 {
            let store = store.clone();
            let id = conversation.id.clone();
            handles.push(tokio::spawn(async move {
                for n in 0..10 {
                    store
                        .append_message(&id, NewMessage::text(Role::User, format!("{task}-{n}")))
                        .await
                        .unwrap();
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        let found = store.get_conversation(&conversation.id).await.unwrap();
        assert_eq!(found.unwrap().message_count, 320);
    }

    #[tokio::test]
    async fn message_pages_follow_cursors_in_stable_order() {
        for store in test_stores() {
            message_pages_follow_cursors(store).await;
        }
    }

    async fn message_pages_follow_cursors(store: Store) {
        let c = store.create_conversation("pages").await.unwrap();
        let mut ids = Vec::new();
        for n in 0..7 {
            let m = store
                .append_message(&c.id, NewMessage::text(Role::User, format!("m{n}")))
                .await
                .unwrap();
            ids.push(m.id);
        }
        let q = |limit, before, after| MessageQuery {
            limit,
            before,
            after,
        };
        let newest = store.list_messages(&c.id, q(3, None, None)).await.unwrap();
        assert_eq!(
            newest.messages.iter().map(|m| m.id).collect::<Vec<_>>(),
            ids[4..7]
        );
        assert!(newest.has_more);
        let older = store
            .list_messages(&c.id, q(3, Some(ids[4]), None))
            .await
            .unwrap();
        assert_eq!(
            older.messages.iter().map(|m| m.id).collect::<Vec<_>>(),
            ids[1..4]
        );
        let after = store
            .list_messages(&c.id, q(10, None, Some(ids[4])))
            .await
            .unwrap();
        assert_eq!(
            after.messages.iter().map(|m| m.id).collect::<Vec<_>>(),
            ids[5..7]
        );
        assert!(!after.has_more);
    }

    #[tokio::test]
    async fn a_page_of_long_messages_stops_at_its_byte_budget() {
        let store = test_stores().remove(0);
        let c = store.create_conversation("long").await.unwrap();
        let long = "x".repeat(MESSAGE_PAGE_BYTES / 3 + 1);
        let mut ids = Vec::new();
        for _ in 0..5 {
            let m = NewMessage::text(Role::User, long.clone());
            ids.push(store.append_message(&c.id, m).await.unwrap().id);
        }
        let q = |before, after| MessageQuery {
            limit: 1000,
            before,
            after,
        };
        let page_ids = |page: &MessagePage| page.messages.iter().map(|m| m.id).collect::<Vec<_>>();
        // Newest first: the two newest fit, the third would pass the budget.
        let newest = store.list_messages(&c.id, q(None, None)).await.unwrap();
        assert_eq!(page_ids(&newest), ids[3..5]);
        assert!(newest.has_more);
        let older = store
            .list_messages(&c.id, q(Some(ids[3]), None))
            .await
            .unwrap();
        assert_eq!(page_ids(&older), ids[1..3]);
        let oldest = store
            .list_messages(&c.id, q(Some(ids[1]), None))
            .await
            .unwrap();
        assert_eq!(
            (page_ids(&oldest), oldest.has_more),
            (ids[0..1].to_vec(), false)
        );
        // After a cursor: the oldest that fit, the rest next.
        let after = store
            .list_messages(&c.id, q(None, Some(ids[0])))
            .await
            .unwrap();
        assert_eq!(
            (page_ids(&after), after.has_more),
            (ids[1..3].to_vec(), true)
        );
        // One message larger than the budget still makes a page.
        let huge = NewMessage::text(Role::User, "y".repeat(MESSAGE_PAGE_BYTES + 1));
        let huge = store.append_message(&c.id, huge).await.unwrap().id;
        let page = store.list_messages(&c.id, q(None, None)).await.unwrap();
        assert_eq!((page_ids(&page), page.has_more), (vec![huge], true));
    }

    #[tokio::test]
    async fn appending_to_a_missing_conversation_writes_nothing() {
        for store in test_stores() {
            let err = store
                .append_message("nope", NewMessage::text(Role::User, "hi"))
                .await
                .unwrap_err();
            assert!(matches!(err, StoreError::NotFound(_)));
            let count = store
                .run_sql(
                    "SELECT COUNT(*) FROM messages",
                    vec![],
                    10,
                    true,
                    std::time::Duration::from_secs(5),
                )
                .await
                .unwrap();
            assert_eq!(count.rows, vec![vec![serde_json::json!(0)]]);
        }
    }
}
