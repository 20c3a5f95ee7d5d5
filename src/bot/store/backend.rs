//! The seam between the store's facade and its two backends, `sqlite/` and `postgres/`.
//!
//! [`Database`] is the backend chosen once, when the store opens; it is the one place
//! that asks which it is. Everything else goes through it in one of two ways:
//! - **shared SQL**, for every statement both backends speak alike: the facade writes it
//!   once, with SQLite's `?N` placeholders (PostgreSQL's `$N` are made from them), and runs
//!   it with [`Database::query`], [`Backend::execute`] or [`Backend::execute_all`]. Where
//!   the two dialects differ in a word or a clause, [`Dialect`] holds both forms;
//! - **the [`Backend`] trait and its parts**, for what each backend does its own way: a
//!   guarded prune ([`Conversations`]), the `db_query` console ([`Console`]) and the
//!   schema description ([`Schema`]). Each part is implemented in a file of the same name in `sqlite/` and
//!   `postgres/`, so the twins sit side by side.

use std::borrow::Cow;
use std::ops::Deref;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::broadcast;

use super::StoreError;
use super::console::{SqlOutcome, SqlRequest, StatementSummary};
use super::postgres::{Change, Postgres};
use super::rows::{Bound, FromRow};
use super::sqlite::{Sqlite, TracesFile, WriterWaits};

/// The backend the store opened.
pub(super) enum Database {
    Sqlite(Sqlite),
    /// Boxed: its pool and settings are several times the size of SQLite's handles.
    Postgres(Box<Postgres>),
}

impl Deref for Database {
    type Target = dyn Backend;

    fn deref(&self) -> &(dyn Backend + 'static) {
        match self {
            Database::Sqlite(sqlite) => sqlite,
            Database::Postgres(postgres) => postgres.as_ref(),
        }
    }
}

impl Database {
    /// Runs a query written once for both backends and reads each row as a `T`.
    pub(super) async fn query<T: FromRow>(
        &self,
        sql: Sql,
        values: Vec<Bound>,
    ) -> Result<Vec<T>, StoreError> {
        match self {
            Database::Sqlite(sqlite) => sqlite.query(sql, values).await,
            Database::Postgres(postgres) => postgres.query(sql, values).await,
        }
    }

    /// Runs `sql` (a write whose own `WHERE` checks a count, say, `RETURNING` what it
    /// wrote) alone among the writes that name `key`, and reads its rows: on PostgreSQL
    /// in a transaction holding an advisory lock on `key`, so writers on other replicas
    /// wait, then see its row; SQLite's one writer runs statements one at a time anyway.
    pub(super) async fn query_exclusive<T: FromRow>(
        &self,
        key: &str,
        sql: Sql,
        values: Vec<Bound>,
    ) -> Result<Vec<T>, StoreError> {
        match self {
            Database::Sqlite(sqlite) => sqlite.query(sql, values).await,
            Database::Postgres(postgres) => postgres.query_exclusive(key, sql, values).await,
        }
    }

    /// Runs a [`QueryThen`] in one transaction; returns the rows its query read.
    pub(super) async fn query_then<T: FromRow>(
        &self,
        work: QueryThen<T>,
    ) -> Result<Vec<T>, StoreError> {
        match self {
            Database::Sqlite(sqlite) => sqlite.query_then(work).await,
            Database::Postgres(postgres) => postgres.query_then(work).await,
        }
    }

    /// [`Database::query`] for at most one row.
    pub(super) async fn query_one<T: FromRow>(
        &self,
        sql: Sql,
        values: Vec<Bound>,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.query(sql, values).await?.into_iter().next())
    }

    /// The SQLite backend, for what only it has (`Store::call`).
    pub(super) fn sqlite(&self) -> Option<&Sqlite> {
        match self {
            Database::Sqlite(sqlite) => Some(sqlite),
            Database::Postgres(_) => None,
        }
    }
}

/// One statement's text as both backends take it (`?N` or anonymous `?` placeholders),
/// with how to run it.
pub(super) struct Sql {
    pub(super) text: Cow<'static, str>,
    /// Whether the text takes one of a bounded number of forms, so a connection may keep
    /// it prepared (PostgreSQL's statement cache is never emptied).
    pub(super) fixed: bool,
    /// Whether it reads or writes the traces (SQLite keeps them in a file of their own).
    pub(super) traces: bool,
}

impl Sql {
    /// A statement of a bounded number of forms, on the bot's tables.
    pub(super) fn fixed(text: impl Into<Cow<'static, str>>) -> Sql {
        Sql {
            text: text.into(),
            fixed: true,
            traces: false,
        }
    }

    /// A statement built from a query's conditions and limits: prepared for one use.
    pub(super) fn varying(text: String) -> Sql {
        Sql {
            text: text.into(),
            fixed: false,
            traces: false,
        }
    }

