//! OpenAI-compatible chat completions (`POST {LLM_BASE_URL}/chat/completions`), streamed.
//! Works with OpenAI, Ollama, llama.cpp's server and vLLM, which all speak this format.

use serde_json::{Map, Value, json};

use super::streamed::{StreamedReply, WireFormat};
use super::{ChatRequest, Endpoint, LlmError, ToolNames, Usage};
use crate::config::LlmConfig;
use crate::model::Role;

pub struct OpenAiProvider {
    endpoint: Endpoint,
}

impl OpenAiProvider {
    pub fn new(config: &LlmConfig) -> Self {
        OpenAiProvider {
            endpoint: Endpoint::new(config, "/chat/completions"),
        }
    }
}

impl WireFormat for OpenAiProvider {
    const PROVIDER: &'static str = "openai";

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn default_parameters(&self) -> Map<String, Value> {
        Map::from_iter([("model".to_string(), json!(self.endpoint.model))])
    }

    /// `include_usage` asks for a last chunk with the token counts (for traces).
    fn stream_parameters(&self) -> Value {
        json!({"stream": true, "stream_options": {"include_usage": true}})
    }

    fn content(&self, request: &ChatRequest<'_>, names: &ToolNames) -> Map<String, Value> {
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
        let mut content = Map::new();
        content.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools = request
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
            content.insert("tools".into(), tools);
        }
        content
    }

    async fn post(&self, body: &Value) -> Result<reqwest::Response, LlmError> {
        self.endpoint
            .post(body, &[], |http, key| http.bearer_auth(key))
            .await
    }

    fn on_event(&self, data: &str, reply: &mut StreamedReply<'_>) -> Result<bool, LlmError> {
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
            reply.usage = Some(Usage {
                input_tokens: counts.get("prompt_tokens").and_then(Value::as_u64),
                output_tokens: counts.get("completion_tokens").and_then(Value::as_u64),
            });
        }
        if let Some(reason) = chunk["choices"][0]["finish_reason"].as_str() {
            reply.finish_reason = Some(reason.to_string());
        }
        let delta = &chunk["choices"][0]["delta"];
        if let Some(text) = delta["content"].as_str()
            && !text.is_empty()
        {
            reply.push_text(text);
        }
        for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = fragment["index"].as_u64().unwrap_or(0);
            let call = reply.calls.entry(index).or_default();
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
        Ok(true)
    }

    /// Some compatible servers send calls without ids; the conversation needs one to
    /// pair each result with its call.
    fn call_id(&self, streamed: String) -> String {
        if streamed.is_empty() {
            format!("call_{}", uuid::Uuid::new_v4().simple())
        } else {
            streamed
        }
    }
}
