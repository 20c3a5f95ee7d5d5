//! What if: `replay_llm_call` and `replay_llm_calls` against fake providers of both wire
//! formats (real HTTP servers that record every request they receive).

use crate::common;
use crate::fake_llm;

use common::{MODERN, call_tool, client, error_text, into_reply, is_error, modern_meta, start_bot};
use fake_llm::{FakeLlm, Turn};
use porthole::app::RunningApp;
use serde_json::{Value, json};

const API_KEY: &str = "sk-test-key-0123456789abcdef";

/// A bot on `provider` (`openai` or `anthropic`) and its fake server.
async fn bot_on(
    provider: &str,
    script: Vec<Turn>,
    extra: &[(&str, &str)],
) -> (RunningApp, FakeLlm) {
    let llm = fake_llm::start(script).await;
    let base = match provider {
        "openai" => format!("{}/v1", llm.url()),
        _ => llm.url(),
    };
    let mut vars = vec![
        ("LLM_PROVIDER", provider),
        ("LLM_BASE_URL", base.as_str()),
        ("LLM_API_KEY", API_KEY),
        ("LLM_MODEL", "fake-model"),
    ];
    vars.extend_from_slice(extra);
    (start_bot(&vars).await, llm)
}

fn structured(result: &Value) -> Value {
    assert!(!is_error(result), "{}", error_text(result));
    result["structuredContent"].clone()
}

