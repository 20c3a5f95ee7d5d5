//! What a scheduled run tells its work, with real processes: a user tool (`env`, which
//! prints its environment) started by a task gets the task id, the due time and the
//! attempt number as `PORTHOLE_TASK_*` variables; a prompt task's agent reads them as
//! `scheduled_run` in its instructions, and a tool it calls gets the variables too; a
//! tool called any other way gets none of them.

use crate::common;
use crate::fake_llm;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Timelike, Utc};
use common::*;
use fake_llm::Turn;
use porthole::app::RunningApp;
use serde_json::{Value, json};

/// A tools folder with `print_env`, a user tool that prints its environment.
fn tools_with_print_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("print_env.json"),
        json!({"name": "print_env", "description": "Prints its environment.",
               "command": ["env"]})
        .to_string(),
    )
    .unwrap();
    dir
}

/// A bot with its scheduler on and the `print_env` user tool (the folder that holds the
/// tool must outlive the bot).
async fn scheduling_bot() -> (tempfile::TempDir, RunningApp) {
    let tools = tools_with_print_env();
    let tools_dir = tools.path().display().to_string();
    let app = start_bot(&[
        ("USER_TOOLS_DIR", &tools_dir),
        ("SCHEDULER_ENABLED", "true"),
    ])
    .await;
    (tools, app)
}

/// The `PORTHOLE_TASK_*` variables in the output of `env`.
fn task_vars(env_output: &str) -> BTreeMap<String, String> {
    env_output
        .lines()
        .filter(|line| line.starts_with("PORTHOLE_TASK_"))
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Creates a task (through `/api`, so it runs as a chat user) whose schedule fires once,
/// a few seconds from now; its id, and that due time as the scheduler writes it.
async fn task_due_soon(app: &RunningApp, name: &str, action: Value) -> (i64, String) {
    let due = (Utc::now() + chrono::Duration::seconds(3))
        .with_nanosecond(0)
        .unwrap();
    let schedule = format!("{} {} {} * * *", due.second(), due.minute(), due.hour());
    let created = client()
        .post(format!("{}/api/tasks", app.url()))
        .json(&json!({"name": name, "schedule": schedule, "action": action}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    (id, due.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// The JSON body of the answer to `request`.
async fn api_json(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// The task's `last_result` once its first run has finished, which must have succeeded.
async fn first_result(app: &RunningApp, id: i64) -> String {
    let (status, result) = first_run(app, id).await;
    assert_eq!(status, "ok", "{result}");
    result
}

/// The task's `status` and `last_result` once its first run has finished.
async fn first_run(app: &RunningApp, id: i64) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let listed = api_json(client().get(format!("{}/api/tasks", app.url()))).await;
        let task = listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .unwrap()
            .clone();
        if task["last_run"].is_string() {
            let text = |field: &str| task[field].as_str().unwrap_or_default().to_string();
            return (text("status"), text("last_result"));
        }
        assert!(Instant::now() < deadline, "the task never ran: {task}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn expected_vars(id: i64, due_at: &str, attempt: u32) -> BTreeMap<String, String> {
    [
        ("PORTHOLE_TASK_ID", id.to_string()),
        ("PORTHOLE_TASK_DUE_AT", due_at.to_string()),
        ("PORTHOLE_TASK_ATTEMPT", attempt.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_tool_run_gets_its_task_due_time_and_attempt() {
    let (_tools, app) = scheduling_bot().await;

    // Called directly (through /mcp): none of the variables.
    let direct = call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "print_env", "parameters": {}}),
    )
    .await;
    let direct_text = direct["content"][0]["text"].as_str().unwrap();
    assert!(direct_text.contains("PORTHOLE_CORRELATION_ID="), "{direct}");
    assert_eq!(task_vars(direct_text), BTreeMap::new(), "{direct}");

    // Run by the scheduler at its due time: all three, the due time to the millisecond.
    let (id, due_at) = task_due_soon(&app, "env-at-due-time", json!({"tool": "print_env"})).await;
    let output = first_result(&app, id).await;
    let output: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(
        task_vars(output.as_str().unwrap()),
        expected_vars(id, &due_at, 1)
    );

    // Run by hand: the moment it was asked for stands for the due time.
    let asked = Utc::now();
    let run = client().post(format!("{}/api/tasks/{id}/run", app.url()));
    let run = api_json(run.json(&json!({}))).await;
    let result: Value = serde_json::from_str(run["result"].as_str().unwrap()).unwrap();
    let vars = task_vars(result.as_str().unwrap());
    let due = chrono::DateTime::parse_from_rfc3339(&vars["PORTHOLE_TASK_DUE_AT"]).unwrap();
    assert!(
        (due.with_timezone(&Utc) - asked).num_seconds().abs() < 5,
        "{vars:?}"
    );
    assert_eq!(vars["PORTHOLE_TASK_ID"], id.to_string());
    assert_eq!(vars["PORTHOLE_TASK_ATTEMPT"], "1");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_prompt_reads_its_run_and_its_tools_get_it_too() {
    let llm = fake_llm::start(vec![
        Turn::ToolCall("print_env", json!({})),
        Turn::Text(vec!["done"]),
    ])
    .await;
    let tools = tools_with_print_env();
    let tools_dir = tools.path().display().to_string();
    let app = start_bot_on_llm(
        &llm.url(),
        &[
            ("USER_TOOLS_DIR", &tools_dir),
            ("SCHEDULER_ENABLED", "true"),
        ],
    )
    .await;
    let (id, due_at) = task_due_soon(
        &app,
        "prompt-at-due-time",
        json!({"prompt": "print the environment"}),
    )
    .await;
    assert_eq!(first_result(&app, id).await, "done");

    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    let field = json!({"scheduled_run": {"attempt": 1, "due_at": due_at, "task_id": id}});
    assert!(system.contains(&field.to_string()), "{system}");
    let tool_answer = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        task_vars(&tool_answer.replace("\\n", "\n")),
        expected_vars(id, &due_at, 1),
        "{tool_answer}"
    );

    // A chat turn is no scheduled run: its instructions say nothing of one.
    let chat = call_tool(&app, "send_message", json!({"content": "hello"})).await;
    assert!(!is_error(&chat), "{chat}");
    let requests = llm.requests();
    let system = requests[2]["messages"][0]["content"].as_str().unwrap();
    assert!(!system.contains("scheduled_run"), "{system}");
    app.shutdown().await;
}

/// A due time whose earlier attempts were all interrupted is not run a fourth time: the
/// run ends as an error that says why, and the tool never starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_interrupted_three_times_is_given_up() {
    let (_tools, app) = scheduling_bot().await;
    let (id, due_at) = task_due_soon(&app, "crashes-the-bot", json!({"tool": "print_env"})).await;
    // Three attempts at this due time, each cut short by a stop of the process.
    let ledger = call_tool(
        &app,
        "db_query",
        json!({"query": format!(
            "INSERT INTO task_runs (task_id, due_at, replica, attempts, started_at, status) \
             VALUES ({id}, '{due_at}', 'gone', 3, '{due_at}', 'interrupted')"
        )}),
    )
    .await;
    assert_eq!(ledger["structuredContent"]["rows_affected"], 1, "{ledger}");
    let (status, result) = first_run(&app, id).await;
    assert_eq!(status, "error", "{result}");
    assert!(result.contains("gave up: 3 attempts"), "{result}");
    assert_eq!(
        app.bot.tools.get("print_env").unwrap().stats.invocations,
        0,
        "the tool did not run"
    );
    app.shutdown().await;
}
