//! `resources/list`, `resources/templates/list`, `resources/read` (redacted like tool
//! results) and the legacy `resources/subscribe` / `resources/unsubscribe`, over every
//! [`ResourceProvider`](crate::ResourceProvider) in the order they were added.

use porthole_core::params::{PageParams, UriParams};
use serde_json::{Map, Value, json};

use super::Method;
use crate::ServerInner;
use crate::context::RequestContext;
use crate::jsonrpc::{self, RpcError};
use crate::params::{page, read};
use crate::protocol::Era;
use crate::tool::Outcome;

pub(super) async fn serve(
    inner: &ServerInner,
    method: Method,
    params: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<Outcome<Value>, RpcError> {
    let listed = match method {
        Method::ResourcesList => {
            let PageParams { cursor } = read(method.name(), params)?;
            let all: Vec<Value> = inner.resources.iter().flat_map(|r| r.resources()).collect();
            page("resources", &all, cursor.as_deref())?
        }
        Method::ResourcesTemplatesList => {
            let PageParams { cursor } = read(method.name(), params)?;
            let all: Vec<Value> = inner.resources.iter().flat_map(|r| r.templates()).collect();
            page("resourceTemplates", &all, cursor.as_deref())?
        }
        Method::ResourcesRead => {
            return read_resource(inner, read(method.name(), params)?, ctx).await;
        }
        _ => subscribe(method, read(method.name(), params)?, ctx)?,
    };
    // Listings carry text from outside the code too (a skill's description).
    let mut listed = listed;
    inner.redactor.redact(&mut listed);
    Ok(Outcome::Complete(listed))
}

/// The longest URI a session may subscribe to, and how many it may follow at once.
const MAX_SUBSCRIBED_URI_BYTES: usize = 2048;
const MAX_SUBSCRIPTIONS: usize = 256;

/// `resources/subscribe` and `resources/unsubscribe`: the session's interest in one URI.
fn subscribe(
    method: Method,
    UriParams { uri }: UriParams,
    ctx: &RequestContext,
) -> Result<Value, RpcError> {
    if let Some(session) = &ctx.session {
        if method == Method::ResourcesSubscribe {
            // Each one lives as long as the session: both their size and number are bounded.
            if uri.len() > MAX_SUBSCRIBED_URI_BYTES {
                return Err(RpcError::invalid_params(format!(
                    "`uri` is over {MAX_SUBSCRIBED_URI_BYTES} bytes; no resource of this server has such a URI"
                )));
            }
            if !session.subscribe(&uri, MAX_SUBSCRIPTIONS) {
                return Err(RpcError::invalid_params(format!(
                    "a session follows at most {MAX_SUBSCRIPTIONS} resources; unsubscribe from one first"
                )));
            }
        } else {
            session.unsubscribe(&uri);
        }
    }
    Ok(json!({}))
}

/// `resources/read`: the first provider that knows the URI answers.
async fn read_resource(
    inner: &ServerInner,
    UriParams { uri }: UriParams,
    ctx: &RequestContext,
) -> Result<Outcome<Value>, RpcError> {
    for provider in &inner.resources {
        if let Some(outcome) = provider.read(&uri, ctx).await? {
            return Ok(match outcome {
                Outcome::Complete(mut contents) => {
                    for c in &mut contents {
                        inner.redactor.redact(c);
                    }
                    Outcome::Complete(json!({"contents": contents}))
                }
                Outcome::InputRequired(i) => Outcome::InputRequired(i),
            });
        }
    }
    // The 2025 revisions answer an unknown URI with -32002; 2026-07-28 moved it to
    // -32602 (its changelog, item 6).
    let code = match ctx.era {
        Era::Legacy(_) => jsonrpc::RESOURCE_NOT_FOUND,
        Era::Modern(_) => jsonrpc::INVALID_PARAMS,
    };
    Err(RpcError::new(code, format!("Resource not found: {uri}")).with_data(json!({"uri": uri})))
}
