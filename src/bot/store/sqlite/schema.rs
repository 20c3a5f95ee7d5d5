//! The SQLite schema (the twin of `postgres/schema.rs`): ordered migrations, connection
//! settings, and the description behind `porthole://db/schema`. A new migration goes at
//! the end of [`MIGRATIONS`] here and, in PostgreSQL's words, of its list there.

use async_trait::async_trait;
use rusqlite::Connection;
use serde_json::Value;

use super::{BUSY_TIMEOUT, Sqlite};
use crate::bot::store::backend::Schema;
use crate::bot::store::{StoreError, schema_version};

/// `trace_turns` as migration 12 made it in the bot's file and the traces file's first
/// migration makes it in its own: a macro, so both are one text (`concat!` takes only
/// literals). Frozen, as every migration is: a change is a new traces migration.
macro_rules! trace_turns_table {
    () => {
        "CREATE TABLE trace_turns (
        id INTEGER PRIMARY KEY,
        trace_id TEXT NOT NULL,
        root_span_id TEXT NOT NULL,
        has_root INTEGER NOT NULL,
        start_us INTEGER NOT NULL,
        duration_us INTEGER NOT NULL,
        end_us INTEGER NOT NULL,
        conversation_id TEXT,
        source TEXT,
        failed INTEGER NOT NULL,
        span_ids TEXT NOT NULL,
        spans TEXT NOT NULL
    );\n"
    };
}

/// The indexes of `trace_turns` and the `trace_spans` view over it (one row per span),
/// shared as [`trace_turns_table`] is.
macro_rules! trace_turns_indexes_and_view {
    () => {
        "CREATE UNIQUE INDEX trace_turns_by_turn ON trace_turns(trace_id, root_span_id);
    CREATE INDEX trace_turns_by_start ON trace_turns(start_us, root_span_id);
    CREATE INDEX trace_turns_by_end ON trace_turns(end_us, id);
    CREATE INDEX trace_turns_failed ON trace_turns(end_us, id) WHERE failed > 0;
    CREATE VIEW trace_spans AS SELECT
        s.value ->> 'span_id' AS span_id,
        t.trace_id AS trace_id,
        s.value ->> 'parent_span_id' AS parent_span_id,
        coalesce(s.value ->> 'is_root', 0) AS is_root,
        s.value ->> 'kind' AS kind,
        s.value ->> 'name' AS name,
        s.value ->> 'source' AS source,
        s.value ->> 'conversation_id' AS conversation_id,
        s.value ->> 'start_us' AS start_us,
        s.value ->> 'duration_us' AS duration_us,
        s.value ->> 'error' AS error,
        s.value ->> 'model' AS model,
        s.value ->> 'tool' AS tool,
        s.value ->> 'input_tokens' AS input_tokens,
        s.value ->> 'output_tokens' AS output_tokens,
        coalesce(s.value -> 'attributes', '{}') AS attributes,
        t.root_span_id AS root_span_id
    FROM trace_turns t, json_each(t.spans) s;"
    };
}

