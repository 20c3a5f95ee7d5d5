//! Export to a real backend LLM developers use: a traced turn goes to Arize Phoenix over
//! OTLP/HTTP and is read back from Phoenix's own REST API, GenAI attributes included;
//! and `/mcp` calls that name their caller's span (a `traceparent` header, or in
//! `_meta`) are read back in the caller's trace, children of the caller's span.
//!
//! Needs a running Phoenix, so it is ignored by a plain `cargo test`;
//! `scripts/phoenix.sh` installs and starts one and runs this test with `PHOENIX_URL`
//! set (CI does, see `.ci/run`).

use crate::common;
use crate::fake_llm;

use std::time::Duration;

use common::{call_tool, start_bot_on_llm};
use fake_llm::Turn;
use serde_json::{Map, Value, json};

/// Flattens nested attribute objects (`{"gen_ai": {"request": {"model": …}}}`) into
/// dotted keys, whichever of the two shapes the backend answers with.
fn flatten(prefix: &str, value: &Value, out: &mut Map<String, Value>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let key = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&key, inner, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.clone());
        }
    }
}

/// The spans Phoenix holds for `project`, once it holds `count` (30 s at most).
async fn phoenix_spans(phoenix: &str, project: &str, count: usize) -> Vec<Map<String, Value>> {
    let client = reqwest::Client::new();
    let url = format!("{phoenix}/v1/projects/{project}/spans?limit=100");
    let mut spans = Vec::new();
    for _ in 0..60 {
        if let Ok(response) = client.get(&url).send().await
            && response.status().is_success()
        {
            let body: Value = response.json().await.unwrap_or_default();
            spans = body["data"].as_array().cloned().unwrap_or_default();
            if spans.len() >= count {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    spans
        .iter()
        .map(|span| {
            let mut out = Map::new();
            flatten("", span, &mut out);
            out
        })
        .collect()
}

/// A project name of this run's own, so runs do not read each other's spans.
fn fresh_project() -> String {
    format!(
        "porthole-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

#[tokio::test]
#[ignore = "needs Arize Phoenix: run scripts/phoenix.sh"]
async fn calls_that_name_their_callers_span_join_its_trace_in_phoenix() {
    let phoenix = std::env::var("PHOENIX_URL").expect("PHOENIX_URL (set by scripts/phoenix.sh)");
    let project = fresh_project();
    let app = common::start_bot(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &phoenix),
        ("OTEL_SERVICE_NAME", &project),
    ])
    .await;
    let (header_trace, header_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let (meta_trace, meta_span) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let header_call = common::post(
        &app,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "list_agents", "arguments": {}, "_meta": common::modern_meta()}}),
        &[
            ("mcp-protocol-version", common::MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", "list_agents"),
            (
                "traceparent",
                &format!("00-{header_trace}-{header_span}-01"),
            ),
        ],
    )
    .await;
    assert_eq!(header_call.status, 200, "{}", header_call.raw);
    let mut meta = common::modern_meta();
    meta["traceparent"] = json!(format!("00-{meta_trace}-{meta_span}-01"));
    meta["claudecode/toolUseId"] = json!("toolu_01PhoenixJoin");
    let meta_call = common::modern(
        &app,
        2,
        "tools/call",
        json!({"name": "health", "arguments": {}, "_meta": meta}),
    )
    .await;
    assert_eq!(meta_call.status, 200, "{}", meta_call.raw);
    app.bot.tracer.flush_export().await;

    let spans = phoenix_spans(&phoenix, &project, 2).await;
    let in_trace = |trace: &str| {
        spans
            .iter()
            .find(|s| s.iter().any(|(k, v)| k.ends_with("trace_id") && v == trace))
            .unwrap_or_else(|| panic!("no span in the caller's trace {trace}: {spans:?}"))
    };
    for (trace, parent) in [(header_trace, header_span), (meta_trace, meta_span)] {
        let span = in_trace(trace);
        assert_eq!(
            span.get("parent_id"),
            Some(&json!(parent)),
            "the caller's span is the parent: {span:?}"
        );
    }
    let joined = in_trace(meta_trace);
    assert_eq!(
        joined.get("attributes.claudecode/toolUseId"),
        Some(&json!("toolu_01PhoenixJoin")),
        "the caller's own id is on the span: {joined:?}"
    );
    app.shutdown().await;
}

#[tokio::test]
#[ignore = "needs Arize Phoenix: run scripts/phoenix.sh"]
async fn a_traced_turn_is_read_back_from_phoenix() {
    let phoenix = std::env::var("PHOENIX_URL").expect("PHOENIX_URL (set by scripts/phoenix.sh)");
    let project = fresh_project();
    let llm = fake_llm::start(vec![
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["It is ", "42."]),
    ])
    .await;
    let app = start_bot_on_llm(
        &llm.url(),
        &[
            ("LLM_API_KEY", "sk-phoenix-test-0123456789abcdef"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &phoenix),
            ("OTEL_SERVICE_NAME", &project),
        ],
    )
    .await;
    let sent = call_tool(&app, "send_message", json!({"content": "what is 6*7?"})).await;
    let trace_id = sent["structuredContent"]["trace_id"]
        .as_str()
        .unwrap()
        .to_string();
    app.bot.tracer.flush_export().await;
    assert_eq!(app.bot.tracer.counters().spans_export_dropped, 0);

    // Phoenix ingests in the background: poll its REST API for the project's spans.
    let flat = phoenix_spans(&phoenix, &project, 4).await;
    assert_eq!(
        flat.len(),
        4,
        "turn, two LLM calls, one tool call: {flat:?}"
    );
    let in_trace = |s: &&Map<String, Value>| {
        s.iter()
            .any(|(k, v)| k.ends_with("trace_id") && v == trace_id.as_str())
    };
    assert_eq!(flat.iter().filter(in_trace).count(), 4, "{flat:?}");
    let llm_span = flat
        .iter()
        .find(|s| s.get("attributes.gen_ai.operation.name") == Some(&json!("chat")))
        .unwrap_or_else(|| panic!("no chat span with gen_ai attributes: {flat:?}"));
    assert_eq!(llm_span["attributes.gen_ai.request.model"], "fake-model");
    assert_eq!(
        llm_span["attributes.gen_ai.usage.input_tokens"],
        fake_llm::PROMPT_TOKENS
    );
    assert!(
        flat.iter()
            .any(|s| s.get("attributes.gen_ai.tool.name") == Some(&json!("calculator")))
    );
    app.shutdown().await;
}
