//! The PostgreSQL backend, chosen by `DATABASE_URL=postgres://…`: the same tables and
//! the same meaning as the SQLite store, so several bot replicas can share one database.
//!
//! The driver is `tokio-postgres` with a `deadpool-postgres` pool. Both are small,
//! well-kept and async from the ground up, and they compile far less than `sqlx` (no
//! macros, no compile-time query checking, no other databases' drivers): the store's
//! SQL is written by hand anyway, and every statement here is tested against a real
//! server (`PORTHOLE_TEST_DATABASE_URL`, see `scripts/replicas.sh`).
//!
//! Connection loss: a pooled connection whose server went away reports itself closed,
//! and the pool replaces it at the next checkout; so a PostgreSQL restart fails only the
//! requests in flight (with an error that says to retry) and the next ones succeed.
//!
//! This file holds the pool, the runner of the SQL the facade shares with SQLite, and the
//! error wording; `changes` is the `LISTEN/NOTIFY` channel between replicas, and
//! `conversations`, `console` and `schema` what this backend does its own way (their
//! twins are in `sqlite/`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio::sync::broadcast;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::backend::{Backend, Dialect, QueryThen, Sql};
use super::rows::{Bound, FromRow, RowRead, numbered_for_postgres};
use super::{StoreError, schedule, traces};
use crate::redact::{redact_url, scrub_url_password};

mod changes;
mod console;
mod conversations;
mod refusal;
mod schema;
mod tls;

pub use changes::Change;

/// Most connections one replica holds open.
const POOL_SIZE: usize = 16;

/// How long a request waits for a connection (a new one, or a free one) before it fails.
const CONNECTION_WAIT: Duration = Duration::from_secs(5);

static POSTGRES: Dialect = Dialect {
    name: "postgres",
    shared_by_replicas: true,
    like: "ILIKE",
    upsert_turn: traces::UPSERT_TURN_POSTGRES,
    claim_due: schedule::CLAIM_DUE_POSTGRES,
};

/// Whether `location` names a PostgreSQL database rather than a SQLite file.
pub(super) fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// The PostgreSQL store: a pool of connections (cheap to clone).
pub(super) struct Postgres {
    pool: Pool,
    /// For connections outside the pool (`db_query`'s, the change listener's).
    config: Arc<tokio_postgres::Config>,
    /// The URL with its password replaced, for messages and `health`.
    display_url: Arc<str>,
    changes: changes::Changes,
    /// How every connection speaks TLS (`sslmode`, `sslrootcert`; see [`tls`]).
    tls: MakeRustlsConnect,
    /// The runtime the store was opened on, where its pooled connections are made.
    runtime: Option<tokio::runtime::Handle>,
}

impl Postgres {
    /// Connects, runs pending migrations, and builds the pool. Blocks until the
    /// migrations are done (start-up only), on a thread of its own so it may be called
    /// from inside the async runtime.
    pub(super) fn open(url: &str) -> Result<Postgres, StoreError> {
        let display_url = redact_url(url);
        let open_error = |reason: String| StoreError::Open {
            path: display_url.clone(),
            reason: scrub_url_password(url, &reason),
        };
        let bad_url = |reason: String| StoreError::BadUrl {
            path: display_url.clone(),
            reason: scrub_url_password(url, &reason),
        };
        let (driver_url, tls) = tls::from_url(url).map_err(bad_url)?;
        let mut config: tokio_postgres::Config = driver_url.parse().map_err(|e| {
            // The form is spelled so that no redaction takes it for credentials.
            bad_url(format!(
                "it is not a valid PostgreSQL URL ({e}); use the form \
                 postgres://HOST:PORT/DATABASE, with USER:PASSWORD@ before the host"
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECTION_WAIT);
        }
        config.application_name("porthole");
        let migration_config = config.clone();
        std::thread::scope(|scope| {
            scope
                .spawn(|| schema::migrate_on_own_runtime(migration_config, tls.clone()))
                .join()
                .unwrap_or_else(|_| Err("the migration thread panicked".to_string()))
        })
        .map_err(|reason| {
            open_error(format!(
                "{reason}; check that PostgreSQL runs and DATABASE_URL is right"
            ))
        })?;
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECTION_WAIT))
            .create_timeout(Some(CONNECTION_WAIT))
            .recycle_timeout(Some(CONNECTION_WAIT))
            .build()
            .map_err(|e| open_error(format!("cannot build the connection pool: {e}")))?;
        Ok(Postgres {
            pool,
            display_url: display_url.as_str().into(),
            changes: changes::Changes::new(config.clone(), tls.clone()),
            config: Arc::new(config),
            tls,
            runtime: tokio::runtime::Handle::try_current().ok(),
        })
    }

