//! The supervisor's LLM tool loop against fake providers that are real HTTP servers,
//! and the scheduler, checking what ends up in the database.

use crate::common;
use crate::fake_llm;

use std::time::Duration;

use common::{start_bot, start_bot_on_llm};
use fake_llm::Turn;
use porthole::bot::schedule::RunAs;
use porthole::bot::tools::ExecContext;
use porthole::model::Role;
use serde_json::json;

#[tokio::test]
async fn openai_tool_call_round_trip_is_persisted() {
    let llm = fake_llm::start(vec![
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["The answer ", "is 42."]),
    ])
    .await;
    let app = start_bot_on_llm(&llm.url(), &[]).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let reply = app
        .bot
        .supervisor
        .send(
            None,
            "what is 6 times 7?",
            &ExecContext::new(&["user"]),
            Some(tx),
        )
        .await
        .unwrap();
    assert_eq!(reply.response, "The answer is 42.");
    assert!(reply.error.is_none());

    let history = app
        .bot
        .store
        .conversation_history(&reply.conversation_id)
        .await
        .unwrap();
    let roles: Vec<Role> = history.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(
        history[1].tool_calls.as_ref().unwrap()[0].name,
        "calculator"
    );
    assert_eq!(
        history[1].tool_calls.as_ref().unwrap()[0].arguments,
        json!({"expression": "6*7"})
    );
    assert!(history[2].content.contains("42"), "{}", history[2].content);
    assert_eq!(history[2].tool_call_id.as_deref(), Some("call_1"));

    // The second request carried the tool result back, and tools were offered.
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "fake-model");
    assert!(
        requests[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "calculator")
    );
    assert!(
        requests[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "get_bot_status"),
        "the status tool is an ordinary tool the model is offered"
    );
    let last = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_1");
    assert_eq!(
        llm.recorded.auth.lock().unwrap()[0],
        "Bearer sk-test-key-0123456789abcdef"
    );

    // Tokens were streamed as events.
    let mut tokens = String::new();
    while let Ok(event) = rx.try_recv() {
        if let porthole::bot::agents::AgentEvent::Token(t) = event {
            tokens.push_str(&t);
        }
    }
    assert_eq!(tokens, "The answer is 42.");
    app.shutdown().await;
}

