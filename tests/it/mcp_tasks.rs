//! The Tasks extension (2026-07-28) and the experimental tasks of 2025-11-25 against the
//! real bot over real HTTP, with a fake OpenAI-compatible model: `send_message` as a
//! task polled to completion and cancelled mid-turn, a `db_query` write confirmed with
//! `tasks/update`, task status notifications, and a restart while a task runs.

use crate::common;
use crate::fake_llm;

use std::time::Duration;

use common::*;
use fake_llm::Turn;
use porthole::app::RunningApp;
use serde_json::{Value, json};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// `_meta` declaring the Tasks extension (and elicitation, for db_query's confirmation).
fn with_tasks() -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}}})
}

async fn bot_with_llm(
    script: Vec<Turn>,
    extra: &[(&str, &str)],
) -> (RunningApp, fake_llm::FakeLlm) {
    let llm = fake_llm::start(script).await;
    (start_bot_on_llm(&llm.url(), extra).await, llm)
}

/// A modern request that declares the extension.
async fn tasks_call(app: &impl BotUrl, method: &str, mut params: Value) -> Reply {
    params["_meta"] = with_tasks();
    modern(app, 11, method, params).await
}

/// Polls `tasks/get` until the task leaves `working` (or 10 s pass).
async fn poll_until_settled(app: &impl BotUrl, task_id: &str) -> Value {
    for _ in 0..100 {
        let reply = tasks_call(app, "tasks/get", json!({"taskId": task_id})).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        let task = reply.result().clone();
        if task["status"] != "working" {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {task_id} did not settle within 10 s");
}

/// The id of the task a 2025-11-25 task-augmented call created.
fn legacy_task_id(created: &Reply) -> String {
    created.result()["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", created.raw))
        .to_string()
}

fn start_send_message(reply: &Reply) -> String {
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let created = reply.result();
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working");
    assert!(created["pollIntervalMs"].as_u64().is_some_and(|ms| ms > 0));
    created["taskId"].as_str().expect("taskId").to_string()
}

#[tokio::test]
async fn send_message_as_a_task_is_polled_to_completion() {
    let (app, _llm) = bot_with_llm(vec![Turn::Slow(600, vec!["slow ", "answer"])], &[]).await;
    let reply = tasks_call(
        &app,
        "tools/call",
        json!({"name": "send_message", "arguments": {"content": "hello"}}),
    )
    .await;
    let task_id = start_send_message(&reply);
    assert_eq!(task_id.len(), 32, "128 random bits, hex");
    // Durable at once: the first poll finds it, still working behind the slow model.
    let first = tasks_call(&app, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(first.result()["status"], "working", "{}", first.raw);
    let done = poll_until_settled(&app, &task_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["response"],
        "slow answer"
    );
    assert_eq!(done["resultType"], "complete");
    // A client without the extension gets the blocking call and cannot read tasks.
    let plain = modern(&app, 3, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(plain.error_code(), Some(-32021), "{}", plain.raw);
    app.shutdown().await;
}

#[tokio::test]
async fn the_task_ttl_is_configurable_and_bounds_the_task() {
    let (app, _llm) = bot_with_llm(
        vec![Turn::Text(vec!["kept briefly"])],
        &[("MCP_TASK_TTL_SECS", "10")],
    )
    .await;
    let reply = tasks_call(
        &app,
        "tools/call",
        json!({"name": "send_message", "arguments": {"content": "hello"}}),
    )
    .await;
    assert_eq!(reply.result()["ttlMs"], 10_000, "{}", reply.raw);
    let task_id = start_send_message(&reply);
    let done = poll_until_settled(&app, &task_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["ttlMs"], 10_000);
    app.shutdown().await;
}

#[tokio::test]
async fn cancelling_a_send_message_task_stops_the_agent_and_keeps_the_conversation() {
    let (app, llm) = bot_with_llm(vec![Turn::Hang, Turn::Text(vec!["second reply"])], &[]).await;
    let reply = tasks_call(
        &app,
        "tools/call",
        json!({"name": "send_message", "arguments": {"content": "never answered"}}),
    )
    .await;
    let task_id = start_send_message(&reply);
    // Wait until the agent is waiting on the model, then cancel.
    for _ in 0..50 {
        if !llm.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancel = tasks_call(&app, "tasks/cancel", json!({"taskId": task_id})).await;
    assert_eq!(cancel.result()["resultType"], "complete", "{}", cancel.raw);
    assert!(cancel.result().get("status").is_none(), "an empty ack");
    let task = tasks_call(&app, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(task.result()["status"], "cancelled", "{}", task.raw);
    // The conversation stays usable: the next turn in it gets an answer.
    let conversations = call_tool(&app, "list_conversations", json!({})).await;
    let id = conversations["structuredContent"]["conversations"][0]["id"]
        .as_str()
        .expect("the cancelled turn's conversation")
        .to_string();
    let next = call_tool(
        &app,
        "send_message",
        json!({"content": "again", "conversation_id": id}),
    )
    .await;
    assert!(!is_error(&next), "{next}");
    assert_eq!(next["structuredContent"]["response"], "second reply");
    assert_eq!(
        llm.requests().len(),
        2,
        "the cancelled turn asked the model once"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_db_query_write_in_a_task_waits_for_confirmation_through_tasks_update() {
    let (app, _llm) = bot_with_llm(vec![], &[]).await;
    let sql = "INSERT INTO memories (key, value, updated_at) VALUES ('k', 'v', 'now')";
    let reply = tasks_call(
        &app,
        "tools/call",
        json!({"name": "db_query", "arguments": {"query": sql}}),
    )
    .await;
    let task_id = start_send_message(&reply);
    let parked = poll_until_settled(&app, &task_id).await;
    assert_eq!(parked["status"], "input_required", "{parked}");
    let requests = parked["inputRequests"].as_object().expect("inputRequests");
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create");
    let update = tasks_call(
        &app,
        "tasks/update",
        json!({"taskId": task_id, "inputResponses": {
            key: {"action": "accept", "content": {"confirm": true}},
            "never-asked": {"action": "accept"}
        }}),
    )
    .await;
    assert_eq!(update.result()["resultType"], "complete", "{}", update.raw);
    let done = poll_until_settled(&app, &task_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["structuredContent"]["rows_affected"], 1);
    let check = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT value FROM memories WHERE key = 'k'"}),
    )
    .await;
    assert_eq!(check["structuredContent"]["rows"], json!([["v"]]));
    app.shutdown().await;
}

#[tokio::test]
async fn listeners_hear_about_their_tasks() {
    let (app, _llm) = bot_with_llm(vec![Turn::Slow(800, vec!["done"])], &[]).await;
    let reply = tasks_call(
        &app,
        "tools/call",
        json!({"name": "send_message", "arguments": {"content": "hi"}}),
    )
    .await;
    let task_id = start_send_message(&reply);
    // Without the extension, asking for task notifications is refused.
    let refused = listen(&app, json!(1), json!({"taskIds": [task_id]})).await;
    assert_eq!(refused.status(), 400);
    let mut seen = String::new();
    let (mut stream, agreed) =
        listen_to_tasks(&app, json!([task_id, "not-a-task"]), &mut seen).await;
    assert_eq!(
        agreed,
        json!([task_id]),
        "only the caller's own tasks are agreed to"
    );
    let done = read_sse_until(&mut stream, &mut seen, |messages| {
        messages
            .iter()
            .find(|m| m["method"] == "notifications/tasks" && m["params"]["status"] == "completed")
            .cloned()
    })
    .await
    .unwrap_or_else(|| panic!("no completed notification in {seen}"));
    assert_eq!(done["params"]["taskId"], task_id.as_str());
    assert_eq!(
        done["params"]["result"]["structuredContent"]["response"],
        "done"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn legacy_tasks_get_and_result() {
    let (app, _llm) = bot_with_llm(
        vec![Turn::Slow(300, vec!["legacy answer"]), Turn::Hang],
        &[],
    )
    .await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let init = post(
        &app,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        &[],
    )
    .await;
    assert!(init.result()["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object());
    let created = legacy(
        &app,
        &session,
        2,
        "tools/call",
        json!({
        "name": "send_message", "arguments": {"content": "hi"}, "task": {"ttl": 60000}}),
    )
    .await;
    let task = &created.result()["task"];
    assert_eq!(task["status"], "working", "{}", created.raw);
    assert_eq!(task["ttl"], 60000);
    let task_id = task["taskId"].as_str().unwrap().to_string();
    let result = legacy(
        &app,
        &session,
        3,
        "tasks/result",
        json!({"taskId": task_id}),
    )
    .await;
    assert_eq!(
        result.result()["structuredContent"]["response"],
        "legacy answer",
        "{}",
        result.raw
    );
    assert_eq!(
        result.result()["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    let got = legacy(&app, &session, 4, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(got.result()["status"], "completed");
    app.shutdown().await;
}

#[tokio::test]
async fn legacy_tasks_are_listed_per_session_and_cancelled() {
    let (app, _llm) = bot_with_llm(vec![Turn::Text(vec!["done"]), Turn::Hang], &[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let first = legacy(
        &app,
        &session,
        2,
        "tools/call",
        json!({
        "name": "send_message", "arguments": {"content": "hi"}, "task": {}}),
    )
    .await;
    let task_id = legacy_task_id(&first);
    let done = legacy(
        &app,
        &session,
        3,
        "tasks/result",
        json!({"taskId": task_id}),
    )
    .await;
    assert_eq!(
        done.result()["structuredContent"]["response"],
        "done",
        "{}",
        done.raw
    );
    // A second, hanging task is cancelled; the list shows both, newest first.
    let hanging = legacy(
        &app,
        &session,
        5,
        "tools/call",
        json!({
        "name": "send_message", "arguments": {"content": "hang"}, "task": {}}),
    )
    .await;
    let hanging_id = legacy_task_id(&hanging);
    let cancelled = legacy(
        &app,
        &session,
        6,
        "tasks/cancel",
        json!({"taskId": hanging_id}),
    )
    .await;
    assert_eq!(
        cancelled.result()["status"],
        "cancelled",
        "{}",
        cancelled.raw
    );
    // A task already in a terminal status is refused with -32602, as 2025-11-25 says.
    for id in [&hanging_id, &task_id] {
        let again = legacy(&app, &session, 8, "tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(again.error_code(), Some(-32602), "{}", again.raw);
        assert!(again.raw.contains("terminal status"), "{}", again.raw);
    }
    let list = legacy(&app, &session, 7, "tasks/list", json!({})).await;
    let ids: Vec<&str> = list.result()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert_eq!(ids, vec![hanging_id.as_str(), task_id.as_str()]);
    // Another session sees none of them.
    let other = legacy_session(&app, "2025-11-25", json!({})).await;
    let foreign = legacy(&app, &other, 8, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(foreign.error_code(), Some(-32602), "{}", foreign.raw);
    app.shutdown().await;
}

#[tokio::test]
async fn a_task_cut_short_by_a_restart_reads_failed_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bot.db").display().to_string();
    let (app, _llm) = bot_with_llm(vec![Turn::Hang], &[("DATABASE_PATH", &db)]).await;
    let reply = tasks_call(
        &app,
        "tools/call",
        json!({"name": "send_message", "arguments": {"content": "long"}}),
    )
    .await;
    let task_id = start_send_message(&reply);
    app.shutdown().await;
    let (again, _llm) = bot_with_llm(vec![], &[("DATABASE_PATH", &db)]).await;
    let task = tasks_call(&again, "tasks/get", json!({"taskId": task_id})).await;
    let task = task.result();
    assert_eq!(task["status"], "failed", "{task}");
    assert!(
        task["statusMessage"]
            .as_str()
            .unwrap()
            .contains("restarted"),
        "{task}"
    );
    assert_eq!(task["error"]["code"], -32603);
    again.shutdown().await;
}

#[tokio::test]
async fn a_legacy_session_hears_its_task_status_on_its_get_stream() {
    let (app, _llm) = bot_with_llm(vec![Turn::Slow(500, vec!["streamed"])], &[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let response = legacy_get_stream(&app, &session).await;
    assert_eq!(response.status(), 200);
    let created = legacy(
        &app,
        &session,
        2,
        "tools/call",
        json!({
        "name": "send_message", "arguments": {"content": "hi"}, "task": {}}),
    )
    .await;
    let task_id = legacy_task_id(&created);
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    let status = read_sse_until(&mut stream, &mut seen, |messages| {
        messages
            .iter()
            .find(|m| {
                m["method"] == "notifications/tasks/status" && m["params"]["status"] == "completed"
            })
            .cloned()
    })
    .await
    .unwrap_or_else(|| panic!("no completed status in {seen}"));
    assert_eq!(status["params"]["taskId"], task_id.as_str());
    assert!(
        status["params"].get("result").is_none(),
        "2025-11-25 status carries the task only"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn clients_without_tasks_keep_the_blocking_call_and_a_cancelled_write_never_runs() {
    let (app, _llm) = bot_with_llm(vec![Turn::Text(vec!["blocking reply"])], &[]).await;
    let plain = call_tool(&app, "send_message", json!({"content": "hi"})).await;
    assert_eq!(
        plain["structuredContent"]["response"], "blocking reply",
        "{plain}"
    );
    assert!(plain.get("taskId").is_none());
    let sql = "INSERT INTO memories (key, value, updated_at) VALUES ('never', 'v', 'now')";
    let reply = tasks_call(
        &app,
        "tools/call",
        json!({"name": "db_query", "arguments": {"query": sql}}),
    )
    .await;
    let task_id = start_send_message(&reply);
    let parked = poll_until_settled(&app, &task_id).await;
    assert_eq!(parked["status"], "input_required", "{parked}");
    let cancel = tasks_call(&app, "tasks/cancel", json!({"taskId": task_id})).await;
    assert_eq!(cancel.status, 200, "{}", cancel.raw);
    let task = poll_until_settled(&app, &task_id).await;
    assert_eq!(task["status"], "cancelled");
    assert!(task.get("inputRequests").is_none());
    let check = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT COUNT(*) FROM memories WHERE key = 'never'"}),
    )
    .await;
    assert_eq!(check["structuredContent"]["rows"], json!([[0]]));
    // A wrong Mcp-Name is refused before the task is looked up.
    let mut params = json!({"taskId": task_id, "_meta": modern_meta()});
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        with_tasks()["io.modelcontextprotocol/clientCapabilities"].clone();
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": params});
    let mismatched = post(
        &app,
        &body,
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tasks/get"),
            ("mcp-name", "another-task"),
        ],
    )
    .await;
    assert_eq!(mismatched.status, 400);
    assert_eq!(mismatched.error_code(), Some(-32020), "{}", mismatched.raw);
    app.shutdown().await;
}

#[tokio::test]
async fn a_legacy_task_whose_tool_reports_an_error_is_failed_and_keeps_its_result() {
    let app = start_bot(&[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let created = legacy(
        &app,
        &session,
        2,
        "tools/call",
        json!({"name": "db_query", "arguments": {"query": "SELECT * FROM no_such_table"},
               "task": {}}),
    )
    .await;
    let task_id = legacy_task_id(&created);
    let result = legacy(
        &app,
        &session,
        3,
        "tasks/result",
        json!({"taskId": task_id}),
    )
    .await;
    assert_eq!(result.result()["isError"], true, "{}", result.raw);
    let got = legacy(&app, &session, 4, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(got.result()["status"], "failed", "{}", got.raw);
    let message = got.result()["statusMessage"].as_str().unwrap();
    assert!(message.contains("no_such_table"), "{message}");

    app.shutdown().await;
}

#[tokio::test]
async fn tasks_live_in_2025_11_25_sessions_only() {
    let app = start_bot(&[]).await;
    // An older session has no tasks: task metadata is ignored, tasks/* do not exist.
    let older = legacy_session(&app, "2025-06-18", json!({})).await;
    let headers = [
        ("mcp-session-id", older.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "db_query", "arguments": {"query": "SELECT 1 AS one"}, "task": {}}});
    let plain = post(&app, &call, &headers).await;
    assert_eq!(
        plain.result()["structuredContent"]["rows"][0][0],
        1,
        "{}",
        plain.raw
    );
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/list", "params": {}});
    assert_eq!(post(&app, &list, &headers).await.error_code(), Some(-32601));

    // A 2025-11-25 session's task is not reachable from the modern era, same token.
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let created = legacy(
        &app,
        &session,
        4,
        "tools/call",
        json!({"name": "db_query", "arguments": {"query": "SELECT 1"}, "task": {}}),
    )
    .await;
    let task_id = legacy_task_id(&created);
    let reached = tasks_call(&app, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(reached.error_code(), Some(-32602), "{}", reached.raw);
    app.shutdown().await;
}

/// 2025-11-25's `tasks/list` pages as every list does: 100 tasks a page, `nextCursor`
/// to the rest, and a cursor the server did not give refused with -32602.
#[tokio::test]
async fn legacy_tasks_list_pages_with_a_cursor() {
    let app = start_bot(&[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let mut created = Vec::new();
    for n in 0..101 {
        let call = legacy(
            &app,
            &session,
            10 + n,
            "tools/call",
            json!({"name": "db_query", "arguments": {"query": "SELECT 1"}, "task": {}}),
        )
        .await;
        created.push(legacy_task_id(&call));
    }
    let first = legacy(&app, &session, 1, "tasks/list", json!({})).await;
    let page = first.result()["tasks"].as_array().unwrap();
    assert_eq!(page.len(), 100, "{}", first.raw);
    let cursor = first.result()["nextCursor"]
        .as_str()
        .unwrap_or_else(|| panic!("more follow: {}", first.raw));
    let rest = legacy(&app, &session, 2, "tasks/list", json!({"cursor": cursor})).await;
    let last = rest.result()["tasks"].as_array().unwrap();
    assert_eq!(last.len(), 1, "{}", rest.raw);
    assert!(rest.result().get("nextCursor").is_none(), "{}", rest.raw);
    let mut listed: Vec<&str> = page
        .iter()
        .chain(last)
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    listed.sort_unstable();
    let mut expected: Vec<&str> = created.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(listed, expected, "every task once, across the pages");
    let bad = legacy(&app, &session, 3, "tasks/list", json!({"cursor": "page-2"})).await;
    assert_eq!(bad.error_code(), Some(-32602), "{}", bad.raw);
    app.shutdown().await;
}

/// 2025-11-25: a task asked of a tool that lists no `execution.taskSupport` gets -32601,
/// as the revision says a server should; the same call without `task` runs.
#[tokio::test]
async fn a_task_asked_of_a_tool_without_task_support_is_refused() {
    let app = start_bot(&[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let listed = legacy(&app, &session, 1, "tools/list", json!({})).await;
    let health = listed.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "health")
        .cloned()
        .unwrap();
    assert!(health.get("execution").is_none(), "{health}");
    let asked = legacy(
        &app,
        &session,
        2,
        "tools/call",
        json!({"name": "health", "arguments": {}, "task": {}}),
    )
    .await;
    assert_eq!(asked.error_code(), Some(-32601), "{}", asked.raw);
    assert!(asked.raw.contains("without `task`"), "{}", asked.raw);
    let plain = legacy(
        &app,
        &session,
        3,
        "tools/call",
        json!({"name": "health", "arguments": {}}),
    )
    .await;
    assert!(
        plain.result()["structuredContent"]["uptime_secs"].is_u64(),
        "{}",
        plain.raw
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_batch_replay_runs_as_a_task_in_both_eras() {
    let (app, _llm) = bot_with_llm(
        vec![
            Turn::Text(vec!["It is 42."]),
            Turn::Slow(300, vec!["Forty-two."]),
            Turn::Slow(300, vec!["42, said the replay."]),
        ],
        &[],
    )
    .await;
    let turn = call_tool(
        &app,
        "send_message",
        json!({"content": "what is 6 times 7?"}),
    )
    .await;
    let conversation = turn["structuredContent"]["conversation_id"].clone();
    let batch = json!({"name": "replay_llm_calls", "arguments": {
        "conversation_id": conversation, "expect": {"text_contains": "42"}}});

    // 2026-07-28: a task handle, polled to the batch's answer.
    let reply = tasks_call(&app, "tools/call", batch.clone()).await;
    let task_id = start_send_message(&reply);
    let done = poll_until_settled(&app, &task_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let summary = &done["result"]["structuredContent"]["summary"];
    assert_eq!(summary["replayed"], 1, "{done}");
    assert_eq!(summary["checks"], json!({"passed": 0, "failed": 1}));

    // 2025-11-25: the experimental task, its result read with tasks/result.
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let mut params = batch;
    params["task"] = json!({"ttl": 60000});
    let created = legacy(&app, &session, 2, "tools/call", params).await;
    let task_id = legacy_task_id(&created);
    let result = legacy(
        &app,
        &session,
        3,
        "tasks/result",
        json!({"taskId": task_id}),
    )
    .await;
    let summary = &result.result()["structuredContent"]["summary"];
    assert_eq!(summary["replayed"], 1, "{}", result.raw);
    assert_eq!(summary["checks"], json!({"passed": 1, "failed": 0}));
    app.shutdown().await;
}
