//! The bot on PostgreSQL, with several replicas sharing one database: real bots over real
//! HTTP, a real server. Runs when `PORTHOLE_TEST_DATABASE_URL` names a PostgreSQL
//! database (`.ci/run` and `scripts/replicas.sh` start one and set it); without it every
//! test here prints why it skipped and passes, or fails under `PORTHOLE_REQUIRE_SERVICES=1`. The server restart is tested on its own in
//! `postgres_restart.rs` (test binaries run one after another).
//! Each test works in a fresh schema of its own, so they run at once without meeting.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use porthole::app::RunningApp;
use serde_json::{Value, json};

/// A replica: a bot on `url` named `replica`, with `extra` settings.
async fn replica(url: &str, replica: &str, extra: &[(&str, &str)]) -> RunningApp {
    let mut settings = vec![("DATABASE_URL", url), ("PORTHOLE_REPLICA_ID", replica)];
    settings.extend_from_slice(extra);
    start_bot(&settings).await
}

fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

/// Polls `check` until it returns `Some` or `limit` passes.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    limit: Duration,
    mut check: impl FnMut() -> F,
) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(found) = check().await {
            return Some(found);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_share_conversations_traces_and_logs_and_say_who_answered() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = porthole::bot::store::fresh_schema_url(&base);
    let a = replica(&url, "replica-a", &[]).await;
    let b = replica(&url, "replica-b", &[]).await;

    let sent = call_tool(&a, "send_message", json!({"content": "/help"})).await;
    assert!(!is_error(&sent), "{sent}");
    let conversation = structured(&sent)["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let listed = call_tool(&b, "list_conversations", json!({})).await;
    assert!(
        listed.to_string().contains(&conversation),
        "replica b sees replica a's conversation: {listed}"
    );
    let trace_id = structured(&sent)["trace_id"].as_str().unwrap().to_string();
    let found = eventually(Duration::from_secs(10), || {
        let (b, trace_id) = (&b, trace_id.clone());
        async move {
            let r = call_tool(b, "get_trace", json!({"trace_id": trace_id})).await;
            (!is_error(&r)).then_some(r)
        }
    })
    .await;
    assert!(found.is_some(), "replica b reads replica a's trace");

    for (app, id) in [(&a, "replica-a"), (&b, "replica-b")] {
        let health = call_tool(app, "health", json!({})).await;
        assert_eq!(structured(&health)["replica"]["id"], id, "{health}");
        assert_eq!(structured(&health)["database"]["backend"], "postgres");
        let agents = call_tool(app, "list_agents", json!({})).await;
        assert_eq!(structured(&agents)["replica"]["id"], id, "{agents}");
        assert!(structured(&agents)["replica"]["hostname"].is_string());
    }

    // A warning kept by replica a (as its log journal keeps them) is read back, labelled
    // with the replica that wrote it, through replica b's server_log.
    let now_us = chrono::Utc::now().timestamp_micros();
    let record = json!({"seq": 1, "time_us": now_us, "timestamp": "", "level": "warn",
        "target": "porthole::bot", "message": "a warning kept in the shared store",
        "fields": {}, "source": "server"});
    a.bot
        .store
        .append_log_events(
            vec![(now_us, "warn".into(), record.to_string())],
            "replica-a",
            1000,
        )
        .await
        .unwrap();
    let r = call_tool(
        &b,
        "server_log",
        json!({"grep": "a warning kept in the shared store", "level": "warn"}),
    )
    .await;
    let lines = structured(&r)["lines"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        lines
            .iter()
            .any(|l| l["reader"] == "database" && l["replica"] == "replica-a"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_legacy_session_minted_by_one_replica_works_on_another() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = porthole::bot::store::fresh_schema_url(&base);
    let a = replica(&url, "replica-a", &[]).await;
    let b = replica(&url, "replica-b", &[]).await;
    let session = legacy_session(&a, "2025-11-25", json!({})).await;
    let listed = legacy(&b, &session, 2, "tools/list", json!({})).await;
    assert_eq!(listed.status, 200, "{}", listed.raw);
    assert!(listed.raw.contains("db_query"), "{}", listed.raw);
    let called = legacy(
        &b,
        &session,
        3,
        "tools/call",
        json!({"name": "health", "arguments": {}}),
    )
    .await;
    assert!(called.raw.contains("replica-b"), "{}", called.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tool_toggled_on_one_replica_is_announced_on_every_replica() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = porthole::bot::store::fresh_schema_url(&base);
    let a = replica(&url, "replica-a", &[]).await;
    let b = replica(&url, "replica-b", &[]).await;
    let stream = listen(&b, json!(7), json!({"toolsListChanged": true})).await;
    let mut stream = stream.bytes_stream();
    // Let the stream open, and the listener connect, before the change.
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.next()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let toggled = call_tool(
        &a,
        "toggle_tool",
        json!({"name": "calculator", "enabled": false}),
    )
    .await;
    assert!(!is_error(&toggled), "{toggled}");
    let mut seen = String::new();
    let announced = read_sse_until(&mut stream, &mut seen, |messages| {
        messages
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed")
            .then_some(())
    })
    .await;
    assert!(announced.is_some(), "replica b's stream heard it: {seen}");
    let disabled = eventually(Duration::from_secs(5), || {
        let b = &b;
        async move {
            let tool = b.bot.tools.get("calculator")?;
            (!tool.enabled).then_some(())
        }
    })
    .await;
    assert!(disabled.is_some(), "replica b applied the saved setting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scheduled_runs_happen_once_per_due_time_across_three_replicas() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = porthole::bot::store::fresh_schema_url(&base);
    let scheduler = [("SCHEDULER_ENABLED", "true")];
    let replicas = [
        replica(&url, "replica-a", &scheduler).await,
        replica(&url, "replica-b", &scheduler).await,
        replica(&url, "replica-c", &scheduler).await,
    ];
    // Every second (six-field cron, seconds first).
    let created = client()
        .post(format!("{}/api/tasks", replicas[0].url()))
        .json(
            &json!({"name": "tick", "schedule": "* * * * * *", "action": {"tool": "current_time"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    tokio::time::sleep(Duration::from_secs(6)).await;
    let runs = call_tool(
        &replicas[1],
        "db_query",
        json!({"query": "SELECT due_at, replica, attempts, status FROM task_runs ORDER BY due_at"}),
    )
    .await;
    let rows = structured(&runs)["rows"].as_array().unwrap().clone();
    assert!(rows.len() >= 4, "about one run a second: {rows:?}");
    let due: Vec<&str> = rows.iter().map(|r| r[0].as_str().unwrap()).collect();
    let mut distinct = due.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), due.len(), "one run per due time: {due:?}");
    assert!(
        rows.iter().all(|r| r[2] == 1),
        "no due time ran twice: {rows:?}"
    );
    // The traces of every run, whichever replica ran it, are one query away.
    let traces = call_tool(&replicas[2], "list_traces", json!({"source": "task"})).await;
    assert!(!is_error(&traces), "{traces}");
}

/// Read-only `db_query` on PostgreSQL: every attack is refused (by the console before it
/// runs, or by PostgreSQL's read-only transaction), and nothing any of them did is left
/// behind. The SQLite counterpart is in `trust_boundary.rs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_only_db_query_on_postgres_refuses_every_attack() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = porthole::bot::store::fresh_schema_url(&base);
    let app = replica(&url, "replica-ro", &[("DB_QUERY_READONLY", "true")]).await;
    let sent = call_tool(&app, "send_message", json!({"content": "/help"})).await;
    assert!(!is_error(&sent), "{sent}");
    let attacks = [
        "DELETE FROM messages",
        "UPDATE conversations SET title = 'x'",
        "INSERT INTO memories (key, value, updated_at) VALUES ('k', 'v', 'now')",
        "DROP TABLE messages",
        "CREATE TABLE evil (x int)",
        "CREATE TEMP TABLE evil (x int)",
        "TRUNCATE messages",
        "ALTER TABLE messages ADD COLUMN evil int",
        "WITH gone AS (DELETE FROM messages RETURNING id) SELECT count(*) FROM gone",
        "SELECT * FROM conversations FOR UPDATE",
        "SELECT nextval('messages_id_seq')",
        "SET search_path = nowhere",
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
        "RESET ALL",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "LISTEN porthole_changes",
        "NOTIFY porthole_changes, 'x'",
        "COPY messages TO PROGRAM 'touch /tmp/porthole-pwned'",
        "COPY messages TO '/tmp/porthole-pwned'",
        "DO $$ BEGIN DELETE FROM messages; END $$",
        "PREPARE p AS SELECT 1",
        "DISCARD ALL",
        "VACUUM",
        "EXPLAIN ANALYZE DELETE FROM messages",
        "SELECT 1; DELETE FROM messages",
        "SELECT set_config('search_path', 'nowhere', false)",
        "SELECT pg_advisory_lock(1)",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT \"pg_read_file\"('/etc/passwd')",
        "SELECT lo_export(1, '/tmp/porthole-pwned')",
        "SELECT U&\"pg\\005fsleep\"(1)",
        "/* looks harmless */ DELETE FROM messages",
    ];
    for attack in attacks {
        let r = call_tool(&app, "db_query", json!({"query": attack})).await;
        assert!(is_error(&r), "not refused: {attack}: {r}");
    }
    assert!(!std::path::Path::new("/tmp/porthole-pwned").exists());
    // A slow statement is stopped by the time limit, not left running.
    let reads = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT count(*) AS n, current_setting('search_path') AS path FROM messages"}),
    )
    .await;
    let row = &structured(&reads)["rows"][0];
    assert!(
        row[0].as_i64().unwrap() >= 2,
        "the messages survived: {reads}"
    );
    assert!(
        !row[1].as_str().unwrap().contains("nowhere"),
        "no session change outlived its call: {reads}"
    );
    let schema = app.bot.store.describe_schema().await.expect("schema");
    assert!(!schema.to_string().contains("evil"), "no table was made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_database_password_never_shows() {
    let Some(base) = test_database_url() else {
        return;
    };
    let Some(password) = porthole::redact::url_password(&base) else {
        service_missing(
            "a password in PORTHOLE_TEST_DATABASE_URL",
            "use a URL with one (`.ci/run` and `scripts/replicas.sh` do)",
        );
        return;
    };
    let url = porthole::bot::store::fresh_schema_url(&base);
    let app = replica(&url, "replica-pw", &[]).await;
    for tool in ["health", "get_config", "get_bot_status"] {
        let r = call_tool(&app, tool, json!({})).await;
        assert!(!r.to_string().contains(&password), "{tool} shows it: {r}");
    }
    let schema = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT current_user AS u"}),
    )
    .await;
    assert!(!schema.to_string().contains(&password));
    // A wrong password: start-up fails with a message that names the variable, and
    // neither the wrong password nor the right one.
    let wrong = url.replacen(&password, "not-the-password", 1);
    let vars: std::collections::HashMap<String, String> = [
        ("DATABASE_URL", wrong.as_str()),
        ("PORT", "0"),
        ("HOST", "127.0.0.1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let config = porthole::config::Config::from_map(&vars).unwrap();
    let err = porthole::app::start(config, porthole::app::Logging::default())
        .await
        .err()
        .expect("a wrong password stops start-up")
        .to_string();
    assert!(
        !err.contains("not-the-password") && !err.contains(&password),
        "{err}"
    );
    assert!(
        err.contains("DATABASE_URL") && err.contains("[REDACTED]"),
        "{err}"
    );
}
