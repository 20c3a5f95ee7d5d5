//! The bot on PostgreSQL, with several replicas sharing one database: real bots over real
//! HTTP, a real server. Runs when `PORTHOLE_TEST_DATABASE_URL` names a PostgreSQL
//! database (`.ci/run` and `scripts/replicas.sh` start one and set it); without it every
//! test here prints why it skipped and passes, or fails under `PORTHOLE_REQUIRE_SERVICES=1`. The server restart is tested on its own in
//! `postgres_restart.rs` (test binaries run one after another).
//! Each test works in a fresh schema of its own, so they run at once without meeting.

use crate::common;

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

/// A fresh schema of the test database for one test; `None` (the test skips) without one.
fn fresh_database() -> Option<String> {
    test_database_url().map(|base| porthole::bot::store::fresh_schema_url(&base))
}

/// Replicas `replica-a` and `replica-b` on a fresh database (whose URL comes first).
async fn two_replicas() -> Option<(String, RunningApp, RunningApp)> {
    let url = fresh_database()?;
    let a = replica(&url, "replica-a", &[]).await;
    let b = replica(&url, "replica-b", &[]).await;
    Some((url, a, b))
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
    let _postgres = postgres_share().await;
    let Some((_, a, b)) = two_replicas().await else {
        return;
    };

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
    let _postgres = postgres_share().await;
    let Some((_, a, b)) = two_replicas().await else {
        return;
    };
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
    let _postgres = postgres_share().await;
    let Some((_, a, b)) = two_replicas().await else {
        return;
    };
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
    let _postgres = postgres_share().await;
    let Some(url) = fresh_database() else {
        return;
    };
    let scheduler = [("SCHEDULER_ENABLED", "true")];
    let replicas = [
        replica(&url, "replica-a", &scheduler).await,
        replica(&url, "replica-b", &scheduler).await,
        replica(&url, "replica-c", &scheduler).await,
    ];
    // Every second (six-field cron, seconds first): more often than the page may ask
    // for, so it is made through /mcp, as an admin's task, due at once.
    let created = call_tool(
        &replicas[0],
        "db_query",
        json!({"query": "INSERT INTO tasks (name, schedule, action, next_run, created_at, run_as) \
                         VALUES ('tick', '* * * * * *', '{\"tool\":\"current_time\"}', \
                         '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', 'admin')"}),
    )
    .await;
    assert!(!is_error(&created), "{created}");
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
    let _postgres = postgres_share().await;
    let Some(url) = fresh_database() else {
        return;
    };
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
        // SQL built as the statement runs, where no check of its text can read it.
        "SELECT query_to_xml('SELECT pg_'||'terminate_backend(pid) FROM pg_stat_activity', true, false, '')",
        "SELECT * FROM ts_stat('SELECT to_tsvector(pg_'||'terminate_backend(pg_backend_pid())::text)')",
        "SELECT * FROM pg_ls_waldir()",
        "SELECT pg_stat_reset_shared('bgwriter')",
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
    let _postgres = postgres_share().await;
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

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A modern request declaring the Tasks extension (and elicitation, which db_query's
/// confirmation asks for).
async fn tasks_call(app: &RunningApp, method: &str, mut params: Value) -> Reply {
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities":
        {"elicitation": {}, "extensions": {TASKS: {}}}});
    modern(app, 21, method, params).await
}

/// A `db_query` write started as a task on `app`: it parks in `input_required`,
/// waiting for the client's confirmation. Its id.
async fn start_parked_write(app: &RunningApp, key: &str) -> String {
    let sql = format!("INSERT INTO memories (key, value, updated_at) VALUES ('{key}', 'v', 'now')");
    let reply = tasks_call(
        app,
        "tools/call",
        json!({"name": "db_query", "arguments": {"query": sql}}),
    )
    .await;
    assert_eq!(reply.result()["resultType"], "task", "{}", reply.raw);
    reply.result()["taskId"].as_str().unwrap().to_string()
}