/// Ordered migrations; `PRAGMA user_version` records how many have run.
pub(in crate::bot::store) const MIGRATIONS: &[&str] = &[
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
    // 9: replicas sharing one database (PostgreSQL; harmless with one SQLite process):
    // which replica claimed a running task and until when its claim holds (a lease,
    // renewed while the run goes on), a ledger with one row per task and due time, and
    // which replica wrote a log event.
    "ALTER TABLE tasks ADD COLUMN claimed_by TEXT;
    ALTER TABLE tasks ADD COLUMN lease_until_ms INTEGER;
    ALTER TABLE log_events ADD COLUMN replica TEXT;
    CREATE TABLE task_runs (
        task_id INTEGER NOT NULL,
        due_at TEXT NOT NULL,
        replica TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL,
        PRIMARY KEY (task_id, due_at)
    );",
    // 10: conversations by last activity, for retention (keep the newest N, delete
    // those idle too long) without reading the whole table.
    "CREATE INDEX conversations_by_activity ON conversations(updated_at, id);",
    // 11: trace_spans with fewer, cheaper indexes, the rows kept (only indexes change).
    // Each stored span cost a b-tree insert and later a delete in each of six indexes; now
    // four, two of them on roots or failures only. A turn is found by (trace_id,
    // root_span_id), so one index serves both a trace and a turn; the kind index goes
    // (span listings walk the start index newest first); the roots and start indexes end
    // in span_id, so listings in (start_us, span_id) order need no sort; last_error
    // reads the newest failure from a partial index instead of scanning every span.
    "DROP INDEX trace_spans_by_trace;
    DROP INDEX trace_spans_by_turn;
    DROP INDEX trace_spans_roots;
    DROP INDEX trace_spans_by_kind;
    DROP INDEX trace_spans_by_start;
    CREATE INDEX trace_spans_by_turn ON trace_spans(trace_id, root_span_id);
    CREATE INDEX trace_spans_roots ON trace_spans(start_us, span_id) WHERE is_root = 1;
    CREATE INDEX trace_spans_by_start ON trace_spans(start_us, span_id);
    CREATE INDEX trace_spans_failed ON trace_spans(start_us + duration_us) WHERE error IS NOT NULL;",
    // 12: one row per turn (`trace_turns`), its spans a JSON array, and `trace_spans` a
    // view over them with the columns the table had. A turn stored as one row costs one
    // insert in a table and two indexes, where a span per row cost one in a table and four
    // indexes for each of its spans: the writer's work on every turn, measured in
    // docs/performance.md §6. The columns beside `spans` are what listing turns, cutting
    // back their count and age, and finding the latest failure read without opening the
    // JSON (`span_ids` lists the turn's span ids, so a span is found by its id without
    // opening every turn's JSON; `end_us` is when the last of its spans ended, so the
    // newest spans across turns are found by walking the newest turns only); a turn whose
    // root has not arrived yet (`has_root = 0`) is stored all the same
    // and is completed when the rest of its spans arrive.
    concat!(
        trace_turns_table!(),
        "INSERT INTO trace_turns (trace_id, root_span_id, has_root, start_us, duration_us,
        end_us, conversation_id, source, failed, span_ids, spans)
    SELECT trace_id, root_span_id, max(is_root),
        coalesce(min(CASE WHEN is_root = 1 THEN start_us END), min(start_us)),
        coalesce(max(CASE WHEN is_root = 1 THEN duration_us END), 0),
        max(start_us + duration_us),
        coalesce(max(CASE WHEN is_root = 1 THEN conversation_id END), max(conversation_id)),
        max(CASE WHEN is_root = 1 THEN source END),
        sum(error IS NOT NULL),
        group_concat(span_id, ' '),
        json_group_array(json_object('trace_id', trace_id, 'span_id', span_id,
            'parent_span_id', parent_span_id, 'is_root', json(iif(is_root = 1, 'true', 'false')),
            'root_span_id', root_span_id, 'kind', kind, 'name', name, 'source', source,
            'conversation_id', conversation_id, 'start_us', start_us, 'duration_us', duration_us,
            'error', error, 'model', model, 'tool', tool, 'input_tokens', input_tokens,
            'output_tokens', output_tokens, 'attributes', json(attributes)))
    FROM (SELECT * FROM trace_spans ORDER BY start_us, span_id)
    GROUP BY trace_id, root_span_id
    ORDER BY min(start_us);
    DROP TABLE trace_spans;
",
        trace_turns_indexes_and_view!()
    ),
    // 13: traces move to a SQLite file of their own (see `files`), so the trace writer
    // and the bot's own writes never wait for each other. `OR IGNORE`: a copy that
    // committed in the traces file while this migration did not (the two files commit
    // apart) is not copied twice when it runs again.
    "INSERT OR IGNORE INTO traces.trace_turns (trace_id, root_span_id, has_root, start_us,
        duration_us, end_us, conversation_id, source, failed, span_ids, spans)
    SELECT trace_id, root_span_id, has_root, start_us, duration_us, end_us,
        conversation_id, source, failed, span_ids, spans
    FROM main.trace_turns ORDER BY id;
    DROP VIEW main.trace_spans;
    DROP TABLE main.trace_turns;",
    // 14: the tool definitions LLM calls offered, each distinct set once: on SQLite in the
    // traces file (its migration 2), so nothing here; PostgreSQL makes the table.
    "",
    // 15: /mcp tasks shared by replicas: the replica that runs a task (its owner), the
    // lease it renews while it runs it, and answers another replica received for it.
    "ALTER TABLE mcp_tasks ADD COLUMN owner_replica TEXT;
    ALTER TABLE mcp_tasks ADD COLUMN lease_until_ms INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE mcp_tasks ADD COLUMN forwarded_input TEXT;",
    // 16: MCP servers enabled or disabled at runtime (toggle_mcp_server), kept across
    // restarts and shared by replicas.
    "CREATE TABLE mcp_server_settings (
        name TEXT PRIMARY KEY,
        enabled INTEGER NOT NULL,
        updated_at TEXT NOT NULL
    );",
    // 17: the traces of /mcp tool calls, kept under a count of their own: an index in
    // the traces file (its migration 3), so nothing here.
    "",
    // 18: a conversation's title may be NULL, so the design documents' example
    // `UPDATE conversations SET title = NULL WHERE id = '…'` ("simulate corrupted state")
    // runs as written. SQLite drops a NOT NULL only by rebuilding the table; `migrate`
    // runs this with foreign keys off, so dropping the old table does not cascade to the
    // messages, and checks them before it commits.
    "CREATE TABLE conversations_rebuilt (
        id TEXT PRIMARY KEY,
        title TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        createdAt TEXT GENERATED ALWAYS AS (created_at) VIRTUAL,
        updatedAt TEXT GENERATED ALWAYS AS (updated_at) VIRTUAL
    );
    INSERT INTO conversations_rebuilt (id, title, created_at, updated_at)
        SELECT id, title, created_at, updated_at FROM conversations;
    DROP TABLE conversations;
    ALTER TABLE conversations_rebuilt RENAME TO conversations;
    CREATE INDEX conversations_by_activity ON conversations(updated_at, id);",
    // 19: memories belong to the rights of the turn that stored them (`admin` or `user`):
    // a chat user's `recall` must not read, nor its `remember` overwrite, what an admin
    // turn kept. Memories stored before were any turn's, and a row written by hand
    // (`db_query`) names no scope: both are the admins'.
    // The columns in PostgreSQL's order (its `ADD COLUMN` puts `scope` last).
    "CREATE TABLE memories_scoped (
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        scope TEXT NOT NULL DEFAULT 'admin' CHECK (scope IN ('user', 'admin')),
        PRIMARY KEY (scope, key)
    );
    INSERT INTO memories_scoped (scope, key, value, updated_at)
        SELECT 'admin', key, value, updated_at FROM memories;
    DROP TABLE memories;
    ALTER TABLE memories_scoped RENAME TO memories;",
    // 20: when a replica last served each /mcp session, so that idleness is counted
    // across replicas (one process on SQLite writes none; the table keeps both lists
    // as long).
    "CREATE TABLE mcp_session_seen (
        id TEXT PRIMARY KEY,
        seen_ms INTEGER NOT NULL
    );
    CREATE INDEX mcp_session_seen_by_age ON mcp_session_seen(seen_ms);",
    // 21: named sets of recorded LLM calls (save_replay_set), each call copied whole so
    // trace retention does not erase it, and each set's last run. In the bot's file,
    // not the traces': they are the user's, not the traces' to prune.
    "CREATE TABLE replay_sets (
        name TEXT PRIMARY KEY,
        description TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_run_at TEXT,
        last_run TEXT
    );
    CREATE TABLE replay_set_calls (
        set_name TEXT NOT NULL REFERENCES replay_sets(name) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        span_id TEXT NOT NULL,
        span TEXT NOT NULL,
        PRIMARY KEY (set_name, position)
    );",
];