/// A turn whose model calls the calculator, then answers; returns the conversation id.
async fn calculator_turn(app: &RunningApp, question: &str) -> String {
    let reply = call_tool(app, "send_message", json!({"content": question})).await;
    structured(&reply)["conversation_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `replay_llm_call` as the full token's `tools/list` lists it.
async fn listed_replay_tool(app: &RunningApp) -> Value {
    let listed = common::modern(app, 1, "tools/list", json!({})).await;
    listed.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "replay_llm_call")
        .expect("replay_llm_call is listed")
        .clone()
}

/// The LLM calls recorded so far, oldest first.
async fn llm_calls(app: &RunningApp) -> Vec<String> {
    let calls = call_tool(app, "get_llm_calls", json!({"limit": 100})).await;
    let mut ids: Vec<String> = structured(&calls)["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["span_id"].as_str().unwrap().to_string())
        .collect();
    ids.reverse();
    ids
}

fn tool_turn_script() -> Vec<Turn> {
    vec![
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["It is ", "42."]),
    ]
}

async fn unchanged_replay_sends_what_was_recorded(provider: &str) {
    let mut script = tool_turn_script();
    script.push(Turn::ToolCall("calculator", json!({"expression": "7*6"})));
    let (app, llm) = bot_on(provider, script, &[]).await;
    calculator_turn(&app, "what is 6 times 7?").await;
    let calls = llm_calls(&app).await;
    assert_eq!(calls.len(), 2);
    // The second call holds every kind of message: system, user, the assistant's tool
    // call and the tool's result.
    let replay = call_tool(&app, "replay_llm_call", json!({"span_id": calls[1]})).await;
    let replay = structured(&replay);
    let sent = llm.requests();
    assert_eq!(sent.len(), 3, "one call, no tool loop");
    assert_eq!(
        sent[2], sent[1],
        "{provider}: the request as it was recorded"
    );
    assert!(sent[1]["tools"].as_array().unwrap().len() > 1);

    assert_eq!(replay["original"]["text"], "It is 42.");
    assert_eq!(replay["original"]["tool_calls"], json!([]));
    assert_eq!(
        replay["replays"][0]["tool_calls"],
        json!([{"name": "calculator", "arguments": {"expression": "7*6"}}]),
        "the asked tool call is shown"
    );
    assert_eq!(replay["comparison"][0]["same_tool_calls"], false);
    assert_eq!(replay["comparison"][0]["text_changed"], true);
    assert_eq!(replay["changes"], json!({}));
    assert_eq!(replay["redacted"], json!([]));
    assert!(replay["replays"][0]["latency_ms"].as_f64().unwrap() >= 0.0);

    // No tool ran: the replay's trace is its root and the one LLM call.
    let trace_id = replay["replay_trace_id"].as_str().unwrap();
    let trace = call_tool(&app, "get_trace", json!({"trace_id": trace_id})).await;
    let root = &structured(&trace)["spans"][0];
    assert_eq!(root["kind"], "turn");
    let kinds: Vec<&str> = root["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["llm"]);
    let listed = call_tool(&app, "list_traces", json!({"source": "replay"})).await;
    let listed = structured(&listed);
    assert_eq!(listed["traces"][0]["trace_id"], trace_id);
    let opened = call_tool(
        &app,
        "get_trace",
        json!({"trace_id": trace_id, "span_id": root["span_id"]}),
    )
    .await;
    assert_eq!(
        structured(&opened)["span"]["attributes"]["replay.span_id"],
        calls[1],
        "the replay names the call it replays: {opened}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn an_unchanged_replay_sends_the_recorded_request_openai() {
    unchanged_replay_sends_what_was_recorded("openai").await;
}

#[tokio::test]
async fn an_unchanged_replay_sends_the_recorded_request_anthropic() {
    unchanged_replay_sends_what_was_recorded("anthropic").await;
}

#[tokio::test]
async fn each_change_lands_where_it_should_and_nowhere_else() {
    let (app, llm) = bot_on("openai", tool_turn_script(), &[]).await;
    calculator_turn(&app, "what is 6 times 7?").await;
    let calls = llm_calls(&app).await;
    let changes = json!({
        "system": "Answer in one word.",
        "model": "other-model",
        "temperature": 0.25,
        "max_tokens": 77,
        "tools": ["current_time"],
        "edit_messages": [{"index": 1, "content": "what is 7 times 6?"}],
    });
    let mut arguments = changes.clone();
    arguments["span_id"] = json!(calls[1]);
    let replay = call_tool(&app, "replay_llm_call", arguments).await;
    let replay = structured(&replay);
    assert_eq!(replay["changes"], changes);
    assert_eq!(replay["model"], "other-model");

    let sent = llm.requests();
    let mut expected = sent[1].clone();
    expected["messages"][0]["content"] = json!("Answer in one word.");
    expected["messages"][1]["content"] = json!("what is 7 times 6?");
    expected["model"] = json!("other-model");
    expected["temperature"] = json!(0.25);
    expected["max_tokens"] = json!(77);
    let time_tool = sent[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "current_time")
        .unwrap()
        .clone();
    expected["tools"] = json!([time_tool]);
    assert_eq!(sent[2], expected);

    // The replay's own LLM span records what it sent.
    let replayed = call_tool(&app, "get_llm_calls", json!({"model": "other-model"})).await;
    assert_eq!(structured(&replayed)["calls"].as_array().unwrap().len(), 1);
    app.shutdown().await;
}

#[tokio::test]
async fn runs_make_that_many_calls_and_show_each_answer() {
    let mut script = tool_turn_script();
    script.extend([
        Turn::Text(vec!["one"]),
        Turn::Text(vec!["two"]),
        Turn::Text(vec!["three"]),
    ]);
    let (app, llm) = bot_on("anthropic", script, &[]).await;
    calculator_turn(&app, "what is 6 times 7?").await;
    let calls = llm_calls(&app).await;
    let replay = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "runs": 3, "temperature": 1.0}),
    )
    .await;
    let replay = structured(&replay);
    assert_eq!(llm.requests().len(), 5);
    let texts: Vec<&str> = replay["replays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
    assert_eq!(replay["comparison"].as_array().unwrap().len(), 3);
    assert_eq!(
        replay["original"]["tool_calls"],
        json!([{"name": "calculator", "arguments": {"expression": "6*7"}}])
    );
    assert_eq!(replay["original"]["finish_reason"], "tool_use");
    for request in &llm.requests()[2..] {
        assert_eq!(request["temperature"], 1.0);
    }
    app.shutdown().await;
}

/// A 1 MiB answer budget, as `tools/list` declares it.
const ANSWER_BUDGET: usize = 1024 * 1024;

#[tokio::test]
async fn a_replay_of_long_answers_keeps_to_the_size_it_declares() {
    // Five runs of 300 KB each, half of it quotes that JSON writes as two bytes.
    let long: &'static str = Box::leak("ab\"".repeat(100_000).into_boxed_str());
    let mut script = vec![Turn::Text(vec!["short"])];
    script.extend((0..5).map(|_| Turn::Text(vec![long])));
    let (app, llm) = bot_on("openai", script, &[]).await;
    let tool = listed_replay_tool(&app).await;
    assert_eq!(tool["_meta"]["anthropic/maxResultSizeChars"], ANSWER_BUDGET);

    call_tool(&app, "send_message", json!({"content": "say something"})).await;
    let calls = llm_calls(&app).await;
    let system = "be brief ".repeat(20_000);
    let replay = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "runs": 5, "system": system}),
    )
    .await;
    let replay = structured(&replay);
    assert_eq!(llm.requests().len(), 6, "all five runs were sent");
    assert_eq!(llm.requests()[5]["messages"][0]["content"], system.as_str());
    let size = serde_json::to_vec(&replay).unwrap().len();
    assert!(size <= ANSWER_BUDGET, "the answer is {size} bytes");
    assert!(replay["changes"]["system"].as_str().unwrap().len() < 1000);
    assert_eq!(replay["original"]["text"], "short");
    assert!(replay["original"].get("text_truncated").is_none());
    for run in replay["replays"].as_array().unwrap() {
        let text = run["text"].as_str().unwrap();
        assert_eq!(run["text_truncated"], true);
        assert!(
            text.len() > 50_000 && long.starts_with(text),
            "{}",
            text.len()
        );
    }
    for compared in replay["comparison"].as_array().unwrap() {
        assert_eq!(compared["text_changed"], true);
    }
    app.shutdown().await;
}

