//! Faults: the store locked by another connection or full, the LLM provider going away
//! mid-answer, a user tool that crashes or never returns. Each must fail only the
//! request it hits, with an error that says what happened, while the bot keeps serving
//! other clients and loses nothing it had already stored.

use crate::common;
use crate::fake_llm;

use std::time::Duration;

use common::*;
use fake_llm::Turn;
use porthole::app::RunningApp;
use serde_json::json;

/// Meanwhile, another client is still served.
async fn assert_still_serving(app: &RunningApp) {
    let health = tokio::time::timeout(Duration::from_secs(3), call_tool(app, "health", json!({})))
        .await
        .expect("health answers while another request is stuck");
    assert!(
        health["structuredContent"]["uptime_secs"].is_u64(),
        "{health}"
    );
}

async fn message_count(app: &RunningApp) -> i64 {
    app.bot
        .store
        .call(|c| Ok(c.query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0))?))
        .await
        .unwrap()
}

/// A bot on a database file, with one conversation already stored.
struct BotOnFile {
    _dir: tempfile::TempDir,
    db: String,
    app: RunningApp,
    conversation: String,
    stored: i64,
}

async fn bot_with_a_conversation() -> BotOnFile {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bot.db").display().to_string();
    let app = start_bot(&[("DATABASE_PATH", &db)]).await;
    let first = call_tool(&app, "send_message", json!({"content": "/help"})).await;
    assert!(!is_error(&first), "{first}");
    let conversation = first["structuredContent"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let stored = message_count(&app).await;
    BotOnFile {
        _dir: dir,
        db,
        app,
        conversation,
        stored,
    }
}

#[tokio::test]
async fn a_locked_store_fails_that_request_only() {
    let BotOnFile {
        _dir,
        db,
        app,
        conversation: id,
        stored,
    } = bot_with_a_conversation().await;

    // Another connection takes the write lock and keeps it.
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let blocked = {
        let app_url = app.url();
        let id = id.clone();
        tokio::spawn(async move {
            call_tool(
                &app_url,
                "send_message",
                json!({"content": "/help", "conversation_id": id}),
            )
            .await
        })
    };
    assert_still_serving(&app).await;
    let failed = blocked.await.unwrap();
    assert!(is_error(&failed), "{failed}");
    let message = error_text(&failed);
    assert!(message.contains("locked"), "{message}");
    assert!(message.contains("DATABASE_PATH"), "{message}");

    // The lock goes away: the same request works, and nothing was half-written.
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert_eq!(message_count(&app).await, stored);
    let retry = call_tool(
        &app,
        "send_message",
        json!({"content": "/help", "conversation_id": id}),
    )
    .await;
    assert!(!is_error(&retry), "{retry}");
    assert_eq!(message_count(&app).await, stored + 2);
    app.shutdown().await;
}

#[tokio::test]
async fn a_full_store_fails_writes_cleanly_and_reads_go_on() {
    let BotOnFile {
        _dir,
        app,
        conversation: id,
        stored,
        ..
    } = bot_with_a_conversation().await;

    // SQLite's page limit gives the same SQLITE_FULL a full disk does.
    set_max_pages(&app, None).await;
    let big = "x".repeat(90_000);
    let failed = call_tool(
        &app,
        "send_message",
        json!({"content": big, "conversation_id": id}),
    )
    .await;
    assert!(is_error(&failed), "{failed}");
    assert!(
        error_text(&failed).contains("full"),
        "{}",
        error_text(&failed)
    );
    assert_eq!(message_count(&app).await, stored, "no partial write");

    // Reads and other clients carry on.
    assert_still_serving(&app).await;
    let read = call_tool(
        &app,
        "db_query",
        json!({"sql": "SELECT COUNT(*) AS n FROM messages"}),
    )
    .await;
    assert!(!is_error(&read), "{read}");
    assert_eq!(read["structuredContent"]["rows"][0][0], stored);

    // Space comes back: the same write goes through.
    set_max_pages(&app, Some(1 << 30)).await;
    let retry = call_tool(
        &app,
        "send_message",
        json!({"content": big, "conversation_id": id}),
    )
    .await;
    assert!(!is_error(&retry), "{retry}");
    assert_eq!(message_count(&app).await, stored + 2);
    app.shutdown().await;
}

/// Caps the database at `pages`, or at its current size when `None`.
async fn set_max_pages(app: &RunningApp, pages: Option<i64>) {
    app.bot
        .store
        .call(move |c| {
            let current: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            let limit = pages.unwrap_or(current);
            c.query_row(&format!("PRAGMA max_page_count = {limit}"), [], |r| {
                r.get::<_, i64>(0)
            })?;
            Ok(())
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn the_llm_dropping_mid_answer_fails_that_turn_only() {
    let llm = fake_llm::start(vec![
        Turn::DropMidStream(vec!["Half an ", "answer"]),
        Turn::Text(vec!["All ", "good."]),
    ])
    .await;
    let base = format!("{}/v1", llm.url());
    let app = start_bot(&[("LLM_PROVIDER", "openai"), ("LLM_BASE_URL", &base)]).await;

    let broken = call_tool(&app, "send_message", json!({"content": "hi"})).await;
    let reply = &broken["structuredContent"];
    let id = reply["conversation_id"].as_str().unwrap().to_string();
    let said = format!("{}", reply["response"]);
    assert!(
        said.contains("broke off mid-stream") && said.contains("send the message again"),
        "the reply says the answer broke off and what to do: {broken}"
    );
    assert!(reply["error"].is_string(), "{broken}");
    assert_still_serving(&app).await;

    // The conversation goes on with the next turn.
    let next = call_tool(
        &app,
        "send_message",
        json!({"content": "again", "conversation_id": id}),
    )
    .await;
    assert_eq!(next["structuredContent"]["response"], "All good.", "{next}");
    let history = app.bot.store.conversation_history(&id).await.unwrap();
    assert_eq!(
        history.len(),
        4,
        "both user messages and both replies are kept"
    );
    let state = call_tool(&app, "get_agent_state", json!({})).await;
    assert_eq!(state["structuredContent"]["status"], "idle");
    app.shutdown().await;
}

#[tokio::test]
async fn user_tools_that_crash_or_hang_fail_alone_and_leave_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let pid_file = dir.path().join("hang.pid");
    let manifests = [
        (
            "crash",
            json!({"name": "crash", "description": "dies of a signal",
                   "command": ["sh", "-c", "kill -SEGV $$"]}),
        ),
        (
            "hang",
            json!({"name": "hang", "description": "never returns", "timeout_secs": 1,
                   "command": ["sh", "-c", format!("echo $$ > {}; exec sleep 600", pid_file.display())]}),
        ),
    ];
    for (name, manifest) in manifests {
        std::fs::write(tools.join(format!("{name}.json")), manifest.to_string()).unwrap();
    }
    let app = start_bot(&[("USER_TOOLS_DIR", tools.to_str().unwrap())]).await;

    let crashed = call_tool(&app, "run_tool", json!({"name": "crash"})).await;
    assert!(is_error(&crashed), "{crashed}");
    assert!(
        error_text(&crashed).contains("crash"),
        "{}",
        error_text(&crashed)
    );

    let hang = {
        let url = app.url();
        tokio::spawn(async move { call_tool(&url, "run_tool", json!({"name": "hang"})).await })
    };
    assert_still_serving(&app).await;
    let hung = hang.await.unwrap();
    assert!(is_error(&hung), "{hung}");
    assert!(
        error_text(&hung).contains("timed out"),
        "{}",
        error_text(&hung)
    );

    // The hung process was killed, not left behind.
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    let mut running = true;
    for _ in 0..50 {
        let state = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        running = state.lines().any(|l| {
            l.starts_with("State:") && !l.contains("Z (zombie)") && !l.contains("X (dead)")
        });
        if !running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!running, "process {pid} still runs after the timeout");
    app.shutdown().await;
}
