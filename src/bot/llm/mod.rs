//! LLM providers behind one trait: OpenAI-compatible chat completions, the Anthropic
//! Messages API, and an offline provider for when no model is configured.
//!
//! Providers stream: text arrives through the `on_token` callback as it is generated,
//! and the full turn (text plus any tool calls) is returned at the end. Every failure is
//! an [`LlmError`] with a message a person can act on; the agent stores it in the
//! conversation rather than crashing.

mod anthropic;
mod offline;
mod openai;
mod sse_reader;
mod streamed;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::config::{LlmConfig, LlmProviderKind};
use crate::model::ToolDef;
use crate::model::{Role, ToolCall};

pub use anthropic::AnthropicProvider;
pub use offline::OfflineProvider;
pub use openai::OpenAiProvider;

/// One message of the context sent to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// For assistant messages: the tools it asked to call.
    pub tool_calls: Vec<ToolCall>,
    /// For tool messages: which call this answers, and the tool's name.
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
}

impl ChatMessage {
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }
}

pub struct ChatRequest<'a> {
    pub system: &'a str,
    pub messages: &'a [ChatMessage],
    pub tools: &'a [ToolDef],
    /// Parameters to send instead of the provider's own (model, sampling, `max_tokens`):
    /// a replay sends those of the call it replays. The stream settings stay the
    /// provider's, which reads the answer as a stream.
    pub parameters: Option<&'a Map<String, Value>>,
}

/// A model's turn: text and/or tool calls, and what the provider said about it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatResponse {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped (`stop`, `tool_calls`, `end_turn`…), when the provider says.
    pub finish_reason: Option<String>,
    /// Tokens the provider counted, when it reports them.
    pub usage: Option<Usage>,
}

/// Token counts of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

impl ChatRequest<'_> {
    /// Wire names for every tool offered and every tool called in the history.
    pub(crate) fn tool_names(&self) -> ToolNames {
        ToolNames::new(
            self.tools.iter().map(|t| t.name.as_str()).chain(
                self.messages
                    .iter()
                    .flat_map(|m| m.tool_calls.iter().map(|c| c.name.as_str())),
            ),
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("the model did not answer within {0} s (raise LLM_TIMEOUT_SECS if it is slow)")]
    Timeout(u64),
    #[error("the provider rejected the API key (HTTP {0}); check LLM_API_KEY")]
    Unauthorized(u16),
    #[error("the provider is rate limiting requests (HTTP 429); wait and try again")]
    RateLimited,
    #[error("the provider answered HTTP {status}: {message}")]
    Http { status: u16, message: String },
    #[error(
        "cannot reach the provider at {url}: {reason} (check LLM_BASE_URL and that the server runs)"
    )]
    Connect { url: String, reason: String },
    #[error("the provider sent a response we cannot read: {0}")]
    Malformed(String),
    #[error(
        "the provider's answer broke off mid-stream ({0}); the partial answer was not kept; send the message again"
    )]
    BrokeOff(String),
}

pub type TokenSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

#[async_trait]
pub trait LlmProvider: Send + Sync {
    /// `offline`, `openai` or `anthropic`.
    fn provider(&self) -> &str;
    fn model(&self) -> &str;
    /// Every parameter `request` is sent with beside its messages, system prompt and
    /// tools (model, `max_tokens`, stream settings…), as the provider writes them.
    fn parameters(&self, request: &ChatRequest<'_>) -> Map<String, Value> {
        request
            .parameters
            .cloned()
            .unwrap_or_else(|| Map::from_iter([("model".to_string(), Value::from(self.model()))]))
    }
    async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_token: TokenSink<'_>,
    ) -> Result<ChatResponse, LlmError>;
}

/// Builds the provider the configuration asks for.
pub fn from_config(config: &LlmConfig) -> Arc<dyn LlmProvider> {
    match config.provider {
        LlmProviderKind::Offline => Arc::new(OfflineProvider),
        LlmProviderKind::OpenAi => Arc::new(OpenAiProvider::new(config)),
        LlmProviderKind::Anthropic => Arc::new(AnthropicProvider::new(config)),
    }
}

/// Provider tool names allow only `A-Z a-z 0-9 _ -` (64 at most), while ours may hold
/// dots (`mcp.files__read`). This maps both ways for one request.
pub(crate) struct ToolNames {
    to_wire: std::collections::HashMap<String, String>,
    from_wire: std::collections::HashMap<String, String>,
}