    pub(super) fn display_url(&self) -> &str {
        &self.display_url
    }

    /// A pooled connection; a broken one is replaced on the way. Connections are made on
    /// the runtime that opened the store: a new connection's driver is a task of the
    /// runtime it is made on, and a caller on another one (the trace writer has its own)
    /// must not leave the pool a connection that dies with that runtime.
    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        let Some(runtime) = &self.runtime else {
            return self.pool.get().await.map_err(pool_error);
        };
        let pool = self.pool.clone();
        runtime
            .spawn(async move { pool.get().await })
            .await
            .map_err(|e| StoreError::Postgres(format!("database connection pool: {e}")))?
            .map_err(pool_error)
    }
}

/// Prepares `sql` in PostgreSQL's placeholders: from the connection's cache when its
/// text is fixed (so each later use is one round trip instead of two; the cache of a
/// connection is never emptied, hence only for texts of a bounded number of forms).
async fn prepare(
    client: &deadpool_postgres::ClientWrapper,
    sql: &Sql,
) -> Result<tokio_postgres::Statement, StoreError> {
    let text = numbered_for_postgres(&sql.text);
    Ok(if sql.fixed {
        client.prepare_cached(&text).await?
    } else {
        client.prepare(&text).await?
    })
}

/// Parameters for a tokio-postgres call.
fn parameters(values: &[Bound]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

/// Reads every row as a `T`.
fn read_all<T: FromRow>(rows: &[tokio_postgres::Row]) -> Result<Vec<T>, StoreError> {
    Ok(rows
        .iter()
        .map(T::from_row)
        .collect::<Result<Vec<_>, _>>()?)
}

impl Postgres {
    /// Runs a shared query and reads its rows.
    pub(super) async fn query<T: FromRow>(
        &self,
        sql: Sql,
        values: Vec<Bound>,
    ) -> Result<Vec<T>, StoreError> {
        let client = self.client().await?;
        let statement = prepare(&client, &sql).await?;
        read_all(&client.query(&statement, &parameters(&values)).await?)
    }

    /// See `Database::query_exclusive`.
    pub(super) async fn query_exclusive<T: FromRow>(
        &self,
        key: &str,
        sql: Sql,
        values: Vec<Bound>,
    ) -> Result<Vec<T>, StoreError> {
        let mut client = self.client().await?;
        let statement = prepare(&client, &sql).await?;
        let tx = client.transaction().await?;
        // Held until the transaction ends: the next writer of `key` reads after this one.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&key])
            .await?;
        let rows = tx.query(&statement, &parameters(&values)).await?;
        tx.commit().await?;
        read_all(&rows)
    }

    /// See `Database::query_then`.
    pub(super) async fn query_then<T: FromRow>(
        &self,
        work: QueryThen<T>,
    ) -> Result<Vec<T>, StoreError> {
        let mut client = self.client().await?;
        let query = prepare(&client, &work.query).await?;
        let then = prepare(&client, &work.then).await?;
        let tx = client.transaction().await?;
        let rows: Vec<T> = read_all(&tx.query(&query, &parameters(&work.values)).await?)?;
        for row in &rows {
            tx.execute(&then, &parameters(&(work.values_of)(row)))
                .await?;
        }
        tx.commit().await?;
        Ok(rows)
    }
}

#[async_trait]
impl Backend for Postgres {
    fn dialect(&self) -> &'static Dialect {
        &POSTGRES
    }

    async fn execute(&self, sql: Sql, values: Vec<Bound>) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let statement = prepare(&client, &sql).await?;
        Ok(client.execute(&statement, &parameters(&values)).await?)
    }

    async fn execute_all(
        &self,
        statements: Vec<(Sql, Vec<Bound>)>,
    ) -> Result<std::time::Duration, StoreError> {
        let mut client = self.client().await?;
        let mut prepared = Vec::with_capacity(statements.len());
        for (sql, _) in &statements {
            prepared.push(prepare(&client, sql).await?);
        }
        let tx = client.transaction().await?;
        for (statement, (_, values)) in prepared.iter().zip(&statements) {
            tx.execute(statement, &parameters(values)).await?;
        }
        tx.commit().await?;
        Ok(Duration::ZERO)
    }

    async fn insert_after(
        &self,
        guard: (Sql, Vec<Bound>),
        insert: (Sql, Vec<Bound>),
    ) -> Result<Option<i64>, StoreError> {
        let mut client = self.client().await?;
        let (first, next) = (
            prepare(&client, &guard.0).await?,
            prepare(&client, &insert.0).await?,
        );
        let tx = client.transaction().await?;
        if tx.execute(&first, &parameters(&guard.1)).await? == 0 {
            return Ok(None);
        }
        let row = tx.query_one(&next, &parameters(&insert.1)).await?;
        tx.commit().await?;
        Ok(Some(row.int(0)?))
    }

    async fn publish_change(&self, change: &Change) -> Result<(), StoreError> {
        self.publish(change).await
    }

    fn subscribe_changes(&self) -> Option<broadcast::Receiver<Change>> {
        Some(self.subscribe())
    }

    async fn until_listening(&self, limit: std::time::Duration) -> bool {
        Postgres::until_listening(self, limit).await
    }
}

