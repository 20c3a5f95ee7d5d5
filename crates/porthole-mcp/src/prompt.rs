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
    /// The key the client passes the value under in `prompts/get`.
    pub name: String,
    /// What the value is; also quoted when a required argument is missing.
    pub description: String,
    /// Whether `prompts/get` refuses a request without this argument.
    pub required: bool,
}

/// What a prompt declares about itself: the `Prompt` object of `prompts/list`.
#[derive(Debug, Clone)]
pub struct PromptSpec {
    /// The name clients ask for in `prompts/get`; unique within a [`PromptSet`].
    pub name: String,
    /// A display name; `None` leaves `title` out of the listing.
    pub title: Option<String>,
    /// What the prompt is for; must not be blank ([`PromptSet::new`] refuses it).
    pub description: String,
    /// The arguments it takes, in listing order.
    pub arguments: Vec<PromptArgument>,
}

impl PromptSpec {
    /// The `Prompt` object as listed: `{name, title?, description, arguments}`.
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
    /// A description of the rendered prompt; `None` leaves it out.
    pub description: Option<String>,
    /// `PromptMessage` objects: `{role, content}`.
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

    /// The `prompts/get` result as sent.
    pub fn to_json(&self) -> Value {
        let mut result = json!({"messages": self.messages});
        if let Some(d) = &self.description {
            result["description"] = json!(d);
        }
        result
    }
}

/// A prompt a server offers: its declaration, its rendering and argument completion.
#[async_trait]
pub trait Prompt: Send + Sync {
    /// The prompt's name, description and arguments; read once, when the set is built.
    fn spec(&self) -> PromptSpec;
    /// Renders the messages for `args`, which [`PromptSet::get`] has already checked:
    /// every required argument is present and every value is a string.
    async fn get(
        &self,
        args: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Result<Outcome<PromptMessages>, RpcError>;
    /// Values for `argument` that start like `value`; none by default.
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
    /// The set of `prompts`, sorted by name; refuses two prompts with one name and a
    /// prompt with a blank description.
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

    /// The `Prompt` objects of `prompts/list`, in name order.
    pub fn listing(&self) -> &[Value] {
        &self.listing
    }

    /// Whether the server has no prompts.
    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty()
    }

    /// The prompt named `name`, with its spec.
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
