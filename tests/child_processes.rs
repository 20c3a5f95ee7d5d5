//! The processes a bot starts die with it: a user tool still running when its bot is
//! killed outright (SIGKILL) is gone at once and never finishes its side effect, so a
//! rerun elsewhere cannot overlap it (the real `porthole` binary, as a subprocess). And
//! a tool that times out is killed with everything it started. Linux only: elsewhere
//! there is no parent-death signal.

#![cfg(target_os = "linux")]

mod common;

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
    let started = tools.join("started");
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        if let Ok(pid) = std::fs::read_to_string(&started)
            && !pid.trim().is_empty()
        {
            break pid.trim().to_string();
        }
        assert!(Instant::now() < deadline, "the tool never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!has_ended(&pid), "the tool runs");

    bot.kill().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while !has_ended(&pid) {
        assert!(
            Instant::now() < deadline,
            "the tool outlived its bot by 2 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let deadline = Instant::now() + Duration::from_secs(2);
    while !has_ended(grandchild.trim()) {
        assert!(
            Instant::now() < deadline,
            "the grandchild outlived the timeout by 2 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.shutdown().await;
}
