//! Seed 001's log readers over real HTTP: the bot's warnings, errors and audit records
//! are kept in its SQLite database, so `server_log` reads a warning from before a
//! restart back, merged in time order with the ring buffer, labelled by reader,
//! without duplicates, and the table stays bounded.

use crate::common;

use std::time::Duration;

use common::*;
use porthole::logs::buffer::LogBuffer;
use porthole::logs::journal::LogJournal;
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;

fn lines(result: &Value) -> Vec<Value> {
    result["structuredContent"]["lines"]
        .as_array()
        .unwrap_or_else(|| panic!("lines: {result}"))
        .clone()
}

fn reader<'a>(result: &'a Value, name: &str) -> &'a Value {
    result["structuredContent"]["readers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["reader"] == name)
        .unwrap_or_else(|| panic!("reader {name} reported: {result}"))
}

/// Log layers as the binary installs them, for this test thread.
fn capture() -> (porthole::app::Logging, tracing::subscriber::DefaultGuard) {
    let buffer = LogBuffer::new(1000);
    let journal = LogJournal::new();
    let subscriber = tracing_subscriber::registry()
        .with(buffer.layer().skipping("web_console"))
        .with(journal.layer("web_console"));
    let guard = tracing::subscriber::set_default(subscriber);
    let logging = porthole::app::Logging {
        buffer: Some(buffer),
        journal: Some(journal),
        ..Default::default()
    };
    (logging, guard)
}

/// Rows in the bot's log table whose record contains `text`.
fn stored(db: &str, text: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT count(*) FROM log_events WHERE instr(record, ?1) > 0",
        [text],
        |r| r.get(0),
    )
    .unwrap()
}

async fn wait_until_stored(db: &str, text: &str, count: i64) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while stored(db, text) < count {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("`{text}` reaches the database"));
}

#[tokio::test]
async fn a_warning_from_before_a_restart_is_read_back_from_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bot.db").display().to_string();
    let settings = [("DATABASE_PATH", db.as_str()), ("LOG_DB_MAX_EVENTS", "100")];

    // First run: a warning, an error, an ordinary line and an audited tool call.
    let (logging, guard) = capture();
    let app = start_bot_with(&settings, logging).await;
    tracing::info!(target: "porthole::bot", "ordinary line before restart");
    tracing::warn!(target: "porthole::bot::store", "disk nearly full before restart");
    tracing::error!(target: "porthole::bot::llm", "provider refused before restart");
    let r = call_tool(&app, "health", json!({})).await;
    assert!(!is_error(&r));
    wait_until_stored(&db, "provider refused before restart", 1).await;
    wait_until_stored(&db, "tools/call", 1).await;
    assert_eq!(
        stored(&db, "ordinary line before restart"),
        0,
        "info is not kept"
    );

    // While running, the ring buffer and the database hold the same warning: once.
    let r = call_tool(
        &app,
        "server_log",
        json!({"level": "warn", "grep": "before restart"}),
    )
    .await;
    let seen = lines(&r);
    assert_eq!(seen.len(), 2, "no duplicates: {seen:?}");
    assert!(
        seen.iter().all(|l| l["reader"] == "ring_buffer"),
        "{seen:?}"
    );
    assert_eq!(reader(&r, "database")["available"], true);
    assert_eq!(reader(&r, "database")["persistent"], true);

    // The table is bounded by LOG_DB_MAX_EVENTS.
    for n in 0..150 {
        tracing::warn!(target: "porthole::bot", "flood warning {n}");
    }
    wait_until_stored(&db, "flood warning 149", 1).await;
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM log_events", [], |r| r.get(0))
        .unwrap();
    assert!(rows <= 100, "bounded retention: {rows} rows");
    drop(conn);
    app.shutdown().await;
    drop(guard);

    // Second run on the same file, with a keep big enough for a fresh warning.
    let (logging, guard) = capture();
    let app = start_bot_with(&[("DATABASE_PATH", db.as_str())], logging).await;
    tracing::warn!(target: "porthole::bot", "flood warning after restart");
    let r = call_tool(
        &app,
        "server_log",
        json!({"level": "warn", "grep": "flood warning"}),
    )
    .await;
    let seen = lines(&r);
    let last_two: Vec<(&str, &str)> = seen[seen.len() - 2..]
        .iter()
        .map(|l| {
            (
                l["message"].as_str().unwrap(),
                l["reader"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        last_two,
        [
            ("flood warning 149", "database"),
            ("flood warning after restart", "ring_buffer")
        ],
        "merged in time order, labelled by reader"
    );
    assert!(
        seen.windows(2)
            .all(|w| w[0]["time_us"].as_i64() <= w[1]["time_us"].as_i64()),
        "time order"
    );

    // The oldest rows made room for the flood: the first run's error is gone for good.
    assert_eq!(stored(&db, "provider refused before restart"), 0);
    let r = call_tool(
        &app,
        "server_log",
        json!({"level": "error", "grep": "before restart"}),
    )
    .await;
    assert!(lines(&r).is_empty(), "{r}");
    app.shutdown().await;
    drop(guard);
}

#[tokio::test]
async fn a_fresh_bot_reads_an_old_warning_and_reports_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bot.db").display().to_string();
    let (logging, guard) = capture();
    let app = start_bot_with(&[("DATABASE_PATH", db.as_str())], logging).await;
    tracing::warn!(target: "porthole::bot::agents", step = 3, "yesterday's agent warning");
    let r = call_tool(&app, "list_agents", json!({})).await;
    assert!(!is_error(&r));
    wait_until_stored(&db, "yesterday's agent warning", 1).await;
    wait_until_stored(&db, "list_agents", 1).await;
    app.shutdown().await;
    drop(guard);

    // No capture at all this time: the line can only come from the database.
    let app = start_bot(&[("DATABASE_PATH", db.as_str())]).await;
    let r = call_tool(&app, "server_log", json!({"level": "log"})).await;
    let seen = lines(&r);
    let line = seen
        .iter()
        .find(|l| l["message"] == "yesterday's agent warning")
        .unwrap_or_else(|| panic!("the old warning: {r}"));
    assert_eq!(line["reader"], "database");
    assert_eq!(line["level"], "warn");
    assert_eq!(line["target"], "porthole::bot::agents");
    assert_eq!(line["fields"]["step"], "3");
    assert_eq!(reader(&r, "ring_buffer")["available"], true);
    assert_eq!(reader(&r, "log_file")["available"], false);
    assert!(reader(&r, "database")["lines_returned"].as_u64().unwrap() >= 1);
    // Audit records are kept too, shown with include_mcp like the buffer's.
    let r = call_tool(
        &app,
        "server_log",
        json!({"grep": "list_agents", "include_mcp": true}),
    )
    .await;
    let audit = lines(&r);
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["reader"], "database");
    assert_eq!(audit[0]["target"], "porthole::mcp::audit");
    let web = call_tool(&app, "web_log", json!({})).await;
    assert_eq!(reader(&web, "database")["available"], false);
    app.shutdown().await;
}
