//! The bot's SQLite store: one module owns every SQL statement the bot runs, so another
//! backend could replace it without touching callers.
//!
//! SQLite calls block, so they never run on an async worker thread: [`Store::call`] hands
//! a closure to tokio's blocking pool, where it gets the connection under a mutex. One
//! writer connection keeps writes serialised (SQLite allows one writer anyway); WAL mode
//! and a busy timeout let readers from other processes (or `db_query`'s read-only
//! connection, see [`sql`]) proceed alongside it.

use std::path::Path;
use std::sync::{Arc, Mutex};

use chrono::{SecondsFormat, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod mcp_tasks;
mod sql;
pub use mcp_tasks::StoredTaskRow;
mod traces;
pub use sql::{SqlOutcome, StatementSummary};
pub use traces::{Page, SpanQuery, TraceSummary};

/// Ordered migrations; `PRAGMA user_version` records how many have run.
const MIGRATIONS: &[&str] = &[
    // 1: the core tables.
    "CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('system','user','assistant','tool')),
        content TEXT NOT NULL,
        tool_calls TEXT,
        tool_call_id TEXT,
        name TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
    CREATE TABLE tasks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        description TEXT NOT NULL DEFAULT '',
        schedule TEXT NOT NULL,
        action TEXT NOT NULL,
        enabled INTEGER NOT NULL DEFAULT 1,
        status TEXT NOT NULL DEFAULT 'idle',
        last_run TEXT,
        next_run TEXT,
        last_result TEXT,
        created_at TEXT NOT NULL
    );
    CREATE TABLE embeddings (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        owner_kind TEXT NOT NULL,
        owner_id TEXT NOT NULL,
        model TEXT NOT NULL,
        vector BLOB NOT NULL,
        created_at TEXT NOT NULL
    );",
    // 2: long-term memory for the remember/recall tools.
    "CREATE TABLE memories (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );",
    // 3: whose rights a task runs with; tasks made before run as a chat user.
    "ALTER TABLE tasks ADD COLUMN run_as TEXT NOT NULL DEFAULT 'user'
        CHECK (run_as IN ('user', 'admin'));",
    // 4: ended /mcp session ids, so an ended session is not restored after a restart.
    "CREATE TABLE mcp_ended_sessions (
        id TEXT PRIMARY KEY,
        minted_ms INTEGER NOT NULL
    );
    CREATE INDEX mcp_ended_sessions_by_age ON mcp_ended_sessions(minted_ms);",
    // 5: tools enabled or disabled at runtime (toggle_tool), and the bot's warnings and
    // errors kept across restarts (server_log's database reader), newest rows kept.
    "CREATE TABLE tool_settings (
        name TEXT PRIMARY KEY,
        enabled INTEGER NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE log_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        time_us INTEGER NOT NULL,
        level TEXT NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX log_events_by_time ON log_events(time_us);",
    // 6: the design documents' column spellings, so their example queries run as
    // written (`SELECT * FROM messages ORDER BY createdAt DESC`). Virtual generated
    // columns: nothing is stored twice, and INSERTs without a column list are unchanged.
    "ALTER TABLE messages ADD COLUMN conversationId TEXT GENERATED ALWAYS AS (conversation_id) VIRTUAL;
    ALTER TABLE messages ADD COLUMN createdAt TEXT GENERATED ALWAYS AS (created_at) VIRTUAL;
    ALTER TABLE conversations ADD COLUMN createdAt TEXT GENERATED ALWAYS AS (created_at) VIRTUAL;
    ALTER TABLE conversations ADD COLUMN updatedAt TEXT GENERATED ALWAYS AS (updated_at) VIRTUAL;
    ALTER TABLE tasks ADD COLUMN lastRun TEXT GENERATED ALWAYS AS (last_run) VIRTUAL;
    ALTER TABLE tasks ADD COLUMN nextRun TEXT GENERATED ALWAYS AS (next_run) VIRTUAL;",
    // 7: /mcp tasks (the Tasks extension): each task's record as JSON, kept until it
    // expires, so a result outlives the request and a restart.
    "CREATE TABLE mcp_tasks (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        session TEXT,
        finished INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX mcp_tasks_by_owner ON mcp_tasks(owner, finished);
    CREATE INDEX mcp_tasks_by_session ON mcp_tasks(session);
    CREATE INDEX mcp_tasks_by_expiry ON mcp_tasks(expires_ms);",
    // 8: turn traces, one row per span (see `traces`); a trace's root has is_root = 1.
    "CREATE TABLE trace_spans (
        span_id TEXT PRIMARY KEY,
        trace_id TEXT NOT NULL,
        parent_span_id TEXT,
        is_root INTEGER NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('turn','llm','tool','agent')),
        name TEXT NOT NULL,
        source TEXT,
        conversation_id TEXT,
        start_us INTEGER NOT NULL,
        duration_us INTEGER NOT NULL,
        error TEXT,
        model TEXT,
        tool TEXT,
        input_tokens INTEGER,
        output_tokens INTEGER,
        attributes TEXT NOT NULL,
        root_span_id TEXT NOT NULL
    );
    CREATE INDEX trace_spans_by_trace ON trace_spans(trace_id, start_us);
    CREATE INDEX trace_spans_by_turn ON trace_spans(root_span_id);
    CREATE INDEX trace_spans_roots ON trace_spans(is_root, start_us);
    CREATE INDEX trace_spans_by_kind ON trace_spans(kind, start_us);
    CREATE INDEX trace_spans_by_start ON trace_spans(start_us);",
];

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database at {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("{}", explain_sqlite(.0))]
    Sqlite(#[from] rusqlite::Error),
    #[error("{0}")]
    NotFound(String),
    /// A uniqueness rule was broken (e.g. a task name already taken).
    #[error("{0}")]
    Conflict(String),
    #[error("the database worker stopped unexpectedly")]
    WorkerGone,
    /// A statement that would change something, refused in read-only mode.
    #[error("a {0} statement is not allowed here: read-only mode runs only statements that read")]
    ReadOnly(String),
}

