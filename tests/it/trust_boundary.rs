//! The trust boundary around `/mcp`: nothing reaches the bot's power or its secrets
//! without the token. Each test is an attack that worked before the boundary was closed:
//! the web API running admin tools and returning secrets, cross-site requests, a
//! read-only SQL mode that changed lasting state, a write confirmation that hid the
//! write, user tools inheriting the bot's environment, whole-file reads, loose Host
//! checks and framing.

use crate::common;

use std::path::Path;

use common::*;
use porthole::app::RunningApp;
use serde_json::{Value, json};

/// Writes a user tool manifest whose command is a Python one-liner.
fn user_tool(dir: &Path, name: &str, roles: &[&str], script: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let manifest = json!({
        "name": name,
        "description": format!("test tool {name}"),
        "command": ["python3", "-c", script],
        "required_roles": roles,
    });
    std::fs::write(dir.join(format!("{name}.json")), manifest.to_string()).unwrap();
}

async fn api(
    app: &RunningApp,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = client().request(method, format!("{}{path}", app.url()));
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn the_web_api_does_no_more_than_a_chat_user_and_redacts_what_it_returns() {
    if !has_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("user-tools");
    user_tool(&tools, "admin_only", &["admin"], "print('admin power')");
    // Prints the /mcp token and an API-key assignment: a tool result quoting secrets.
    user_tool(
        &tools,
        "leaky",
        &[],
        &format!("print('token {TOKEN} and api_key=sk-abcdefghijklmnopqrstuv')"),
    );
    let tools_dir = tools.display().to_string();
    let app = start_bot(&[("USER_TOOLS_DIR", &tools_dir)]).await;
    let post = reqwest::Method::POST;

    // No tool that a chat user may not call can become a task, internal ones included.
    let forbidden: Vec<String> = app
        .bot
        .tools
        .all()
        .into_iter()
        .filter(|t| t.def.internal || !t.def.required_roles.is_empty())
        .map(|t| t.def.name)
        .collect();
    assert!(forbidden.iter().any(|n| n == "admin_only"));
    for (i, tool) in forbidden.iter().enumerate() {
        let (status, body) = api(
            &app,
            post.clone(),
            "/api/tasks",
            Some(
                json!({"name": format!("t{i}"), "schedule": "0 0 * * *", "action": {"tool": tool}}),
            ),
            &[],
        )
        .await;
        assert_eq!(status, 400, "{tool}: {body}");
    }
    // The page's tool list shows only what a chat user may use.
    let (_, listed) = api(&app, reqwest::Method::GET, "/api/tools", None, &[]).await;
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"leaky") && names.contains(&"calculator"));
    for tool in &forbidden {
        assert!(!names.contains(&tool.as_str()), "{tool} listed");
    }

    // A task the page created runs, and what it returns is redacted.
    let (status, task) = api(
        &app,
        post.clone(),
        "/api/tasks",
        Some(json!({"name": "leak", "schedule": "0 0 * * *", "action": {"tool": "leaky"}})),
        &[],
    )
    .await;
    assert_eq!(status, 201, "{task}");
    assert_eq!(task["run_as"], "user");
    let path = format!("/api/tasks/{}/run", task["id"]);
    let (status, run) = api(&app, post.clone(), &path, Some(json!({})), &[]).await;
    assert_eq!(status, 200, "{run}");
    let (_, listed) = api(&app, reqwest::Method::GET, "/api/tasks", None, &[]).await;
    for text in [run.to_string(), listed.to_string()] {
        assert!(text.contains("[REDACTED]"), "{text}");
        assert!(!text.contains(TOKEN), "token leaked: {text}");
        assert!(!text.contains("sk-abcdefghij"), "key leaked: {text}");
    }

    // A prompt task made by the page runs as a chat user even when the scheduler (an
    // admin caller) runs it: the admin-only tool stays out of reach.
    let (_, prompt_task) = api(
        &app,
        post.clone(),
        "/api/tasks",
        Some(json!({"name": "sneaky", "schedule": "0 0 * * *",
                    "action": {"prompt": "/run admin_only {}"}})),
        &[],
    )
    .await;
    let run = app
        .bot
        .schedule
        .run_now(
            prompt_task["id"].as_i64().unwrap(),
            porthole::bot::schedule::RunAs::Admin,
        )
        .await
        .unwrap();
    assert!(!run.result.contains("admin power"), "{run:?}");

    // A task with admin rights (made through /mcp's db_query) cannot be run from the page.
    let r = call_tool(
        &app,
        "db_query",
        json!({"query": "INSERT INTO tasks (name, schedule, action, created_at, run_as) \
                         VALUES ('adm', '0 0 * * *', '{\"tool\":\"admin_only\"}', '2026-01-01', 'admin')"}),
    )
    .await;
    let id = r["structuredContent"]["last_insert_rowid"].clone();
    let (status, body) = api(
        &app,
        post.clone(),
        &format!("/api/tasks/{id}/run"),
        Some(json!({})),
        &[],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("run_task"),
        "{body}"
    );
    let r = call_tool(&app, "run_task", json!({"id": id})).await;
    assert!(r.to_string().contains("admin power"), "{r}");
    // The page lists it, but not what it does or returned.
    let (status, listed) = api(&app, reqwest::Method::GET, "/api/tasks", None, &[]).await;
    assert_eq!(status, 200, "{listed}");
    let task = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap();
    assert_eq!(task["run_as"], "admin");
    assert!(
        task["action"].is_null() && task["last_result"].is_null(),
        "{task}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn state_changing_api_routes_refuse_other_sites_and_form_bodies() {
    let app = start_bot(&[]).await;
    let task = app
        .bot
        .schedule
        .create(
            "clock",
            "",
            "0 0 * * *",
            json!({"tool": "current_time"}),
            porthole::bot::schedule::RunAs::User,
        )
        .await
        .unwrap();
    let run = format!("{}/api/tasks/{}/run", app.url(), task.id);
    let send = |headers: Vec<(&'static str, &'static str)>, body: &'static str| {
        let mut request = client().post(&run).body(body);
        for (k, v) in headers {
            request = request.header(k, v);
        }
        request.send()
    };
    // A form post from another site: a "simple" request browsers send without asking.
    let r = send(
        vec![
            ("origin", "http://evil.example"),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
        "a=b",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    let r = send(
        vec![
            ("origin", "http://evil.example"),
            ("content-type", "application/json"),
        ],
        "{}",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    let r = send(vec![("sec-fetch-site", "cross-site")], "{}")
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = send(vec![("content-type", "text/plain")], "{}")
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let body = r.text().await.unwrap();
    assert!(body.contains("application/json"), "{body}");
    let tasks = app.bot.schedule.list().await.unwrap();
    assert!(
        tasks[0].last_run.is_none(),
        "no refused request ran the task"
    );

    // The page itself (same origin, JSON) still works.
    let origin = app.url();
    let r = client()
        .post(&run)
        .header("origin", origin.as_str())
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client()
        .post(format!("{}/api/messages", app.url()))
        .header("origin", "http://evil.example")
        .json(&json!({"content": "/help"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // No other site may frame the page, and it runs only its own scripts.
    let page = client().get(app.url()).send().await.unwrap();
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    let policy = page.headers()["content-security-policy"].to_str().unwrap();
    for directive in [
        "frame-ancestors 'none'",
        "script-src 'self'",
        "object-src 'none'",
    ] {
        assert!(policy.contains(directive), "{policy}");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn read_only_sql_changes_nothing_that_outlives_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bot.db").display().to_string();
    let app = start_bot(&[("DATABASE_PATH", &db), ("DB_QUERY_READONLY", "true")]).await;
    app.bot.store.create_conversation("before").await.unwrap();
    let attached = dir.path().join("attached.db");
    let vacuumed = dir.path().join("vacuumed.db");
    let attacks = [
        "PRAGMA hard_heap_limit=1".to_string(),
        "PRAGMA soft_heap_limit=1".into(),
        "PRAGMA journal_mode=DELETE".into(),
        "PRAGMA foreign_keys=OFF".into(),
        "PRAGMA writable_schema=ON".into(),
        "PRAGMA locking_mode=EXCLUSIVE".into(),
        "PRAGMA synchronous=OFF".into(),
        "PRAGMA query_only=0".into(),
        "PRAGMA user_version=99".into(),
        "PRAGMA wal_checkpoint(TRUNCATE)".into(),
        "PRAGMA optimize".into(),
        format!("ATTACH DATABASE '{}' AS x", attached.display()),
        format!("VACUUM INTO '{}'", vacuumed.display()),
        "VACUUM".into(),
        "BEGIN IMMEDIATE".into(),
        "SAVEPOINT s".into(),
        "CREATE TEMP TABLE t(x)".into(),
        "CREATE TEMP VIEW v AS SELECT 1".into(),
        "DELETE FROM conversations".into(),
        "INSERT INTO memories (key, value, updated_at) VALUES ('k', 'v', 'now')".into(),
        "SELECT load_extension('/tmp/nothing')".into(),
        "/* padding */ DROP TABLE tasks".into(),
    ];
    for attack in &attacks {
        let r = call_tool(&app, "db_query", json!({"query": attack})).await;
        assert!(is_error(&r), "{attack} was allowed: {r}");
        assert!(
            error_text(&r).contains("DB_QUERY_READONLY"),
            "{attack}: {}",
            error_text(&r)
        );
    }
    let r = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT zeroblob(1000000000)"}),
    )
    .await;
    assert!(error_text(&r).contains("too big"), "{r}");
    assert!(!attached.exists(), "ATTACH created a file");
    assert!(!vacuumed.exists(), "VACUUM INTO created a file");
    // Reads work, reporting PRAGMAs too.
    for read in [
        "SELECT COUNT(*) FROM conversations",
        "PRAGMA table_info(tasks)",
        "SELECT name FROM pragma_table_info('tasks')",
        "PRAGMA user_version",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT SUM(i) FROM n",
    ] {
        let r = call_tool(&app, "db_query", json!({"query": read})).await;
        assert!(!is_error(&r), "{read}: {r}");
    }
    // The bot's own connection kept its settings and still writes.
    app.bot.store.create_conversation("after").await.unwrap();
    let settings = app
        .bot
        .store
        .call(|c| {
            let journal: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
            let keys: i64 = c.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
            // The bot's file and the traces' own, attached at start-up; nothing else (an
            // empty `temp`, opened by a migration's rename, holds nothing).
            let databases: String = c.query_row(
                "SELECT group_concat(name, ',') FROM pragma_database_list WHERE name <> 'temp'",
                [],
                |r| r.get(0),
            )?;
            let temporary: i64 =
                c.query_row("SELECT COUNT(*) FROM temp.sqlite_master", [], |r| r.get(0))?;
            Ok((journal, keys, format!("{databases}; {temporary} temporary")))
        })
        .await
        .unwrap();
    assert_eq!(
        settings,
        ("wal".to_string(), 1, "main,traces; 0 temporary".to_string())
    );
    let r = call_tool(&app, "list_conversations", json!({})).await;
    assert_eq!(
        r["structuredContent"]["conversations"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    app.shutdown().await;

    // The same guarantees hold on a `:memory:` store, which has no second connection.
    let app = start_bot(&[("DB_QUERY_READONLY", "true")]).await;
    for attack in ["PRAGMA foreign_keys=OFF", "BEGIN", "CREATE TEMP TABLE t(x)"] {
        let r = call_tool(&app, "db_query", json!({"query": attack})).await;
        assert!(is_error(&r), "{attack}: {r}");
    }
    app.bot.store.create_conversation("fine").await.unwrap();
    let keys = app
        .bot
        .store
        .call(|c| Ok(c.query_row("PRAGMA foreign_keys", [], |r| r.get::<_, i64>(0))?))
        .await
        .unwrap();
    assert_eq!(keys, 1);
    app.shutdown().await;
}

#[tokio::test]
async fn a_write_confirmation_names_the_write_however_long_the_statement() {
    let app = start_bot(&[]).await;
    let padded = format!("/* {} */ DELETE FROM messages", "harmless ".repeat(200));
    let reply = modern(
        &app,
        1,
        "tools/call",
        json!({"name": "db_query", "arguments": {"query": padded},
               "_meta": {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}),
    )
    .await;
    let message = reply.result()["inputRequests"]["confirm_write"]["params"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("DELETE on messages"), "{message}");
    assert!(message.contains("cut"), "{message}");
    app.shutdown().await;
}

#[tokio::test]
async fn db_query_takes_the_design_spelling_and_redacts_secret_columns() {
    let app = start_bot(&[]).await;
    // The bot's own writes leave a rowid on the connection; only an insert reports one.
    call_tool(&app, "send_message", json!({"content": "hello"})).await;
    for (statement, rowid) in [
        (
            "CREATE TABLE creds (name TEXT, password TEXT, api_key TEXT)",
            json!(null),
        ),
        (
            "INSERT INTO creds VALUES ('svc', 'hunter2', 'k-123456789')",
            json!(1),
        ),
        ("DROP TABLE IF EXISTS not_there", json!(null)),
    ] {
        let r = call_tool(&app, "db_query", json!({"query": statement})).await;
        assert!(!is_error(&r), "{r}");
        assert_eq!(
            r["structuredContent"]["last_insert_rowid"], rowid,
            "{statement}: {r}"
        );
    }
    let r = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT * FROM creds", "limit": 5}),
    )
    .await;
    assert_eq!(
        r["structuredContent"]["rows"][0],
        json!(["svc", "[REDACTED]", "[REDACTED]"])
    );
    // The older spelling still works.
    let r = call_tool(&app, "db_query", json!({"sql": "SELECT name FROM creds"})).await;
    assert_eq!(r["structuredContent"]["rows"][0][0], "svc");
    app.shutdown().await;
}

#[tokio::test]
async fn user_tools_start_with_a_clean_environment_plus_their_own() {
    if !has_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("user-tools");
    std::fs::create_dir_all(&tools).unwrap();
    let manifest = json!({
        "name": "env_dump",
        "description": "prints its environment's names",
        "command": ["python3", "-c", "import os, json; print(json.dumps(sorted(os.environ)))"],
        "env": {"GREETING": "hello"},
    });
    std::fs::write(tools.join("env_dump.json"), manifest.to_string()).unwrap();
    let tools_dir = tools.display().to_string();
    let app = start_bot(&[("USER_TOOLS_DIR", &tools_dir)]).await;
    let r = call_tool(
        &app,
        "run_tool",
        json!({"name": "env_dump", "arguments": {}}),
    )
    .await;
    let text = r.to_string();
    assert!(text.contains("GREETING"), "{text}");
    // `cargo test` gives this process many CARGO_* variables: none may reach the tool.
    assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
    assert!(
        !text.contains("CARGO"),
        "the bot's environment leaked: {text}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn read_file_returns_the_start_of_a_huge_file_without_loading_it() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    // A sparse 1 GiB file: reading it whole would need 1 GiB of memory.
    let file = std::fs::File::create(workspace.join("big.log")).unwrap();
    file.set_len(1 << 30).unwrap();
    let ws = workspace.display().to_string();
    let app = start_bot(&[("WORKSPACE_DIR", &ws)]).await;
    let before = resident_kib();
    let r = call_tool(
        &app,
        "run_tool",
        json!({"name": "read_file", "arguments": {"path": "big.log"}}),
    )
    .await;
    let grew = resident_kib().saturating_sub(before);
    let result = r["structuredContent"].to_string();
    assert!(result.contains("\"truncated\":true"), "{result}");
    assert!(result.contains(&(1u64 << 30).to_string()), "{result}");
    assert!(grew < 200 * 1024, "resident memory grew by {grew} KiB");
    app.shutdown().await;
}

/// This process's resident memory in KiB (0 where /proc is missing).
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn an_ended_session_stays_ended_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bot.db").display().to_string();
    let app = start_bot(&[("DATABASE_PATH", &db)]).await;
    let ended = legacy_session(&app, "2025-11-25", json!({})).await;
    let kept = legacy_session(&app, "2025-11-25", json!({})).await;
    assert_eq!(end_session(&app, &ended).await, 204);
    // The ledger writes in the background; give it a moment before the restart.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    app.shutdown().await;

    let app = start_bot(&[("DATABASE_PATH", &db)]).await;
    let ping = |session: String| {
        let app = &app;
        async move { legacy(app, &session, 2, "ping", json!({})).await.status }
    };
    assert_eq!(ping(kept).await, 200, "a live session survives the restart");
    assert_eq!(ping(ended).await, 404, "an ended one does not come back");
    app.shutdown().await;
}

#[tokio::test]
async fn host_checks_are_exact_and_oversized_bodies_are_refused_at_once() {
    let app = start_bot(&[]).await;
    let addr = app.addr;
    // Raw requests: reqwest would not send two Host headers or a lying length.
    let raw = |request: String| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 4096];
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut answer))
                .await
                .expect("answered at once")
                .unwrap();
        String::from_utf8_lossy(&answer[..read]).to_string()
    };
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let post = |host_lines: &str, length: usize| {
        format!(
            "POST /mcp HTTP/1.1\r\n{host_lines}Authorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {length}\r\n\r\n"
        )
    };
    for host in [
        "[::1].evil.example",
        "[::1].evil.example:3000",
        "localhost:80:80",
    ] {
        let answer = raw(post(&format!("Host: {host}\r\n"), body.len()) + body).await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{host}: {answer}");
    }
    let answer = raw(post("Host: 127.0.0.1\r\nHost: evil.example\r\n", body.len()) + body).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let page = raw("GET / HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n".into()).await;
    assert!(page.starts_with("HTTP/1.1 400"), "{page}");
    // A 100 GB body is refused before a byte of it is sent.
    let answer = raw(post("Host: 127.0.0.1\r\n", 100_000_000_000)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    app.shutdown().await;
}

#[tokio::test]
async fn slow_headers_cannot_hold_the_bot_and_streams_outlive_the_header_timeout() {
    use futures::StreamExt;
    use tokio::io::AsyncReadExt;
    let app = start_bot(&[
        ("HTTP_MAX_CONNECTIONS", "32"),
        ("HTTP_HEADER_TIMEOUT_SECS", "1"),
    ])
    .await;
    // A stream opened before the attack, to be checked after it.
    let mut events = open_legacy_stream(&app).await;

    // More slow clients than the cap, each stuck in the middle of its headers.
    let mut slow = slow_header_clients(app.addr, 48).await;
    // The bot stays reachable: slots come back as the slow clients time out.
    let started = std::time::Instant::now();
    let info = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client().get(format!("{}/api/info", app.url())).send(),
    )
    .await
    .expect("answered while slow clients held connections")
    .unwrap();
    assert_eq!(info.status(), 200);
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
    // And the slow clients were cut off.
    let mut buffer = [0u8; 256];
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), slow[0].read(&mut buffer))
        .await
        .expect("the server closed the slow connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

    // The stream opened before the attack is still open past the header timeout.
    let next = tokio::time::timeout(std::time::Duration::from_millis(1500), events.next()).await;
    assert!(
        matches!(next, Err(_) | Ok(Some(Ok(_)))),
        "the SSE stream was cut: {next:?}"
    );
    app.shutdown().await;
}

/// An HTTP/2 peer that sends a request and then answers nothing more (not the server's
/// pings) is closed: it cannot hold a connection, and a place under the cap, for good.
#[tokio::test]
async fn an_http2_peer_that_stops_answering_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const SETTINGS: u8 = 4;
    const PING: u8 = 6;
    let app = start_bot(&[("HTTP_HEADER_TIMEOUT_SECS", "1")]).await;
    let mut tcp = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let frame = |length: usize, kind: u8, flags: u8, stream: u32| {
        let mut header = (length as u32).to_be_bytes()[1..].to_vec();
        header.extend_from_slice(&[kind, flags]);
        header.extend_from_slice(&stream.to_be_bytes());
        header
    };
    // The preface, empty SETTINGS, then `GET /` on stream 1: `:method GET`, `:path /`
    // and `:scheme http` from HPACK's static table, `:authority` as a literal.
    let authority = app.addr.to_string();
    let mut block = vec![0x82, 0x84, 0x86, 0x41, authority.len() as u8];
    block.extend_from_slice(authority.as_bytes());
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(0, SETTINGS, 0, 0));
    hello.extend(frame(block.len(), 1, 0x5, 0x1));
    hello.extend(block);
    tcp.write_all(&hello).await.unwrap();

    // Read what comes, acknowledging the server's SETTINGS (as any client does) but
    // never its pings, until the server closes the connection.
    let started = std::time::Instant::now();
    let (mut received, mut pings, mut answered) = (Vec::new(), 0, false);
    let mut chunk = [0u8; 4096];
    let closed = loop {
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), tcp.read(&mut chunk));
        match read.await {
            Err(_) => break false,
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => received.extend_from_slice(&chunk[..n]),
        }
        while received.len() >= 9 {
            let length = u32::from_be_bytes([0, received[0], received[1], received[2]]) as usize;
            if received.len() < 9 + length {
                break;
            }
            let (kind, flags) = (received[3], received[4]);
            if kind == SETTINGS && flags & 1 == 0 {
                tcp.write_all(&frame(0, SETTINGS, 1, 0)).await.unwrap();
            }
            answered |= kind == 1;
            pings += usize::from(kind == PING && flags & 1 == 0);
            received.drain(..9 + length);
        }
    };
    assert!(answered, "the request was answered first");
    assert!(
        closed,
        "the connection was still open after 10 s of unanswered pings"
    );
    assert!(pings >= 1, "closed after a ping went unanswered");
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
    app.shutdown().await;
}