#[tokio::test]
async fn a_batch_replays_what_the_filter_selects() {
    let script = vec![
        Turn::Text(vec!["first answer"]),
        Turn::Text(vec!["second answer"]),
        Turn::Text(vec!["second answer"]),
    ];
    let (app, llm) = bot_on("openai", script, &[]).await;
    calculator_turn(&app, "hello").await;
    let second = calculator_turn(&app, "hello again").await;
    let batch = call_tool(
        &app,
        "replay_llm_calls",
        json!({"conversation_id": second, "system": "Be terse."}),
    )
    .await;
    let batch = structured(&batch);
    assert_eq!(
        batch["summary"],
        json!({"replayed": 1, "changed": 0, "unchanged": 1, "errors": 0})
    );
    let rows = batch["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["before"]["text_preview"], "second answer");
    assert_eq!(rows[0]["after"]["text_preview"], "second answer");
    let sent = llm.requests();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[2]["messages"][0]["content"], "Be terse.");
    assert_eq!(
        sent[2]["messages"].as_array().unwrap()[1..],
        sent[1]["messages"].as_array().unwrap()[1..]
    );

    // By model: both conversations' calls, newest first; the script has run out, so the
    // answers change.
    let batch = call_tool(
        &app,
        "replay_llm_calls",
        json!({"model": "fake-model", "status": "ok", "since": "1h", "limit": 2}),
    )
    .await;
    let batch = structured(&batch);
    assert_eq!(batch["summary"]["replayed"], 2);
    assert_eq!(batch["summary"]["changed"], 2);
    assert_eq!(llm.requests().len(), 5);
    app.shutdown().await;
}

