//! A recorded LLM call read back as the request it was: the system prompt and messages
//! of its `request`, the tool definitions its `tools_hash` names, and its `parameters`;
//! then the request a replay sends, with the caller's changes and nothing else.

use serde_json::{Map, Value, json};

use super::recorded_turn::is_cut;
use super::sets::SAVED_TOOLS;
use super::{Changes, ReplayError};
use crate::bot::Bot;
use crate::bot::llm::ChatMessage;
use crate::bot::store::StoreError;
use crate::bot::trace::TOOLS_HASH;
use crate::model::{Role, SpanKind, SpanRecord, ToolCall, ToolDef, ToolSource};
use crate::redact::REDACTED;

/// The request of one recorded LLM call.
#[derive(Debug, Clone)]
pub struct Request {
    pub system: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolDef>,
    pub parameters: Map<String, Value>,
}

/// The stored span `span_id`, spans still on their way to the store included.
pub async fn find(bot: &Bot, span_id: &str) -> Result<Option<SpanRecord>, StoreError> {
    bot.tracer.flush().await;
    bot.store.span(span_id).await
}

/// The request the LLM call `span` sent, as it was recorded.
pub(super) async fn request_of(bot: &Bot, span: &SpanRecord) -> Result<Request, ReplayError> {
    let span_id = span.span_id.as_str();
    if span.kind != SpanKind::Llm {
        return Err(ReplayError::NotAnLlmCall(
            span_id.into(),
            span.kind.as_str(),
        ));
    }
    let attributes = &span.attributes;
    let cut = is_cut(span, "request") || is_cut(span, "parameters");
    if cut {
        return Err(ReplayError::Cut(span_id.into()));
    }
    let recorded = attributes.get("request").and_then(Value::as_array);
    let (Some(recorded), Some(hash)) =
        (recorded, attributes.get(TOOLS_HASH).and_then(Value::as_str))
    else {
        return Err(ReplayError::NotRecordedInFull(span_id.into()));
    };
    // A call saved in a set carries its definitions: its trace may be gone.
    let saved = attributes.get(SAVED_TOOLS).and_then(Value::as_str);
    let tools = match saved {
        Some(text) => tool_defs(text)?,
        None => match bot.store.tool_set(hash).await? {
            Some(text) => tool_defs(&text)?,
            None => return Err(ReplayError::NotRecordedInFull(span_id.into())),
        },
    };
    let mut parameters = attributes
        .get("parameters")
        .unwrap_or(&Value::Null)
        .as_object()
        .cloned()
        .unwrap_or_default();
    if let Some(model) = &span.model {
        parameters.entry("model").or_insert_with(|| json!(model));
    }
    let request = Request {
        system: recorded
            .first()
            .map(|m| text_of(&m["content"]))
            .unwrap_or_default(),
        messages: recorded.iter().skip(1).map(chat_message).collect(),
        tools,
        parameters,
    };
    Ok(request)
}

fn tool_defs(text: &str) -> Result<Vec<ToolDef>, ReplayError> {
    let stored: Vec<Value> = serde_json::from_str(text)
        .map_err(|e| ReplayError::Store(format!("stored tool definitions are not JSON: {e}")))?;
    Ok(stored.iter().map(tool_def).collect())
}

/// A tool as the provider is told of it; the rest of a definition is not sent.
fn tool_def(stored: &Value) -> ToolDef {
    ToolDef {
        name: text_of(&stored["name"]),
        source: ToolSource::Native,
        description: text_of(&stored["description"]),
        input_schema: stored["input_schema"].clone().into(),
        required_roles: Vec::new(),
        internal: false,
        read_only: false,
    }
}

fn text_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

fn chat_message(recorded: &Value) -> ChatMessage {
    let tool_calls: Vec<ToolCall> =
        serde_json::from_value(recorded["tool_calls"].clone()).unwrap_or_default();
    ChatMessage {
        role: Role::parse(recorded["role"].as_str().unwrap_or_default()),
        content: text_of(&recorded["content"]),
        tool_calls,
        tool_call_id: recorded["tool_call_id"].as_str().map(str::to_string),
        name: recorded["name"].as_str().map(str::to_string),
    }
}

impl Request {
    /// This request with `changes` applied; `bot`'s tools supply the definitions of
    /// tools named in `changes.tools` that the recorded call did not offer.
    pub(super) fn changed(&self, changes: &Changes, bot: &Bot) -> Result<Request, ReplayError> {
        let mut request = self.clone();
        if let Some(system) = &changes.system {
            request.system = system.clone();
        }
        for edit in &changes.edit_messages {
            match edit.index {
                0 => request.system = edit.content.clone(),
                n if n <= request.messages.len() => {
                    request.messages[n - 1].content = edit.content.clone();
                }
                n => {
                    return Err(ReplayError::Invalid(format!(
                        "edit_messages: index {n} is past the last message ({}); 0 is the system prompt",
                        request.messages.len()
                    )));
                }
            }
        }
        if let Some(names) = &changes.tools {
            request.tools = names
                .iter()
                .map(|name| self.tool_named(name, bot))
                .collect::<Result<_, _>>()?;
        }
        if let Some(model) = &changes.model {
            request.parameters.insert("model".into(), json!(model));
        }
        if let Some(temperature) = changes.temperature {
            request
                .parameters
                .insert("temperature".into(), json!(temperature));
        }
        if let Some(max_tokens) = changes.max_tokens {
            // Newer OpenAI models take `max_completion_tokens`; keep the recorded name.
            let key = if request.parameters.contains_key("max_completion_tokens") {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            request.parameters.insert(key.into(), json!(max_tokens));
        }
        Ok(request)
    }

    fn tool_named(&self, name: &str, bot: &Bot) -> Result<ToolDef, ReplayError> {
        if let Some(recorded) = self.tools.iter().find(|t| t.name == name) {
            return Ok(recorded.clone());
        }
        match bot.tools.get(name) {
            Some(info) if !info.def.internal => Ok(info.def),
            _ => Err(ReplayError::Invalid(format!(
                "tools: no tool `{name}` (neither offered in the recorded call nor known to the bot)"
            ))),
        }
    }

    /// The parts of this request that hold a redaction placeholder: what the model would
    /// see instead of a secret. Messages are numbered as `edit_messages` numbers them
    /// (0 is the system prompt).
    pub fn redacted_parts(&self) -> Vec<String> {
        let mut parts = Vec::new();
        if self.system.contains(REDACTED) {
            parts.push("messages[0] (system prompt)".to_string());
        }
        for (i, m) in self.messages.iter().enumerate() {
            if m.content.contains(REDACTED) {
                parts.push(format!("messages[{}].content", i + 1));
            }
            if m.tool_calls
                .iter()
                .any(|c| c.arguments.to_string().contains(REDACTED))
            {
                parts.push(format!("messages[{}].tool_calls", i + 1));
            }
        }
        for tool in &self.tools {
            let definition = json!([tool.description, tool.input_schema]).to_string();
            if definition.contains(REDACTED) {
                parts.push(format!("tools.{}", tool.name));
            }
        }
        for (key, value) in &self.parameters {
            if value.to_string().contains(REDACTED) {
                parts.push(format!("parameters.{key}"));
            }
        }
        parts
    }
}
