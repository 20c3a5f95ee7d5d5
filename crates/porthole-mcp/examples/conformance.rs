//! The MCP conformance fixture: the tools, resources and prompts the official
//! conformance suite (`@modelcontextprotocol/conformance`) calls, served by this crate
//! over the real HTTP transport, behind the same guards as the bot.
//!
//! ```text
//! PORT=0 MCP_SERVER_SECRET=<token> cargo run -p porthole-mcp --example conformance
//! ```
//!
//! It prints `listening on http://127.0.0.1:PORT` once ready. `scripts/conformance.sh
//! --fixture` starts it and runs both protocol revisions against it. Every capability
//! used here (server→client requests, MRTR, progress, logging, resumable streams,
//! subscriptions, completion, `x-mcp-header`) is a general feature of the crate, not a
//! fixture special case.

#[path = "conformance_fixture/tasks.rs"]
mod task_fixtures;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use porthole_mcp::input_request;
use porthole_mcp::jsonrpc::MISSING_CLIENT_CAPABILITY;
use porthole_mcp::{
    Annotations, Auth, CallToolResult, InputRequired, McpServer, Notifier, Outcome, Prompt,
    PromptArgument, PromptMessages, PromptSpec, RequestContext, ResourceProvider, RpcError, Tool,
    ToolSpec,
};
use serde_json::{Map, Value, json};

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

type Result = std::result::Result<Outcome<CallToolResult>, RpcError>;

fn text(t: impl Into<String>) -> Result {
    Ok(Outcome::Complete(CallToolResult::text(t)))
}

fn blocks(content: Vec<Value>) -> Result {
    Ok(Outcome::Complete(CallToolResult {
        content,
        structured: None,
        is_error: false,
    }))
}

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn string_args(names: &[&str]) -> Value {
    let properties: Map<String, Value> = names
        .iter()
        .map(|n| (n.to_string(), json!({"type": "string"})))
        .collect();
    json!({"type": "object", "properties": properties, "required": names})
}

/// One fixture tool; `call` dispatches on its name.
struct Fixture {
    name: &'static str,
    description: &'static str,
    schema: Value,
    notifier: Notifier,
}

/// A fixture tool's spec: a name, a description and a hand-written input schema (the
/// suite's scenarios fix each schema to the letter).
fn fixture_spec(name: &str, description: &str, schema: &Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        title: None,
        description: description.into(),
        input_schema: schema.clone(),
        output_schema: None,
        annotations: Annotations::default(),
        max_result_chars: None,
    }
}

fn elicit(message: &str, properties: Value, required: &[&str]) -> Value {
    input_request(
        "elicitation/create",
        json!({"mode": "form", "message": message,
               "requestedSchema": {"type": "object", "properties": properties, "required": required}}),
    )
}

fn sample(prompt: &str, max_tokens: u32) -> Value {
    input_request(
        "sampling/createMessage",
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": max_tokens}),
    )
}

/// An accepted elicitation answer's `content[field]` as a string.
fn accepted(ctx: &RequestContext, key: &str, field: &str) -> Option<String> {
    let answer = ctx.input_response(key)?;
    if answer["action"] != "accept" {
        return None;
    }
    answer["content"][field].as_str().map(str::to_string)
}

fn sampled_text(ctx: &RequestContext, key: &str) -> Option<String> {
    ctx.input_response(key)?["content"]["text"]
        .as_str()
        .map(str::to_string)
}

fn several(requests: Vec<(&str, Value)>, state: Option<String>) -> Result {
    Ok(Outcome::InputRequired(InputRequired {
        input_requests: requests
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        request_state: state,
    }))
}

impl Fixture {
    async fn legacy_elicit(&self, ctx: &RequestContext, params: Value) -> Result {
        let answer = ctx
            .request_client("elicitation/create", params, "elicitation")
            .await?;
        text(format!(
            "User response: action={}, content={}",
            answer["action"].as_str().unwrap_or("unknown"),
            answer["content"]
        ))
    }
}

#[async_trait]
impl Tool for Fixture {
    fn spec(&self) -> ToolSpec {
        fixture_spec(self.name, self.description, &self.schema)
    }

