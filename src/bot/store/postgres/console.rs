//! `db_query` on PostgreSQL: one statement of any kind, rows streamed up to a limit, a
//! time limit, and a read-only mode that PostgreSQL itself enforces — with the SQLite
//! console's guarantee that nothing a statement does outlives its call.
//!
//! How that guarantee is kept:
//! - every call runs on a connection of its own, opened for the call and closed after
//!   it, never on a pooled one: whatever session state a statement changes (a
//!   `set_config(…, false)`, an advisory lock, a temporary table, a prepared
//!   statement) dies with that connection instead of leaking into the bot's own work;
//! - the statement runs inside a transaction with `SET LOCAL statement_timeout`, and is
//!   cancelled on the server as soon as its caller stops waiting; in read-only mode the
//!   transaction is `READ ONLY` (PostgreSQL refuses every write, `nextval`,
//!   `SELECT … FOR UPDATE`, DDL) and is always rolled back;
//! - before anything runs, the statement is refused when it is not one statement, when
//!   read-only mode gets anything but a query (`SELECT`, `WITH`, `VALUES`, `TABLE`,
//!   `SHOW`, `EXPLAIN`), when it controls transactions or the session (`BEGIN`, `SET`,
//!   `LISTEN`, `PREPARE`, `DISCARD`…), copies (`COPY … TO PROGRAM` runs a shell on the
//!   server), runs anonymous code (`DO`), or calls a function whose effect escapes any
//!   transaction (`pg_terminate_backend`, `pg_read_file`, `lo_export`, `dblink`…) or
//!   that runs SQL given as text (`query_to_xml`): see `refusal.rs`.
//!
//! Values map to JSON as on SQLite: integers and floats as numbers (`numeric` too when
//! it fits), text as strings, NULL as null, `bytea` as `{"base64": …}`, `json`/`jsonb`
//! as JSON, times as RFC 3339 text, `uuid` as text; any other type as
//! `{"unsupported_type": …}` with a hint to cast it to text.

use std::time::Duration;

use futures::{StreamExt, pin_mut};
use serde_json::{Value, json};
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type};
use tokio_postgres::{CancelToken, Client, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use async_trait::async_trait;

use super::Postgres;
use super::refusal::refusal;
use crate::bot::store::StoreError;
use crate::bot::store::backend::Console;
use crate::bot::store::console::{
    GatheredRows, SqlOutcome, SqlRequest, StatementSummary, statement_kind,
};

impl Postgres {
    /// A connection for one console call, closed when the returned client drops.
    async fn own_connection(&self) -> Result<Client, StoreError> {
        let (client, connection) = self.config.connect(self.tls.clone()).await?;
        tokio::spawn(connection);
        Ok(client)
    }
}

#[async_trait]
impl Console for Postgres {
    async fn run_sql(&self, request: SqlRequest) -> Result<SqlOutcome, StoreError> {
        if let Some(refused) = refusal(&request.sql, request.read_only) {
            return Err(refused);
        }
        let client = self.own_connection().await?;
        let cancel = CancelOnDrop(Some((client.cancel_token(), self.tls.clone())));
        let work = run_in_transaction(&client, &request);
        // The server's statement_timeout stops the statement; this is the backstop for
        // a server that does not answer at all (the guard, dropped armed, cancels it).
        match tokio::time::timeout(request.timeout + Duration::from_secs(5), work).await {
            Ok(outcome) => {
                cancel.disarm();
                outcome
            }
            Err(_) => Err(StoreError::Postgres(format!(
                "canceling statement due to statement timeout: it ran longer than {} s",
                request.timeout.as_secs()
            ))),
        }
    }

    /// Says what `sql` would change. A statement PostgreSQL can plan is planned
    /// (`EXPLAIN`, which runs nothing) and its plan's `ModifyTable` nodes name what it
    /// writes, so a data-modifying `WITH` is caught however it is dressed. One it cannot
    /// plan (DDL, or a plan that needs parameter values) counts as a write unless its
    /// first keyword says it only reads.
    async fn describe_statement(&self, sql: &str) -> Result<StatementSummary, StoreError> {
        let kind = statement_kind(sql);
        let mut writes = Vec::new();
        let plan = if PLANNABLE_KINDS.contains(&kind.as_str()) {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let plan = tx
                .query_opt(&format!("EXPLAIN (FORMAT JSON) {sql}"), &[])
                .await;
            tx.rollback().await?;
            plan.ok()
                .flatten()
                .and_then(|row| row.try_get::<_, Value>(0).ok())
        } else {
            None
        };
        let read_only = match &plan {
            Some(plan) => {
                collect_modified_tables(plan, &mut writes);
                writes.is_empty()
            }
            None => {
                ["SELECT", "VALUES", "TABLE", "SHOW"].contains(&kind.as_str())
                    || (kind == "EXPLAIN" && !sql.to_ascii_lowercase().contains("analyze"))
            }
        };
        if !read_only && writes.is_empty() {
            writes.push(leading_words(sql, 3));
        }
        writes.sort();
        writes.dedup();
        Ok(StatementSummary {
            kind,
            read_only,
            writes,
        })
    }
}

/// Cancels the statement on the server unless it ended: when its caller stops waiting
/// (the request cancelled, the runtime shutting down) or the server does not answer in
/// time. Closing the connection alone leaves the server running it until its
/// `statement_timeout`, as PostgreSQL notices a client gone only when it next writes to
/// it.
struct CancelOnDrop(Option<(CancelToken, MakeRustlsConnect)>);

impl CancelOnDrop {
    /// The statement ended: nothing to cancel.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some((token, tls)) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = token.cancel_query(tls).await;
            });
        }
    }
}

