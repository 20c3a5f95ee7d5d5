//! `replay_turn`: a recorded turn re-run from one of its LLM calls with a change, the
//! agent loop continued against a fake provider (a real HTTP server that records every
//! request): recorded results reused where the model repeats the recording, the first
//! divergence reported, read-only tools run only when asked, nothing that changes state.

use crate::common;
use crate::fake_llm;

use common::{call_tool, error_text, is_error, start_bot};
use fake_llm::{FakeLlm, Turn};
use porthole::app::RunningApp;
use serde_json::{Value, json};

/// A bot on a fake OpenAI-style provider that first plays a recorded turn (the model
/// calls the calculator for 6*7, then answers), then the replay's `answers`. Returns
/// the bot, the fake and the turn's two LLM calls, oldest first.
async fn recorded_turn(answers: Vec<Turn>) -> (RunningApp, FakeLlm, Vec<String>) {
    let mut script = vec![
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["It is ", "42."]),
    ];
    script.extend(answers);
    let llm = fake_llm::start(script).await;
    let base = format!("{}/v1", llm.url());
    let app = start_bot(&[
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", base.as_str()),
        ("LLM_API_KEY", "sk-test-key-0123456789abcdef"),
        ("LLM_MODEL", "fake-model"),
    ])
    .await;
    let reply = call_tool(
        &app,
        "send_message",
        json!({"content": "what is 6 times 7?"}),
    )
    .await;
    assert!(!is_error(&reply), "{}", error_text(&reply));
    let calls = call_tool(&app, "get_llm_calls", json!({"limit": 10})).await;
    let mut ids: Vec<String> = structured(&calls)["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["span_id"].as_str().unwrap().to_string())
        .collect();
    ids.reverse();
    assert_eq!(ids.len(), 2, "the recorded turn made two LLM calls");
    (app, llm, ids)
}

fn structured(result: &Value) -> Value {
    assert!(!is_error(result), "{}", error_text(result));
    result["structuredContent"].clone()
}

