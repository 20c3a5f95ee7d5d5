//! Prompts: a [`Prompt`] has a name and arguments and renders messages; it can
//! complete argument values (`completion/complete`). [`PromptSet`] holds a server's
//! prompts with their listing.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::context::RequestContext;
use super::error::SetupError;
use super::jsonrpc::RpcError;
use super::tool::Outcome;

/// A prompt argument as listed.
#[derive(Debug, Clone)]
pub struct PromptArgument {
    pub name: String,
    pub description: String,
    pub required: bool,
}

#[derive(Debug, Clone)]
pub struct PromptSpec {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub arguments: Vec<PromptArgument>,
}

impl PromptSpec {
    pub fn to_json(&self) -> Value {
        let mut prompt = json!({
            "name": self.name,
            "description": self.description,
            "arguments": self.arguments.iter().map(|a| json!({
                "name": a.name, "description": a.description, "required": a.required,
            })).collect::<Vec<_>>(),
        });
        if let Some(title) = &self.title {
            prompt["title"] = json!(title);
        }
        prompt
    }
}

/// The result of `prompts/get`: `{description?, messages}`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessages {
    pub description: Option<String>,
    pub messages: Vec<Value>,
}

impl PromptMessages {
    /// One user message of text: a prompt that hands the model one investigation.
    pub fn user_text(text: String) -> Self {
        PromptMessages::user(vec![json!({"type": "text", "text": text})])
    }

    /// One user message per content block.
    pub fn user(blocks: Vec<Value>) -> Self {
        PromptMessages {
            description: None,
            messages: blocks
                .into_iter()
                .map(|content| json!({"role": "user", "content": content}))
                .collect(),
        }
    }

    pub fn to_json(&self) -> Value {
        let mut result = json!({"messages": self.messages});
        if let Some(d) = &self.description {
            result["description"] = json!(d);
        }
        result
    }
}

#[async_trait]
pub trait Prompt: Send + Sync {
    fn spec(&self) -> PromptSpec;
    async fn get(
        &self,
        args: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Result<Outcome<PromptMessages>, RpcError>;
    async fn complete(&self, _argument: &str, _value: &str) -> Vec<String> {
        Vec::new()
    }
}

/// Prompts by name, in name order.
pub struct PromptSet {
    prompts: Vec<(PromptSpec, Arc<dyn Prompt>)>,
    listing: Vec<Value>,
}

impl PromptSet {
    pub fn new(prompts: Vec<Arc<dyn Prompt>>) -> Result<Self, SetupError> {
        let mut prompts: Vec<(PromptSpec, Arc<dyn Prompt>)> =
            prompts.into_iter().map(|p| (p.spec(), p)).collect();
        prompts.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        for pair in prompts.windows(2) {
            if pair[0].0.name == pair[1].0.name {
                return Err(SetupError::Duplicate {
                    kind: "prompt",
                    name: pair[0].0.name.clone(),
                });
            }
        }
        if let Some((spec, _)) = prompts
            .iter()
            .find(|(s, _)| s.description.trim().is_empty())
        {
            return Err(SetupError::PromptWithoutDescription {
                name: spec.name.clone(),
            });
        }
        let listing = prompts.iter().map(|(s, _)| s.to_json()).collect();
        Ok(PromptSet { prompts, listing })
    }

    pub fn listing(&self) -> &[Value] {
        &self.listing
    }

    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty()
    }

    pub fn find(&self, name: &str) -> Option<(&PromptSpec, &Arc<dyn Prompt>)> {
        self.prompts
            .iter()
            .find(|(s, _)| s.name == name)
            .map(|(s, p)| (s, p))
    }

    /// Checks required arguments and that every value is a string, then renders.
    pub async fn get(
        &self,
        name: &str,
        args: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Result<Outcome<PromptMessages>, RpcError> {
        let Some((spec, prompt)) = self.find(name) else {
            let names: Vec<&str> = self.prompts.iter().map(|(s, _)| s.name.as_str()).collect();
            return Err(RpcError::invalid_params(format!(
                "Unknown prompt: {name}; available: {}",
                names.join(", ")
            )));
        };
        for argument in &spec.arguments {
            if argument.required && !args.contains_key(&argument.name) {
                return Err(RpcError::invalid_params(format!(
                    "prompt `{name}` needs the argument `{}` ({})",
                    argument.name, argument.description
                )));
            }
        }
        if let Some((key, _)) = args.iter().find(|(_, v)| !v.is_string()) {
            return Err(RpcError::invalid_params(format!(
                "prompt argument `{key}` must be a string"
            )));
        }
        prompt.get(args, ctx).await
    }
}