    /// The same statement, on the traces' tables.
    pub(super) fn on_traces(self) -> Sql {
        Sql {
            traces: true,
            ..self
        }
    }
}

/// A query, and for each row it returns a statement with values made from the row, all
/// in one transaction (claiming due tasks and opening their runs).
pub(super) struct QueryThen<T> {
    pub(super) query: Sql,
    pub(super) values: Vec<Bound>,
    pub(super) then: Sql,
    pub(super) values_of: ValuesOf<T>,
}

/// Makes the values of a [`QueryThen`]'s statement from one row of its query.
pub(super) type ValuesOf<T> = Box<dyn Fn(&T) -> Vec<Bound> + Send + Sync>;

/// What the facade needs to know of a backend besides running its statements: its
/// name, whether replicas share it, and the words and clauses its SQL differs in.
pub(super) struct Dialect {
    /// `sqlite` or `postgres`.
    pub(super) name: &'static str,
    /// Whether other processes (replicas) may share the database: a SQLite file has one
    /// process, a PostgreSQL database any number.
    pub(super) shared_by_replicas: bool,
    /// A `LIKE` that ignores ASCII case: SQLite's `LIKE` does, PostgreSQL's `ILIKE` does.
    pub(super) like: &'static str,
    /// Stores a turn's row or merges a part of it in (see `traces`).
    pub(super) upsert_turn: &'static str,
    /// Claims the due tasks (see `schedule`).
    pub(super) claim_due: &'static str,
}

/// What the facade asks of a backend.
#[async_trait]
pub(super) trait Backend: Conversations + Console + Schema + Send + Sync {
    fn dialect(&self) -> &'static Dialect;

    /// Runs one shared statement; returns how many rows it changed.
    async fn execute(&self, sql: Sql, values: Vec<Bound>) -> Result<u64, StoreError>;

    /// Runs shared statements in one transaction (on the file of the first, on SQLite).
    /// Returns the CPU time the store's thread spent on it: SQLite's work is done on it,
    /// PostgreSQL's by its server (zero).
    async fn execute_all(&self, statements: Vec<(Sql, Vec<Bound>)>)
    -> Result<Duration, StoreError>;

    /// Runs `guard` and, when it changed a row, `insert` (a statement `RETURNING` the new
    /// row's id), in one transaction. `None` when `guard` changed nothing: then nothing
    /// is written.
    async fn insert_after(
        &self,
        guard: (Sql, Vec<Bound>),
        insert: (Sql, Vec<Bound>),
    ) -> Result<Option<i64>, StoreError>;

    /// How often callers waited for the SQLite writer connection (`None` on PostgreSQL,
    /// whose pool has no such queue).
    fn writer_waits(&self) -> Option<WriterWaits> {
        None
    }

    /// The SQLite traces file (`None` on PostgreSQL, which keeps traces in its database).
    fn traces_file(&self) -> Option<TracesFile> {
        None
    }

    /// The size of the SQLite file and its WAL (`None` for `:memory:` and PostgreSQL).
    fn file_size(&self) -> Option<u64> {
        None
    }

    /// Announces a change to the other replicas (PostgreSQL `NOTIFY`; SQLite's file has
    /// one process, so nothing to do).
    async fn publish_change(&self, _change: &Change) -> Result<(), StoreError> {
        Ok(())
    }

    /// The changes replicas announce (`None` on SQLite).
    fn subscribe_changes(&self) -> Option<broadcast::Receiver<Change>> {
        None
    }

    /// Waits (at most `limit`) until the changes of other replicas are heard; true at
    /// once on SQLite, which has none.
    async fn until_listening(&self, _limit: std::time::Duration) -> bool {
        true
    }
}

/// Pruning conversations, which each backend guards its own way.
#[async_trait]
pub(super) trait Conversations {
    /// Deletes what `prune` says in one transaction; returns how many conversations went.
    async fn prune_conversations(&self, prune: ConversationPrune) -> Result<usize, StoreError>;
}

/// Which conversations a prune deletes: those beyond `keep` (by last activity) and those
/// last active before `cutoff` (RFC 3339), except the `held` ones.
pub(super) struct ConversationPrune {
    pub(super) keep: Option<i64>,
    pub(super) cutoff: Option<String>,
    pub(super) held: Vec<String>,
}

/// `db_query`'s console.
#[async_trait]
pub(super) trait Console {
    async fn run_sql(&self, request: SqlRequest) -> Result<SqlOutcome, StoreError>;
    async fn describe_statement(&self, sql: &str) -> Result<StatementSummary, StoreError>;
}

/// The schema as `porthole://db/schema` shows it.
#[async_trait]
pub(super) trait Schema {
    async fn describe_schema(&self) -> Result<Value, StoreError>;
}
