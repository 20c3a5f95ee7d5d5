//! Turn traces end to end: a real bot on 127.0.0.1:0 talking to a fake OpenAI-compatible
//! server, read back through the MCP trace tools, resource and prompt, in both eras; and
//! the trace every other `/mcp` `tools/call` leaves (source `mcp`): one tool span with
//! the MCP semantic conventions, listed only when asked for, never `last_error`'s
//! answer, kept under `TRACE_MAX_MCP_CALLS` apart from the turns.

use crate::common;
use crate::fake_llm;

use common::{
    TOKEN, call_tool, error_text, is_error, legacy, legacy_session, modern, start_bot,
    start_bot_on_llm,
};
use fake_llm::{COMPLETION_TOKENS, PROMPT_TOKENS, Turn};
use porthole::app::RunningApp;
use porthole::bot::schedule::RunAs;
use porthole::bot::tools::ExecContext;
use serde_json::{Value, json};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

async fn bot_with(script: Vec<Turn>, extra: &[(&str, &str)]) -> (RunningApp, fake_llm::FakeLlm) {
    let llm = fake_llm::start(script).await;
    (start_bot_on_llm(&llm.url(), extra).await, llm)
}

fn structured(result: &Value) -> &Value {
    assert!(!is_error(result), "{}", error_text(result));
    &result["structuredContent"]
}

