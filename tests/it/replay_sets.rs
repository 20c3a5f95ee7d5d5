//! Named replay sets: LLM calls saved under a name survive the retention of their
//! traces, and `replay_llm_calls` with `set` replays them with a change and `expect`
//! checks, the summary kept as the set's last run. Against a fake provider over real
//! HTTP.

use crate::common;
use crate::fake_llm;

use common::{call_tool, error_text, is_error, start_bot_on_llm};
use fake_llm::Turn;
use serde_json::{Value, json};

fn structured(result: &Value) -> Value {
    assert!(!is_error(result), "{}", error_text(result));
    result["structuredContent"].clone()
}

#[tokio::test]
async fn a_saved_set_outlives_its_traces_and_replays_with_checks() {
    let llm = fake_llm::start(vec![
        // The recorded turn: the calculator, then the answer.
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["It is 42."]),
        // The set replayed: one answer per saved call.
        Turn::Text(vec!["It is 42 again."]),
        Turn::Text(vec!["Forty-two."]),
    ])
    .await;
    let app = start_bot_on_llm(&llm.url(), &[]).await;
    let turn = call_tool(
        &app,
        "send_message",
        json!({"content": "what is 6 times 7?"}),
    )
    .await;
    let conversation = structured(&turn)["conversation_id"].clone();

    let saved = call_tool(
        &app,
        "save_replay_set",
        json!({"name": "six-times-seven", "description": "the calculator turn",
               "conversation_id": conversation}),
    )
    .await;
    let saved = structured(&saved);
    assert_eq!(saved["name"], "six-times-seven");
    assert_eq!(saved["calls"], 2, "{saved}");
    let span_ids: Vec<String> = saved["span_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();

    // Retention takes the traces (and their tool sets): the set keeps its copies.
    for table in ["trace_turns", "trace_tool_sets"] {
        let gone = call_tool(
            &app,
            "db_query",
            json!({"sql": format!("DELETE FROM {table}")}),
        )
        .await;
        assert!(!is_error(&gone), "{}", error_text(&gone));
    }
    let erased = call_tool(&app, "get_llm_call", json!({"span_id": span_ids[0]})).await;
    assert!(is_error(&erased), "the trace is gone: {erased}");

    let replayed = call_tool(
        &app,
        "replay_llm_calls",
        json!({"set": "six-times-seven", "system": "Answer in words.",
               "expect": {"text_contains": "42"}}),
    )
    .await;
    let replayed = structured(&replayed);
    let rows = replayed["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{replayed:#}");
    assert_eq!(rows[0]["span_id"], span_ids[0].as_str());
    let passed: Vec<&Value> = rows.iter().map(|r| &r["checks"][0]["passed"]).collect();
    assert_eq!(passed, [&json!(true), &json!(false)], "{replayed:#}");
    assert_eq!(replayed["summary"]["replayed"], 2);
    assert_eq!(
        replayed["summary"]["checks"],
        json!({"passed": 1, "failed": 1})
    );
    let sent = llm.requests();
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[2]["messages"][0]["content"], "Answer in words.");
    assert!(
        sent[3]["tools"].as_array().is_some_and(|t| !t.is_empty()),
        "the saved tool definitions are sent: {}",
        sent[3]
    );

    let listed = structured(&call_tool(&app, "list_replay_sets", json!({})).await);
    let set = &listed["sets"][0];
    assert_eq!(set["name"], "six-times-seven");
    assert_eq!(set["description"], "the calculator turn");
    assert_eq!(set["calls"], 2);
    assert_eq!(set["last_run"]["checks"], json!({"passed": 1, "failed": 1}));
    assert!(set["last_run_at"].is_string());

    let deleted = structured(
        &call_tool(
            &app,
            "delete_replay_set",
            json!({"name": "six-times-seven"}),
        )
        .await,
    );
    assert_eq!(deleted["deleted"], true);
    let listed = structured(&call_tool(&app, "list_replay_sets", json!({})).await);
    assert_eq!(listed["sets"], json!([]));
    let gone = call_tool(&app, "replay_llm_calls", json!({"set": "six-times-seven"})).await;
    assert!(
        error_text(&gone).contains("no replay set"),
        "{}",
        error_text(&gone)
    );
    assert_eq!(
        llm.requests().len(),
        4,
        "nothing was sent for a set that is gone"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn bad_sets_are_refused_with_what_to_fix() {
    let llm = fake_llm::start(vec![Turn::Text(vec!["Hello."])]).await;
    let app = start_bot_on_llm(&llm.url(), &[]).await;
    call_tool(&app, "send_message", json!({"content": "hi"})).await;
    for (arguments, says) in [
        (json!({"name": "no spaces"}), "name"),
        (
            json!({"name": "x", "span_ids": ["0123456789abcdef"], "model": "m"}),
            "not both",
        ),
        (
            json!({"name": "x", "span_ids": ["0123456789abcdef"]}),
            "get_llm_calls",
        ),
        (
            json!({"name": "x", "model": "no-such-model"}),
            "nothing to save",
        ),
    ] {
        let refused = call_tool(&app, "save_replay_set", arguments.clone()).await;
        assert!(is_error(&refused), "{arguments} is refused: {refused}");
        assert!(
            error_text(&refused).contains(says),
            "{arguments}: {}",
            error_text(&refused)
        );
    }
    let both = call_tool(&app, "replay_llm_calls", json!({"set": "x", "limit": 2})).await;
    assert!(
        error_text(&both).contains("not both"),
        "{}",
        error_text(&both)
    );
    let listed = structured(&call_tool(&app, "list_replay_sets", json!({})).await);
    assert_eq!(listed["sets"], json!([]), "nothing half-saved");
    app.shutdown().await;
}