/// How long a statement waits for another connection's lock before giving up.
pub(crate) const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A SQLite error in words that say what to do about it. The failed statement (or
/// transaction) wrote nothing.
fn explain_sqlite(error: &rusqlite::Error) -> String {
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

/// The current time as RFC 3339 UTC with milliseconds, the one timestamp format we store.
pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Conversation {
    pub id: String,
    pub title: String,
    pub created_at: String,
    pub updated_at: String,
    pub message_count: i64,
}

/// A tool call requested by the model, stored with the assistant message that made it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    fn parse(text: &str) -> Role {
        match text {
            "system" => Role::System,
            "user" => Role::User,
            "tool" => Role::Tool,
            _ => Role::Assistant,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Message {
    pub id: i64,
    pub conversation_id: String,
    pub role: Role,
    pub content: String,
    pub tool_calls: Option<Vec<ToolCall>>,
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
    pub created_at: String,
}

/// A message about to be stored.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub role: Role,
    pub content: String,
    pub tool_calls: Option<Vec<ToolCall>>,
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
}

impl NewMessage {
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        NewMessage {
            role,
            content: content.into(),
            tool_calls: None,
            tool_call_id: None,
            name: None,
        }
    }
}

/// A page of messages and whether more exist beyond it in the direction read.
#[derive(Debug, Clone, Serialize)]
pub struct MessagePage {
    pub messages: Vec<Message>,
    pub has_more: bool,
}

/// Which messages of a conversation to read. Cursors are message ids.
#[derive(Debug, Clone, Copy, Default)]
pub struct MessageQuery {
    pub limit: usize,
    pub before: Option<i64>,
    pub after: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Task {
    pub id: i64,
    pub name: String,
    pub description: String,
    pub schedule: String,
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
    conn: Arc<Mutex<Connection>>,
    path: Arc<str>,
}

impl Store {
    /// Opens (creating if needed) the database and runs pending migrations.
    /// `:memory:` gives a private in-memory database.
    pub fn open(path: &str) -> Result<Store, StoreError> {
        let open_error = |reason: String| StoreError::Open {
            path: path.to_string(),
            reason,
        };
        if path != ":memory:"
            && let Some(parent) = Path::new(path).parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|e| {
                open_error(format!(
                    "cannot create folder {}: {e}; set DATABASE_PATH to a writable location",
                    parent.display()
                ))
            })?;
        }
        let conn = Connection::open(path).map_err(|e| {
            open_error(format!(
                "{e}; check that DATABASE_PATH points to a writable file"
            ))
        })?;
        let mut conn = conn;
        configure(&conn).map_err(|e| {
            open_error(format!(
                "{e}; the file may be corrupt or not a SQLite database (move it aside or set DATABASE_PATH)"
            ))
        })?;
        migrate(&mut conn).map_err(|e| open_error(format!("migration failed: {e}")))?;
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
            path: path.into(),
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Size of the database file (and its WAL) in bytes; `None` for `:memory:`.
    pub fn file_size(&self) -> Option<u64> {
        if &*self.path == ":memory:" {
            return None;
        }
        let main = std::fs::metadata(&*self.path).ok()?.len();
        let wal = std::fs::metadata(format!("{}-wal", self.path))
            .map(|m| m.len())
            .unwrap_or(0);
        Some(main + wal)
    }

    /// Runs `f` with the writer connection on the blocking pool.
    pub async fn call<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock poisons it; the connection itself is still
            // usable, so recover it rather than failing every later call.
            let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(|_| StoreError::WorkerGone)?
    }

    // ---- conversations -------------------------------------------------------------

    pub async fn create_conversation(&self, title: &str) -> Result<Conversation, StoreError> {
        let title = title.to_string();
        self.call(move |c| {
            let id = uuid::Uuid::new_v4().to_string();
            let now = now_rfc3339();
            c.execute(
                "INSERT INTO conversations (id, title, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
                params![id, title, now],
            )?;
            Ok(Conversation {
                id,
                title,
                created_at: now.clone(),
                updated_at: now,
                message_count: 0,
            })
        })
        .await
    }

    pub async fn get_conversation(&self, id: &str) -> Result<Option<Conversation>, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            Ok(c.query_row(
                &format!("{CONVERSATION_SELECT} WHERE c.id = ?1"),
                [id],
                conversation_from_row,
            )
            .optional()?)
        })
        .await
    }

    /// Conversations, most recently updated first.
    pub async fn list_conversations(&self, limit: usize) -> Result<Vec<Conversation>, StoreError> {
        self.call(move |c| {
            let mut stmt = c.prepare(&format!(
                "{CONVERSATION_SELECT} ORDER BY c.updated_at DESC, c.id LIMIT ?1"
            ))?;
            let rows = stmt.query_map([limit as i64], conversation_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn set_conversation_title(&self, id: &str, title: &str) -> Result<(), StoreError> {
        let (id, title) = (id.to_string(), title.to_string());
        self.call(move |c| {
            c.execute(
                "UPDATE conversations SET title = ?2 WHERE id = ?1",
                params![id, title],
            )?;
            Ok(())
        })
        .await
    }

    // ---- messages ------------------------------------------------------------------

    /// Appends a message and bumps the conversation's `updated_at`, atomically.
    pub async fn append_message(
        &self,
        conversation_id: &str,
        message: NewMessage,
    ) -> Result<Message, StoreError> {
        let conversation_id = conversation_id.to_string();
        self.call(move |c| {
            let tx = c.transaction()?;
            let now = now_rfc3339();
            let updated = tx.execute(
                "UPDATE conversations SET updated_at = ?2 WHERE id = ?1",
                params![conversation_id, now],
            )?;
            if updated == 0 {
                return Err(StoreError::NotFound(format!(
                    "conversation {conversation_id} does not exist"
                )));
            }
            let tool_calls = message
                .tool_calls
                .as_ref()
                .map(|calls| serde_json::to_string(calls).unwrap_or_default());
            tx.execute(
                "INSERT INTO messages (conversation_id, role, content, tool_calls, tool_call_id, name, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    conversation_id,
                    message.role.as_str(),
                    message.content,
                    tool_calls,
                    message.tool_call_id,
                    message.name,
                    now
                ],
            )?;
            let id = tx.last_insert_rowid();
            tx.commit()?;
            Ok(Message {
                id,
                conversation_id,
                role: message.role,
                content: message.content,
                tool_calls: message.tool_calls,
                tool_call_id: message.tool_call_id,
                name: message.name,
                created_at: now,
            })
        })
        .await
    }

    /// A page of a conversation's messages, oldest first. With `after`, the page starts
    /// just after that id; otherwise it ends just before `before` (or at the newest).
    pub async fn list_messages(
        &self,
        conversation_id: &str,
        query: MessageQuery,
    ) -> Result<MessagePage, StoreError> {
        let conversation_id = conversation_id.to_string();
        self.call(move |c| {
            let limit = query.limit.max(1);
            // Fetch one extra row to learn whether more exist.
            let fetch = (limit + 1) as i64;
            let mut messages = if let Some(after) = query.after {
                let mut stmt = c.prepare(&format!(
                    "{MESSAGE_SELECT} WHERE conversation_id = ?1 AND id > ?2 AND id < ?3 ORDER BY id ASC LIMIT ?4"
                ))?;
                let before = query.before.unwrap_or(i64::MAX);
                stmt.query_map(params![conversation_id, after, before, fetch], message_from_row)?
                    .collect::<Result<Vec<_>, _>>()?
            } else {
                let before = query.before.unwrap_or(i64::MAX);
                let mut stmt = c.prepare(&format!(
                    "{MESSAGE_SELECT} WHERE conversation_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
                ))?;
                let mut rows = stmt
                    .query_map(params![conversation_id, before, fetch], message_from_row)?
                    .collect::<Result<Vec<_>, _>>()?;
                rows.reverse();
                rows
            };
            let has_more = messages.len() > limit;
            if has_more {
                if query.after.is_some() {
                    messages.truncate(limit);
                } else {
                    messages.remove(0);
                }
            }
            Ok(MessagePage { messages, has_more })
        })
        .await
    }

    /// Every message of a conversation, oldest first (the agent's context).
    pub async fn conversation_history(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<Message>, StoreError> {
        let conversation_id = conversation_id.to_string();
        self.call(move |c| {
            let mut stmt = c.prepare(&format!(
                "{MESSAGE_SELECT} WHERE conversation_id = ?1 ORDER BY id ASC"
            ))?;
            let rows = stmt.query_map([conversation_id], message_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    // ---- tasks ---------------------------------------------------------------------

    pub async fn create_task(
        &self,
        name: &str,
        description: &str,
        schedule: &str,
        action: Value,
        next_run: Option<String>,
        run_as: &'static str,
    ) -> Result<Task, StoreError> {
        let (name, description, schedule) = (
            name.to_string(),
            description.to_string(),
            schedule.to_string(),
        );
        self.call(move |c| {
            let inserted = c.execute(
                "INSERT INTO tasks (name, description, schedule, action, next_run, created_at, run_as)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    name,
                    description,
                    schedule,
                    action.to_string(),
                    next_run,
                    now_rfc3339(),
                    run_as
                ],
            );
            match inserted {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    return Err(StoreError::Conflict(format!(
                        "a task named `{name}` already exists; pick another name"
                    )));
                }
                other => other?,
            };
            let id = c.last_insert_rowid();
            Ok(c.query_row(&format!("{TASK_SELECT} WHERE id = ?1"), [id], task_from_row)?)
        })
        .await
    }

    pub async fn list_tasks(&self) -> Result<Vec<Task>, StoreError> {
        self.call(|c| {
            let mut stmt = c.prepare(&format!("{TASK_SELECT} ORDER BY id"))?;
            let rows = stmt.query_map([], task_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn get_task(&self, id: i64) -> Result<Option<Task>, StoreError> {
        self.call(move |c| {
            Ok(
                c.query_row(&format!("{TASK_SELECT} WHERE id = ?1"), [id], task_from_row)
                    .optional()?,
            )
        })
        .await
    }

    /// Marks a task as running; returns false if it already was (so it never runs twice at once).
    pub async fn mark_task_running(&self, id: i64) -> Result<bool, StoreError> {
        self.call(move |c| {
            let changed = c.execute(
                "UPDATE tasks SET status = 'running' WHERE id = ?1 AND status != 'running'",
                [id],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    pub async fn finish_task_run(
        &self,
        id: i64,
        status: &str,
        result: &str,
        next_run: Option<String>,
    ) -> Result<(), StoreError> {
        let (status, result) = (status.to_string(), result.to_string());
        self.call(move |c| {
            c.execute(
                "UPDATE tasks SET status = ?2, last_result = ?3, last_run = ?4, next_run = ?5 WHERE id = ?1",
                params![id, status, result, now_rfc3339(), next_run],
            )?;
            Ok(())
        })
        .await
    }

    /// Clears `running` left behind by a crash, so those tasks run again.
    pub async fn reset_stale_running_tasks(&self) -> Result<usize, StoreError> {
        self.call(|c| {
            Ok(c.execute(
                "UPDATE tasks SET status = 'interrupted' WHERE status = 'running'",
                [],
            )?)
        })
        .await
    }

    // ---- tool settings -------------------------------------------------------------

    /// Records that a tool was enabled or disabled at runtime.
    pub async fn save_tool_enabled(&self, name: &str, enabled: bool) -> Result<(), StoreError> {
        let name = name.to_string();
        self.call(move |c| {
            c.execute(
                "INSERT INTO tool_settings (name, enabled, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at",
                params![name, enabled, now_rfc3339()],
            )?;
            Ok(())
        })
        .await
    }

    /// Every saved enabled state, by tool name.
    pub async fn tool_settings(&self) -> Result<Vec<(String, bool)>, StoreError> {
        self.call(|c| {
            let mut statement =
                c.prepare("SELECT name, enabled FROM tool_settings ORDER BY name")?;
            let rows = statement
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    // ---- log events (server_log's database reader) ----------------------------------

    /// Appends log events — `(time in µs, level name, the record as JSON text)` — and
    /// deletes the oldest beyond `keep`, in one transaction.
    pub async fn append_log_events(
        &self,
        events: Vec<(i64, String, String)>,
        keep: usize,
    ) -> Result<(), StoreError> {
        self.call(move |c| {
            let tx = c.transaction()?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO log_events (time_us, level, record) VALUES (?1, ?2, ?3)",
                )?;
                for (time_us, level, record) in &events {
                    insert.execute(params![time_us, level, record])?;
                }
            }
            tx.execute(
                "DELETE FROM log_events WHERE id <= (SELECT max(id) FROM log_events) - ?1",
                params![keep as i64],
            )?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// The newest log events (as the JSON text they were saved with), newest first: at
    /// most `limit`, only these levels (all when empty), only after `after_us`, only
    /// those whose text contains `contains` (SQLite's ASCII-case-insensitive `LIKE`, so
    /// callers filter exactly afterwards).
    pub async fn log_events(
        &self,
        levels: Vec<String>,
        after_us: Option<i64>,
        contains: Option<String>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.call(move |c| {
            let mut sql = String::from("SELECT record FROM log_events WHERE time_us > ?1");
            if !levels.is_empty() {
                let placeholders: Vec<String> =
                    (0..levels.len()).map(|i| format!("?{}", i + 4)).collect();
                sql.push_str(&format!(" AND level IN ({})", placeholders.join(",")));
            }
            sql.push_str(
                " AND (?2 IS NULL OR record LIKE ?2 ESCAPE '\\') ORDER BY id DESC LIMIT ?3",
            );
            let pattern = contains.as_deref().map(contains_pattern);
            let mut values: Vec<rusqlite::types::Value> = vec![
                after_us.unwrap_or(i64::MIN).into(),
                pattern.map_or(rusqlite::types::Value::Null, Into::into),
                (limit as i64).into(),
            ];
            values.extend(levels.into_iter().map(Into::into));
            let mut statement = c.prepare(&sql)?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(values), |r| {
                    r.get::<_, String>(0)
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    // ---- memories ------------------------------------------------------------------

    pub async fn remember(&self, key: &str, value: &str) -> Result<(), StoreError> {
        let (key, value) = (key.to_string(), value.to_string());
        self.call(move |c| {
            c.execute(
                "INSERT INTO memories (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                params![key, value, now_rfc3339()],
            )?;
            Ok(())
        })
        .await
    }

    /// Memories whose key or value contains `query` (all of them for an empty query).
    pub async fn recall(&self, query: &str) -> Result<Vec<(String, String)>, StoreError> {
        let pattern = contains_pattern(query);
        self.call(move |c| {
            let mut stmt = c.prepare(
                "SELECT key, value FROM memories
                 WHERE key LIKE ?1 ESCAPE '\\' OR value LIKE ?1 ESCAPE '\\'
                 ORDER BY updated_at DESC LIMIT 50",
            )?;
            let rows = stmt.query_map([pattern], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }
}

/// Ended `/mcp` session ids (the endpoint's session ledger).
impl Store {
    /// Most ended ids kept; the oldest go first.
    const ENDED_SESSIONS_KEPT: i64 = 100_000;

    /// Ids of sessions that ended, minted at `minted_after_ms` or later. Older rows are
    /// past the sessions' maximum age and are deleted on the way.
    pub async fn ended_sessions(&self, minted_after_ms: u64) -> Result<Vec<String>, StoreError> {
        self.call(move |c| {
            c.execute(
                "DELETE FROM mcp_ended_sessions WHERE minted_ms < ?1",
                [minted_after_ms as i64],
            )?;
            c.execute(
                "DELETE FROM mcp_ended_sessions WHERE id NOT IN
                   (SELECT id FROM mcp_ended_sessions ORDER BY minted_ms DESC LIMIT ?1)",
                [Self::ENDED_SESSIONS_KEPT],
            )?;
            let mut stmt = c.prepare("SELECT id FROM mcp_ended_sessions")?;
            let ids = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            Ok(ids)
        })
        .await
    }

    pub async fn record_ended_session(&self, id: &str, minted_ms: u64) -> Result<(), StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            c.execute(
                "INSERT OR IGNORE INTO mcp_ended_sessions (id, minted_ms) VALUES (?1, ?2)",
                params![id, minted_ms as i64],
            )?;
            Ok(())
        })
        .await
    }
}

/// Tables with their columns, indexes and row counts (for `porthole://db/schema`).
impl Store {
    pub async fn describe_schema(&self) -> Result<Value, StoreError> {
        self.call(|c| {
            let mut tables = Vec::new();
            let names: Vec<(String, String)> = {
                let mut stmt = c.prepare(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
                )?;
                stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, Option<String>>(1)?.unwrap_or_default())))?
                    .collect::<Result<_, _>>()?
            };
            for (name, sql) in names {
                let quoted = name.replace('"', "\"\"");
                let mut stmt = c.prepare(&format!("PRAGMA table_info(\"{quoted}\")"))?;
                let columns: Vec<Value> = stmt
                    .query_map([], |r| {
                        Ok(serde_json::json!({
                            "name": r.get::<_, String>(1)?,
                            "type": r.get::<_, String>(2)?,
                            "not_null": r.get::<_, bool>(3)?,
                            "primary_key": r.get::<_, i64>(5)? > 0,
                        }))
                    })?
                    .collect::<Result<_, _>>()?;
                let mut stmt = c.prepare(&format!("PRAGMA index_list(\"{quoted}\")"))?;
                let indexes: Vec<String> = stmt
                    .query_map([], |r| r.get::<_, String>(1))?
                    .collect::<Result<_, _>>()?;
                let rows: i64 =
                    c.query_row(&format!("SELECT COUNT(*) FROM \"{quoted}\""), [], |r| r.get(0))?;
                tables.push(serde_json::json!({
                    "name": name, "columns": columns, "indexes": indexes, "rows": rows, "sql": sql,
                }));
            }
            Ok(serde_json::json!({"schema_version": schema_version(), "tables": tables}))
        })
        .await
    }
}

const CONVERSATION_SELECT: &str = "SELECT c.id, c.title, c.created_at, c.updated_at,
    (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) FROM conversations c";
const MESSAGE_SELECT: &str = "SELECT id, conversation_id, role, content, tool_calls, tool_call_id, name, created_at FROM messages";
const TASK_SELECT: &str = "SELECT id, name, description, schedule, action, enabled, status, last_run, next_run, last_result, created_at, run_as FROM tasks";

fn conversation_from_row(r: &rusqlite::Row) -> rusqlite::Result<Conversation> {
    Ok(Conversation {
        id: r.get(0)?,
        title: r.get(1)?,
        created_at: r.get(2)?,
        updated_at: r.get(3)?,
        message_count: r.get(4)?,
    })
}

fn message_from_row(r: &rusqlite::Row) -> rusqlite::Result<Message> {
    let tool_calls: Option<String> = r.get(4)?;
    Ok(Message {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        role: Role::parse(&r.get::<_, String>(2)?),
        content: r.get(3)?,
        tool_calls: tool_calls.and_then(|t| serde_json::from_str(&t).ok()),
        tool_call_id: r.get(5)?,
        name: r.get(6)?,
        created_at: r.get(7)?,
    })
}

fn task_from_row(r: &rusqlite::Row) -> rusqlite::Result<Task> {
    let action: String = r.get(4)?;
    Ok(Task {
        id: r.get(0)?,
        name: r.get(1)?,
        description: r.get(2)?,
        schedule: r.get(3)?,
        action: serde_json::from_str(&action).unwrap_or(Value::String(action)),
        enabled: r.get(5)?,
        status: r.get(6)?,
        last_run: r.get(7)?,
        next_run: r.get(8)?,
        last_result: r.get(9)?,
        created_at: r.get(10)?,
        run_as: r.get(11)?,
    })
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Reading the schema first surfaces "file is not a database" before any pragma.
    conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(())
}

/// A `LIKE … ESCAPE '\\'` pattern matching text that contains `text` literally.
fn contains_pattern(text: &str) -> String {
    format!(
        "%{}%",
        text.replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    )
}

/// Runs every migration newer than the database's `user_version`, each in its own
/// transaction, so a failure leaves the database at the last good version.
fn migrate(conn: &mut Connection) -> rusqlite::Result<usize> {
    let current: usize =
        conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    let mut applied = 0;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (index + 1) as i64)?;
        tx.commit()?;
        applied += 1;
    }
    Ok(applied)
}

/// The number of migrations this build knows; the schema version of a migrated database.
pub fn schema_version() -> usize {
    MIGRATIONS.len()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(found.unwrap().title, "first");
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
            conn.pragma_update(None, "user_version", 1).unwrap();
        }
        let store = Store::open(path.to_str().unwrap()).unwrap();
        store.remember("colour", "blue").await.unwrap();
        assert_eq!(
            store.recall("col").await.unwrap(),
            vec![("colour".to_string(), "blue".to_string())]
        );
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

    #[tokio::test]
    async fn concurrent_writes_from_many_tasks_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("c.db").to_str().unwrap()).unwrap();
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
        let store = Store::open(":memory:").unwrap();
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
    async fn appending_to_a_missing_conversation_writes_nothing() {
        let store = Store::open(":memory:").unwrap();
        let err = store
            .append_message("nope", NewMessage::text(Role::User, "hi"))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)));
        let count: i64 = store
            .call(|c| Ok(c.query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(count, 0);
    }
}
