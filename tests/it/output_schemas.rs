//! Every tool's answer says what it holds: called for real (a bot with a fake provider
//! and the stdio MCP fixture, after a turn that used a tool and one that failed), each
//! tool's `structuredContent` must validate against its `outputSchema` and name no
//! member the schema leaves out, at any depth: an object the schema leaves bare
//! (`{"type": "object"}` with no `properties`) counts as undeclared unless the schema
//! says it is a free-form map (`additionalProperties` given).

use crate::common;
use crate::fake_llm;

use std::sync::Mutex;

use common::{
    MODERN, call_tool, error_text, is_error, modern, stdio_fixture_config, wait_for_tool,
};
use fake_llm::Turn;
use serde_json::{Value, json};

/// A log filter the test holds, so `set_log_level` has one to change.
struct HeldFilter(Mutex<String>);

impl porthole::diagnostics::LogFilterControl for HeldFilter {
    fn current(&self) -> String {
        self.0.lock().unwrap().clone()
    }
    fn set(&self, filter: &str) -> Result<(), String> {
        *self.0.lock().unwrap() = filter.to_string();
        Ok(())
    }
}

/// The members of `value` that `schema` does not declare, as paths.
fn undeclared(value: &Value, schema: &Value, path: &str, found: &mut Vec<String>) {
    Check {
        root: schema,
        found,
    }
    .walk(value, schema, path);
}

/// A walk over an answer beside its schema; `root` is where `$ref`s point into.
struct Check<'a> {
    root: &'a Value,
    found: &'a mut Vec<String>,
}

impl<'a> Check<'a> {
    fn walk(&mut self, value: &Value, schema: &Value, path: &str) {
        let schema = self.resolved(schema);
        walk_one(self, value, schema, path);
    }

    /// `schema`, or what its `$ref` (a pointer into the root, `#/…`) points at.
    fn resolved<'s>(&self, schema: &'s Value) -> &'s Value
    where
        'a: 's,
    {
        let root: &'a Value = self.root;
        match schema["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => root.pointer(pointer).unwrap_or(schema),
            None => schema,
        }
    }
}

fn walk_one(check: &mut Check<'_>, value: &Value, schema: &Value, path: &str) {
    let schema = alternative_for(value, schema);
    // A schema that constrains nothing declares a free-form value (a tool's arguments).
    const CONSTRAINTS: [&str; 10] = [
        "type",
        "properties",
        "items",
        "additionalProperties",
        "oneOf",
        "anyOf",
        "allOf",
        "enum",
        "const",
        "$ref",
    ];
    if schema == &Value::Bool(true)
        || schema
            .as_object()
            .is_some_and(|s| !CONSTRAINTS.iter().any(|c| s.contains_key(*c)))
    {
        return;
    }
    match value {
        Value::Object(members) => {
            let properties = schema["properties"].as_object();
            let additional = schema.get("additionalProperties");
            if properties.is_none() && additional.is_none() {
                check.found.push(format!(
                    "{path}: an object whose members the schema does not name"
                ));
                return;
            }
            for (key, member) in members {
                let inner = format!("{path}.{key}");
                match (properties.and_then(|p| p.get(key)), additional) {
                    (Some(declared), _) => check.walk(member, declared, &inner),
                    (None, Some(Value::Object(map))) => {
                        check.walk(member, &Value::Object(map.clone()), &inner)
                    }
                    (None, Some(Value::Bool(true))) => {}
                    _ => check.found.push(format!("{inner}: not in the schema")),
                }
            }
        }
        Value::Array(items) if !items.is_empty() => match schema.get("items") {
            Some(item_schema) => {
                for (i, item) in items.iter().enumerate() {
                    check.walk(item, item_schema, &format!("{path}[{i}]"));
                }
            }
            None => check.found.push(format!(
                "{path}: an array whose items the schema does not describe"
            )),
        },
        _ => {}
    }
}

