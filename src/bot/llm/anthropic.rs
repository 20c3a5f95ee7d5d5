//! The Anthropic Messages API (`POST {LLM_BASE_URL}/v1/messages`), streamed.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    ChatRequest, ChatResponse, Endpoint, LlmError, LlmProvider, TokenSink, ToolNames, Usage,
    parse_arguments, sse,
};
use crate::bot::store::{Role, ToolCall};
use crate::config::LlmConfig;

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

    fn body(&self, request: &ChatRequest<'_>, names: &ToolNames) -> Value {
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
        let mut body = json!({
            "model": self.endpoint.model,
            "max_tokens": MAX_TOKENS,
            "system": request.system,
            "messages": messages,
            "stream": true,
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"name": names.wire(&t.name), "description": t.description, "input_schema": t.input_schema}))
                .collect();
        }
        body
    }
}

#[async_trait]
impl LlmProvider for AnthropicProvider {
    fn provider(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.endpoint.model
    }

    async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_token: TokenSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let names = request.tool_names();
        let response = self
            .endpoint
            .post(
                &self.body(request, &names),
                &[("anthropic-version", API_VERSION)],
                |http, key| http.header("x-api-key", key),
            )
            .await?;

        let mut content = String::new();
        let mut finish_reason = None;
        let mut usage = Usage::default();
        // Tool-use blocks by index: (id, name, partial JSON input).
        let mut tools: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
        sse::for_each_event(response, self.endpoint.timeout_secs, |data| {
            let event: Value = serde_json::from_str(data)
                .map_err(|e| LlmError::Malformed(format!("bad stream event ({e})")))?;
            match event["type"].as_str().unwrap_or_default() {
                "content_block_start" if event["content_block"]["type"] == "tool_use" => {
                    let index = event["index"].as_u64().unwrap_or(0);
                    let block = &event["content_block"];
                    tools.insert(
                        index,
                        (
                            block["id"].as_str().unwrap_or_default().to_string(),
                            block["name"].as_str().unwrap_or_default().to_string(),
                            String::new(),
                        ),
                    );
                }
                "content_block_delta" => {
                    let delta = &event["delta"];
                    if let Some(text) = delta["text"].as_str() {
                        on_token(text);
                        content.push_str(text);
                    } else if let Some(json) = delta["partial_json"].as_str() {
                        let index = event["index"].as_u64().unwrap_or(0);
                        if let Some(tool) = tools.get_mut(&index) {
                            tool.2.push_str(json);
                        }
                    }
                }
                // Input tokens come first, output tokens (and the stop reason) last.
                "message_start" => {
                    let counts = &event["message"]["usage"];
                    usage.input_tokens = counts["input_tokens"].as_u64();
                    usage.output_tokens = counts["output_tokens"].as_u64();
                }
                "message_delta" => {
                    if let Some(n) = event["usage"]["output_tokens"].as_u64() {
                        usage.output_tokens = Some(n);
                    }
                    if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                        finish_reason = Some(reason.to_string());
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
        })
        .await?;

        let tool_calls = tools
            .into_values()
            .map(|(id, name, input)| {
                let arguments = parse_arguments(&input, &name)?;
                Ok(ToolCall {
                    id,
                    name: names.original(&name),
                    arguments,
                })
            })
            .collect::<Result<Vec<_>, LlmError>>()?;
        let reported = usage.input_tokens.is_some() || usage.output_tokens.is_some();
        Ok(ChatResponse {
            content,
            tool_calls,
            finish_reason,
            usage: reported.then_some(usage),
        })
    }
}
