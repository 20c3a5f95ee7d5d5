//! The processes a bot starts die with it: a user tool still running when its bot is
//! killed outright (SIGKILL) is gone at once and never finishes its side effect, so a
//! rerun elsewhere cannot overlap it (the real `porthole` binary, as a subprocess). And
//! a tool that times out, or whose attempt at a scheduled run lost its claim, is killed
//! with everything it started. Linux only: elsewhere there is no parent-death signal.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// Whether the process `pid` has ended (gone, or a zombie waiting to be reaped).
fn has_ended(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// The pid a tool wrote to `file` once it started.
async fn started_pid(file: &std::path::Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(pid) = std::fs::read_to_string(file)
            && !pid.trim().is_empty()
        {
            return pid.trim().to_string();
        }
        assert!(Instant::now() < deadline, "the tool never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Fails with `what` unless the process `pid` ends within 2 s.
async fn ends_within_2s(pid: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !has_ended(pid) {
        assert!(Instant::now() < deadline, "{what} by 2 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_tool_dies_with_its_bot_and_never_finishes_its_effect() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(
        tools.join("slow_effect.json"),
        json!({"name": "slow_effect", "description": "Writes a marker after 3 s.",
               "command": ["sh", "-c", "echo $$ > started; sleep 3; touch effect"],
               "timeout_secs": 30})
        .to_string(),
    )
    .unwrap();
    let tools_dir = tools.display().to_string();
    let (mut bot, lines) = spawn_porthole(
        dir.path(),
        &[("MCP_SERVER_SECRET", TOKEN), ("USER_TOOLS_DIR", &tools_dir)],
    );
    let url = format!("http://127.0.0.1:{}", listening_port(lines).await);
    // The call never gets its answer: the bot is killed while the tool runs.
    tokio::spawn(async move {
        let _ = client()
            .post(format!("{url}/mcp"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "tools/call")
            .header("mcp-name", "run_tool")
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "run_tool", "_meta": modern_meta(),
                    "arguments": {"tool_name": "slow_effect", "parameters": {}}}})
                .to_string(),
            )
            .send()
            .await;
    });
    let pid = started_pid(&tools.join("started")).await;
    assert!(!has_ended(&pid), "the tool runs");

    bot.kill().await.unwrap();
    ends_within_2s(&pid, "the tool outlived its bot").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !tools.join("effect").exists(),
        "the tool finished its effect after its bot died"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_times_out_is_killed_with_its_grandchildren() {
    let tools = tempfile::tempdir().unwrap();
    std::fs::write(
        tools.path().join("forks.json"),
        json!({"name": "forks", "description": "Starts a grandchild and waits for it.",
               "command": ["sh", "-c", "sleep 30 & echo $! > grandchild; wait"],
               "timeout_secs": 1})
        .to_string(),
    )
    .unwrap();
    let tools_dir = tools.path().display().to_string();
    let app = start_bot(&[("USER_TOOLS_DIR", &tools_dir)]).await;
    let result = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "forks", "parameters": {}}),
    )
    .await;
    assert!(error_text(&result).contains("timed out"), "{result}");
    let grandchild = std::fs::read_to_string(tools.path().join("grandchild")).unwrap();
    ends_within_2s(grandchild.trim(), "the grandchild outlived the timeout").await;
    app.shutdown().await;
}

/// A replica whose claim on a run is lost (here: the run marked interrupted, as another
/// replica does once the lease has run out) stops its attempt, killing the tool, at its
/// next renewal, so a rerun elsewhere never overlaps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_whose_claim_is_lost_is_stopped_with_its_tool() {
    let tools = tempfile::tempdir().unwrap();
    std::fs::write(
        tools.path().join("slow_effect.json"),
        json!({"name": "slow_effect", "description": "Writes a marker after 20 s.",
               "command": ["sh", "-c", "echo $$ > started; sleep 20; touch effect"],
               "timeout_secs": 60})
        .to_string(),
    )
    .unwrap();
    let tools_dir = tools.path().display().to_string();
    let app = start_bot(&[("USER_TOOLS_DIR", &tools_dir), ("TOOL_TIMEOUT_SECS", "60")]).await;
    let client = client();
    let created = create_task_through_api(
        &app,
        json!({"name": "slow", "schedule": "0 0 1 1 *", "action": {"tool": "slow_effect"}}),
    )
    .await;
    let run = tokio::spawn(
        client
            .post(format!("{}/api/tasks/{}/run", app.url(), created["id"]))
            .json(&json!({}))
            .send(),
    );
    let pid = started_pid(&tools.path().join("started")).await;
    // What another replica does once it sees the lease run out.
    let later = chrono::Utc::now().timestamp_millis() + 3_600_000;
    assert_eq!(
        app.bot.store.interrupt_expired_runs(later).await.unwrap(),
        1
    );

    let answer: serde_json::Value = run.await.unwrap().unwrap().json().await.unwrap();
    assert_eq!(answer["status"], "interrupted", "{answer}");
    ends_within_2s(&pid, "the tool outlived its stopped attempt").await;
    assert!(!tools.path().join("effect").exists());
    app.shutdown().await;
}