    async fn call(&self, args: Value, ctx: &RequestContext) -> Result {
        match self.name {
            "test_simple_text" => text("This is a simple text response for testing."),
            "test_image_content" => blocks(vec![json!({"type": "image", "data": PNG, "mimeType": "image/png"})]),
            "test_audio_content" => blocks(vec![json!({"type": "audio", "data": WAV, "mimeType": "audio/wav"})]),
            "test_embedded_resource" => blocks(vec![json!({"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}})]),
            "test_multiple_content_types" => blocks(vec![
                json!({"type": "text", "text": "Multiple content types test:"}),
                json!({"type": "image", "data": PNG, "mimeType": "image/png"}),
                json!({"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                    "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}),
            ]),
            "test_error_handling" => Ok(Outcome::Complete(CallToolResult::error(
                "This tool intentionally returns an error for testing",
            ))),
            "test_tool_with_progress" => {
                for step in [0.0, 50.0, 100.0] {
                    ctx.progress(step, Some(100.0), None);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                text("Progress test completed.")
            }
            "test_tool_with_logging" => {
                for line in ["Tool execution started", "Tool processing data", "Tool execution completed"] {
                    ctx.log("info", "conformance", json!(line));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                text("Logging test completed.")
            }
            "test_logging_tool" => {
                ctx.log("info", "conformance", json!("a log line, sent only when the client asked for a level"));
                text("Logged.")
            }
            "test_sampling" => {
                let prompt = args["prompt"].as_str().unwrap_or_default();
                let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 100});
                let answer = ctx.request_client("sampling/createMessage", params, "sampling").await?;
                text(format!("LLM response: {}", answer["content"]["text"].as_str().unwrap_or_default()))
            }
            "test_elicitation" => {
                let message = args["message"].as_str().unwrap_or("Please provide your information");
                self.legacy_elicit(ctx, json!({"message": message, "requestedSchema": {"type": "object",
                    "properties": {"username": {"type": "string", "description": "Your username"},
                                   "email": {"type": "string", "description": "Your email"}},
                    "required": ["username"]}})).await
            }
            "test_elicitation_sep1034_defaults" => {
                self.legacy_elicit(ctx, json!({"message": "Please review and update the form fields with defaults",
                    "requestedSchema": {"type": "object", "properties": {
                        "name": {"type": "string", "description": "User name", "default": "John Doe"},
                        "age": {"type": "integer", "description": "User age", "default": 30},
                        "score": {"type": "number", "description": "User score", "default": 95.5},
                        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "description": "Verification status", "default": true}}}})).await
            }
            "test_elicitation_sep1330_enums" => {
                self.legacy_elicit(ctx, json!({"message": "Please select options from the enum fields",
                    "requestedSchema": {"type": "object", "properties": {
                        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "oneOf": [
                            {"const": "value1", "title": "First Option"},
                            {"const": "value2", "title": "Second Option"},
                            {"const": "value3", "title": "Third Option"}]},
                        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                                       "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"}]}}}}})).await
            }
            "test_reconnection" => {
                // Drop the connection mid-call; the result waits for the client to resume.
                tokio::time::sleep(Duration::from_millis(100)).await;
                ctx.disconnect_stream();
                tokio::time::sleep(Duration::from_millis(500)).await;
                text("Reconnection test completed: the result was delivered after the client resumed.")
            }
            "json_schema_2020_12_tool" => text(format!("Received: {args}")),
            "test_custom_header" => text(format!("Region: {}", args["region"].as_str().unwrap_or_default())),
            "test_missing_capability" => {
                if !ctx.has_capability("sampling") {
                    return Err(RpcError::new(MISSING_CLIENT_CAPABILITY, "Missing required client capability: sampling")
                        .with_data(json!({"requiredCapabilities": {"sampling": {}}})));
                }
                text("The client declared sampling.")
            }
            "test_streaming_elicitation" => text("Protocol 2026-07-28 sends no requests on a response stream; use input_required results instead."),
            "test_trigger_tool_change" => {
                self.notifier.tools_changed();
                text("Tool list change announced.")
            }
            "test_trigger_prompt_change" => {
                self.notifier.prompts_changed();
                text("Prompt list change announced.")
            }
            "test_input_required_result_elicitation" => match accepted(ctx, "user_name", "name") {
                Some(name) => text(format!("Hello, {name}!")),
                None => Ok(Outcome::InputRequired(InputRequired::ask(
                    "user_name",
                    elicit("What is your name?", json!({"name": {"type": "string"}}), &["name"]),
                    None,
                ))),
            },
            "test_input_required_result_sampling" => match sampled_text(ctx, "capital_question") {
                Some(answer) => text(format!("The model answered: {answer}")),
                None => Ok(Outcome::InputRequired(InputRequired::ask("capital_question", sample("What is the capital of France?", 100), None))),
            },
            "test_input_required_result_list_roots" => match ctx.input_response("client_roots").and_then(|r| r["roots"].as_array()) {
                Some(roots) => text(format!("The client has {} roots.", roots.len())),
                None => Ok(Outcome::InputRequired(InputRequired::ask("client_roots", input_request("roots/list", json!({})), None))),
            },
            "test_input_required_result_request_state" | "test_input_required_result_tampered_state" => {
                let state = ctx.request_state()?;
                match (state, ctx.input_response("confirm")) {
                    (Some(state), Some(answer)) if state["tool"] == self.name && answer["action"] == "accept" => {
                        text("state-ok: requestState validated")
                    }
                    _ => Ok(Outcome::InputRequired(InputRequired::ask(
                        "confirm",
                        elicit("Please confirm", json!({"ok": {"type": "boolean"}}), &["ok"]),
                        Some(ctx.seal_state(&json!({"tool": self.name}))),
                    ))),
                }
            }
            "test_input_required_result_multiple_inputs" => {
                let name = accepted(ctx, "user_name", "name");
                let greeting = sampled_text(ctx, "greeting");
                let roots = ctx.input_response("client_roots").and_then(|r| r["roots"].as_array().cloned());
                let state_ok = ctx.request_state()?.is_some_and(|s| s["tool"] == self.name);
                match (name, greeting, roots, state_ok) {
                    (Some(name), Some(greeting), Some(roots), true) => {
                        text(format!("{greeting} {name}; {} roots.", roots.len()))
                    }
                    _ => several(
                        vec![
                            ("user_name", elicit("What is your name?", json!({"name": {"type": "string"}}), &["name"])),
                            ("greeting", sample("Generate a greeting", 50)),
                            ("client_roots", input_request("roots/list", json!({}))),
                        ],
                        Some(ctx.seal_state(&json!({"tool": self.name}))),
                    ),
                }
            }
            "test_input_required_result_multi_round" => {
                let state = ctx.request_state()?;
                let step = state.as_ref().and_then(|s| s["step"].as_u64()).unwrap_or(0);
                match step {
                    1 => match accepted(ctx, "step1", "name") {
                        Some(name) => Ok(Outcome::InputRequired(InputRequired::ask(
                            "step2",
                            elicit("Step 2: What is your favorite color?", json!({"color": {"type": "string"}}), &["color"]),
                            Some(ctx.seal_state(&json!({"step": 2, "name": name}))),
                        ))),
                        None => Err(RpcError::invalid_params("step1 needs an accepted answer with a name")),
                    },
                    2 => match accepted(ctx, "step2", "color") {
                        Some(color) => text(format!(
                            "{} likes {color}.",
                            state.as_ref().and_then(|s| s["name"].as_str()).unwrap_or("someone")
                        )),
                        None => Err(RpcError::invalid_params("step2 needs an accepted answer with a color")),
                    },
                    _ => Ok(Outcome::InputRequired(InputRequired::ask(
                        "step1",
                        elicit("Step 1: What is your name?", json!({"name": {"type": "string"}}), &["name"]),
                        Some(ctx.seal_state(&json!({"step": 1}))),
                    ))),
                }
            }
            "test_input_required_result_capabilities" => {
                let mut requests = Vec::new();
                if ctx.has_capability("sampling") {
                    requests.push(("capital_question", sample("What is the capital of France?", 100)));
                }
                if ctx.has_capability("elicitation") {
                    requests.push(("user_name", elicit("What is your name?", json!({"name": {"type": "string"}}), &["name"])));
                }
                if requests.is_empty() || requests.iter().all(|(k, _)| ctx.input_response(k).is_some()) {
                    return text("Asked only for what the client can provide.");
                }
                several(requests, None)
            }
            other => Err(RpcError::internal(format!("fixture tool {other} has no behaviour"))),
        }
    }
}

