//! `prompts/list` and `prompts/get`; a rendered prompt is redacted like a tool result,
//! since prompts quote logs and messages.

use serde_json::{Map, Value};

use super::Method;
use crate::mcp::ServerInner;
use crate::mcp::context::RequestContext;
use crate::mcp::jsonrpc::RpcError;
use crate::mcp::params::{page, required_str};
use crate::mcp::tool::Outcome;

pub(super) async fn serve(
    inner: &ServerInner,
    method: Method,
    params: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<Outcome<Value>, RpcError> {
    if method == Method::PromptsList {
        return Ok(Outcome::Complete(page(
            "prompts",
            inner.prompts.listing(),
            params,
        )?));
    }
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