/// The traces file's migrations (see `files`); its own `PRAGMA user_version` records how
/// many have run.
pub(super) const TRACE_MIGRATIONS: &[&str] = &[
    // 1: the tables of migration 12, in a file of their own.
    concat!(trace_turns_table!(), trace_turns_indexes_and_view!()),
    // 2: the tool definitions LLM calls offered, each distinct set once, by the SHA-256
    // of its JSON text (an LLM span's `tools_hash`).
    "CREATE TABLE trace_tool_sets (
        hash TEXT PRIMARY KEY,
        definitions TEXT NOT NULL,
        created_us INTEGER NOT NULL
    );",
    // 3: the traces of /mcp tool calls (source `mcp`), which `TRACE_MAX_MCP_CALLS`
    // counts apart from the turns: the prune walks only them.
    "CREATE INDEX trace_turns_mcp_calls ON trace_turns(id) WHERE source = 'mcp';",
];

/// Tables and views with their columns, indexes and row counts (for
/// `porthole://db/schema`).
#[async_trait]
impl Schema for Sqlite {
    async fn describe_schema(&self) -> Result<Value, StoreError> {
        self.call(|c| {
            let mut tables = Vec::new();
            let names: Vec<(String, String, bool)> = {
                // The traces file is attached as `traces` (see `files`); its names are
                // reached unqualified, as in `db_query`.
                let mut stmt = c.prepare(
                    "SELECT name, sql, type = 'view' FROM \
                     (SELECT * FROM main.sqlite_master UNION ALL SELECT * FROM traces.sqlite_master) \
                     WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name",
                )?;
                stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, Option<String>>(1)?.unwrap_or_default(), r.get(2)?)))?
                    .collect::<Result<_, _>>()?
            };
            for (name, sql, view) in names {
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
                    "name": name, "view": view, "columns": columns, "indexes": indexes, "rows": rows, "sql": sql,
                }));
            }
            Ok(serde_json::json!({"backend": "sqlite", "schema_version": schema_version(), "tables": tables}))
        })
        .await
    }
}

