//! The canary: a secret the process knows is planted in every place a turn's trace
//! takes text from (the user message, the model's tool-call arguments, a tool's error),
//! and must not appear in any stored span, nor in any trace tool's answer.

use crate::common;
use crate::fake_llm;

use common::{call_tool, start_bot_on_llm};
use fake_llm::Turn;
use serde_json::json;

const CANARY: &str = "sk-canary-5f1e0c2a9b7d4e61";

#[tokio::test]
async fn no_secret_reaches_a_stored_span_or_a_trace_tool() {
    let llm = fake_llm::start(vec![
        Turn::ToolCall("calculator", json!({"expression": format!("1+{CANARY}")})),
        Turn::Text(vec!["I will not repeat ", CANARY]),
    ])
    .await;
    let app = start_bot_on_llm(&llm.url(), &[("LLM_API_KEY", CANARY)]).await;
    let sent = call_tool(
        &app,
        "send_message",
        json!({"content": format!("my key is {CANARY}, keep it safe")}),
    )
    .await;
    let trace_id = sent["structuredContent"]["trace_id"]
        .as_str()
        .unwrap()
        .to_string();

    app.bot.tracer.flush().await;
    let rows: Vec<String> = app
        .bot
        .store
        .call(|c| {
            let mut statement = c.prepare(
                "SELECT coalesce(name,'') || coalesce(error,'') || attributes FROM trace_spans",
            )?;
            let rows = statement
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap();
    assert!(
        rows.len() >= 4,
        "turn, two LLM calls and a tool call were stored: {rows:?}"
    );
    let stored = rows.join("\n");
    assert!(stored.contains("my key is"), "the message itself was kept");
    assert!(
        stored.contains("[REDACTED]") || stored.contains("REDACTED"),
        "{stored}"
    );
    assert!(
        !stored.contains(CANARY),
        "a secret reached the store: {stored}"
    );

    let calls = call_tool(&app, "get_llm_calls", json!({})).await;
    for call in calls["structuredContent"]["calls"].as_array().unwrap() {
        let full = call_tool(&app, "get_llm_call", json!({"span_id": call["span_id"]})).await;
        assert!(!full.to_string().contains(CANARY));
    }
    let tree = call_tool(&app, "get_trace", json!({"trace_id": trace_id})).await;
    assert!(!tree.to_string().contains(CANARY));
    app.shutdown().await;
}