/// Polls `tasks/get` on `app` until the task's status is `status` (10 s at most).
async fn task_reaches(app: &RunningApp, id: &str, status: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..100 {
        last = tasks_call(app, "tasks/get", json!({"taskId": id}))
            .await
            .result()
            .clone();
        if last["status"] == status {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {id} did not reach {status}: {last}");
}

/// The key of the first input a parked task asks for.
fn request_key(task: &Value) -> String {
    let requests = task["inputRequests"].as_object().expect("inputRequests");
    requests.keys().next().expect("one request").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_task_run_by_one_replica_is_polled_answered_and_cancelled_through_another() {
    let _postgres = postgres_share().await;
    let Some((url, a, b)) = two_replicas().await else {
        return;
    };
    let answered = start_parked_write(&a, "answered").await;
    let parked = task_reaches(&b, &answered, "input_required").await;
    let key = request_key(&parked);

    // Replica b restarts (its start-up recovery runs) while a's task waits: it lives on.
    b.shutdown().await;
    let b = replica(&url, "replica-b", &[]).await;
    task_reaches(&b, &answered, "input_required").await;

    // b's listener hears the task a runs; b passes the answer to a.
    let mut seen = String::new();
    let (mut stream, agreed) = listen_to_tasks(&b, json!([answered]), &mut seen).await;
    assert_eq!(agreed, json!([answered]), "b agrees to report on a's task");
    let update = tasks_call(
        &b,
        "tasks/update",
        json!({"taskId": answered, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
    )
    .await;
    assert_eq!(update.status, 200, "{}", update.raw);
    let heard = read_sse_until(&mut stream, &mut seen, |messages| {
        messages
            .iter()
            .find(|m| m["method"] == "notifications/tasks" && m["params"]["status"] == "completed")
            .cloned()
    })
    .await
    .unwrap_or_else(|| panic!("b's stream heard no completion: {seen}"));
    assert_eq!(
        heard["params"]["result"]["structuredContent"]["rows_affected"],
        1
    );
    let done = task_reaches(&b, &answered, "completed").await;
    assert_eq!(
        done["result"]["structuredContent"]["rows_affected"], 1,
        "{done}"
    );

    // A cancel through b stops a's work for good: the write never runs.
    let cancelled = start_parked_write(&a, "cancelled").await;
    let key = request_key(&task_reaches(&b, &cancelled, "input_required").await);
    let cancel = tasks_call(&b, "tasks/cancel", json!({"taskId": cancelled})).await;
    assert_eq!(cancel.status, 200, "{}", cancel.raw);
    task_reaches(&b, &cancelled, "cancelled").await;
    let late = tasks_call(
        &a,
        "tasks/update",
        json!({"taskId": cancelled, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
    )
    .await;
    assert_eq!(late.status, 200, "{}", late.raw);
    tokio::time::sleep(Duration::from_millis(500)).await;
    task_reaches(&a, &cancelled, "cancelled").await;
    let rows = call_tool(
        &a,
        "db_query",
        json!({"query": "SELECT COUNT(*) AS writes FROM memories"}),
    )
    .await;
    assert_eq!(
        structured(&rows)["rows"],
        json!([[1]]),
        "only the answered write ran: {rows}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_that_died_has_its_tasks_failed_once_its_lease_runs_out() {
    let _postgres = postgres_share().await;
    let Some(url) = fresh_database() else {
        return;
    };
    let a = replica(&url, "replica-a", &[]).await;
    let task = start_parked_write(&a, "lost").await;
    task_reaches(&a, &task, "input_required").await;
    let live = start_parked_write(&a, "live").await;
    task_reaches(&a, &live, "input_required").await;
    // The first task now belongs to a replica that died (its lease ran out): the next
    // start-up of any replica fails it, and leaves the live replica's task alone.
    let store = porthole::bot::store::Store::open(&url).unwrap();
    let record = store.mcp_task(&task).await.unwrap().unwrap();
    let parsed: porthole::mcp::TaskRecord = serde_json::from_str(&record).unwrap();
    let orphan = porthole::bot::store::StoredTaskRow {
        id: task.clone(),
        owner: parsed.owner.clone(),
        session: None,
        finished: false,
        created_ms: parsed.created_ms,
        expires_ms: parsed.expires_ms(),
        record,
        owner_replica: "replica-gone".into(),
        lease_until_ms: 0,
    };
    assert!(store.put_mcp_task(orphan).await.unwrap());
    let b = replica(&url, "replica-b", &[]).await;
    let failed = task_reaches(&b, &task, "failed").await;
    assert!(
        failed["statusMessage"]
            .as_str()
            .unwrap()
            .contains("stopped"),
        "{failed}"
    );
    task_reaches(&b, &live, "input_required").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_ended_on_one_replica_is_refused_on_another_within_a_second() {
    let _postgres = postgres_share().await;
    let Some((_, a, b)) = two_replicas().await else {
        return;
    };
    let session = legacy_session(&a, "2025-11-25", json!({})).await;
    let listed = legacy(&b, &session, 2, "tools/list", json!({})).await;
    assert_eq!(listed.status, 200, "b restored it: {}", listed.raw);
    assert_eq!(end_session(&a, &session).await, 204);
    let started = Instant::now();
    let refused = eventually(Duration::from_secs(1), || {
        let (b, session) = (&b, &session);
        async move {
            let reply = legacy(b, session, 3, "tools/list", json!({})).await;
            (reply.status == 404).then_some(())
        }
    })
    .await;
    assert!(
        refused.is_some(),
        "b still answers the ended session after 1 s"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_mcp_server_toggled_on_one_replica_is_toggled_on_every_replica_and_stays_so() {
    let _postgres = postgres_share().await;
    let Some(url) = fresh_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(mcp_json) = stdio_fixture_config(dir.path(), json!({})) else {
        return;
    };
    let with_fixture = [("MCP_SERVERS_CONFIG", mcp_json.as_str())];
    let a = replica(&url, "replica-a", &with_fixture).await;
    let b = replica(&url, "replica-b", &with_fixture).await;
    wait_for_tool(&b, "mcp.fixture__echo", true).await;
    let off = call_tool(
        &a,
        "toggle_mcp_server",
        json!({"name": "fixture", "enabled": false}),
    )
    .await;
    assert!(!is_error(&off), "{off}");
    wait_for_tool(&b, "mcp.fixture__echo", false).await;
    let servers = call_tool(&b, "list_mcp_servers", json!({})).await;
    assert_eq!(
        structured(&servers)["servers"][0]["state"],
        "disabled",
        "{servers}"
    );
    // The setting is saved in the shared store: a replica that starts now (or one that
    // restarts) starts with the server off, whatever mcp.json says.
    let c = replica(&url, "replica-c", &with_fixture).await;
    let servers = call_tool(&c, "list_mcp_servers", json!({})).await;
    assert_eq!(
        structured(&servers)["servers"][0]["state"],
        "disabled",
        "{servers}"
    );
    wait_for_tool(&c, "mcp.fixture__echo", false).await;
    let on = call_tool(
        &a,
        "toggle_mcp_server",
        json!({"name": "fixture", "enabled": true}),
    )
    .await;
    assert!(!is_error(&on), "{on}");
    wait_for_tool(&b, "mcp.fixture__echo", true).await;
}

/// Replicas `replica-a` and `replica-b` on a fresh database, whose legacy sessions go
/// idle after `idle_secs` on each.
async fn two_replicas_idle_after(idle_secs: [&str; 2]) -> Option<(RunningApp, RunningApp)> {
    let url = fresh_database()?;
    let idle = |secs| [("MCP_SESSION_IDLE_SECS", secs)];
    let a = replica(&url, "replica-a", &idle(idle_secs[0])).await;
    let b = replica(&url, "replica-b", &idle(idle_secs[1])).await;
    Some((a, b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_busy_on_one_replica_is_not_taken_for_idle_by_another() {
    let _postgres = postgres_share().await;
    let Some((a, b)) = two_replicas_idle_after(["2", "2"]).await else {
        return;
    };
    let session = legacy_session(&a, "2025-11-25", json!({})).await;
    // Served by b only, for twice the idle timeout: a's sweeps find it idle there.
    let busy_until = Instant::now() + Duration::from_secs(4);
    let mut id = 2;
    while Instant::now() < busy_until {
        let reply = legacy(&b, &session, id, "tools/list", json!({})).await;
        assert_eq!(
            reply.status, 200,
            "b serves the busy session: {}",
            reply.raw
        );
        id += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let back_on_a = legacy(&a, &session, id, "tools/list", json!({})).await;
    assert_eq!(
        back_on_a.status, 200,
        "a did not end a session b was serving: {}",
        back_on_a.raw
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_listening_on_one_replica_is_not_taken_for_idle_by_another() {
    let _postgres = postgres_share().await;
    let Some((a, b)) = two_replicas_idle_after(["2", "2"]).await else {
        return;
    };
    let session = legacy_session(&a, "2025-11-25", json!({})).await;
    // The client holds its GET stream on b and sends nothing for twice the timeout.
    let stream = legacy_get_stream(&b, &session).await;
    assert_eq!(stream.status(), 200);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let reply = legacy(&b, &session, 2, "tools/list", json!({})).await;
    assert_eq!(
        reply.status, 200,
        "a did not end a session whose client listens on b: {}",
        reply.raw
    );
    drop(stream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_evicted_for_idleness_is_refused_on_every_replica_within_a_second() {
    let _postgres = postgres_share().await;
    // b would keep it idle for a minute: only a's eviction, announced, can end it there.
    let Some((a, b)) = two_replicas_idle_after(["1", "60"]).await else {
        return;
    };
    let session = legacy_session(&a, "2025-11-25", json!({})).await;
    let listed = legacy(&b, &session, 2, "tools/list", json!({})).await;
    assert_eq!(listed.status, 200, "b restored it: {}", listed.raw);
    // Idle everywhere: a's sweep (every 0.5 s) ends it after a second or so, then b
    // hears of it. Watched through the replicas' counts of live sessions: a request
    // would make the session busy.
    let live = |app: &RunningApp| app.mcp.as_ref().expect("MCP is on").live_sessions();
    assert_eq!(live(&b), 1);
    let evicted = eventually(Duration::from_secs(10), || {
        let gone = live(&a) == 0;
        async move { gone.then_some(()) }
    })
    .await;
    assert!(
        evicted.is_some(),
        "a did not evict the idle session within 10 s"
    );
    let started = Instant::now();
    let refused = eventually(Duration::from_secs(1), || {
        let gone = live(&b) == 0;
        async move { gone.then_some(()) }
    })
    .await;
    assert!(
        refused.is_some(),
        "b still holds the session a ended, 1 s later"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    let reply = legacy(&a, &session, 3, "tools/list", json!({})).await;
    assert_eq!(reply.status, 404, "a ended it: {}", reply.raw);
    let reply = legacy(&b, &session, 3, "tools/list", json!({})).await;
    assert_eq!(reply.status, 404, "b refuses it: {}", reply.raw);
}