/// Statements `EXPLAIN` can plan without running them.
const PLANNABLE_KINDS: &[&str] = &[
    "SELECT", "WITH", "VALUES", "TABLE", "INSERT", "UPDATE", "DELETE", "MERGE",
];

/// The statement inside its transaction: read-only and rolled back, or committed.
async fn run_in_transaction(
    client: &Client,
    request: &SqlRequest,
) -> Result<SqlOutcome, StoreError> {
    client
        .batch_execute(if request.read_only {
            "BEGIN TRANSACTION READ ONLY"
        } else {
            "BEGIN"
        })
        .await?;
    client
        .batch_execute(&format!(
            "SET LOCAL statement_timeout = {}",
            request.timeout.as_millis().max(1)
        ))
        .await?;
    let outcome = run_statement(client, &request.sql, &request.params, request.limit).await;
    let end = if request.read_only || outcome.is_err() {
        "ROLLBACK"
    } else {
        "COMMIT"
    };
    client.batch_execute(end).await?;
    outcome
}

async fn run_statement(
    client: &Client,
    sql: &str,
    params: &[Value],
    limit: usize,
) -> Result<SqlOutcome, StoreError> {
    let statement: Statement = client.prepare(sql).await?;
    if statement.params().len() != params.len() {
        return Err(StoreError::Postgres(format!(
            "the statement has {} parameter(s) ($1, $2…) but {} value(s) were given in `params`",
            statement.params().len(),
            params.len()
        )));
    }
    let bound: Vec<JsonParam> = params.iter().map(JsonParam).collect();
    let bound_refs: Vec<&(dyn ToSql + Sync)> =
        bound.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
    let columns: Vec<String> = statement
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    if columns.is_empty() {
        let changed = client.execute(&statement, &bound_refs).await?;
        return Ok(SqlOutcome {
            columns,
            rows: Vec::new(),
            truncated: false,
            rows_affected: Some(changed as usize),
            last_insert_rowid: None,
        });
    }
    let stream = client.query_raw(&statement, bound_refs).await?;
    pin_mut!(stream);
    let mut rows = GatheredRows::new(limit);
    let mut truncated = false;
    while let Some(row) = stream.next().await {
        let row = row?;
        let bytes = (0..row.len()).map(|i| cell_bytes(&row, i)).sum();
        if !rows.has_room_for(bytes) {
            truncated = true;
            break;
        }
        rows.push((0..row.len()).map(|i| cell(&row, i)).collect(), bytes);
    }
    Ok(rows.into_outcome(columns, truncated))
}

/// A value's size as the server sent it (NULL and small values count 8).
fn cell_bytes(row: &tokio_postgres::Row, index: usize) -> usize {
    match row.try_get::<_, Option<Raw>>(index) {
        Ok(Some(Raw(raw))) => raw.len().max(8),
        _ => 8,
    }
}

