//! The LLM-call span: one request to the model with what it was sent (messages, tools
//! offered with their definitions, every parameter) and what came back (text, tool calls, finish reason, tokens),
//! its time to first token, latency, and the error with its cause when it failed.

use std::sync::OnceLock;
use std::time::Instant;

use serde_json::{Value, json};

use super::TraceScope;
use crate::bot::llm::{ChatMessage, ChatRequest, ChatResponse, LlmError, LlmProvider, TokenSink};
use crate::model::SpanKind;

/// Asks `llm` through `request`, recording the call as a span under `scope`.
pub async fn traced_chat(
    llm: &dyn LlmProvider,
    request: &ChatRequest<'_>,
    on_token: TokenSink<'_>,
    scope: &TraceScope,
) -> Result<ChatResponse, LlmError> {
    let parameters = llm.parameters(request);
    let model = parameters
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(llm.model())
        .to_string();
    let mut span = scope.start(SpanKind::Llm, format!("chat {model}"));
    if !span.is_recording() {
        return llm.chat(request, on_token).await;
    }
    span.set_model(&model);
    span.set_attribute("provider", llm.provider());
    span.set_attribute("request", request_payload(request));
    span.set_tools_offered(request.tools);
    span.set_attribute("parameters", Value::Object(parameters));

    let started = Instant::now();
    let first_token = OnceLock::new();
    let timed = |text: &str| {
        first_token.get_or_init(|| started.elapsed().as_secs_f64() * 1000.0);
        on_token(text);
    };
    let result = llm.chat(request, &timed).await;
    if let Some(ms) = first_token.get() {
        span.set_attribute("time_to_first_token_ms", *ms);
    }
    match &result {
        Ok(response) => {
            span.set_attribute("response", response_payload(response));
            if let Some(reason) = &response.finish_reason {
                span.set_attribute("finish_reason", reason.as_str());
            }
            if let Some(usage) = response.usage {
                span.set_tokens(usage.input_tokens, usage.output_tokens);
            }
            span.end();
        }
        Err(error) => {
            span.set_attribute("error_kind", error_kind(error));
            span.fail(crate::text::with_causes(error));
        }
    }
    result
}

/// The request as the model saw it: the system prompt, then the context.
fn request_payload(request: &ChatRequest<'_>) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    messages.push(json!({"role": "system", "content": request.system}));
    messages.extend(request.messages.iter().map(message_payload));
    Value::Array(messages)
}

fn message_payload(m: &ChatMessage) -> Value {
    let mut value = json!({"role": m.role.as_str(), "content": m.content});
    if !m.tool_calls.is_empty() {
        value["tool_calls"] = json!(m.tool_calls);
    }
    if let Some(id) = &m.tool_call_id {
        value["tool_call_id"] = json!(id);
    }
    if let Some(name) = &m.name {
        value["name"] = json!(name);
    }
    value
}

fn response_payload(response: &ChatResponse) -> Value {
    json!({"content": response.content, "tool_calls": response.tool_calls})
}

/// A short machine-readable name for the kind of failure.
fn error_kind(error: &LlmError) -> &'static str {
    match error {
        LlmError::Timeout(_) => "timeout",
        LlmError::Unauthorized(_) => "unauthorized",
        LlmError::RateLimited => "rate_limited",
        LlmError::Http { .. } => "http",
        LlmError::Connect { .. } => "connect",
        LlmError::Malformed(_) => "malformed",
        LlmError::BrokeOff(_) => "broke_off",
    }
}