/// The kinds of the spans under the replay's root, in order.
async fn replay_span_kinds(app: &RunningApp, replay: &Value) -> Vec<String> {
    let trace_id = replay["replay_trace_id"]
        .as_str()
        .expect("the replay is traced");
    let trace = call_tool(app, "get_trace", json!({"trace_id": trace_id})).await;
    let root = &structured(&trace)["spans"][0];
    let name = format!("replay turn {}", replay["span_id"].as_str().unwrap());
    assert_eq!(
        root["name"],
        name.as_str(),
        "the replay names the call: {root}"
    );
    assert_eq!(root["source"], "replay");
    root["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap().to_string())
        .collect()
}

/// The answer docs/traces.md shows for its `replay_turn` example (this test's turn).
fn documented_answer() -> Value {
    let doc = include_str!("../../docs/traces.md");
    let section = doc
        .split("## What if, for a whole turn")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/traces.md has a section on replay_turn");
    let block = section
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the section shows an answer");
    serde_json::from_str(block).expect("the shown answer is JSON")
}

/// The tool messages of a request sent to the fake provider.
fn tool_messages(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

#[tokio::test]
async fn steps_that_match_the_recording_reuse_its_results_and_run_nothing() {
    let (app, llm, calls) = recorded_turn(vec![
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["Forty-two."]),
    ])
    .await;
    let replay = call_tool(
        &app,
        "replay_turn",
        json!({"span_id": calls[0], "system": "Answer in words."}),
    )
    .await;
    let replay = structured(&replay);
    assert_eq!(replay["stopped"], "final_answer", "{replay:#}");
    assert_eq!(replay["diverged_at"], Value::Null);
    assert_eq!(replay["steps"].as_array().unwrap().len(), 2);
    assert_eq!(replay["steps"][0]["same_tool_calls"], true);
    assert_eq!(replay["steps"][0]["tools"][0]["result"], "recording");
    assert_eq!(replay["steps"][1]["original"]["text"], "It is 42.");
    assert_eq!(replay["steps"][1]["replay"]["text"], "Forty-two.");
    assert_eq!(replay["tools_reused"], 1);
    assert_eq!(replay["tools_run"], 0);
    assert_eq!(
        replay["final"],
        json!({"original": "It is 42.", "replay": "Forty-two."})
    );
    for (key, shown) in documented_answer().as_object().unwrap() {
        assert_eq!(
            &replay[key], shown,
            "docs/traces.md shows {key} as this turn answers it"
        );
    }
    let verdict = replay["verdict"].as_str().unwrap();
    assert!(
        verdict.contains("followed the recording for 2 step"),
        "{verdict}"
    );
    assert!(verdict.contains("final answer changed"), "{verdict}");

    // Two calls went out, the changed system prompt in both; the second carries the
    // recorded tool result, word for word what the recorded turn's model read.
    let sent = llm.requests();
    assert_eq!(sent.len(), 4);
    for request in &sent[2..] {
        assert_eq!(request["messages"][0]["content"], "Answer in words.");
    }
    let recorded_result = tool_messages(&sent[1]);
    let replayed_result = tool_messages(&sent[3]);
    assert_eq!(recorded_result.len(), 1);
    assert_eq!(replayed_result[0]["content"], recorded_result[0]["content"]);
    // No tool ran: the replay's trace holds its two LLM calls and nothing else.
    assert_eq!(replay_span_kinds(&app, &replay).await, ["llm", "llm"]);
    app.shutdown().await;
}

#[tokio::test]
async fn a_call_the_recording_did_not_make_stops_the_replay_and_shows_both() {
    let (app, llm, calls) = recorded_turn(vec![Turn::ToolCall(
        "calculator",
        json!({"expression": "7*6"}),
    )])
    .await;
    let replay = call_tool(&app, "replay_turn", json!({"span_id": calls[0]})).await;
    let replay = structured(&replay);
    assert_eq!(replay["stopped"], "diverged", "{replay:#}");
    assert_eq!(
        replay["diverged_at"],
        json!({
            "step": 1,
            "recorded": [{"name": "calculator", "arguments": {"expression": "6*7"}}],
            "replay": [{"name": "calculator", "arguments": {"expression": "7*6"}}],
        })
    );
    assert_eq!(replay["steps"][0]["tools"][0]["result"], "not_run");
    assert_eq!(replay["final"]["replay"], Value::Null);
    assert!(
        replay["stop_detail"]
            .as_str()
            .unwrap()
            .contains("read_only"),
        "the way on is named: {}",
        replay["stop_detail"]
    );
    assert_eq!(llm.requests().len(), 3, "one LLM call, then the stop");
    assert_eq!(replay_span_kinds(&app, &replay).await, ["llm"]);
    app.shutdown().await;
}

#[tokio::test]
async fn read_only_runs_a_read_only_tool_and_stops_before_one_that_changes_state() {
    let (app, llm, calls) = recorded_turn(vec![
        Turn::ToolCall("calculator", json!({"expression": "7*6"})),
        Turn::ToolCall("remember", json!({"key": "answer", "value": "42"})),
    ])
    .await;
    let replay = call_tool(
        &app,
        "replay_turn",
        json!({"span_id": calls[0], "tools": "read_only", "temperature": 0}),
    )
    .await;
    let replay = structured(&replay);
    assert_eq!(replay["stopped"], "state_changing_tool", "{replay:#}");
    assert_eq!(replay["diverged_at"]["step"], 1);
    assert_eq!(replay["steps"][0]["tools"][0]["result"], "ran");
    let preview = replay["steps"][0]["tools"][0]["preview"].as_str().unwrap();
    assert!(preview.contains("\"result\": 42"), "{preview}");
    assert_eq!(replay["steps"][1]["tools"][0]["name"], "remember");
    assert_eq!(replay["steps"][1]["tools"][0]["result"], "not_run");
    assert_eq!(replay["tools_run"], 1);
    assert_eq!(llm.requests().len(), 4);
    // The calculator ran inside the replay's trace; `remember` never ran: no tool span
    // for it, and nothing stored under its key.
    assert_eq!(
        replay_span_kinds(&app, &replay).await,
        ["llm", "tool", "llm"]
    );
    let stored = call_tool(
        &app,
        "db_query",
        json!({"sql": "SELECT count(*) AS n FROM memories WHERE key = 'answer'"}),
    )
    .await;
    assert_eq!(structured(&stored)["rows"][0][0], 0, "{stored}");
    app.shutdown().await;
}

#[tokio::test]
async fn max_steps_bounds_the_loop_and_bad_arguments_are_named() {
    let (app, llm, calls) = recorded_turn(vec![
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
    ])
    .await;
    let replay = call_tool(
        &app,
        "replay_turn",
        json!({"span_id": calls[0], "max_steps": 1}),
    )
    .await;
    let replay = structured(&replay);
    assert_eq!(replay["stopped"], "max_steps", "{replay:#}");
    assert_eq!(replay["steps"].as_array().unwrap().len(), 1);
    assert_eq!(llm.requests().len(), 3);

    for (arguments, says) in [
        (json!({"span_id": calls[0], "max_steps": 11}), "max_steps"),
        (json!({"span_id": calls[0], "tools": "all"}), "tools"),
        (json!({"span_id": "0000000000000000"}), "get_llm_calls"),
    ] {
        let refused = call_tool(&app, "replay_turn", arguments.clone()).await;
        assert!(is_error(&refused), "{arguments} is refused");
        assert!(
            error_text(&refused).contains(says),
            "{}",
            error_text(&refused)
        );
    }
    assert_eq!(llm.requests().len(), 3, "a refusal calls no model");
    app.shutdown().await;
}

#[tokio::test]
async fn expect_checks_are_reported_on_each_replay_with_a_count() {
    let (app, _llm, calls) = recorded_turn(vec![
        // replay_turn: the same path, another answer.
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["Forty-two."]),
        // replay_llm_calls over the turn's two calls, newest first.
        Turn::Text(vec!["It is 42."]),
        Turn::ToolCall("calculator", json!({"expression": "x +"})),
    ])
    .await;
    let expect = json!({"same_tool_calls": true, "calls_tool": "calculator", "not_calls_tool": "remember",
                        "valid_arguments": true, "text_contains": "Forty", "text_matches": "^It is"});
    let replay = call_tool(
        &app,
        "replay_turn",
        json!({"span_id": calls[0], "expect": expect}),
    )
    .await;
    let replay = structured(&replay);
    let failed: Vec<&str> = replay["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["text_matches"], "{replay:#}");
    assert_eq!(replay["check_count"], json!({"passed": 5, "failed": 1}));
    let text_matches = replay["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "text_matches")
        .unwrap();
    assert_eq!(text_matches["seen"], "text: Forty-two.");

    let conversation = call_tool(&app, "list_conversations", json!({})).await;
    let conversation = structured(&conversation)["conversations"][0]["id"].clone();
    let batch = call_tool(
        &app,
        "replay_llm_calls",
        json!({"conversation_id": conversation, "expect": {"valid_arguments": true, "text_contains": "42"}}),
    )
    .await;
    let batch = structured(&batch);
    let rows = batch["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{batch:#}");
    // Newest first: the answer call replayed as text (both checks pass), then the first
    // call replayed as a calculator call whose expression the schema takes but whose
    // text holds no 42.
    let passed = |row: &Value| -> Vec<bool> {
        row["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["passed"] == true)
            .collect()
    };
    assert_eq!(passed(&rows[0]), [true, true]);
    assert_eq!(passed(&rows[1]), [true, false]);
    assert_eq!(
        batch["summary"]["checks"],
        json!({"passed": 3, "failed": 1})
    );

    let refused = call_tool(
        &app,
        "replay_turn",
        json!({"span_id": calls[0], "expect": {"text_matches": "(unclosed"}}),
    )
    .await;
    assert!(
        error_text(&refused).contains("text_matches"),
        "{}",
        error_text(&refused)
    );
    let refused = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "expect": {"text_contain": "typo"}}),
    )
    .await;
    assert!(is_error(&refused), "an unknown check is named: {refused}");
    app.shutdown().await;
}

#[tokio::test]
async fn checks_on_a_replay_cut_short_fail_saying_why() {
    let (app, _llm, calls) = recorded_turn(vec![Turn::Status(500, "the provider is down")]).await;
    let replay = call_tool(
        &app,
        "replay_turn",
        json!({"span_id": calls[0],
               "expect": {"not_calls_tool": "remember", "valid_arguments": true}}),
    )
    .await;
    let replay = structured(&replay);
    assert_eq!(replay["stopped"], "provider_error", "{replay:#}");
    assert_eq!(replay["check_count"], json!({"passed": 0, "failed": 2}));
    let seen = replay["checks"][0]["seen"].as_str().unwrap();
    assert!(seen.starts_with("not checked:"), "{seen}");
    app.shutdown().await;
}
