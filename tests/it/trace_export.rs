//! OpenTelemetry export against a fake OTLP/HTTP collector (a real HTTP server on
//! 127.0.0.1:0 that decodes the protobuf it receives): the GenAI attributes arrive, no
//! secret does, and a collector that is down costs dropped spans, counted in `health`,
//! never a failed or slowed turn. `scripts/phoenix.sh` proves the same against Arize
//! Phoenix.

use crate::common;
use crate::fake_llm;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use common::{call_tool, start_bot, start_bot_on_llm};
use fake_llm::Turn;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

const CANARY: &str = "sk-canary-export-77c1d0e2f3a4";

type Received = Arc<Mutex<Vec<Bytes>>>;

async fn collector() -> (String, Received) {
    let received: Received = Arc::default();
    let app = Router::new()
        .route(
            "/v1/traces",
            post(|State(r): State<Received>, body: Bytes| async move {
                r.lock().unwrap().push(body);
                ""
            }),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

fn string_attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            AnyValue::IntValue(n) => n.to_string(),
            other => format!("{other:?}"),
        })
}

/// Every span the collector received; fails if any request held the canary.
fn decode_without_secrets(bodies: &[Bytes]) -> Vec<Span> {
    assert!(!bodies.is_empty(), "the collector got nothing");
    let mut spans = Vec::new();
    for body in bodies {
        assert!(
            !body.windows(CANARY.len()).any(|w| w == CANARY.as_bytes()),
            "a secret was exported"
        );
        let request = ExportTraceServiceRequest::decode(body.as_ref()).unwrap();
        for resource in request.resource_spans {
            let attributes = resource.resource.unwrap().attributes;
            assert!(
                attributes
                    .iter()
                    .any(|a| a.key == "openinference.project.name")
            );
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
    }
    spans
}

#[tokio::test]
async fn spans_reach_the_collector_with_gen_ai_attributes_and_without_secrets() {
    let (collector_url, received) = collector().await;
    let llm = fake_llm::start(vec![
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["42"]),
    ])
    .await;
    let app = start_bot_on_llm(
        &llm.url(),
        &[
            ("LLM_API_KEY", CANARY),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector_url),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-collector-key=hdr-secret-0123456789",
            ),
            ("OTEL_SERVICE_NAME", "porthole-test"),
        ],
    )
    .await;
    let sent = call_tool(
        &app,
        "send_message",
        json!({"content": format!("what is 6*7? my key is {CANARY}")}),
    )
    .await;
    assert_eq!(sent["structuredContent"]["response"], "42");
    app.bot.tracer.flush_export().await;

    let spans = decode_without_secrets(&received.lock().unwrap());
    assert_eq!(spans.len(), 4, "turn, two LLM calls, one tool call");
    let llm_span = spans
        .iter()
        .find(|s| string_attribute(s, "gen_ai.operation.name").as_deref() == Some("chat"))
        .expect("an LLM span");
    assert_eq!(
        string_attribute(llm_span, "gen_ai.request.model").as_deref(),
        Some("fake-model")
    );
    assert_eq!(
        string_attribute(llm_span, "gen_ai.usage.input_tokens").as_deref(),
        Some(fake_llm::PROMPT_TOKENS.to_string().as_str())
    );
    let tool = spans
        .iter()
        .find(|s| string_attribute(s, "gen_ai.tool.name").as_deref() == Some("calculator"))
        .expect("a tool span");
    assert_eq!(
        string_attribute(tool, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    let root = spans
        .iter()
        .find(|s| s.parent_span_id.is_empty())
        .expect("a root");
    assert_eq!(
        string_attribute(root, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        string_attribute(root, "mcp.protocol.version").as_deref(),
        Some(common::MODERN)
    );
    assert_eq!(
        string_attribute(root, "gen_ai.tool.name").as_deref(),
        Some("send_message")
    );
    assert_eq!(tool.trace_id, root.trace_id);

    // Every other /mcp tool call is a trace of its own, exported with the MCP
    // conventions; a failed one names its error type. Its arguments stay home.
    let bad = call_tool(
        &app,
        "db_query",
        json!({"query": format!("SELECT '{CANARY}' FROM no_such_table")}),
    )
    .await;
    assert_eq!(bad["isError"], true, "{bad}");
    app.bot.tracer.flush_export().await;
    let spans = decode_without_secrets(&received.lock().unwrap());
    let call = spans
        .iter()
        .find(|s| string_attribute(s, "porthole.source").as_deref() == Some("mcp"))
        .expect("the db_query call's span");
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("mcp.protocol.version", common::MODERN),
        ("jsonrpc.request.id", "7"),
        ("gen_ai.tool.name", "db_query"),
        ("gen_ai.operation.name", "execute_tool"),
        ("error.type", "tool_error"),
    ] {
        assert_eq!(string_attribute(call, key).as_deref(), Some(value), "{key}");
    }
    assert!(call.parent_span_id.is_empty(), "a root of its own");

    let health = call_tool(&app, "health", json!({})).await;
    let traces = &health["structuredContent"]["traces"];
    assert_eq!(traces["exporting"], true);
    assert_eq!(traces["counters"]["spans_export_dropped"], 0);
    app.shutdown().await;
}

#[tokio::test]
async fn a_collector_that_is_down_costs_dropped_spans_not_turns() {
    // A port that was free a moment ago: nothing listens there now.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let app = start_bot(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &closed)]).await;
    let sent = call_tool(&app, "send_message", json!({"content": "hello"})).await;
    assert!(sent["structuredContent"]["response"].is_string(), "{sent}");
    app.bot.tracer.flush_export().await;
    let health = call_tool(&app, "health", json!({})).await;
    let counters = &health["structuredContent"]["traces"]["counters"];
    assert!(
        counters["spans_export_dropped"].as_u64().unwrap() >= 1,
        "{counters}"
    );
    assert_eq!(counters["store_errors"], 0);
    // The trace is still stored and readable.
    let listed = call_tool(&app, "list_traces", json!({})).await;
    assert_eq!(
        listed["structuredContent"]["traces"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    app.shutdown().await;
}
