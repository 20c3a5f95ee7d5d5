//! The Anthropic Messages API (`POST {LLM_BASE_URL}/v1/messages`), streamed.

use serde_json::{Map, Value, json};

use super::streamed::{PartialCall, StreamedReply, WireFormat};
use super::{ChatRequest, Endpoint, LlmError, ToolNames, Usage};
use crate::config::LlmConfig;
use crate::model::Role;

const API_VERSION: &str = "2023-06-01";
const MAX_TOKENS: u32 = 4096;

pub struct AnthropicProvider {
    endpoint: Endpoint,
}

impl AnthropicProvider {
    pub fn new(config: &LlmConfig) -> Self {
        AnthropicProvider {
            endpoint: Endpoint::new(config, "/v1/messages"),
        }
    }
}

impl WireFormat for AnthropicProvider {
    const PROVIDER: &'static str = "anthropic";

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The API requires `max_tokens`.
    fn default_parameters(&self) -> Map<String, Value> {
        Map::from_iter([
            ("model".to_string(), json!(self.endpoint.model)),
            ("max_tokens".to_string(), json!(MAX_TOKENS)),
        ])
    }

    fn stream_parameters(&self) -> Value {
        json!({"stream": true})
    }

    fn content(&self, request: &ChatRequest<'_>, names: &ToolNames) -> Map<String, Value> {
        // Anthropic wants tool results as user messages made of `tool_result` blocks,
        // and consecutive ones merged into one message.
        let mut messages: Vec<Value> = Vec::new();
        for m in request.messages {
            let (role, blocks) = match m.role {
                Role::Tool => (
                    "user",
                    vec![json!({
                        "type": "tool_result",
                        "tool_use_id": m.tool_call_id,
                        "content": m.content,
                    })],
                ),
                Role::Assistant => {
                    let mut blocks = Vec::new();
                    if !m.content.is_empty() {
                        blocks.push(json!({"type": "text", "text": m.content}));
                    }
                    for c in &m.tool_calls {
                        blocks.push(json!({"type": "tool_use", "id": c.id, "name": names.wire(&c.name), "input": c.arguments}));
                    }
                    ("assistant", blocks)
                }
                Role::User | Role::System => {
                    ("user", vec![json!({"type": "text", "text": m.content})])
                }
            };
            if blocks.is_empty() {
                continue;
            }
            match messages.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(existing) = last["content"].as_array_mut() {
                        existing.extend(blocks);
                    }
                }
                _ => messages.push(json!({"role": role, "content": blocks})),
            }
        }
        let mut content = Map::new();
        content.insert("system".into(), json!(request.system));
        content.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|t| json!({"name": names.wire(&t.name), "description": t.description, "input_schema": t.input_schema}))
                .collect();
            content.insert("tools".into(), tools);
        }
        content
    }

    async fn post(&self, body: &Value) -> Result<reqwest::Response, LlmError> {
        self.endpoint
            .post(body, &[("anthropic-version", API_VERSION)], |http, key| {
                http.header("x-api-key", key)
            })
            .await
    }

    fn on_event(&self, data: &str, reply: &mut StreamedReply<'_>) -> Result<bool, LlmError> {
        let event: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::Malformed(format!("bad stream event ({e})")))?;
        match event["type"].as_str().unwrap_or_default() {
            "content_block_start" if event["content_block"]["type"] == "tool_use" => {
                let index = event["index"].as_u64().unwrap_or(0);
                let block = &event["content_block"];
                let call = PartialCall {
                    id: block["id"].as_str().unwrap_or_default().to_string(),
                    name: block["name"].as_str().unwrap_or_default().to_string(),
                    arguments: String::new(),
                };
                reply.calls.insert(index, call);
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                if let Some(text) = delta["text"].as_str() {
                    reply.push_text(text);
                } else if let Some(json) = delta["partial_json"].as_str() {
                    let index = event["index"].as_u64().unwrap_or(0);
                    if let Some(call) = reply.calls.get_mut(&index) {
                        call.arguments.push_str(json);
                    }
                }
            }
            // Input tokens come first, output tokens (and the stop reason) last; usage
            // counts as reported once either count is known.
            "message_start" => {
                let counts = &event["message"]["usage"];
                let usage = Usage {
                    input_tokens: counts["input_tokens"].as_u64(),
                    output_tokens: counts["output_tokens"].as_u64(),
                };
                let reported = usage.input_tokens.is_some() || usage.output_tokens.is_some();
                reply.usage = reported.then_some(usage);
            }
            "message_delta" => {
                if let Some(n) = event["usage"]["output_tokens"].as_u64() {
                    reply.usage.get_or_insert_default().output_tokens = Some(n);
                }
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    reply.finish_reason = Some(reason.to_string());
                }
            }
            "message_stop" => return Ok(false),
            "error" => {
                return Err(LlmError::Http {
                    status: 200,
                    message: event["error"]["message"]
                        .as_str()
                        .unwrap_or("unknown streaming error")
                        .to_string(),
                });
            }
            _ => {}
        }
        Ok(true)
    }
}