/// One value as JSON (see the module docs for the mapping).
fn cell(row: &tokio_postgres::Row, index: usize) -> Value {
    use base64::Engine;
    let column_type = row.columns()[index].type_().clone();
    let value = match column_type {
        Type::BOOL => row.try_get::<_, Option<bool>>(index).map(|v| json!(v)),
        Type::INT2 => row.try_get::<_, Option<i16>>(index).map(|v| json!(v)),
        Type::INT4 => row.try_get::<_, Option<i32>>(index).map(|v| json!(v)),
        Type::INT8 => row.try_get::<_, Option<i64>>(index).map(|v| json!(v)),
        Type::OID => row.try_get::<_, Option<u32>>(index).map(|v| json!(v)),
        Type::FLOAT4 => row
            .try_get::<_, Option<f32>>(index)
            .map(|v| v.map_or(Value::Null, |f| float(f64::from(f)))),
        Type::FLOAT8 => row
            .try_get::<_, Option<f64>>(index)
            .map(|v| v.map_or(Value::Null, float)),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::CHAR => {
            row.try_get::<_, Option<String>>(index).map(|v| json!(v))
        }
        Type::JSON | Type::JSONB => row.try_get::<_, Option<Value>>(index).map(|v| v.unwrap_or(Value::Null)),
        Type::BYTEA => row.try_get::<_, Option<Vec<u8>>>(index).map(|v| {
            v.map_or(Value::Null, |b| {
                json!({"base64": base64::engine::general_purpose::STANDARD.encode(b)})
            })
        }),
        Type::TIMESTAMPTZ => row
            .try_get::<_, Option<chrono::DateTime<chrono::Utc>>>(index)
            .map(|v| json!(v.map(|t| t.to_rfc3339()))),
        Type::TIMESTAMP => row
            .try_get::<_, Option<chrono::NaiveDateTime>>(index)
            .map(|v| json!(v.map(|t| t.to_string()))),
        Type::DATE => row
            .try_get::<_, Option<chrono::NaiveDate>>(index)
            .map(|v| json!(v.map(|t| t.to_string()))),
        Type::NUMERIC => row
            .try_get::<_, Option<Raw>>(index)
            .map(|v| v.map_or(Value::Null, |raw| numeric(raw.0))),
        Type::UUID => row
            .try_get::<_, Option<Raw>>(index)
            .map(|v| v.map_or(Value::Null, |raw| uuid_text(raw.0))),
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY | Type::NAME_ARRAY => row
            .try_get::<_, Option<Vec<Option<String>>>>(index)
            .map(|v| json!(v)),
        Type::INT4_ARRAY => row
            .try_get::<_, Option<Vec<Option<i32>>>>(index)
            .map(|v| json!(v)),
        Type::INT8_ARRAY => row
            .try_get::<_, Option<Vec<Option<i64>>>>(index)
            .map(|v| json!(v)),
        other => row.try_get::<_, Option<Raw>>(index).map(|v| {
            v.map_or(Value::Null, |_| {
                json!({
                    "unsupported_type": other.name(),
                    "hint": format!("cast the column to text in SQL (… ::text) to see a {} value", other.name()),
                })
            })
        }),
    };
    value.unwrap_or_else(|e| json!({"error": e.to_string()}))
}

fn float(value: f64) -> Value {
    serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
}

/// A value's raw binary form, for the types decoded here by hand.
struct Raw<'a>(&'a [u8]);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(raw))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

fn uuid_text(raw: &[u8]) -> Value {
    match uuid::Uuid::from_slice(raw) {
        Ok(id) => json!(id.to_string()),
        Err(_) => Value::Null,
    }
}

/// A `numeric` from its binary form (base-10000 digits): a JSON integer or float when
/// it fits one exactly enough, otherwise its decimal text.
fn numeric(raw: &[u8]) -> Value {
    let text = numeric_text(raw);
    match text.as_deref() {
        Some(t) if !t.contains('.') => t
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| json!(t)),
        Some(t) => match t.parse::<f64>() {
            Ok(f) if f.is_finite() && t.trim_end_matches('0').len() <= 17 => float(f),
            _ => json!(t),
        },
        None => Value::Null,
    }
}

fn numeric_text(raw: &[u8]) -> Option<String> {
    let word =
        |i: usize| -> Option<i16> { raw.get(i..i + 2).map(|b| i16::from_be_bytes([b[0], b[1]])) };
    let (count, weight, sign, scale) = (word(0)?, i32::from(word(2)?), word(4)? as u16, word(6)?);
    if sign == 0xC000 {
        return Some("NaN".into());
    }
    let digits: Vec<i16> = (0..count.max(0) as usize)
        .map(|i| word(8 + 2 * i))
        .collect::<Option<_>>()?;
    // Digit group `i` is worth 10000^(weight - i).
    let group = |i: i32| {
        usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(i).copied())
            .unwrap_or(0)
    };
    let mut integer = String::new();
    for i in 0..=weight {
        if integer.is_empty() {
            integer = group(i).to_string();
        } else {
            integer.push_str(&format!("{:04}", group(i)));
        }
    }
    if integer.is_empty() {
        integer.push('0');
    }
    let scale = scale.max(0) as usize;
    let mut fraction = String::new();
    let mut k = 1;
    while fraction.len() < scale {
        fraction.push_str(&format!("{:04}", group(weight + k)));
        k += 1;
    }
    fraction.truncate(scale);
    let sign = if sign == 0x4000 { "-" } else { "" };
    Some(if fraction.is_empty() {
        format!("{sign}{integer}")
    } else {
        format!("{sign}{integer}.{fraction}")
    })
}