fn tools(notifier: &Notifier) -> Vec<Arc<dyn Tool>> {
    let fixture = |name, description, schema| -> Arc<dyn Tool> {
        Arc::new(Fixture {
            name,
            description,
            schema,
            notifier: notifier.clone(),
        })
    };
    let mut all = vec![
        fixture("test_simple_text", "Returns simple text", no_args()),
        fixture("test_image_content", "Returns a PNG image", no_args()),
        fixture("test_audio_content", "Returns a WAV clip", no_args()),
        fixture("test_embedded_resource", "Returns an embedded resource", no_args()),
        fixture("test_multiple_content_types", "Returns text, an image and a resource", no_args()),
        fixture("test_error_handling", "Always fails with isError", no_args()),
        fixture("test_tool_with_progress", "Reports progress 0, 50, 100", no_args()),
        fixture("test_tool_with_logging", "Logs three lines while it runs", no_args()),
        fixture("test_logging_tool", "Logs one line (2026: only with a logLevel)", no_args()),
        fixture("test_sampling", "Asks the client's model", string_args(&["prompt"])),
        fixture("test_elicitation", "Asks the user for details", string_args(&["message"])),
        fixture("test_elicitation_sep1034_defaults", "Elicitation with default values", no_args()),
        fixture("test_elicitation_sep1330_enums", "Elicitation with enum fields", no_args()),
        fixture("test_reconnection", "Drops the SSE connection mid-call and finishes after the client resumes", no_args()),
        fixture("test_missing_capability", "Needs the sampling capability", no_args()),
        fixture("test_streaming_elicitation", "Never sends requests on a 2026 response stream", no_args()),
        fixture("test_trigger_tool_change", "Announces a tool list change", no_args()),
        fixture("test_trigger_prompt_change", "Announces a prompt list change", no_args()),
        fixture(
            "test_custom_header",
            "Echoes a parameter mirrored in the Mcp-Param-Region header",
            json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}, "required": ["region"]}),
        ),
        fixture(
            "json_schema_2020_12_tool",
            "Has a JSON Schema 2020-12 input schema, listed unchanged",
            serde_json::from_str(r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##).expect("valid JSON"),
        ),
    ];
    for (name, description) in [
        (
            "test_input_required_result_elicitation",
            "MRTR: asks for a name",
        ),
        (
            "test_input_required_result_sampling",
            "MRTR: asks the client's model",
        ),
        (
            "test_input_required_result_list_roots",
            "MRTR: asks for the client's roots",
        ),
        (
            "test_input_required_result_request_state",
            "MRTR: round-trips sealed state",
        ),
        (
            "test_input_required_result_tampered_state",
            "MRTR: rejects altered state",
        ),
        (
            "test_input_required_result_multiple_inputs",
            "MRTR: asks for three inputs at once",
        ),
        (
            "test_input_required_result_multi_round",
            "MRTR: asks twice, in two rounds",
        ),
        (
            "test_input_required_result_capabilities",
            "MRTR: asks only for what the client supports",
        ),
    ] {
        all.push(fixture(name, description, no_args()));
    }
    all
}