#[tokio::test]
async fn a_read_only_token_sees_and_calls_only_what_changes_nothing() {
    const READ_ONLY: &str = "read-only-token-0123456789abcdef";
    let app = start_bot(&[("MCP_SERVER_READONLY_SECRET", READ_ONLY)]).await;
    let send = |token: &'static str, body: Value, headers: Vec<(&'static str, String)>| {
        let mut request = client()
            .post(format!("{}/mcp", app.url()))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        for (k, v) in headers {
            request = request.header(k, v);
        }
        async move { into_reply(request.send().await.unwrap()).await }
    };
    let modern_headers = |method: &str| {
        vec![
            ("mcp-protocol-version", MODERN.to_string()),
            ("mcp-method", method.to_string()),
        ]
    };
    let modern_body = |id: u64, method: &str, mut params: Value| {
        params["_meta"] = modern_meta();
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    };
    let names = |reply: &Reply| -> Vec<String> {
        reply.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };

    // 2026: the listing holds read-only tools only; the rest are refused.
    let listing = send(
        READ_ONLY,
        modern_body(1, "tools/list", json!({})),
        modern_headers("tools/list"),
    )
    .await;
    for tool in listing.result()["tools"].as_array().unwrap() {
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
    }
    let read_only_names = names(&listing);
    assert!(read_only_names.contains(&"server_log".to_string()));
    assert!(!read_only_names.contains(&"db_query".to_string()));
    let mut call_headers = modern_headers("tools/call");
    call_headers.push(("mcp-name", "db_query".into()));
    let refused = send(
        READ_ONLY,
        modern_body(
            2,
            "tools/call",
            json!({"name": "db_query", "arguments": {"query": "DELETE FROM tasks"}}),
        ),
        call_headers,
    )
    .await;
    assert_eq!(refused.error_code(), Some(-32602), "{}", refused.raw);
    assert!(
        refused.raw.contains("MCP_SERVER_READONLY_SECRET"),
        "{}",
        refused.raw
    );
    // A typo is answered with close names it may call, never with the others.
    let mut typo_headers = modern_headers("tools/call");
    typo_headers.push(("mcp-name", "db_quer".into()));
    let typo = send(
        READ_ONLY,
        modern_body(3, "tools/call", json!({"name": "db_quer", "arguments": {}})),
        typo_headers,
    )
    .await;
    assert_eq!(typo.error_code(), Some(-32602), "{}", typo.raw);
    assert!(typo.raw.contains("Unknown tool: db_quer"), "{}", typo.raw);
    assert!(!typo.raw.contains("db_query"), "{}", typo.raw);
    // Nor as a task: the refusal comes before a task is created.
    let mut task_call = modern_body(
        7,
        "tools/call",
        json!({"name": "db_query", "arguments": {"query": "DELETE FROM tasks"}}),
    );
    task_call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let mut call_headers = modern_headers("tools/call");
    call_headers.push(("mcp-name", "db_query".into()));
    let refused = send(READ_ONLY, task_call, call_headers).await;
    assert_eq!(refused.error_code(), Some(-32602), "{}", refused.raw);
    let mut call_headers = modern_headers("tools/call");
    call_headers.push(("mcp-name", "list_conversations".into()));
    let allowed = send(
        READ_ONLY,
        modern_body(
            3,
            "tools/call",
            json!({"name": "list_conversations", "arguments": {}}),
        ),
        call_headers,
    )
    .await;
    assert!(
        allowed.result()["structuredContent"]["conversations"].is_array(),
        "{}",
        allowed.raw
    );
    let mut read_headers = modern_headers("resources/read");
    read_headers.push(("mcp-name", "porthole://config".into()));
    let config = send(
        READ_ONLY,
        modern_body(4, "resources/read", json!({"uri": "porthole://config"})),
        read_headers,
    )
    .await;
    assert!(config.raw.contains("contents"), "{}", config.raw);
    assert!(!config.raw.contains(READ_ONLY) && !config.raw.contains(TOKEN));

    // Legacy era: a session opened with the read-only token is held to the same rule.
    let init = send(
        READ_ONLY,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        vec![],
    )
    .await;
    let session = init.header("mcp-session-id").unwrap().to_string();
    let in_session = |id: u64, method: &str, params: Value| {
        send(
            READ_ONLY,
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            vec![
                ("mcp-session-id", session.clone()),
                ("mcp-protocol-version", "2025-11-25".into()),
            ],
        )
    };
    let listing = in_session(2, "tools/list", json!({})).await;
    assert_eq!(names(&listing), read_only_names);
    let refused = in_session(
        3,
        "tools/call",
        json!({"name": "send_message", "arguments": {"content": "hi"}}),
    )
    .await;
    assert_eq!(refused.error_code(), Some(-32602), "{}", refused.raw);

    // The full token still sees everything (the listing caches are per token kind).
    let full = modern(&app, 5, "tools/list", json!({})).await;
    assert!(names(&full).contains(&"db_query".to_string()));
    let wrong = send(
        "not-the-token-0123456789abcdef",
        modern_body(6, "tools/list", json!({})),
        modern_headers("tools/list"),
    )
    .await;
    assert_eq!(wrong.status, 401);
    app.shutdown().await;
}

