//! The page's Replay button over real HTTP: `POST /api/conversations/{id}/replay`
//! against a bot on a fake provider (a real HTTP server that records every request).
//! `/api` has no token, so it replays only the calls of the conversation named, shares
//! the MCP tools' per-minute budget, and redacts its answers.

use crate::common;
use crate::fake_llm;

use common::{call_tool, client, error_text, is_error, start_bot, start_bot_on_llm};
use fake_llm::{FakeLlm, Turn};
use porthole::app::RunningApp;
use serde_json::{Value, json};

const API_KEY: &str = "sk-test-key-0123456789abcdef";

struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

async fn post_json(url: String, body: &Value) -> Answer {
    let response = client().post(url).json(body).send().await.unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let body = response.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        retry_after,
        body,
    }
}

async fn replay(app: &RunningApp, conversation: &str, body: Value) -> Answer {
    post_json(
        format!("{}/api/conversations/{conversation}/replay", app.url()),
        &body,
    )
    .await
}

/// A turn sent as the page sends it; its conversation, and the spans of its trace.
struct Turned {
    conversation: String,
    spans: Vec<Value>,
}

impl Turned {
    fn of_kind(&self, kind: &str) -> String {
        self.spans
            .iter()
            .find(|s| s["kind"] == kind)
            .and_then(|s| s["span_id"].as_str())
            .unwrap_or_else(|| panic!("no {kind} span in {:?}", self.spans))
            .to_string()
    }
}

async fn turn(app: &RunningApp, content: &str, conversation: Option<&str>) -> Turned {
    let sent = post_json(
        format!("{}/api/messages", app.url()),
        &json!({"content": content, "conversation_id": conversation}),
    )
    .await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    let trace_id = sent.body["trace_id"].as_str().unwrap();
    let trace = client()
        .get(format!("{}/api/traces/{trace_id}", app.url()))
        .send()
        .await
        .unwrap();
    let trace: Value = trace.json().await.unwrap();
    Turned {
        conversation: sent.body["conversation_id"].as_str().unwrap().to_string(),
        spans: trace["spans"].as_array().unwrap().clone(),
    }
}

async fn bot_on(script: Vec<Turn>, extra: &[(&str, &str)]) -> (RunningApp, FakeLlm) {
    let llm = fake_llm::start(script).await;
    let app = start_bot_on_llm(&llm.url(), extra).await;
    (app, llm)
}