#[tokio::test]
async fn bad_input_and_refusals_are_clear_tool_errors() {
    let script = vec![
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["42"]),
        Turn::Status(404, "The model `nope` does not exist"),
    ];
    let (app, _llm) = bot_on("openai", script, &[]).await;
    calculator_turn(&app, "what is 6 times 7?").await;
    let calls = llm_calls(&app).await;
    let error = |result: Value| {
        assert!(is_error(&result), "{result}");
        error_text(&result)
    };
    let unknown = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": "0123456789abcdef"}),
    )
    .await;
    assert!(error(unknown).contains("no LLM call `0123456789abcdef`"));

    let trace = call_tool(&app, "list_traces", json!({})).await;
    let trace_id = structured(&trace)["traces"][0]["trace_id"].clone();
    let tree = call_tool(&app, "get_trace", json!({"trace_id": trace_id})).await;
    let tool_span = structured(&tree)["spans"][0]["children"][1]["span_id"].clone();
    let not_llm = call_tool(&app, "replay_llm_call", json!({"span_id": tool_span})).await;
    assert!(error(not_llm).contains("is a tool span, not an LLM call"));

    let hot = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "temperature": 3}),
    )
    .await;
    assert!(error(hot).contains("temperature"));
    let many = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "runs": 6}),
    )
    .await;
    assert!(error(many).contains("runs"));
    let past = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "edit_messages": [{"index": 9, "content": "x"}]}),
    )
    .await;
    assert!(error(past).contains("index 9 is past the last message"));
    let no_tool = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "tools": ["no_such_tool"]}),
    )
    .await;
    assert!(error(no_tool).contains("no tool `no_such_tool`"));

    let rejected = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "model": "nope"}),
    )
    .await;
    let rejected = error(rejected);
    assert!(
        rejected.contains("The model `nope` does not exist"),
        "the provider's message is passed on: {rejected}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn the_offline_provider_has_nothing_to_replay() {
    let app = start_bot(&[]).await;
    let result = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": "0123456789abcdef"}),
    )
    .await;
    assert!(is_error(&result));
    assert!(error_text(&result).contains("offline provider has nothing to replay"));
    let batch = call_tool(&app, "replay_llm_calls", json!({})).await;
    assert!(error_text(&batch).contains("offline provider has nothing to replay"));
    app.shutdown().await;
}

#[tokio::test]
async fn redacted_parts_are_named_and_refused_unless_allowed() {
    let script = vec![
        Turn::Text(vec!["noted"]),
        Turn::Text(vec!["replayed"]),
        Turn::Text(vec!["replayed"]),
    ];
    let (app, llm) = bot_on("openai", script, &[]).await;
    calculator_turn(&app, &format!("my key is {API_KEY}")).await;
    let calls = llm_calls(&app).await;
    let refused = call_tool(&app, "replay_llm_call", json!({"span_id": calls[0]})).await;
    assert!(is_error(&refused));
    let text = error_text(&refused);
    assert!(text.contains("messages[1].content"), "{text}");
    assert!(text.contains("allow_redacted"), "{text}");
    assert!(!text.contains(API_KEY));

    let edited = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "edit_messages": [{"index": 1, "content": "my key is gone"}]}),
    )
    .await;
    assert_eq!(
        structured(&edited)["redacted"],
        json!(["messages[1].content"])
    );
    let allowed = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "allow_redacted": true}),
    )
    .await;
    assert_eq!(structured(&allowed)["replays"][0]["text"], "replayed");
    let sent = llm.requests();
    assert_eq!(sent[1]["messages"][1]["content"], "my key is gone");
    assert_eq!(sent[2]["messages"][1]["content"], "my key is [REDACTED]");
    app.shutdown().await;
}

#[tokio::test]
async fn the_rate_limit_counts_every_call_and_says_when_to_retry() {
    let (app, llm) = bot_on(
        "openai",
        vec![Turn::Text(vec!["hi"])],
        &[("REPLAY_MAX_PER_MINUTE", "3")],
    )
    .await;
    calculator_turn(&app, "hello").await;
    let calls = llm_calls(&app).await;
    let two = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "runs": 2}),
    )
    .await;
    structured(&two);
    let refused = call_tool(
        &app,
        "replay_llm_call",
        json!({"span_id": calls[0], "runs": 2}),
    )
    .await;
    assert!(is_error(&refused));
    let text = error_text(&refused);
    assert!(text.contains("REPLAY_MAX_PER_MINUTE"), "{text}");
    assert!(text.contains("retry in"), "{text}");
    // A batch takes the last call the minute allows, then is refused call by call.
    calculator_turn(&app, "hello again").await;
    let batch = call_tool(&app, "replay_llm_calls", json!({"limit": 2})).await;
    let batch = structured(&batch);
    assert_eq!(batch["summary"]["replayed"], 1);
    assert_eq!(batch["summary"]["errors"], 1);
    assert!(
        batch["rows"][1]["error"]
            .as_str()
            .unwrap()
            .contains("retry in")
    );
    assert_eq!(llm.requests().len(), 2 + 2 + 1);
    app.shutdown().await;
}