#[cfg(unix)]
#[test]
fn porthole_token_keeps_env_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let token = |dir: &Path| {
        let out = run_token(dir);
        assert!(out.status.success(), "{out:?}");
    };
    // A new file is created 0600.
    let fresh = tempfile::tempdir().unwrap();
    token(fresh.path());
    assert_eq!(mode(&fresh.path().join(".env")), 0o600);
    // An existing world-readable file is rewritten 0600, its other lines kept.
    let existing = tempfile::tempdir().unwrap();
    let env = existing.path().join(".env");
    std::fs::write(&env, "LLM_API_KEY=sk-keep-me-0123456789\n").unwrap();
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();
    token(existing.path());
    assert_eq!(mode(&env), 0o600);
    let text = std::fs::read_to_string(&env).unwrap();
    assert!(
        text.contains("LLM_API_KEY=sk-keep-me-0123456789") && text.contains("MCP_SERVER_SECRET=")
    );
}

/// `porthole token` in `dir`, with no MCP or port setting from the environment.
fn run_token(dir: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_porthole"))
        .arg("token")
        .current_dir(dir)
        .env_remove("MCP_SERVER_SECRET")
        .env_remove("MCP_SERVER_ENABLED")
        .env_remove("PORT")
        .output()
        .unwrap()
}

