//! OpenAI-compatible chat completions (`POST {LLM_BASE_URL}/chat/completions`), streamed.
//! Works with OpenAI, Ollama, llama.cpp's server and vLLM, which all speak this format.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    ChatRequest, ChatResponse, Endpoint, LlmError, LlmProvider, TokenSink, ToolNames, Usage,
    parse_arguments, sse,
};
use crate::bot::store::{Role, ToolCall};
use crate::config::LlmConfig;

pub struct OpenAiProvider {
    endpoint: Endpoint,
}

impl OpenAiProvider {
    pub fn new(config: &LlmConfig) -> Self {
        OpenAiProvider {
            endpoint: Endpoint::new(config, "/chat/completions"),
        }
    }

    fn body(&self, request: &ChatRequest<'_>, names: &ToolNames) -> Value {
        let mut messages = vec![json!({"role": "system", "content": request.system})];
        for m in request.messages {
            messages.push(match m.role {
                Role::Tool => json!({
                    "role": "tool",
                    "tool_call_id": m.tool_call_id,
                    "content": m.content,
                }),
                Role::Assistant if !m.tool_calls.is_empty() => json!({
                    "role": "assistant",
                    "content": if m.content.is_empty() { Value::Null } else { json!(m.content) },
                    "tool_calls": m.tool_calls.iter().map(|c| json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": names.wire(&c.name), "arguments": c.arguments.to_string()},
                    })).collect::<Vec<_>>(),
                }),
                role => json!({"role": role.as_str(), "content": m.content}),
            });
        }
        // `include_usage` asks for a last chunk with the token counts (for traces).
        let mut body = json!({
            "model": self.endpoint.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": names.wire(&t.name),
                            "description": t.description,
                            "parameters": t.input_schema,
                        }
                    })
                })
                .collect();
        }
        body
    }
}

/// A tool call being assembled from streamed fragments.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

#[async_trait]
impl LlmProvider for OpenAiProvider {
    fn provider(&self) -> &str {
        "openai"
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
            .post(&self.body(request, &names), &[], |http, key| {
                http.bearer_auth(key)
            })
            .await?;

        let mut content = String::new();
        let mut calls: BTreeMap<u64, PartialCall> = BTreeMap::new();
        let mut finish_reason = None;
        let mut usage = None;
        sse::for_each_event(response, self.endpoint.timeout_secs, |data| {
            if data == "[DONE]" {
                return Ok(false);
            }
            let chunk: Value = serde_json::from_str(data)
                .map_err(|e| LlmError::Malformed(format!("bad stream chunk ({e})")))?;
            if let Some(message) = chunk["error"]["message"].as_str() {
                return Err(LlmError::Http {
                    status: 200,
                    message: message.to_string(),
                });
            }
            if let Some(counts) = chunk["usage"].as_object() {
                usage = Some(Usage {
                    input_tokens: counts.get("prompt_tokens").and_then(Value::as_u64),
                    output_tokens: counts.get("completion_tokens").and_then(Value::as_u64),
                });
            }
            if let Some(reason) = chunk["choices"][0]["finish_reason"].as_str() {
                finish_reason = Some(reason.to_string());
            }
            let delta = &chunk["choices"][0]["delta"];
            if let Some(text) = delta["content"].as_str()
                && !text.is_empty()
            {
                on_token(text);
                content.push_str(text);
            }
            if let Some(fragments) = delta["tool_calls"].as_array() {
                for fragment in fragments {
                    let index = fragment["index"].as_u64().unwrap_or(0);
                    let call = calls.entry(index).or_default();
                    if let Some(id) = fragment["id"].as_str() {
                        call.id = id.to_string();
                    }
                    if let Some(name) = fragment["function"]["name"].as_str() {
                        call.name.push_str(name);
                    }
                    if let Some(args) = fragment["function"]["arguments"].as_str() {
                        call.arguments.push_str(args);
                    }
                }
            }
            Ok(true)
        })
        .await?;

        let tool_calls = calls
            .into_values()
            .map(|c| {
                let arguments = parse_arguments(&c.arguments, &c.name)?;
                Ok(ToolCall {
                    id: if c.id.is_empty() {
                        format!("call_{}", uuid::Uuid::new_v4().simple())
                    } else {
                        c.id
                    },
                    name: names.original(&c.name),
                    arguments,
                })
            })
            .collect::<Result<Vec<_>, LlmError>>()?;
        Ok(ChatResponse {
            content,
            tool_calls,
            finish_reason,
            usage,
        })
    }
}
