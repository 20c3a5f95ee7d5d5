//! Fake LLM providers for tests: real HTTP servers on 127.0.0.1:0 that speak the
//! OpenAI chat-completions and Anthropic Messages streaming wire formats, answering
//! from a script and recording every request they receive.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Turn {
    /// Streamed text, split into these chunks.
    Text(Vec<&'static str>),
    /// A tool call: name and JSON arguments (streamed in two pieces).
    ToolCall(&'static str, Value),
    /// An HTTP error status with a provider-style error body.
    Status(u16, &'static str),
    /// Never answers (for timeouts).
    Hang,
    /// Waits this many milliseconds, then streams text in these chunks (a slow model).
    Slow(u64, Vec<&'static str>),
    /// Starts streaming text with these chunks, then breaks the connection without
    /// finishing the body (the provider going down mid-answer).
    DropMidStream(Vec<&'static str>),
}

#[derive(Clone, Default)]
pub struct Recorded {
    pub requests: Arc<Mutex<Vec<Value>>>,
    pub auth: Arc<Mutex<Vec<String>>>,
}

#[derive(Clone)]
struct FakeState {
    script: Arc<Mutex<VecDeque<Turn>>>,
    recorded: Recorded,
}

pub struct FakeLlm {
    pub addr: SocketAddr,
    pub recorded: Recorded,
}

impl FakeLlm {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Value> {
        self.recorded.requests.lock().unwrap().clone()
    }
}

fn sse(events: Vec<String>) -> Response {
    let body = events.join("");
    ([("content-type", "text/event-stream")], body).into_response()
}

/// An SSE body that sends `events`, then fails: hyper aborts the connection mid-body.
/// The pause lets the first events reach the client before the connection breaks.
fn sse_then_drop(events: Vec<String>) -> Response {
    use futures::StreamExt;
    let sent = futures::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, std::io::Error>(axum::body::Bytes::from(e))),
    );
    let broken = futures::stream::once(async {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        Err(std::io::Error::other("provider went away"))
    });
    (
        [("content-type", "text/event-stream")],
        axum::body::Body::from_stream(sent.chain(broken)),
    )
        .into_response()
}

/// The token counts every scripted answer reports.
pub const PROMPT_TOKENS: u64 = 12;
pub const COMPLETION_TOKENS: u64 = 5;

/// The script's next answer; a plain note once the script has run out.
async fn next_turn(state: &FakeState, headers: &HeaderMap, body: Value) -> Turn {
    state.recorded.requests.lock().unwrap().push(body);
    let auth = headers
        .get("authorization")
        .or_else(|| headers.get("x-api-key"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    state.recorded.auth.lock().unwrap().push(auth);
    let turn = state.script.lock().unwrap().pop_front();
    if let Some(Turn::Hang) = turn {
        std::future::pending::<()>().await;
    }
    if let Some(Turn::Slow(ms, parts)) = turn {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        return Turn::Text(parts);
    }
    turn.unwrap_or(Turn::Text(vec!["(script exhausted)"]))
}

async fn openai(
    State(state): State<FakeState>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    let turn = next_turn(&state, &headers, body.0).await;
    let chunk = |delta: Value| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": delta}]})
        )
    };
    let text = |parts: &[&str]| -> Vec<String> {
        parts.iter().map(|p| chunk(json!({"content": p}))).collect()
    };
    // How real servers end a stream: a finish reason, then (with `include_usage`) the
    // token counts in a chunk without choices.
    let finish = |reason: &str| {
        vec![
            format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
            ),
            format!(
                "data: {}\n\n",
                json!({"choices": [], "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}})
            ),
            "data: [DONE]\n\n".to_string(),
        ]
    };
    match turn {
        Turn::Text(parts) => {
            let mut events = text(&parts);
            events.extend(finish("stop"));
            sse(events)
        }
        Turn::DropMidStream(parts) => sse_then_drop(text(&parts)),
        Turn::ToolCall(name, args) => {
            let text = args.to_string();
            let (a, b) = text.split_at(text.len() / 2);
            let mut events = vec![
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": a}}]}),
                ),
                chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]})),
            ];
            events.extend(finish("tool_calls"));
            sse(events)
        }
        Turn::Status(code, message) => (
            StatusCode::from_u16(code).unwrap(),
            axum::Json(json!({"error": {"message": message}})),
        )
            .into_response(),
        Turn::Hang | Turn::Slow(..) => unreachable!(),
    }
}

async fn anthropic(
    State(state): State<FakeState>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    let turn = next_turn(&state, &headers, body.0).await;
    let event = |v: Value| format!("event: {}\ndata: {}\n\n", v["type"].as_str().unwrap(), v);
    let text = |parts: &[&str]| -> Vec<String> {
        parts
            .iter()
            .map(|p| event(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}})))
            .collect()
    };
    // How the Messages API reports tokens: input in `message_start`, output (and the
    // stop reason) in `message_delta` at the end.
    let start = || {
        event(
            json!({"type": "message_start", "message": {"usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1}}}),
        )
    };
    let stop = |reason: &str| {
        vec![
            event(
                json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": COMPLETION_TOKENS}}),
            ),
            event(json!({"type": "message_stop"})),
        ]
    };
    match turn {
        Turn::Text(parts) => {
            let mut events = vec![
                start(),
                event(
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                ),
            ];
            events.extend(text(&parts));
            events.extend(stop("end_turn"));
            sse(events)
        }
        Turn::DropMidStream(parts) => sse_then_drop(text(&parts)),
        Turn::ToolCall(name, args) => {
            let mut events = vec![
                start(),
                event(
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": name}}),
                ),
                event(
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": args.to_string()}}),
                ),
            ];
            events.extend(stop("tool_use"));
            sse(events)
        }
        Turn::Status(code, message) => (
            StatusCode::from_u16(code).unwrap(),
            axum::Json(json!({"type": "error", "error": {"message": message}})),
        )
            .into_response(),
        Turn::Hang | Turn::Slow(..) => unreachable!(),
    }
}

/// Starts a fake provider serving both wire formats (`/v1/chat/completions` and
/// `/v1/messages`) with the given script.
pub async fn start(script: Vec<Turn>) -> FakeLlm {
    let recorded = Recorded::default();
    let state = FakeState {
        script: Arc::new(Mutex::new(script.into())),
        recorded: recorded.clone(),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(openai))
        .route("/v1/messages", post(anthropic))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    FakeLlm { addr, recorded }
}