/// What a request that lost its connection is told.
const CONNECTION_LOST: &str = "the connection to PostgreSQL was lost (the server restarted or \
    cannot be reached), so this request was not completed; retry it: the bot reconnects by \
    itself once the server at DATABASE_URL answers again";

/// A PostgreSQL error in words that say what to do about it.
pub(super) fn explain(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        let code = db.code();
        if [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
        ]
        .contains(code)
        {
            return format!("{CONNECTION_LOST} ({})", db.message());
        }
        let mut text = format!("database error: {} ({})", db.message(), code.code());
        if let Some(detail) = db.detail() {
            text.push_str(&format!("; {detail}"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!("; hint: {hint}"));
        }
        if *code == SqlState::DISK_FULL {
            text.push_str("; free some space on the database server and retry");
        }
        return text;
    }
    if let Some(tls) = tls::explain(error) {
        return tls;
    }
    if error.is_closed()
        || std::error::Error::source(error).is_some_and(|s| s.is::<std::io::Error>())
    {
        return format!("{CONNECTION_LOST} ({error})");
    }
    format!("database error: {error}")
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        StoreError::Postgres(explain(&error))
    }
}

fn pool_error(error: PoolError) -> StoreError {
    match error {
        PoolError::Backend(e) => e.into(),
        PoolError::Timeout(_) => StoreError::Postgres(format!(
            "no PostgreSQL connection could be had within {} s (the server may be down, \
             restarting or out of connections); retry, and check the server at DATABASE_URL",
            CONNECTION_WAIT.as_secs()
        )),
        other => StoreError::Postgres(format!("database connection pool: {other}")),
    }
}

/// For tests and benchmarks: a URL for a fresh, empty schema of the database at
/// `base_url`, so runs at once never see each other's rows. Panics when the server
/// cannot be reached (a test set-up failure).
pub fn fresh_schema_url(base_url: &str) -> String {
    let schema = format!("test_{}", uuid::Uuid::new_v4().simple());
    let (driver_url, tls) = tls::from_url(base_url).expect("PORTHOLE_TEST_DATABASE_URL's TLS");
    let config: tokio_postgres::Config = driver_url.parse().expect("PORTHOLE_TEST_DATABASE_URL");
    let create = format!("CREATE SCHEMA {schema}");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async {
                    let (client, connection) = config.connect(tls).await.expect("connect");
                    tokio::spawn(connection);
                    client.batch_execute(&create).await.expect("create schema");
                });
            })
            .join()
            .expect("schema thread");
    });
    let separator = if base_url.contains('?') { '&' } else { '?' };
    format!("{base_url}{separator}options=-csearch_path%3D{schema}")
}

/// A connection of its own to the database and schema of `url` (a test's, made by
/// [`fresh_schema_url`]), outside any store.
#[cfg(test)]
async fn connect_outside_the_store(url: &str) -> tokio_postgres::Client {
    let (driver_url, tls) = tls::from_url(url).unwrap();
    let config: tokio_postgres::Config = driver_url.parse().unwrap();
    let (client, connection) = config.connect(tls).await.unwrap();
    tokio::spawn(connection);
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_server_is_a_clear_error_without_the_password() {
        // Port 1 on loopback: nothing listens there, the connection is refused at once.
        let url = "postgres://bot:hunter2%21pw@127.0.0.1:1/porthole";
        let err = Postgres::open(url).err().unwrap().to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("[REDACTED]"), "{err}");
        assert!(err.contains("DATABASE_URL"), "{err}");
    }
}