struct FixtureResources;

#[async_trait]
impl ResourceProvider for FixtureResources {
    fn resources(&self) -> Vec<Value> {
        vec![
            json!({"uri": "test://static-text", "name": "static-text", "mimeType": "text/plain", "description": "Static text"}),
            json!({"uri": "test://static-binary", "name": "static-binary", "mimeType": "image/png", "description": "A PNG"}),
            json!({"uri": "test://watched-resource", "name": "watched-resource", "mimeType": "text/plain", "description": "Subscribable"}),
        ]
    }

    fn templates(&self) -> Vec<Value> {
        vec![
            json!({"uriTemplate": "test://template/{id}/data", "name": "template", "mimeType": "application/json",
                    "description": "Data by id"}),
        ]
    }

    async fn read(
        &self,
        uri: &str,
        _ctx: &RequestContext,
    ) -> std::result::Result<Option<Outcome<Vec<Value>>>, RpcError> {
        let contents = match uri {
            "test://static-text" => {
                json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
            }
            "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
            "test://watched-resource" => {
                json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content."})
            }
            _ => {
                let Some(id) = uri
                    .strip_prefix("test://template/")
                    .and_then(|r| r.strip_suffix("/data"))
                else {
                    return Ok(None);
                };
                json!({"uri": uri, "mimeType": "application/json",
                       "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string()})
            }
        };
        Ok(Some(Outcome::Complete(vec![contents])))
    }
}

struct FixturePrompt {
    name: &'static str,
    arguments: &'static [&'static str],
}

#[async_trait]
impl Prompt for FixturePrompt {
    fn spec(&self) -> PromptSpec {
        PromptSpec {
            name: self.name.into(),
            title: None,
            description: format!("Conformance prompt {}", self.name),
            arguments: self
                .arguments
                .iter()
                .map(|a| PromptArgument {
                    name: a.to_string(),
                    description: format!("The {a} argument"),
                    required: true,
                })
                .collect(),
        }
    }