/// The size the WAL file is cut back to after a checkpoint (bytes): above what the
/// automatic checkpoint lets it reach, so it is not cut and regrown in normal use.
const WAL_SIZE_LIMIT: i64 = 16 * 1024 * 1024;

pub(super) fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Reading the schema first surfaces "file is not a database" before any pragma.
    conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Checkpoints keep the WAL near 1000 pages (4 MiB), but the file never shrinks: a
    // reader that held a checkpoint back leaves it at its largest. This cuts it back
    // once a checkpoint completes, so the file's size stays bounded.
    conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
    Ok(())
}

/// Runs every one of `migrations` newer than the database's `user_version`, each in its
/// own transaction, so a failure leaves the database at the last good version.
///
/// Foreign keys are off while they run (SQLite's own procedure for changing a table by
/// rebuilding it: with them on, dropping the old table would delete the rows that point
/// at it), and a migration commits only if it left no more references without their row
/// than there were before it (a database may hold such rows already, put there by hand).
pub(super) fn migrate(conn: &mut Connection, migrations: &[&str]) -> rusqlite::Result<usize> {
    let current: usize =
        conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    if current >= migrations.len() {
        return Ok(0);
    }
    let foreign_keys: bool = conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
    conn.pragma_update(None, "foreign_keys", false)?;
    let applied = apply_in_order(conn, migrations, current);
    conn.pragma_update(None, "foreign_keys", foreign_keys)?;
    applied
}

fn apply_in_order(
    conn: &mut Connection,
    migrations: &[&str],
    current: usize,
) -> rusqlite::Result<usize> {
    const BROKEN_REFERENCES: &str = "SELECT COUNT(*) FROM pragma_foreign_key_check";
    // Counted once, then after each migration: each scan reads every referencing table.
    let mut broken_before: i64 = conn.query_row(BROKEN_REFERENCES, [], |r| r.get(0))?;
    let mut applied = 0;
    for (index, sql) in migrations.iter().enumerate().skip(current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        let broken_after: i64 = tx.query_row(BROKEN_REFERENCES, [], |r| r.get(0))?;
        if broken_after > broken_before {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT),
                Some(format!(
                    "migration {} would leave {} rows whose foreign key finds no row",
                    index + 1,
                    broken_after - broken_before
                )),
            ));
        }
        tx.pragma_update(None, "user_version", (index + 1) as i64)?;
        tx.commit()?;
        broken_before = broken_after;
        applied += 1;
    }
    Ok(applied)
}