impl ToolNames {
    pub(crate) fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut map = ToolNames {
            to_wire: Default::default(),
            from_wire: Default::default(),
        };
        for name in names {
            // A tool offered and called in the history is one tool, under one name.
            if map.to_wire.contains_key(name) {
                continue;
            }
            let base: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .take(60)
                .collect();
            let mut wire = base.clone();
            let mut n = 2;
            while map.from_wire.contains_key(&wire) {
                wire = format!("{base}_{n}");
                n += 1;
            }
            map.to_wire.insert(name.to_string(), wire.clone());
            map.from_wire.insert(wire, name.to_string());
        }
        map
    }

    pub(crate) fn wire<'a>(&'a self, name: &'a str) -> &'a str {
        self.to_wire.get(name).map(String::as_str).unwrap_or(name)
    }

    pub(crate) fn original(&self, wire: &str) -> String {
        self.from_wire
            .get(wire)
            .cloned()
            .unwrap_or_else(|| wire.to_string())
    }
}

/// Maps an HTTP error status and body to an [`LlmError`], keeping the provider's own
/// message (shortened) when it has one.
fn status_error(status: u16, body: &str) -> LlmError {
    match status {
        401 | 403 => LlmError::Unauthorized(status),
        429 => LlmError::RateLimited,
        300..=399 => LlmError::Http {
            status,
            message: "a redirect, which the bot does not follow (it would take the API key \
                      to another host); set LLM_BASE_URL to the address it leads to"
                .into(),
        },
        _ => {
            let message = serde_json::from_str::<Value>(body)
                .ok()
                .and_then(|v| {
                    v["error"]["message"]
                        .as_str()
                        .or(v["error"].as_str())
                        .or(v["message"].as_str())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| body.chars().take(300).collect());
            LlmError::Http { status, message }
        }
    }
}

/// The HTTP side both remote providers share: where to POST, with which key, and how
/// long to wait; turns transport failures and error statuses into [`LlmError`]s.
struct Endpoint {
    client: reqwest::Client,
    url: String,
    api_key: Option<String>,
    model: String,
    timeout_secs: u64,
}

impl Endpoint {
    fn new(config: &LlmConfig, path: &str) -> Self {
        Endpoint {
            client: crate::http_client::builder()
                .timeout(config.timeout)
                .build()
                .unwrap_or_default(),
            url: format!("{}{path}", config.base_url),
            api_key: config.api_key.clone(),
            model: config.model.clone(),
            timeout_secs: config.timeout.as_secs(),
        }
    }

    /// POSTs `body` with `headers`; `authorize` adds the key (when there is one) the
    /// provider's way. A non-2xx status becomes the matching error, with the
    /// provider's message.
    async fn post(
        &self,
        body: &Value,
        headers: &[(&'static str, &'static str)],
        authorize: impl FnOnce(reqwest::RequestBuilder, &str) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, LlmError> {
        let mut http = self.client.post(&self.url).json(body);
        for (name, value) in headers {
            http = http.header(*name, *value);
        }
        if let Some(key) = &self.api_key {
            http = authorize(http, key);
        }
        let response = http
            .send()
            .await
            .map_err(|e| send_error(&self.url, e, self.timeout_secs))?;
        let status = response.status();
        if !status.is_success() {
            let body = crate::http_client::error_body(response).await;
            return Err(status_error(status.as_u16(), &body));
        }
        Ok(response)
    }
}

/// Parses streamed tool-call arguments; none at all means `{}`.
fn parse_arguments(text: &str, tool: &str) -> Result<Value, LlmError> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| {
        LlmError::Malformed(format!(
            "the arguments for tool `{tool}` are not JSON ({e})"
        ))
    })
}

fn send_error(url: &str, error: reqwest::Error, timeout_secs: u64) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout(timeout_secs)
    } else {
        LlmError::Connect {
            url: url.to_string(),
            reason: error.without_url().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_round_trip_through_provider_rules() {
        let names = ToolNames::new([
            "mcp.files__read",
            "calculator",
            "mcp_files__read",
            "calculator",
        ]);
        assert_eq!(names.wire("mcp.files__read"), "mcp_files__read");
        assert_eq!(
            names.wire("calculator"),
            "calculator",
            "offered and called: one name"
        );
        assert_eq!(
            names.wire("mcp_files__read"),
            "mcp_files__read_2",
            "collisions stay distinct"
        );
        assert_eq!(names.original("mcp_files__read"), "mcp.files__read");
        assert_eq!(names.original("unknown"), "unknown");
    }
}