    async fn get(
        &self,
        args: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> std::result::Result<Outcome<PromptMessages>, RpcError> {
        let arg = |n: &str| {
            args.get(n)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let text = |t: String| json!({"type": "text", "text": t});
        Ok(Outcome::Complete(match self.name {
            "test_simple_prompt" => {
                PromptMessages::user(vec![text("This is a simple prompt for testing.".into())])
            }
            "test_prompt_with_arguments" => PromptMessages::user(vec![text(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            ))]),
            "test_prompt_with_embedded_resource" => PromptMessages::user(vec![
                json!({"type": "resource", "resource": {"uri": arg("resourceUri"), "mimeType": "text/plain",
                        "text": "Embedded resource content for testing."}}),
                text("Please process the embedded resource above.".into()),
            ]),
            "test_prompt_with_image" => PromptMessages::user(vec![
                json!({"type": "image", "data": PNG, "mimeType": "image/png"}),
                text("Please analyze the image above.".into()),
            ]),
            _ => match accepted(ctx, "user_context", "context") {
                Some(context) => {
                    PromptMessages::user(vec![text(format!("Use this context: {context}"))])
                }
                None => {
                    return Ok(Outcome::InputRequired(InputRequired::ask(
                        "user_context",
                        elicit(
                            "What context should the prompt use?",
                            json!({"context": {"type": "string"}}),
                            &["context"],
                        ),
                        None,
                    )));
                }
            },
        }))
    }

    async fn complete(&self, argument: &str, value: &str) -> Vec<String> {
        if self.name != "test_prompt_with_arguments" || argument != "arg1" {
            return Vec::new();
        }
        ["paris", "park", "parse", "test", "testValue1"]
            .iter()
            .filter(|v| v.starts_with(value))
            .map(|v| v.to_string())
            .collect()
    }
}

fn prompts() -> Vec<Arc<dyn Prompt>> {
    [
        ("test_simple_prompt", &[][..]),
        ("test_prompt_with_arguments", &["arg1", "arg2"][..]),
        ("test_prompt_with_embedded_resource", &["resourceUri"][..]),
        ("test_prompt_with_image", &[][..]),
        ("test_input_required_result_prompt", &[][..]),
    ]
    .into_iter()
    .map(|(name, arguments)| Arc::new(FixturePrompt { name, arguments }) as Arc<dyn Prompt>)
    .collect()
}

#[tokio::main]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let secret = std::env::var("MCP_SERVER_SECRET")
        .ok()
        .filter(|s| !s.is_empty());
    let auth = match &secret {
        Some(s) => Auth::bearer(s),
        None => Auth::Disabled,
    };
    let notifier = Notifier::default();
    let server = McpServer::builder("porthole-conformance", env!("CARGO_PKG_VERSION"))
        .auth(auth)
        .signing_secret(secret)
        .notifier(notifier.clone())
        .tools(tools(&notifier))
        .tools(task_fixtures::tools())
        .skills_dir(
            std::env::var("SKILLS_DIR")
                .unwrap_or_else(|_| {
                    concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/examples/conformance_fixture/skills"
                    )
                    .into()
                })
                .into(),
        )
        .resources(Arc::new(FixtureResources))
        .prompts(prompts())
        .build()?;
    let port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    let app = server
        .router()
        .into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app).await?;
    Ok(())
}