#[tokio::test]
async fn an_unchanged_replay_from_the_page_sends_the_recorded_request() {
    let script = vec![
        Turn::Text(vec!["Hello ", "there."]),
        Turn::Text(vec!["Hi."]),
    ];
    let (app, llm) = bot_on(script, &[]).await;
    let turned = turn(&app, "hello", None).await;
    let call = turned.of_kind("llm");
    let answer = replay(&app, &turned.conversation, json!({"span_id": call})).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let sent = llm.requests();
    assert_eq!(sent.len(), 2, "one provider call");
    assert_eq!(sent[1], sent[0], "the request as it was recorded");
    let body = &answer.body;
    assert_eq!(body["span_id"], call.as_str());
    assert_eq!(body["changes"], json!({}));
    assert_eq!(body["original"]["text"], "Hello there.");
    assert_eq!(body["replays"][0]["text"], "Hi.");
    assert_eq!(body["replays"][0]["finish_reason"], "stop");
    assert_eq!(body["replays"][0]["output_tokens"], 5);
    assert_eq!(body["comparison"][0]["text_changed"], true);
    // The page opens the replay's trace in its panel.
    let replay_trace = body["replay_trace_id"].as_str().unwrap();
    let trace = client()
        .get(format!("{}/api/traces/{replay_trace}", app.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(trace.status(), 200);
    app.shutdown().await;
}

#[tokio::test]
async fn a_change_from_the_page_lands_where_it_should() {
    let script = vec![
        Turn::Text(vec!["Hello."]),
        Turn::ToolCall("calculator", json!({"expression": "1+1"})),
    ];
    let (app, llm) = bot_on(script, &[]).await;
    let turned = turn(&app, "hello", None).await;
    let changes = json!({"system": "Be terse.", "model": "other-model", "temperature": 0.5, "max_tokens": 64});
    let mut body = changes.clone();
    body["span_id"] = json!(turned.of_kind("llm"));
    let answer = replay(&app, &turned.conversation, body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["changes"], changes);
    assert_eq!(answer.body["model"], "other-model");
    assert_eq!(
        answer.body["replays"][0]["tool_calls"],
        json!([{"name": "calculator", "arguments": {"expression": "1+1"}}]),
        "the tool the model asks for is shown"
    );
    let sent = llm.requests();
    assert_eq!(sent.len(), 2, "the tool was not run: no second call");
    let mut expected = sent[0].clone();
    expected["messages"][0]["content"] = json!("Be terse.");
    expected["model"] = json!("other-model");
    expected["temperature"] = json!(0.5);
    expected["max_tokens"] = json!(64);
    assert_eq!(sent[1], expected);
    app.shutdown().await;
}

#[tokio::test]
async fn the_page_replays_only_llm_calls_of_its_own_conversation() {
    let (app, llm) = bot_on(vec![], &[]).await;
    let first = turn(&app, "hello", None).await;
    let second = turn(&app, "hello again", None).await;
    assert_ne!(first.conversation, second.conversation);

    let other = replay(
        &app,
        &second.conversation,
        json!({"span_id": first.of_kind("llm")}),
    )
    .await;
    assert_eq!(other.status, 403, "{}", other.body);
    let text = other.body["error"].as_str().unwrap();
    assert!(text.contains("not a call of conversation"), "{text}");

    let root = replay(
        &app,
        &first.conversation,
        json!({"span_id": first.of_kind("turn")}),
    )
    .await;
    assert_eq!(root.status, 400, "{}", root.body);
    let text = root.body["error"].as_str().unwrap();
    assert!(text.contains("is a turn span, not an LLM call"), "{text}");

    let unknown = replay(
        &app,
        &first.conversation,
        json!({"span_id": "0123456789abcdef"}),
    )
    .await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert!(unknown.body["error"].as_str().unwrap().contains("no span"));
    let malformed = replay(&app, &first.conversation, json!({"span_id": "x"})).await;
    assert_eq!(malformed.status, 400);
    let nowhere = replay(
        &app,
        "no-such-conversation",
        json!({"span_id": first.of_kind("llm")}),
    )
    .await;
    assert_eq!(nowhere.status, 404);

    // The engine's own checks, as the MCP tool gets them.
    let call = first.of_kind("llm");
    let hot = replay(
        &app,
        &first.conversation,
        json!({"span_id": call, "temperature": 3}),
    )
    .await;
    assert_eq!(hot.status, 400);
    assert!(
        hot.body["error"]
            .as_str()
            .unwrap()
            .contains("temperature 3")
    );
    let typo = replay(
        &app,
        &first.conversation,
        json!({"span_id": call, "temprature": 1}),
    )
    .await;
    assert_eq!(typo.status, 400);
    assert!(typo.body["error"].as_str().unwrap().contains("temprature"));
    assert_eq!(llm.requests().len(), 2, "nothing was replayed");
    app.shutdown().await;
}

#[tokio::test]
async fn the_page_and_the_mcp_tool_share_one_budget() {
    let (app, llm) = bot_on(vec![], &[("REPLAY_MAX_PER_MINUTE", "2")]).await;
    let turned = turn(&app, "hello", None).await;
    let call = turned.of_kind("llm");
    let page = replay(&app, &turned.conversation, json!({"span_id": call})).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let mcp = call_tool(&app, "replay_llm_call", json!({"span_id": call})).await;
    assert!(!is_error(&mcp), "{}", error_text(&mcp));

    // The budget is spent: the page is refused, with the time to wait…
    let refused = replay(&app, &turned.conversation, json!({"span_id": call})).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    let text = refused.body["error"].as_str().unwrap();
    assert!(text.contains("REPLAY_MAX_PER_MINUTE"), "{text}");
    assert!(text.contains("retry in"), "{text}");
    let wait = refused.body["retry_after_s"].as_u64().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(
        refused.retry_after.as_deref(),
        Some(wait.to_string().as_str())
    );
    // …and so is the tool.
    let mcp = call_tool(&app, "replay_llm_call", json!({"span_id": call})).await;
    assert!(is_error(&mcp));
    assert!(error_text(&mcp).contains("retry in"));
    assert_eq!(llm.requests().len(), 1 + 2);
    app.shutdown().await;
}

#[tokio::test]
async fn a_provider_rejection_is_passed_on() {
    let script = vec![
        Turn::Text(vec!["Hello."]),
        Turn::Status(404, "The model `nope` does not exist"),
    ];
    let (app, _llm) = bot_on(script, &[]).await;
    let turned = turn(&app, "hello", None).await;
    let answer = replay(
        &app,
        &turned.conversation,
        json!({"span_id": turned.of_kind("llm"), "model": "nope"}),
    )
    .await;
    assert_eq!(answer.status, 502, "{}", answer.body);
    let text = answer.body["error"].as_str().unwrap();
    assert!(text.contains("The model `nope` does not exist"), "{text}");
    app.shutdown().await;
}

#[tokio::test]
async fn the_offline_provider_says_it_has_nothing_to_replay() {
    let app = start_bot(&[]).await;
    let turned = turn(&app, "/help", None).await;
    let answer = replay(
        &app,
        &turned.conversation,
        json!({"span_id": turned.of_kind("llm")}),
    )
    .await;
    assert_eq!(answer.status, 409, "{}", answer.body);
    let text = answer.body["error"].as_str().unwrap();
    assert!(
        text.contains("offline provider has nothing to replay"),
        "{text}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn redacted_parts_need_the_box_ticked_and_no_secret_comes_back() {
    let script = vec![
        Turn::Text(vec!["noted"]),
        Turn::Text(vec!["your key is ", API_KEY]),
    ];
    let (app, llm) = bot_on(script, &[]).await;
    let turned = turn(&app, &format!("my key is {API_KEY}"), None).await;
    let call = turned.of_kind("llm");
    let refused = replay(&app, &turned.conversation, json!({"span_id": call})).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert_eq!(refused.body["redacted"], json!(["messages[1].content"]));
    assert!(
        refused.body["error"]
            .as_str()
            .unwrap()
            .contains("allow_redacted")
    );
    assert_eq!(llm.requests().len(), 1, "nothing sent");

    let allowed = replay(
        &app,
        &turned.conversation,
        json!({"span_id": call, "allow_redacted": true}),
    )
    .await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    assert_eq!(allowed.body["replays"][0]["text"], "your key is [REDACTED]");
    assert!(!allowed.body.to_string().contains(API_KEY));
    app.shutdown().await;
}

#[tokio::test]
async fn the_replay_route_keeps_the_protections_of_every_api_write() {
    let (app, llm) = bot_on(vec![], &[]).await;
    let turned = turn(&app, "hello", None).await;
    let url = format!(
        "{}/api/conversations/{}/replay",
        app.url(),
        turned.conversation
    );
    let body = json!({"span_id": turned.of_kind("llm")}).to_string();
    let cross_site = client()
        .post(&url)
        .header("content-type", "application/json")
        .header("origin", "http://evil.example")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);
    let form = client()
        .post(&url)
        .header("content-type", "text/plain")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 415);
    let other_host = client()
        .post(&url)
        .header("host", "evil.example")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(other_host.status(), 403);
    assert_eq!(llm.requests().len(), 1, "nothing was replayed");
    app.shutdown().await;
}

#[tokio::test]
async fn replay_from_here_replays_the_turn_and_runs_no_tool() {
    let script = vec![
        // The recorded turn: the calculator, then the answer.
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["It is 42."]),
        // From its first call: the same calculator call (the recorded result comes
        // back), then another answer.
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["Forty-two."]),
        // Again, where the model asks for a tool the recording did not call: it stops.
        Turn::ToolCall("current_time", json!({})),
    ];
    let (app, llm) = bot_on(script, &[]).await;
    let turned = turn(&app, "what is 6 times 7?", None).await;
    let first_call = turned.of_kind("llm");
    let body = json!({"span_id": first_call, "turn": true, "system": "Answer in words."});
    let answer = replay(&app, &turned.conversation, body.clone()).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let turn_replay = &answer.body;
    assert_eq!(turn_replay["stopped"], "final_answer", "{turn_replay:#}");
    assert_eq!(turn_replay["steps"].as_array().unwrap().len(), 2);
    assert_eq!(turn_replay["tools_reused"], 1);
    assert_eq!(turn_replay["final"]["replay"], "Forty-two.");
    assert!(
        turn_replay["verdict"]
            .as_str()
            .unwrap()
            .contains("final answer changed")
    );

    let answer = replay(&app, &turned.conversation, body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.body["stopped"], "diverged",
        "the page runs no tool: {:#}",
        answer.body
    );
    assert_eq!(answer.body["tools_run"], 0);
    assert_eq!(llm.requests().len(), 5);
    // A turn replay is still only for the conversation the page shows.
    let other = turn(&app, "hello", None).await;
    let refused = replay(
        &app,
        &other.conversation,
        json!({"span_id": first_call, "turn": true}),
    )
    .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    app.shutdown().await;
}