#[tokio::test]
async fn anthropic_provider_speaks_the_messages_api() {
    let llm = fake_llm::start(vec![
        Turn::ToolCall("current_time", json!({})),
        Turn::Text(vec!["It is now."]),
    ])
    .await;
    let app = start_bot(&[
        ("LLM_PROVIDER", "anthropic"),
        ("LLM_BASE_URL", &llm.url()),
        ("LLM_API_KEY", "anthropic-test-key-xyz"),
    ])
    .await;
    let reply = app
        .bot
        .supervisor
        .send(None, "time?", &ExecContext::new(&["user"]), None)
        .await
        .unwrap();
    assert_eq!(reply.response, "It is now.");
    let requests = llm.requests();
    // The tool result went back as a user message of tool_result blocks.
    let messages = requests[1]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(
        llm.recorded.auth.lock().unwrap()[0],
        "anthropic-test-key-xyz"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn provider_errors_become_stored_assistant_messages() {
    let llm = fake_llm::start(vec![
        Turn::Status(401, "bad key"),
        Turn::Status(429, "slow down"),
        Turn::Status(500, "upstream exploded"),
    ])
    .await;
    let base = format!("{}/v1", llm.url());
    let app = start_bot(&[("LLM_PROVIDER", "openai"), ("LLM_BASE_URL", &base)]).await;
    let ctx = ExecContext::new(&["user"]);
    let first = app
        .bot
        .supervisor
        .send(None, "hi", &ctx, None)
        .await
        .unwrap();
    assert!(first.response.contains("LLM_API_KEY"), "{}", first.response);
    assert!(first.error.is_some());
    let id = first.conversation_id.clone();
    let second = app
        .bot
        .supervisor
        .send(Some(&id), "again", &ctx, None)
        .await
        .unwrap();
    assert!(
        second.response.contains("rate limiting"),
        "{}",
        second.response
    );
    let third = app
        .bot
        .supervisor
        .send(Some(&id), "and again", &ctx, None)
        .await
        .unwrap();
    assert!(
        third.response.contains("upstream exploded"),
        "{}",
        third.response
    );
    let history = app.bot.store.conversation_history(&id).await.unwrap();
    assert_eq!(
        history.len(),
        6,
        "each user message and each error reply is stored"
    );

    // A provider that is not there at all.
    app.shutdown().await;
    let app = start_bot(&[
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", "http://127.0.0.1:9/v1"),
    ])
    .await;
    let reply = app
        .bot
        .supervisor
        .send(None, "hi", &ctx, None)
        .await
        .unwrap();
    assert!(
        reply.response.contains("cannot reach"),
        "{}",
        reply.response
    );
    app.shutdown().await;
}

#[tokio::test]
async fn offline_provider_runs_slash_commands_through_real_tools() {
    let app = start_bot(&[]).await;
    let ctx = ExecContext::new(&["user"]);
    let reply = app
        .bot
        .supervisor
        .send(
            None,
            r#"/run calculator {"expression": "2^10"}"#,
            &ctx,
            None,
        )
        .await
        .unwrap();
    assert!(reply.response.contains("1024"), "{}", reply.response);
    let reply = app
        .bot
        .supervisor
        .send(None, "/run get_bot_status {}", &ctx, None)
        .await
        .unwrap();
    assert!(
        reply.response.contains("uptime_secs"),
        "a user may ask for the bot's status: {}",
        reply.response
    );
    let reply = app
        .bot
        .supervisor
        .send(None, "hello there", &ctx, None)
        .await
        .unwrap();
    assert!(reply.response.contains("no language model is configured"));
    assert_eq!(
        app.bot.tools.get("calculator").unwrap().stats.invocations,
        1
    );
    app.shutdown().await;
}

#[tokio::test]
async fn delegation_runs_a_worker_agent() {
    let llm = fake_llm::start(vec![
        Turn::ToolCall(
            "delegate",
            json!({"task": "compute 2+2", "worker_name": "math"}),
        ),
        // The worker's own turn:
        Turn::Text(vec!["4"]),
        // Back in the supervisor:
        Turn::Text(vec!["The worker says 4."]),
    ])
    .await;
    let base = format!("{}/v1", llm.url());
    let app = start_bot(&[("LLM_PROVIDER", "openai"), ("LLM_BASE_URL", &base)]).await;
    let reply = app
        .bot
        .supervisor
        .send(None, "delegate it", &ExecContext::new(&["user"]), None)
        .await
        .unwrap();
    assert_eq!(reply.response, "The worker says 4.");
    let history = app
        .bot
        .store
        .conversation_history(&reply.conversation_id)
        .await
        .unwrap();
    assert!(
        history[2].content.contains("\"answer\": \"4\""),
        "{}",
        history[2].content
    );
    // The worker's request had the task as its user message.
    let worker_request = &llm.requests()[1];
    assert_eq!(worker_request["messages"][1]["content"], "compute 2+2");
    assert!(
        app.bot.agents.list().iter().all(|a| a.role != "worker"),
        "workers leave the registry"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn scheduler_runs_a_due_task_once_and_run_now_works() {
    let app = start_bot(&[("SCHEDULER_ENABLED", "true")]).await;
    // A daily schedule whose time is two seconds from now.
    let at = chrono::Utc::now() + chrono::Duration::seconds(2);
    let schedule = format!(
        "{} {} {} * * *",
        at.format("%S"),
        at.format("%M"),
        at.format("%H")
    );
    let task = app
        .bot
        .schedule
        .create(
            "tick",
            "calls current_time",
            &schedule,
            json!({"tool": "current_time"}),
            RunAs::User,
        )
        .await
        .unwrap();
    assert!(task.next_run.is_some());
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let stats = app.bot.tools.get("current_time").unwrap().stats;
    assert_eq!(stats.invocations, 1, "ran exactly once");
    let tasks = app.bot.schedule.list().await.unwrap();
    assert_eq!(tasks[0].status, "ok");
    assert!(tasks[0].last_run.is_some());
    assert!(
        tasks[0].next_run.as_deref() > tasks[0].last_run.as_deref(),
        "next run moved on"
    );

    let run = app
        .bot
        .schedule
        .run_now(task.id, RunAs::Admin)
        .await
        .unwrap();
    assert_eq!(run.status, "ok");
    assert_eq!(
        app.bot.tools.get("current_time").unwrap().stats.invocations,
        2
    );
    assert!(app.bot.schedule.run_now(999, RunAs::Admin).await.is_err());
    let bad = app
        .bot
        .schedule
        .create(
            "bad",
            "",
            "every tuesday",
            json!({"tool": "x"}),
            RunAs::User,
        )
        .await;
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("invalid cron schedule")
    );
    app.shutdown().await;
}

/// Polls `check` every 50 ms for up to `secs` seconds; whether it came true.
async fn eventually<F, Fut>(secs: u64, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Conversation retention never deletes the conversation a turn is working on: with
/// `CONVERSATION_MAX_COUNT=1`, conversations made during a slow turn push the turn's own
/// out of the newest one, and the retention task prunes them, yet the turn's stays and
/// the turn stores its reply. Once the turn is over, the next prune removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_spares_the_conversation_of_a_running_turn() {
    let llm = fake_llm::start(vec![Turn::Slow(3000, vec!["slow ", "answer"])]).await;
    let app = start_bot_on_llm(&llm.url(), &[("CONVERSATION_MAX_COUNT", "1")]).await;
    let store = app.bot.store.clone();
    let turn = tokio::spawn({
        let bot = app.bot.clone();
        async move {
            bot.supervisor
                .send(None, "take your time", &ExecContext::new(&["user"]), None)
                .await
        }
    });
    let turn_started = || {
        let store = store.clone();
        async move { store.list_conversations(10).await.unwrap().len() == 1 }
    };
    assert!(
        eventually(5, turn_started).await,
        "the turn starts its conversation"
    );
    let turn_conversation = store.list_conversations(10).await.unwrap()[0].id.clone();
    let mut newer = Vec::new();
    for i in 0..3 {
        let c = store
            .create_conversation(&format!("newer {i}"))
            .await
            .unwrap();
        newer.push(c.id);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let gone = |id: String| {
        let store = store.clone();
        move || {
            let (store, id) = (store.clone(), id.clone());
            async move { store.get_conversation(&id).await.unwrap().is_none() }
        }
    };
    assert!(
        eventually(3, gone(newer[1].clone())).await,
        "the retention task prunes beyond the newest conversation"
    );
    assert!(store.get_conversation(&newer[0]).await.unwrap().is_none());
    assert!(
        !turn.is_finished(),
        "the model is still answering (the test relies on it)"
    );
    assert!(
        store
            .get_conversation(&turn_conversation)
            .await
            .unwrap()
            .is_some(),
        "the turn's conversation is held"
    );

    let reply = turn.await.unwrap().unwrap();
    assert_eq!(reply.conversation_id, turn_conversation);
    assert_eq!(reply.response, "slow answer");
    assert!(reply.error.is_none(), "{:?}", reply.error);
    let history = store
        .conversation_history(&turn_conversation)
        .await
        .unwrap();
    assert_eq!(
        history.len(),
        2,
        "the question and the reply are both stored"
    );

    // The turn is over: a newer conversation, and the next prune takes it. Timestamps
    // have millisecond precision: make "newer" than the turn's reply unambiguous.
    tokio::time::sleep(Duration::from_millis(5)).await;
    store.create_conversation("after the turn").await.unwrap();
    assert!(
        eventually(3, gone(turn_conversation.clone())).await,
        "without a turn holding it, the conversation goes like any other"
    );
    app.shutdown().await;
}

/// Workers may hand a task on, but not without end: two levels of workers run, and the
/// third `delegate` is refused with a reason the model can act on.
#[tokio::test]
async fn delegation_stops_two_levels_of_workers_deep() {
    let app = start_bot(&[]).await;
    let ctx = ExecContext::new(&["user"]);
    let delegate = |task: String| format!("/run delegate {}", serde_json::json!({"task": task}));
    let calculate = r#"/run calculator {"expression": "6*7"}"#.to_string();
    let two_levels = delegate(delegate(calculate.clone()));
    let reply = app
        .bot
        .supervisor
        .send(None, &two_levels, &ctx, None)
        .await
        .unwrap();
    assert!(reply.response.contains("42"), "{}", reply.response);

    let three_levels = delegate(delegate(delegate(calculate)));
    let reply = app
        .bot
        .supervisor
        .send(None, &three_levels, &ctx, None)
        .await
        .unwrap();
    assert!(
        reply.response.contains("more than 2 levels deep"),
        "{}",
        reply.response
    );
    assert!(!reply.response.contains("42"), "{}", reply.response);
    app.shutdown().await;
}