/// Sends a user message through `send_message` as the child of the caller's trace.
async fn send_traced(app: &RunningApp, content: &str) -> Value {
    let reply = modern(
        app,
        3,
        "tools/call",
        json!({"name": "send_message", "arguments": {"content": content},
               "_meta": {"traceparent": format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")}}),
    )
    .await;
    reply.result()["structuredContent"].clone()
}

/// A bot whose model calls the calculator once and then answers; one turn sent as the
/// child of the caller's trace. Returns the bot, the fake server and the reply.
async fn one_tool_turn() -> (RunningApp, fake_llm::FakeLlm, Value) {
    let (app, llm) = bot_with(
        vec![
            Turn::ToolCall("calculator", json!({"expression": "6*7"})),
            Turn::Text(vec!["The answer ", "is 42."]),
        ],
        &[],
    )
    .await;
    let reply = send_traced(&app, "what is 6 times 7?").await;
    assert_eq!(reply["response"], "The answer is 42.");
    assert_eq!(
        reply["trace_id"], CALLER_TRACE,
        "the caller's trace id is kept"
    );
    (app, llm, reply)
}

#[tokio::test]
async fn a_turn_is_one_trace_of_llm_and_tool_spans_joined_to_the_callers_trace() {
    let (app, _llm, reply) = one_tool_turn().await;
    let listed = call_tool(&app, "list_traces", json!({})).await;
    let traces = structured(&listed)["traces"].as_array().unwrap().clone();
    assert_eq!(traces.len(), 1);
    let trace = &traces[0];
    assert_eq!(trace["trace_id"], CALLER_TRACE);
    assert_eq!(trace["remote_parent_span_id"], CALLER_SPAN);
    assert_eq!(trace["source"], "send_message");
    assert_eq!(trace["status"], "ok");
    assert_eq!(trace["llm_calls"], 2);
    assert_eq!(trace["tool_calls"], 1);
    assert_eq!(trace["input_tokens"], 2 * PROMPT_TOKENS);
    assert_eq!(trace["conversation_id"], reply["conversation_id"]);

    let got = call_tool(&app, "get_trace", json!({"trace_id": CALLER_TRACE})).await;
    let tree = &structured(&got)["spans"];
    assert_eq!(tree.as_array().unwrap().len(), 1, "{tree}");
    let turn = &tree[0];
    assert_eq!(turn["kind"], "turn");
    let steps: Vec<&str> = turn["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["llm", "tool", "llm"]);
    let first = &turn["children"][0];
    assert_eq!(first["model"], "fake-model");
    assert_eq!(first["finish_reason"], "tool_calls");
    assert_eq!(first["tool_calls"], json!(["calculator"]));
    assert_eq!(first["output_tokens"], COMPLETION_TOKENS);
    assert!(
        first["time_to_first_token_ms"].is_null(),
        "no text streamed in a tool call"
    );
    assert!(
        turn["children"][2]["time_to_first_token_ms"]
            .as_f64()
            .unwrap()
            >= 0.0
    );
    assert_eq!(turn["children"][1]["tool"], "calculator");
    app.shutdown().await;
}

/// The writer gathers spans for a moment before storing them; SQL about traces, sent
/// right after the turn, still sees all of them.
#[tokio::test]
async fn sql_on_trace_spans_right_after_a_turn_sees_the_whole_turn() {
    let (app, _llm, _reply) = one_tool_turn().await;
    let result = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT kind, COUNT(*) FROM trace_spans GROUP BY kind ORDER BY kind"}),
    )
    .await;
    assert_eq!(
        structured(&result)["rows"],
        json!([["llm", 2], ["tool", 1], ["turn", 1]]),
        "{result}"
    );
    let counters = app.bot.tracer.counters();
    assert!(
        counters.writer_cpu_us > 0,
        "the writer's work on the turn is counted: {counters:?}"
    );
    app.shutdown().await;
}

/// The span holds every parameter the provider was sent, and the tool definitions in
/// full (stored once by their hash).
async fn assert_recorded_as_sent(app: &RunningApp, attributes: &Value, sent: &Value) {
    let mut parameters = sent.as_object().unwrap().clone();
    parameters.remove("messages");
    let wire_tools = parameters.remove("tools").unwrap();
    assert_eq!(attributes["parameters"], Value::Object(parameters));
    assert_eq!(attributes["parameters"]["model"], "fake-model");
    let hash = attributes["tools_hash"].as_str().unwrap();
    let stored = app.bot.store.tool_set(hash).await.unwrap().unwrap();
    let stored: Vec<Value> = serde_json::from_str(&stored).unwrap();
    let wire_tools = wire_tools.as_array().unwrap();
    assert_eq!(stored.len(), wire_tools.len());
    for (definition, wire) in stored.iter().zip(wire_tools) {
        assert_eq!(definition["name"], wire["function"]["name"]);
        assert_eq!(definition["description"], wire["function"]["description"]);
        assert_eq!(definition["input_schema"], wire["function"]["parameters"]);
    }
    let sets = call_tool(
        app,
        "db_query",
        json!({"query": "SELECT COUNT(*) AS n FROM trace_tool_sets"}),
    )
    .await;
    assert_eq!(
        structured(&sets)["rows"][0][0],
        1,
        "both calls of the turn offered one set: stored once"
    );
    // The names shown as `tools_offered` are the set's, in order, read back from it:
    // no span stores them.
    let names: Vec<&Value> = stored.iter().map(|d| &d["name"]).collect();
    assert_eq!(attributes["tools_offered"], json!(names));
    let stored_names = call_tool(
        app,
        "db_query",
        json!({"query": "SELECT COUNT(*) FROM trace_turns WHERE spans LIKE '%tools_offered%'"}),
    )
    .await;
    assert_eq!(structured(&stored_names)["rows"][0][0], 0, "{stored_names}");
}

#[tokio::test]
async fn llm_calls_open_in_full_and_add_up_in_the_stats() {
    let (app, llm, _) = one_tool_turn().await;
    // One LLM call in full: what the model was sent and what it answered.
    let calls = call_tool(&app, "get_llm_calls", json!({"model": "fake-model"})).await;
    let calls = structured(&calls)["calls"].as_array().unwrap().clone();
    assert_eq!(calls.len(), 2);
    let oldest = calls[1]["span_id"].as_str().unwrap();
    let call = call_tool(&app, "get_llm_call", json!({"span_id": oldest})).await;
    let attributes = &structured(&call)["attributes"];
    assert_eq!(attributes["request"][0]["role"], "system");
    assert_eq!(attributes["request"][1]["content"], "what is 6 times 7?");
    assert!(
        attributes["tools_offered"]
            .as_array()
            .unwrap()
            .contains(&json!("calculator"))
    );
    assert_eq!(
        attributes["response"]["tool_calls"][0]["arguments"],
        json!({"expression": "6*7"})
    );
    assert_eq!(attributes["provider"], "openai");
    assert_recorded_as_sent(&app, attributes, &llm.requests()[0]).await;

    let stats = call_tool(&app, "get_trace_stats", json!({"since": "1h"})).await;
    let stats = structured(&stats);
    assert_eq!(stats["models"][0]["model"], "fake-model");
    assert_eq!(stats["models"][0]["count"], 2);
    assert_eq!(stats["models"][0]["error_rate"], 0.0);
    assert_eq!(stats["models"][0]["output_tokens"], 2 * COMPLETION_TOKENS);
    assert_eq!(stats["tools"][0]["tool"], "calculator");
    assert!(
        stats["tools"][0]["p95_ms"].as_f64().unwrap()
            >= stats["tools"][0]["p50_ms"].as_f64().unwrap()
    );

    // The same tree as a resource.
    let uri = format!("porthole://traces/{CALLER_TRACE}");
    let read = modern(&app, 4, "resources/read", json!({"uri": uri})).await;
    let text = read.result()["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("\"kind\": \"turn\""), "{text}");
    app.shutdown().await;
}

#[tokio::test]
async fn a_failed_turn_is_the_last_error_and_its_prompt_explains_it() {
    let (app, _llm) = bot_with(vec![Turn::Status(500, "the model is on fire")], &[]).await;
    let trace_id = fail_a_turn(&app).await;

    let last = call_tool(&app, "last_error", json!({})).await;
    let last = structured(&last);
    assert_eq!(last["found"], true);
    assert_eq!(last["kind"], "llm");
    assert_eq!(last["trace_id"], trace_id.as_str());
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains("the model is on fire"),
        "{last}"
    );
    assert_eq!(last["trace"][0]["kind"], "turn");

    let failed = call_tool(
        &app,
        "list_traces",
        json!({"status": "error", "source": "web"}),
    )
    .await;
    assert_eq!(
        structured(&failed)["traces"][0]["trace_id"],
        trace_id.as_str()
    );
    let ok = call_tool(&app, "list_traces", json!({"status": "ok"})).await;
    assert_eq!(structured(&ok)["traces"], json!([]));
    let calls = call_tool(&app, "get_llm_calls", json!({"status": "error"})).await;
    assert_eq!(structured(&calls)["calls"][0]["status"], "error");

    let prompt = modern(
        &app,
        5,
        "prompts/get",
        json!({"name": "explain_failed_turn", "arguments": {}}),
    )
    .await;
    let text = prompt.result()["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.contains(&trace_id) && text.contains("FAILED"),
        "{text}"
    );
    let diagnose = modern(
        &app,
        6,
        "prompts/get",
        json!({"name": "diagnose_recent_errors", "arguments": {}}),
    )
    .await;
    let text = diagnose.result()["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains(&trace_id), "{text}");
    app.shutdown().await;
}

/// What `last_error` names as the latest failure, once `expected` (polled: an MCP
/// server fails on its own time, in the background).
async fn wait_for_last_error(app: &RunningApp, expected: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let last = call_tool(app, "last_error", json!({})).await;
        let last = structured(&last).clone();
        if last["kind"] == expected {
            return last;
        }
        assert!(std::time::Instant::now() < deadline, "still {last}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A scheduled task that asks the model for a digest.
async fn digest_task(app: &RunningApp) -> porthole::bot::store::Task {
    let action = json!({"prompt": "write the digest"});
    let created = app.bot.schedule.create(
        "digest",
        "asks the model",
        "0 0 3 * * *",
        action,
        RunAs::User,
    );
    created.await.unwrap()
}

/// A web turn the model fails; returns its trace id.
async fn fail_a_turn(app: &RunningApp) -> String {
    let mut ctx = ExecContext::new(&["user"]);
    ctx.trace = app.bot.tracer.root("web", None);
    let reply = app.bot.supervisor.send(None, "hello", &ctx, None).await;
    let reply = reply.unwrap();
    assert!(reply.error.is_some());
    reply.trace_id.unwrap()
}

async fn toggle_server(app: &RunningApp, enabled: bool) {
    let toggled = call_tool(
        app,
        "toggle_mcp_server",
        json!({"name": "down", "enabled": enabled}),
    )
    .await;
    structured(&toggled);
}

#[tokio::test]
async fn last_error_is_the_newest_failure_of_a_turn_a_task_or_an_mcp_server() {
    let dir = tempfile::tempdir().unwrap();
    let mcp_json = dir.path().join("mcp.json");
    let down = json!({"url": "http://127.0.0.1:9/mcp", "enabled": false});
    std::fs::write(&mcp_json, json!({"mcpServers": {"down": down}}).to_string()).unwrap();
    let on_fire = Turn::Status(500, "the model is on fire");
    let (app, _llm) = bot_with(
        vec![on_fire.clone(), on_fire.clone(), on_fire],
        &[("MCP_SERVERS_CONFIG", &mcp_json.display().to_string())],
    )
    .await;
    let task = digest_task(&app).await;

    // The server fails first, then keeps failing the same way at every retry: its
    // outage began before the turn's failure, which is therefore the newest.
    toggle_server(&app, true).await;
    let last = wait_for_last_error(&app, "mcp_server").await;
    assert_eq!(last["server"]["name"], "down", "{last}");
    assert!(last["server"]["since"].is_string(), "{last}");
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    fail_a_turn(&app).await;
    let last = wait_for_last_error(&app, "llm").await;
    assert!(
        last["error"].as_str().unwrap().contains("on fire"),
        "{last}"
    );
    assert_eq!(last["mcp_servers_failing_now"][0]["name"], "down", "{last}");

    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let run = app.bot.schedule.run_now(task.id, RunAs::Admin).await;
    assert_eq!(run.unwrap().status, "error");
    let last = wait_for_last_error(&app, "task").await;
    assert_eq!(last["task"]["id"], task.id, "{last}");

    // Switched off and on again, the server's new failure is a new outage.
    toggle_server(&app, false).await;
    toggle_server(&app, true).await;
    wait_for_last_error(&app, "mcp_server").await;

    fail_a_turn(&app).await;
    wait_for_last_error(&app, "llm").await;
    app.shutdown().await;
}

#[tokio::test]
async fn worker_agents_nest_under_the_delegate_call() {
    let (app, _llm) = bot_with(
        vec![
            Turn::ToolCall(
                "delegate",
                json!({"task": "add 2 and 2", "worker_name": "adder"}),
            ),
            Turn::Text(vec!["4"]),
            Turn::Text(vec!["The worker says 4."]),
        ],
        &[],
    )
    .await;
    let reply = send_traced(&app, "delegate a sum").await;
    assert_eq!(reply["response"], "The worker says 4.");
    let got = call_tool(&app, "get_trace", json!({"trace_id": CALLER_TRACE})).await;
    let delegate = &structured(&got)["spans"][0]["children"][1];
    assert_eq!(delegate["tool"], "delegate");
    let agent = &delegate["children"][0];
    assert_eq!(agent["kind"], "agent");
    assert_eq!(agent["name"], "agent adder");
    assert_eq!(agent["children"][0]["kind"], "llm", "{agent}");
    app.shutdown().await;
}

#[tokio::test]
async fn run_tool_in_a_legacy_session_joins_the_callers_trace_and_old_traces_are_pruned() {
    let (app, _llm) = bot_with(vec![], &[("TRACE_MAX_TURNS", "2")]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    for n in 0..4 {
        let reply = legacy(
            &app,
            &session,
            10 + n,
            "tools/call",
            json!({"name": "run_tool", "arguments": {"tool_name": "calculator", "parameters": {"expression": "1+1"}},
                   "_meta": {"traceparent": format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")}}),
        )
        .await;
        assert!(!is_error(reply.result()), "{}", reply.raw);
        // Each batch prunes; let the writer see them one by one.
        app.bot.tracer.flush().await;
    }
    let first = call_tool(
        &app,
        "list_traces",
        json!({"source": "run_tool", "limit": 1}),
    )
    .await;
    let page = structured(&first);
    assert_eq!(page["traces"][0]["trace_id"], CALLER_TRACE);
    assert_eq!(page["traces"][0]["kind"], "tool");
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let next = call_tool(
        &app,
        "list_traces",
        json!({"source": "run_tool", "cursor": cursor}),
    )
    .await;
    let next = structured(&next);
    assert_eq!(
        next["traces"].as_array().unwrap().len(),
        1,
        "TRACE_MAX_TURNS=2 keeps two"
    );
    assert!(next["next_cursor"].is_null());
    // A run_tool call is its own trace's root: no second, `mcp` trace for it.
    let calls = listed(&app, json!({"source": "mcp"})).await;
    assert!(!calls.is_empty());
    assert!(calls.iter().all(|t| t["tool"] != "run_tool"), "{calls:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn bad_arguments_say_what_to_fix() {
    let (app, _llm) = bot_with(vec![], &[]).await;
    for (tool, args, expected) in [
        ("list_traces", json!({"since": "yesterday"}), "ISO 8601"),
        ("list_traces", json!({"cursor": "nonsense"}), "next_cursor"),
        (
            "get_trace",
            json!({"trace_id": "0123456789abcdef0123456789abcdef"}),
            "list_traces",
        ),
        (
            "get_llm_call",
            json!({"span_id": "0123456789abcdef"}),
            "get_llm_calls",
        ),
    ] {
        let result = call_tool(&app, tool, args).await;
        assert!(is_error(&result), "{tool}: {result}");
        assert!(
            error_text(&result).contains(expected),
            "{tool}: {}",
            error_text(&result)
        );
    }
    let last = call_tool(&app, "last_error", json!({})).await;
    assert_eq!(
        structured(&last)["found"],
        false,
        "a caller's bad arguments are not the bot's failure"
    );
    // Yet each bad call is traced (source mcp), failed.
    let failed = listed(&app, json!({"source": "mcp", "status": "error"})).await;
    assert_eq!(failed.len(), 4, "{failed:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn a_scheduled_task_is_a_trace_of_its_own() {
    let (app, _llm) = bot_with(vec![Turn::Text(vec!["done"])], &[]).await;
    let task = digest_task(&app).await;
    let run = app
        .bot
        .schedule
        .run_now(task.id, RunAs::Admin)
        .await
        .unwrap();
    assert_eq!(run.status, "ok");
    let listed = call_tool(&app, "list_traces", json!({"source": "task"})).await;
    let trace = &structured(&listed)["traces"][0];
    assert_eq!(trace["kind"], "turn");
    assert_eq!(trace["llm_calls"], 1);
    app.shutdown().await;
}

#[tokio::test]
async fn a_turn_stopped_by_a_timeout_leaves_its_trace_marked_cancelled() {
    let (app, _llm) = bot_with(vec![Turn::Hang], &[("MCP_SEND_MESSAGE_TIMEOUT_SECS", "1")]).await;
    let sent = call_tool(&app, "send_message", json!({"content": "are you there?"})).await;
    assert!(is_error(&sent), "{sent}");
    let listed = call_tool(&app, "list_traces", json!({"status": "error"})).await;
    let trace = &structured(&listed)["traces"][0];
    assert_eq!(trace["source"], "send_message");
    assert!(
        trace["error"].as_str().unwrap().starts_with("cancelled"),
        "{trace}"
    );
    let calls = call_tool(&app, "get_llm_calls", json!({"status": "error"})).await;
    let call = &structured(&calls)["calls"][0];
    assert!(
        call["error"].as_str().unwrap().starts_with("cancelled"),
        "{call}"
    );
    assert!(call["duration_ms"].as_f64().unwrap() >= 900.0, "{call}");
    app.shutdown().await;
}

#[tokio::test]
async fn anthropic_calls_report_their_tokens_and_stop_reason() {
    let llm = fake_llm::start(vec![Turn::Text(vec!["Hello."])]).await;
    let app = start_bot(&[
        ("LLM_PROVIDER", "anthropic"),
        ("LLM_BASE_URL", &llm.url()),
        ("LLM_API_KEY", "sk-ant-test-0123456789abcdef"),
        ("LLM_MODEL", "claude-fake"),
    ])
    .await;
    let sent = call_tool(&app, "send_message", json!({"content": "hi"})).await;
    assert_eq!(structured(&sent)["response"], "Hello.");
    let calls = call_tool(&app, "get_llm_calls", json!({"model": "claude-fake"})).await;
    let call = &structured(&calls)["calls"][0];
    assert_eq!(call["provider"], "anthropic");
    assert_eq!(call["input_tokens"], PROMPT_TOKENS);
    assert_eq!(call["output_tokens"], COMPLETION_TOKENS);
    assert_eq!(call["finish_reason"], "end_turn");
    app.shutdown().await;
}

/// The traces `list_traces` lists with `arguments`.
async fn listed(app: &RunningApp, arguments: Value) -> Vec<Value> {
    let listed = call_tool(app, "list_traces", arguments).await;
    structured(&listed)["traces"].as_array().unwrap().clone()
}

/// The one span of an `mcp` trace, in full.
async fn call_span(app: &RunningApp, trace: &Value) -> Value {
    let got = call_tool(
        app,
        "get_trace",
        json!({"trace_id": trace["trace_id"], "span_id": trace["span_id"]}),
    )
    .await;
    structured(&got)["span"].clone()
}

#[tokio::test]
async fn an_mcp_tool_call_is_a_trace_of_its_own_with_the_mcp_conventions() {
    let (app, _llm) = bot_with(vec![], &[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let reply = legacy(
        &app,
        &session,
        41,
        "tools/call",
        json!({"name": "list_agents", "arguments": {},
               "_meta": {"traceparent": format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01")}}),
    )
    .await;
    assert!(!is_error(reply.result()), "{}", reply.raw);

    assert_eq!(
        listed(&app, json!({})).await,
        Vec::<Value>::new(),
        "no turn ran: the default listing holds turns (and replays) only"
    );
    // This call's own span is stored after it answers: the list_agents call and the
    // default listing above.
    let calls = listed(&app, json!({"source": "mcp"})).await;
    let tools: Vec<&Value> = calls.iter().map(|t| &t["tool"]).collect();
    assert_eq!(tools, [&json!("list_traces"), &json!("list_agents")]);
    let call = &calls[1];
    assert_eq!(call["source"], "mcp");
    assert_eq!(call["kind"], "tool");
    assert_eq!(call["name"], "tools/call");
    assert_eq!(call["status"], "ok");
    assert_eq!(call["spans"], 1);
    assert_eq!(call["trace_id"], CALLER_TRACE, "the caller's trace is kept");
    assert_eq!(call["remote_parent_span_id"], CALLER_SPAN);

    let span = call_span(&app, call).await;
    let attributes = &span["attributes"];
    assert_eq!(attributes["mcp.method.name"], "tools/call");
    assert_eq!(attributes["mcp.protocol.version"], "2025-11-25");
    assert_eq!(attributes["jsonrpc.request.id"], "41");
    assert!(
        attributes.get("arguments").is_none(),
        "arguments are not recorded: {span}"
    );
    assert!(
        !span.to_string().contains(&session),
        "the session id is a credential: {span}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_call_refused_before_any_tool_ran_is_a_failed_mcp_trace_too() {
    let (app, _llm) = bot_with(vec![], &[]).await;
    // An unknown tool (a protocol error), its name long and holding the bearer token.
    let unknown = format!("no_such_tool_{TOKEN}_{}", "x".repeat(300));
    let reply = common::modern(
        &app,
        5,
        "tools/call",
        json!({"name": unknown, "arguments": {}}),
    )
    .await;
    assert_eq!(reply.error_code(), Some(-32602), "{}", reply.raw);
    // Arguments the schema rejects (a tool error).
    let bad = call_tool(&app, "db_query", json!({"query": 5})).await;
    assert!(is_error(&bad), "{bad}");

    let failed = listed(&app, json!({"source": "mcp", "status": "error"})).await;
    assert_eq!(failed.len(), 2, "{failed:?}");
    let schema = call_span(&app, &failed[0]).await;
    assert_eq!(failed[0]["tool"], "db_query");
    assert_eq!(schema["attributes"]["error.type"], "tool_error");
    assert!(
        schema["error"]
            .as_str()
            .unwrap()
            .contains("Invalid arguments"),
        "{schema}"
    );

    let refused = call_span(&app, &failed[1]).await;
    assert_eq!(refused["attributes"]["error.type"], "-32602");
    assert_eq!(refused["attributes"]["mcp.method.name"], "tools/call");
    let tool = failed[1]["tool"].as_str().unwrap();
    assert!(
        tool.starts_with("no_such_tool_") && tool.chars().count() <= 100,
        "{tool}"
    );
    assert!(
        refused["error"].as_str().unwrap().contains("Unknown tool"),
        "{refused}"
    );
    assert!(!refused.to_string().contains(TOKEN), "{refused}");
    assert!(!failed[1].to_string().contains(TOKEN), "{}", failed[1]);
    assert_eq!(
        structured(&call_tool(&app, "last_error", json!({})).await)["found"],
        false
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_failed_tool_call_is_the_callers_mistake_not_the_bots_last_error() {
    let (app, _llm) = bot_with(vec![], &[]).await;
    let bad = call_tool(
        &app,
        "db_query",
        json!({"query": "SELECT * FROM no_such_table"}),
    )
    .await;
    assert!(is_error(&bad), "{bad}");

    let failed = listed(&app, json!({"source": "mcp", "status": "error"})).await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["tool"], "db_query");
    assert_eq!(failed[0]["status"], "error");
    let span = call_span(&app, &failed[0]).await;
    assert_eq!(span["attributes"]["error.type"], "tool_error");
    assert!(
        span["error"].as_str().unwrap().contains("no_such_table"),
        "{span}"
    );

    let last = call_tool(&app, "last_error", json!({})).await;
    assert_eq!(structured(&last)["found"], false, "{last}");
    assert_eq!(listed(&app, json!({"status": "error"})).await.len(), 0);
    app.shutdown().await;
}

#[tokio::test]
async fn mcp_calls_are_kept_under_their_own_cap_and_never_evict_turns() {
    let (app, _llm) = bot_with(
        vec![Turn::Text(vec!["hello back"])],
        &[("TRACE_MAX_TURNS", "1"), ("TRACE_MAX_MCP_CALLS", "3")],
    )
    .await;
    let sent = call_tool(&app, "send_message", json!({"content": "hello"})).await;
    assert_eq!(structured(&sent)["response"], "hello back");
    // A client calling tools flat out, many more calls than either cap, each with its
    // own request id.
    for id in 100..140 {
        let args = json!({"name": "health", "arguments": {}});
        let health = common::modern(&app, id, "tools/call", args).await;
        assert!(!is_error(health.result()), "{}", health.raw);
    }
    // Read from the store itself: a tool call to read them would add a call of its own.
    app.bot.tracer.flush().await;
    let query = porthole::bot::store::SpanQuery {
        source: Some("mcp".into()),
        limit: 100,
        ..Default::default()
    };
    let calls = app.bot.store.list_traces(query).await.unwrap().items;
    let ids: Vec<&Value> = calls
        .iter()
        .map(|c| &c.root.attributes["jsonrpc.request.id"])
        .collect();
    assert_eq!(
        ids,
        ["139", "138", "137"],
        "the newest 3 (TRACE_MAX_MCP_CALLS=3)"
    );
    let turns = listed(&app, json!({})).await;
    assert_eq!(turns.len(), 1, "the turn is kept: {turns:?}");
    assert_eq!(turns[0]["source"], "send_message");
    app.shutdown().await;
}

/// A caller's trace joined from a `traceparent` header as from `_meta` (which wins when
/// both are sent), in both eras, and what the caller says about itself (client name and
/// version, Claude Code's tool use id, VS Code's ids) recorded on the call's span, where
/// `list_traces` finds it by client and by id.
#[tokio::test]
async fn a_call_joins_the_callers_trace_from_a_header_and_carries_its_ids() {
    let (app, _llm) = bot_with(vec![], &[]).await;
    let header_parent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let meta_trace = "0af7651916cd43dd8448eb211c80319c";
    let meta_parent = format!("00-{meta_trace}-b7ad6b7169203331-01");

    // Legacy, as Claude Code sends it: clientInfo at initialize, its tool use id and a
    // progress token on every call; the trace parent in a header.
    let init = common::post(
        &app,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "claude-code", "version": "2.1.337"}}}),
        &[],
    )
    .await;
    let session = init.header("mcp-session-id").unwrap().to_string();
    let call = common::post(
        &app,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "list_agents", "arguments": {},
            "_meta": {"claudecode/toolUseId": "toolu_01JoinMe", "progressToken": 2}}}),
        &[
            ("mcp-session-id", &session),
            ("mcp-protocol-version", "2025-11-25"),
            ("traceparent", &header_parent),
        ],
    )
    .await;
    assert!(!is_error(call.result()), "{}", call.raw);

    // Modern, as VS Code sends it: the trace parent in `_meta` and in a header.
    let vscode = common::modern(
        &app,
        3,
        "tools/call",
        json!({"name": "health", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/clientInfo": {"name": "Visual Studio Code", "version": "1.107.0"},
            "vscode.conversationId": "conv-7", "vscode.requestId": "req-9",
            "traceparent": meta_parent}}),
    )
    .await;
    assert!(!is_error(vscode.result()), "{}", vscode.raw);
    // The same with only the header: `common::modern` sends no traceparent of its own.
    let header_only = common::post(
        &app,
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "list_tools", "arguments": {}, "_meta": common::modern_meta()}}),
        &[
            ("mcp-protocol-version", common::MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", "list_tools"),
            ("traceparent", &header_parent),
        ],
    )
    .await;
    assert!(!is_error(header_only.result()), "{}", header_only.raw);

    let by_id = listed(&app, json!({"caller_id": "toolu_01JoinMe"})).await;
    assert_eq!(by_id.len(), 1, "{by_id:?}");
    assert_eq!(by_id[0]["tool"], "list_agents");
    assert_eq!(by_id[0]["trace_id"], CALLER_TRACE, "joined from the header");
    assert_eq!(by_id[0]["remote_parent_span_id"], CALLER_SPAN);
    let span = call_span(&app, &by_id[0]).await;
    assert_eq!(span["attributes"]["mcp.client.name"], "claude-code");
    assert_eq!(span["attributes"]["mcp.client.version"], "2.1.337");
    assert_eq!(span["attributes"]["claudecode/toolUseId"], "toolu_01JoinMe");

    let by_client = listed(&app, json!({"client": "Visual Studio Code"})).await;
    assert_eq!(by_client.len(), 1, "{by_client:?}");
    assert_eq!(
        by_client[0]["trace_id"], meta_trace,
        "`_meta` wins over the header"
    );
    let span = call_span(&app, &by_client[0]).await;
    assert_eq!(span["attributes"]["vscode.conversationId"], "conv-7");
    assert_eq!(span["attributes"]["vscode.requestId"], "req-9");
    assert_eq!(listed(&app, json!({"caller_id": "req-9"})).await.len(), 1);

    let header_only = listed(&app, json!({"source": "mcp"})).await;
    let list_tools = header_only
        .iter()
        .find(|t| t["tool"] == "list_tools")
        .unwrap();
    assert_eq!(
        list_tools["trace_id"], CALLER_TRACE,
        "modern, joined from the header"
    );
    // A value of one client is not another's, and wildcards are matched as text.
    assert!(listed(&app, json!({"client": "claude"})).await.is_empty());
    assert!(
        listed(&app, json!({"caller_id": "toolu_01%"}))
            .await
            .is_empty()
    );
    assert!(
        listed(&app, json!({"caller_id": "toolu_01_oinMe"}))
            .await
            .is_empty()
    );
    app.shutdown().await;
}
