//! `prompts/list` and `prompts/get`; a rendered prompt is redacted like a tool result,
//! since prompts quote logs and messages.

use serde_json::{Map, Value};

use crate::ServerInner;
use crate::context::RequestContext;
use crate::jsonrpc::RpcError;
use crate::params::{page, required_str};
use crate::tool::Outcome;

pub(super) fn list(inner: &ServerInner, params: &Map<String, Value>) -> Result<Value, RpcError> {
    page("prompts", inner.prompts.listing(), params)
}

/// `prompts/get`: the prompt rendered with its arguments (an object of strings).
pub(super) async fn get(
    inner: &ServerInner,
    params: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<Outcome<Value>, RpcError> {
    let name = required_str(params, "name")?;
    let empty = Map::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(a)) => a,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "`arguments` must be an object of strings",
            ));
        }
    };
    Ok(match inner.prompts.get(name, args, ctx).await? {
        Outcome::Complete(messages) => {
            let mut rendered = messages.to_json();
            inner.redactor.redact(&mut rendered);
            Outcome::Complete(rendered)
        }
        Outcome::InputRequired(i) => Outcome::InputRequired(i),
    })
}