/// A `db_query` parameter bound to whatever type PostgreSQL inferred for its slot:
/// numbers, booleans and text convert; other types ask to be cast in the SQL.
#[derive(Debug)]
struct JsonParam<'a>(&'a Value);

impl ToSql for JsonParam<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let value = self.0;
        if value.is_null() {
            return Ok(IsNull::Yes);
        }
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match *ty {
            Type::INT2 => text.parse::<i16>()?.to_sql(ty, out),
            Type::INT4 => text.parse::<i32>()?.to_sql(ty, out),
            Type::INT8 => text.parse::<i64>()?.to_sql(ty, out),
            Type::FLOAT4 => text.parse::<f32>()?.to_sql(ty, out),
            Type::FLOAT8 => text.parse::<f64>()?.to_sql(ty, out),
            Type::BOOL => match value {
                Value::Bool(b) => b.to_sql(ty, out),
                _ => (!matches!(text.as_str(), "0" | "false" | "")).to_sql(ty, out),
            },
            Type::JSON | Type::JSONB => value.to_sql(ty, out),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                text.to_sql(ty, out)
            }
            _ => Err(format!(
                "a parameter of type {} cannot be given from JSON; write it as text and cast it in the SQL ($1::{})",
                ty.name(),
                ty.name()
            )
            .into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// The tables a plan's `ModifyTable` nodes write, e.g. `DELETE on messages`.
fn collect_modified_tables(plan: &Value, writes: &mut Vec<String>) {
    match plan {
        Value::Array(items) => items
            .iter()
            .for_each(|item| collect_modified_tables(item, writes)),
        Value::Object(node) => {
            if node.get("Node Type").and_then(Value::as_str) == Some("ModifyTable")
                && let (Some(operation), Some(table)) = (
                    node.get("Operation").and_then(Value::as_str),
                    node.get("Relation Name").and_then(Value::as_str),
                )
            {
                writes.push(match operation {
                    "Insert" => format!("INSERT into {table}"),
                    "Update" => format!("UPDATE of {table}"),
                    "Delete" => format!("DELETE on {table}"),
                    other => format!("{} on {table}", other.to_ascii_uppercase()),
                });
            }
            node.values()
                .for_each(|value| collect_modified_tables(value, writes));
        }
        _ => {}
    }
}

/// The first words of a statement after its comments (`DROP TABLE messages`), for a
/// statement PostgreSQL cannot plan.
fn leading_words(sql: &str, count: usize) -> String {
    let kind = statement_kind(sql);
    let start = sql.to_ascii_uppercase().find(&kind).unwrap_or(0);
    sql[start..]
        .split_whitespace()
        .take(count)
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(';')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numerics_decode_from_their_binary_form() {
        // 12345.678: digits 1, 2345, 6780; weight 1; scale 3.
        let raw = [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1A, 0x7C];
        assert_eq!(numeric_text(&raw).unwrap(), "12345.678");
        // -0.00012: digits 1, 2000; weight -1; scale 5.
        let raw = [0, 2, 0xFF, 0xFF, 0x40, 0, 0, 5, 0, 1, 0x07, 0xD0];
        assert_eq!(numeric_text(&raw).unwrap(), "-0.00012");
        // 42: one digit, weight 0, scale 0.
        assert_eq!(numeric(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 42]), json!(42));
    }

    /// A caller that stops waiting (a cancelled request) stops its statement on the
    /// server at once, not at its `statement_timeout`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_statement_stops_on_the_server() {
        use crate::bot::store::{Store, postgres};
        let Some(url) = crate::test_support::test_database_url() else {
            return;
        };
        let url = postgres::fresh_schema_url(&url);
        let store = Store::open(&url).unwrap();
        // A mark of this statement, so no other test's (or CI job's) is counted.
        let mark = format!("cancelled_{}", uuid::Uuid::new_v4().simple());
        let sql = format!("SELECT pg_sleep(30) AS {mark}");
        let caller = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .run_sql(&sql, vec![], 1, true, Duration::from_secs(60))
                    .await
            })
        };
        let watcher = postgres::connect_outside_the_store(&url).await;
        let running = || async {
            let row = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE state = 'active' AND query LIKE '%' || $1 || '%' \
                     AND pid <> pg_backend_pid()",
                    &[&mark],
                )
                .await
                .unwrap();
            row.get::<_, i64>(0)
        };
        for _ in 0..500 {
            if running().await == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(running().await, 1, "the statement runs on the server");
        caller.abort();
        for _ in 0..500 {
            if running().await == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the server still runs the statement 10 s after its caller stopped waiting");
    }
}