/// The branch of a `oneOf`/`anyOf` that describes `value`'s kind (the schema itself when
/// it has none).
fn alternative_for<'a>(value: &Value, schema: &'a Value) -> &'a Value {
    let alternatives = schema["oneOf"].as_array().or(schema["anyOf"].as_array());
    let Some(alternatives) = alternatives else {
        return schema;
    };
    let kind = match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
    };
    alternatives
        .iter()
        .find(|a| match &a["type"] {
            Value::String(t) => t == kind || (t == "integer" && kind == "number"),
            Value::Array(ts) => ts.iter().any(|t| t == kind),
            _ => false,
        })
        .unwrap_or(schema)
}

#[test]
fn the_check_finds_undeclared_members_at_any_depth() {
    let schema = json!({"type": "object", "properties": {
        "rows": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
        "bare": {"type": "object"},
        "map": {"type": "object", "additionalProperties": {"type": "integer"}},
    }});
    let value =
        json!({"rows": [{"id": "a", "extra": 1}], "bare": {"x": 1}, "map": {"a": 1}, "more": 2});
    let mut found = Vec::new();
    undeclared(&value, &schema, "$", &mut found);
    found.sort();
    assert_eq!(
        found,
        [
            "$.bare: an object whose members the schema does not name",
            "$.more: not in the schema",
            "$.rows[0].extra: not in the schema",
        ]
    );
}

/// Arguments for each tool, given what the setup made; `None` for a tool this test
/// does not know yet (the test then fails, naming it).
fn arguments(name: &str, made: &Value) -> Option<Value> {
    Some(match name {
        "db_query" => json!({"sql": "SELECT id, title FROM conversations LIMIT 1"}),
        "get_llm_call" => json!({"span_id": made["llm_call"]}),
        "get_tool_schema" => json!({"name": "calculator"}),
        "get_trace" => json!({"trace_id": made["trace_id"]}),
        "list_messages" => json!({"conversation_id": made["conversation_id"]}),
        "replay_llm_call" => json!({"span_id": made["llm_call"]}),
        "replay_llm_calls" => json!({"conversation_id": made["conversation_id"], "limit": 1,
                                     "expect": {"text_contains": "42"}}),
        "replay_turn" => {
            json!({"span_id": made["llm_call"], "expect": {"calls_tool": "calculator"}})
        }
        "run_task" => json!({"id": made["task_id"]}),
        "save_replay_set" => {
            json!({"name": "schema-check", "conversation_id": made["conversation_id"]})
        }
        "delete_replay_set" => json!({"name": "no-such-set"}),
        "run_tool" => json!({"tool_name": "calculator", "parameters": {"expression": "2+2"}}),
        "send_message" => json!({"content": "what is 6 times 7?"}),
        "set_log_level" => json!({"filter": "info"}),
        "toggle_mcp_server" => json!({"name": "fixture", "enabled": true}),
        "toggle_tool" => json!({"name": "calculator", "enabled": true}),
        "get_agent_state" | "get_config" | "get_llm_calls" | "get_trace_stats" | "health"
        | "last_error" | "list_agents" | "list_conversations" | "list_mcp_servers"
        | "list_skills" | "list_tasks" | "list_replay_sets" | "list_tools" | "list_traces"
        | "server_log" | "web_log" => json!({}),
        _ => return None,
    })
}