#[test]
fn porthole_token_replaces_an_unusable_secret_and_every_enabled_line() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join(".env");
    for old_secret in ["MCP_SERVER_SECRET=", "MCP_SERVER_SECRET=short"] {
        let before = format!(
            "export MCP_SERVER_ENABLED=false\n{old_secret}\nMCP_SERVER_ENABLED = false\n\
             GREETING=\"multi\nMCP_SERVER_ENABLED=inside-a-value\"\nPORT=40455\n"
        );
        std::fs::write(&env, &before).unwrap();
        let out = run_token(dir.path());
        assert!(out.status.success(), "{out:?}");
        let text = std::fs::read_to_string(&env).unwrap();
        let file = porthole::env_file::EnvFile::parse(&text).unwrap();
        assert_eq!(file.get("MCP_SERVER_ENABLED"), Some("true"), "{text}");
        assert_eq!(
            file.get("MCP_SERVER_SECRET").map(str::len),
            Some(64),
            "{text}"
        );
        assert_eq!(
            file.get("GREETING"),
            Some("multi\nMCP_SERVER_ENABLED=inside-a-value"),
            "a quoted value is kept whole"
        );
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(printed.contains("http://127.0.0.1:40455/mcp"), "{printed}");
    }
    // A value the bot would refuse stops it, and .env stays as it was.
    std::fs::write(&env, "PORT=eighty\n").unwrap();
    let out = run_token(dir.path());
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("PORT"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&env).unwrap(), "PORT=eighty\n");
}

