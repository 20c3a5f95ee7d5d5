//! `prompts/list` and `prompts/get`; a rendered prompt is redacted like a tool result,
//! since prompts quote logs and messages.

use porthole_core::params::{GetPromptParams, PageParams};
use serde_json::Value;

use crate::ServerInner;
use crate::context::RequestContext;
use crate::jsonrpc::RpcError;
use crate::params::page;
use crate::tool::Outcome;

pub(super) fn list(inner: &ServerInner, params: PageParams) -> Result<Value, RpcError> {
    page("prompts", inner.prompts.listing(), params.cursor.as_deref())
}

/// `prompts/get`: the prompt rendered with its arguments (an object of strings).
pub(super) async fn get(
    inner: &ServerInner,
    params: GetPromptParams,
    ctx: &RequestContext,
) -> Result<Outcome<Value>, RpcError> {
    let arguments = params.arguments.unwrap_or_default();
    Ok(
        match inner.prompts.get(&params.name, &arguments, ctx).await? {
            Outcome::Complete(messages) => {
                let mut rendered = messages.to_json();
                inner.redactor.redact(&mut rendered);
                Outcome::Complete(rendered)
            }
            Outcome::InputRequired(i) => Outcome::InputRequired(i),
        },
    )
}