#[tokio::test]
async fn every_tool_answers_only_what_its_output_schema_declares() {
    if !common::has_python() {
        return;
    }
    // The turns the setup plays, then the replays' answers, in the order they are asked.
    let llm = fake_llm::start(vec![
        Turn::ToolCall("calculator", json!({"expression": "6*7"})),
        Turn::Text(vec!["It is 42."]),
        Turn::ToolCall("no_such_tool", json!({})),
        Turn::Text(vec!["That failed."]),
        Turn::Text(vec!["42."]),
        Turn::Text(vec!["Forty-two."]),
        // replay_turn leaves the recording at once: its divergence is checked too.
        Turn::ToolCall("calculator", json!({"expression": "7*6"})),
        Turn::Text(vec!["It is 42 again."]),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mcp_json = stdio_fixture_config(dir.path(), json!({})).unwrap();
    let base = format!("{}/v1", llm.url());
    // Lines in the log buffer, from the server and from the page, so the log tools'
    // answers hold lines to check.
    use tracing_subscriber::layer::SubscriberExt;
    let buffer = porthole::logs::buffer::LogBuffer::new(100);
    let subscriber = tracing_subscriber::registry().with(buffer.layer().skipping("web_console"));
    tracing::subscriber::with_default(subscriber, || {
        tracing::warn!(target: "porthole::bot", attempt = 2, "a server line");
    });
    buffer.push_web("error", "a page line", None);
    let logging = porthole::app::Logging {
        buffer: Some(buffer),
        filter: Some(std::sync::Arc::new(HeldFilter(Mutex::new("info".into())))),
        ..Default::default()
    };
    let app = common::start_bot_with(
        &[
            ("LLM_PROVIDER", "openai"),
            ("LLM_BASE_URL", base.as_str()),
            ("LLM_API_KEY", "sk-test-key-0123456789abcdef"),
            ("LLM_MODEL", "fake-model"),
            ("MCP_SERVERS_CONFIG", mcp_json.as_str()),
        ],
        logging,
    )
    .await;
    wait_for_tool(&app, "mcp.fixture__echo", true).await;

    let turn = call_tool(
        &app,
        "send_message",
        json!({"content": "what is 6 times 7?"}),
    )
    .await;
    assert!(!is_error(&turn), "{}", error_text(&turn));
    let turn = &turn["structuredContent"];
    let failing = call_tool(
        &app,
        "send_message",
        json!({"content": "use a missing tool"}),
    )
    .await;
    assert!(!is_error(&failing), "{}", error_text(&failing));
    let calls = call_tool(&app, "get_llm_calls", json!({"limit": 10})).await;
    let oldest_call = calls["structuredContent"]["calls"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["span_id"]
        .clone();
    let task = app
        .bot
        .schedule
        .create(
            "heartbeat",
            "Checks the clock every hour",
            "0 * * * *",
            json!({"tool": "current_time"}),
            porthole::bot::schedule::RunAs::User,
        )
        .await
        .unwrap();
    // A set saved first, so listing the sets shows one.
    let saved = call_tool(
        &app,
        "save_replay_set",
        json!({"name": "saved-first", "conversation_id": turn["conversation_id"]}),
    )
    .await;
    assert!(!is_error(&saved), "{}", error_text(&saved));
    let made = json!({
        "conversation_id": turn["conversation_id"],
        "trace_id": turn["trace_id"],
        "llm_call": oldest_call,
        "task_id": task.id,
    });

    let listed = modern(&app, 1, "tools/list", json!({})).await;
    let tools = listed.result()["tools"].as_array().unwrap().clone();
    let mut problems = Vec::new();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        let Some(schema) = tool.get("outputSchema") else {
            problems.push(format!("{name}: declares no outputSchema"));
            continue;
        };
        let Some(args) = arguments(name, &made) else {
            problems.push(format!(
                "{name}: this test has no arguments for it (add them)"
            ));
            continue;
        };
        let answer = call_tool(&app, name, args).await;
        if is_error(&answer) {
            problems.push(format!(
                "{name}: answered an error: {}",
                error_text(&answer)
            ));
            continue;
        }
        let content = &answer["structuredContent"];
        if name == "replay_turn" {
            assert!(
                content["diverged_at"].is_object(),
                "a divergence to check: {content}"
            );
        }
        if name == "list_replay_sets" {
            assert!(
                !content["sets"].as_array().unwrap().is_empty(),
                "a set to check"
            );
        }
        if name.ends_with("_log") {
            assert!(
                !content["lines"].as_array().unwrap().is_empty(),
                "{name} has lines to check"
            );
        }
        let validator = jsonschema::validator_for(schema).unwrap();
        for error in validator.iter_errors(content) {
            problems.push(format!(
                "{name}: does not validate: {error} at {}",
                error.instance_path()
            ));
        }
        let mut found = Vec::new();
        undeclared(content, schema, "$", &mut found);
        problems.extend(found.into_iter().map(|f| format!("{name}: {f}")));
    }
    assert!(tools.len() >= 32, "every tool was listed: {}", tools.len());
    assert!(
        problems.is_empty(),
        "{} problems (protocol {MODERN}):\n{}",
        problems.len(),
        problems.join("\n")
    );
    app.shutdown().await;
}