#[tokio::test]
async fn the_read_only_token_neither_sees_nor_calls_a_replay() {
    const READ_ONLY: &str = "read-only-token-0123456789abcdef";
    let (app, llm) = bot_on(
        "openai",
        vec![],
        &[("MCP_SERVER_READONLY_SECRET", READ_ONLY)],
    )
    .await;
    let send = |method: &str, params: Value| {
        let mut params = params;
        params["_meta"] = modern_meta();
        let mut request = client()
            .post(format!("{}/mcp", app.url()))
            .bearer_auth(READ_ONLY)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", method)
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string(),
            );
        if let Some(name) = params["name"].as_str() {
            request = request.header("mcp-name", name);
        }
        async move { into_reply(request.send().await.unwrap()).await }
    };
    let listing = send("tools/list", json!({})).await;
    let names: Vec<&str> = listing.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"get_llm_call"));
    assert!(!names.contains(&"replay_llm_call"));
    assert!(!names.contains(&"replay_llm_calls"));
    assert!(!names.contains(&"replay_turn"));
    for tool in ["replay_llm_call", "replay_llm_calls", "replay_turn"] {
        let refused = send(
            "tools/call",
            json!({"name": tool, "arguments": {"span_id": "0123456789abcdef"}}),
        )
        .await;
        assert_eq!(refused.error_code(), Some(-32602), "{}", refused.raw);
    }
    // The full token sees both, annotated as spending: not read-only, open-world.
    let replay = listed_replay_tool(&app).await;
    assert_eq!(replay["annotations"]["readOnlyHint"], false);
    assert_eq!(replay["annotations"]["openWorldHint"], true);
    assert!(llm.requests().is_empty());
    app.shutdown().await;
}

/// The worked example of docs/traces.md ("What if"): its arguments, and the answer it shows.
fn documented_example() -> (Value, Value) {
    let doc = include_str!("../../docs/traces.md");
    let section = doc
        .split("## What if")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/traces.md has a What if section");
    let blocks: Vec<Value> = section
        .split("```json\n")
        .skip(1)
        .map(|block| serde_json::from_str(block.split("```").next().unwrap()).unwrap())
        .collect();
    assert_eq!(blocks.len(), 2, "arguments, then the answer");
    (blocks[0].clone(), blocks[1].clone())
}

/// Whether every key and value `shown` holds is in `answered` (the placeholder span id
/// aside); arrays are compared item by item.
fn shown_in(shown: &Value, answered: &Value, path: &str) -> Result<(), String> {
    match (shown, answered) {
        (Value::Object(shown), Value::Object(answered)) => shown.iter().try_for_each(|(k, v)| {
            if k == "span_id" {
                return Ok(());
            }
            let other = answered
                .get(k)
                .ok_or(format!("{path}.{k} is not in the answer"))?;
            shown_in(v, other, &format!("{path}.{k}"))
        }),
        (Value::Array(shown), Value::Array(answered)) if shown.len() == answered.len() => shown
            .iter()
            .zip(answered)
            .enumerate()
            .try_for_each(|(i, (s, a))| shown_in(s, a, &format!("{path}[{i}]"))),
        _ if shown == answered => Ok(()),
        _ => Err(format!(
            "{path}: the page shows {shown}, the bot answered {answered}"
        )),
    }
}

#[tokio::test]
async fn the_worked_example_of_traces_md_answers_what_the_page_shows() {
    let mut script = tool_turn_script();
    script.push(Turn::Text(vec!["42."]));
    let (app, _llm) = bot_on("openai", script, &[]).await;
    calculator_turn(&app, "what is 6 times 7?").await;
    let calls = llm_calls(&app).await;
    let (mut arguments, shown) = documented_example();
    arguments["span_id"] = json!(calls[0]);
    let answer = call_tool(&app, "replay_llm_call", arguments).await;
    let answer = structured(&answer);
    if let Err(drift) = shown_in(&shown, &answer, "") {
        panic!("docs/traces.md drifted: {drift}\nanswered: {answer:#}");
    }
    app.shutdown().await;
}