#[tokio::test]
async fn the_web_api_cannot_grow_the_task_table_without_bound() {
    let app = start_bot(&[]).await;
    let fill = call_tool(
        &app,
        "db_query",
        json!({"query": "INSERT INTO tasks (name, schedule, action, created_at) \
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) \
            SELECT 't' || i, '0 0 * * *', '{\"tool\":\"current_time\"}', '2026-01-01' FROM n"}),
    )
    .await;
    assert_eq!(fill["structuredContent"]["rows_affected"], 1000, "{fill}");
    let (status, body) = api(
        &app,
        reqwest::Method::POST,
        "/api/tasks",
        Some(json!({"name": "one more", "schedule": "0 0 * * *", "action": {"tool": "current_time"}})),
        &[],
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("1000"), "{body}");

    // Tasks that run as a chat user have a tenth of the places: the page cannot take
    // the places an admin's tasks need.
    let trim = call_tool(
        &app,
        "db_query",
        json!({"query": "DELETE FROM tasks WHERE id NOT IN (SELECT id FROM tasks ORDER BY id LIMIT 100)"}),
    )
    .await;
    assert_eq!(trim["structuredContent"]["rows_affected"], 900, "{trim}");
    let one_more = || {
        api(
            &app,
            reqwest::Method::POST,
            "/api/tasks",
            Some(
                json!({"name": "one more", "schedule": "0 0 * * *", "action": {"tool": "current_time"}}),
            ),
            &[],
        )
    };
    let (status, body) = one_more().await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("100 tasks that run as a chat user"),
        "{body}"
    );
    call_tool(
        &app,
        "db_query",
        json!({"query": "UPDATE tasks SET run_as = 'admin' WHERE id IN (SELECT id FROM tasks ORDER BY id LIMIT 50)"}),
    )
    .await;
    let (status, body) = one_more().await;
    assert_eq!(status, 201, "{body}");
    app.shutdown().await;
}
