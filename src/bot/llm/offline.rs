//! The offline provider: used when no model is configured. It says so plainly and
//! still does useful work through slash commands, which run real tools through the
//! agent's normal tool loop:
//!
//! - `/help` — what it can do;
//! - `/tools` — the tools the agent may call;
//! - `/run NAME {json}` — call a tool with JSON arguments.

use async_trait::async_trait;
use serde_json::Value;

use super::{ChatRequest, ChatResponse, LlmError, LlmProvider, TokenSink};
use crate::model::{Role, ToolCall};

pub struct OfflineProvider;

const HELP: &str = "No language model is configured, so I can only run commands:\n\
  /help — this text\n\
  /tools — list the tools I can call\n\
  /run NAME {json} — call a tool, e.g. /run calculator {\"expression\": \"6*7\"}\n\
To chat with a model, set LLM_PROVIDER (openai or anthropic), LLM_BASE_URL, LLM_API_KEY and LLM_MODEL in .env and restart.";

#[async_trait]
impl LlmProvider for OfflineProvider {
    fn provider(&self) -> &str {
        "offline"
    }

    fn model(&self) -> &str {
        "none"
    }

    async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_token: TokenSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let response = respond(request);
        if !response.content.is_empty() {
            on_token(&response.content);
        }
        Ok(response)
    }
}

fn text(content: impl Into<String>) -> ChatResponse {
    ChatResponse {
        content: content.into(),
        ..ChatResponse::default()
    }
}

fn respond(request: &ChatRequest<'_>) -> ChatResponse {
    let Some(last) = request.messages.last() else {
        return text(HELP);
    };
    // After a tool ran, report its result.
    if last.role == Role::Tool {
        let name = last.name.as_deref().unwrap_or("tool");
        return text(format!("Result of `{name}`:\n{}", last.content));
    }
    let input = last.content.trim();
    if input == "/help" {
        return text(HELP);
    }
    if input == "/tools" {
        if request.tools.is_empty() {
            return text("No tools are available to this conversation.");
        }
        let lines: Vec<String> = request
            .tools
            .iter()
            .map(|t| format!("- {} ({}): {}", t.name, t.source.as_str(), t.description))
            .collect();
        return text(format!("Tools I can run with /run:\n{}", lines.join("\n")));
    }
    if let Some(rest) = input.strip_prefix("/run") {
        let rest = rest.trim();
        if rest.is_empty() {
            return text("Usage: /run NAME {json arguments}, e.g. /run current_time {}");
        }
        let (name, json) = match rest.split_once(char::is_whitespace) {
            Some((name, json)) => (name, json.trim()),
            None => (rest, ""),
        };
        let arguments = if json.is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str::<Value>(json) {
                Ok(v @ Value::Object(_)) => v,
                Ok(_) => {
                    return text(
                        "The arguments after the tool name must be a JSON object, e.g. {\"key\": \"value\"}.",
                    );
                }
                Err(e) => return text(format!("The arguments are not valid JSON: {e}")),
            }
        };
        return ChatResponse {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: format!("offline-{}", uuid::Uuid::new_v4().simple()),
                name: name.to_string(),
                arguments,
            }],
            ..ChatResponse::default()
        };
    }
    text(format!(
        "I can't answer that: no language model is configured (LLM_PROVIDER is offline).\n\n{HELP}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bot::llm::ChatMessage;

    fn ask(text: &str) -> ChatResponse {
        let messages = [ChatMessage::text(Role::User, text)];
        respond(&ChatRequest {
            system: "",
            messages: &messages,
            tools: &[],
            parameters: None,
        })
    }

    #[test]
    fn run_becomes_a_tool_call_and_bad_json_is_explained() {
        let r = ask("/run calculator {\"expression\": \"1+1\"}");
        assert_eq!(r.tool_calls[0].name, "calculator");
        assert_eq!(r.tool_calls[0].arguments["expression"], "1+1");
        assert!(
            ask("/run calculator {oops")
                .content
                .contains("not valid JSON")
        );
        assert!(
            ask("hello")
                .content
                .contains("no language model is configured")
        );
        assert!(ask("/help").content.contains("/run NAME"));
    }
}
