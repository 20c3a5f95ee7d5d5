//! The method layer: the table of the methods we serve ([`Method`]), one file per method
//! family, mini-redis `cmd/` style — `lifecycle` (`initialize`, `ping`,
//! `server/discover`), `tools`, `resources`, `prompts`, `completion`, `logging`,
//! `tasks`, `skills` — and the shaping every result gets for its era (`resultType` and
//! caching hints in 2026, bare results before).
//!
//! The transport (`http`) has already decided the era, validated the headers and built
//! the [`RequestContext`]; it hands the parsed method here and knows no method by name
//! except where the protocol routes on it (`initialize` opens a session,
//! `subscriptions/listen` is a stream, `tools/call` mirrors parameters into headers).

mod completion;
mod lifecycle;
mod logging;
mod prompts;
mod resources;
mod skills;
mod tasks;
mod tool_task;
mod tools;

use serde_json::{Map, Value, json};

use super::ServerInner;
use super::context::RequestContext;
use super::jsonrpc::RpcError;
use super::protocol::{Era, META_SERVER_INFO};
use super::tool::Outcome;

pub(crate) use lifecycle::check_initialize;
pub(crate) use tasks::TaskMethod;
pub(crate) use tools::{Memo, ToolCall};

/// Every request method the server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Initialize,
    Ping,
    LoggingSetLevel,
    ServerDiscover,
    SubscriptionsListen,
    ToolsList,
    ToolsCall,
    ResourcesList,
    ResourcesRead,
    ResourcesTemplatesList,
    ResourcesSubscribe,
    ResourcesUnsubscribe,
    PromptsList,
    PromptsGet,
    CompletionComplete,
    Tasks(TaskMethod),
    SkillsList,
    SkillsGet,
    ResourcesDirectoryRead,
}

impl Method {
    /// The method for `name` as served in `era`; methods of the other era are unknown.
    pub(crate) fn parse(name: &str, modern: bool) -> Option<Method> {
        let method = match name {
            "initialize" => Method::Initialize,
            "ping" => Method::Ping,
            "logging/setLevel" => Method::LoggingSetLevel,
            "server/discover" => Method::ServerDiscover,
            "subscriptions/listen" => Method::SubscriptionsListen,
            "tools/list" => Method::ToolsList,
            "tools/call" => Method::ToolsCall,
            "resources/list" => Method::ResourcesList,
            "resources/read" => Method::ResourcesRead,
            "resources/templates/list" => Method::ResourcesTemplatesList,
            "resources/subscribe" => Method::ResourcesSubscribe,
            "resources/unsubscribe" => Method::ResourcesUnsubscribe,
            "prompts/list" => Method::PromptsList,
            "prompts/get" => Method::PromptsGet,
            "completion/complete" => Method::CompletionComplete,
            "skills/list" => Method::SkillsList,
            "skills/get" => Method::SkillsGet,
            "resources/directory/read" => Method::ResourcesDirectoryRead,
            "tasks/get" => Method::Tasks(TaskMethod::Get),
            "tasks/update" => Method::Tasks(TaskMethod::Update),
            "tasks/cancel" => Method::Tasks(TaskMethod::Cancel),
            "tasks/result" => Method::Tasks(TaskMethod::Result),
            "tasks/list" => Method::Tasks(TaskMethod::List),
            _ => return None,
        };
        let legacy_only = matches!(
            method,
            Method::Initialize
                | Method::Ping
                | Method::LoggingSetLevel
                | Method::ResourcesSubscribe
                | Method::ResourcesUnsubscribe
                | Method::Tasks(TaskMethod::Result | TaskMethod::List)
        );
        let modern_only = matches!(
            method,
            Method::ServerDiscover
                | Method::SubscriptionsListen
                | Method::Tasks(TaskMethod::Update)
        );
        if (modern && legacy_only) || (!modern && modern_only) {
            return None;
        }
        Some(method)
    }

    /// Methods that need no session state, so a bare request (no session, no version)
    /// can be served: listing, reading and calling, but not the handshake,
    /// subscriptions or a session's log level.
    pub(crate) fn is_stateless(self) -> bool {
        matches!(
            self,
            Method::Ping
                | Method::ToolsList
                | Method::ToolsCall
                | Method::ResourcesList
                | Method::ResourcesRead
                | Method::ResourcesTemplatesList
                | Method::PromptsList
                | Method::PromptsGet
                | Method::CompletionComplete
        )
    }

    /// Results that carry `ttlMs`/`cacheScope` in 2026.
    fn cacheable(self) -> bool {
        matches!(
            self,
            Method::ServerDiscover
                | Method::ToolsList
                | Method::PromptsList
                | Method::ResourcesList
                | Method::ResourcesTemplatesList
                | Method::ResourcesRead
                | Method::SkillsList
                | Method::SkillsGet
                | Method::ResourcesDirectoryRead
        )
    }
}

/// A method's result: a value, or JSON text the method wrote itself (a tool's result,
/// whose structured content is serialised once and written out as it is).
#[derive(Debug)]
pub(crate) enum MethodResult {
    Value(Value),
    Json(String),
}

impl MethodResult {
    pub(crate) fn into_value(self) -> Value {
        match self {
            MethodResult::Value(value) => value,
            MethodResult::Json(text) => serde_json::from_str(&text).unwrap_or_default(),
        }
    }
}

/// The method the server serves under `name` in an era: in the modern era a family the
/// server has nothing for (no prompts) is unknown, as the 2026 tests expect.
pub(crate) fn served(inner: &ServerInner, name: &str, modern: bool) -> Option<Method> {
    Method::parse(name, modern)
        .filter(|m| !modern || *m != Method::PromptsList || !inner.prompts.is_empty())
}

/// A result the server already holds in memory, serialised, when `method` can be
/// answered without running a handler (today: the first page of `tools/list`). The
/// transport writes it out as it is.
pub(crate) fn remembered<'a>(
    inner: &'a ServerInner,
    method: Method,
    params: &Map<String, Value>,
    ctx: &RequestContext,
) -> Option<&'a serde_json::value::RawValue> {
    match method {
        Method::ToolsList => tools::cached_list(inner, params, ctx),
        _ => None,
    }
}

/// What a call runs: a method with its `params` as a map, or a `tools/call` read
/// straight from the body.
pub(crate) enum Work {
    Method(Method, Map<String, Value>),
    ToolCall(ToolCall),
}

/// Runs `work`, its result shaped for the request's era.
pub(crate) async fn run(
    inner: &ServerInner,
    work: Work,
    ctx: &RequestContext,
) -> Result<MethodResult, RpcError> {
    let result = match work {
        Work::Method(method, params) => dispatch(inner, method, &params, ctx).await,
        Work::ToolCall(call) => tools::call(inner, call, ctx).await,
    };
    result.map_err(|error| error.redacted(&inner.redactor))
}

/// Runs `method` and returns its result shaped for the request's era.
pub(crate) async fn dispatch(
    inner: &ServerInner,
    method: Method,
    params: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<MethodResult, RpcError> {
    let outcome = match method {
        Method::Initialize => Outcome::Complete(lifecycle::initialize(inner, params)),
        Method::Ping => Outcome::Complete(json!({})),
        Method::ServerDiscover => Outcome::Complete(lifecycle::discover(inner, &ctx.era)),
        // A long-lived stream, not a reply: `http/listen.rs` serves it before dispatch.
        Method::SubscriptionsListen => {
            return Err(RpcError::internal(
                "subscriptions/listen is served as a stream (http/listen.rs)",
            ));
        }
        Method::LoggingSetLevel => Outcome::Complete(logging::set_level(params, ctx)?),
        Method::ToolsList => Outcome::Complete(tools::list(inner, params, ctx)?),
        Method::ToolsCall => return tools::call(inner, ToolCall::from_params(params)?, ctx).await,
        Method::ResourcesList
        | Method::ResourcesTemplatesList
        | Method::ResourcesRead
        | Method::ResourcesSubscribe
        | Method::ResourcesUnsubscribe => resources::serve(inner, method, params, ctx).await?,
        Method::PromptsList => Outcome::Complete(prompts::list(inner, params)?),
        Method::PromptsGet => prompts::get(inner, params, ctx).await?,
        Method::CompletionComplete => Outcome::Complete(completion::complete(inner, params).await?),
        Method::Tasks(task_method) => {
            Outcome::Complete(tasks::serve(inner, task_method, params, ctx).await?)
        }
        Method::SkillsList | Method::SkillsGet | Method::ResourcesDirectoryRead => {
            // A skill's front matter is whatever its author wrote, secrets included.
            let mut served = skills::serve(inner, method, params)?;
            inner.redactor.redact(&mut served);
            Outcome::Complete(served)
        }
    };
    shape(inner, method, outcome, &ctx.era).map(MethodResult::Value)
}

/// Adds what the era requires to a result.
fn shape(
    inner: &ServerInner,
    method: Method,
    outcome: Outcome<Value>,
    era: &Era,
) -> Result<Value, RpcError> {
    match (outcome, era) {
        (Outcome::Complete(result), Era::Legacy(_)) => Ok(result),
        (Outcome::InputRequired(_), Era::Legacy(_)) => Err(RpcError::internal(
            "this request needs input from the client, which the legacy era provides through server requests; retry with protocol 2026-07-28",
        )),
        (Outcome::InputRequired(input), Era::Modern(_)) => Ok(input.to_json()),
        (Outcome::Complete(mut result), Era::Modern(_)) => {
            // A task handle keeps its own discriminator.
            if result["resultType"] != "task" {
                result["resultType"] = json!("complete");
            }
            if method.cacheable() {
                result["ttlMs"] = json!(inner.info.cache_ttl_ms);
                result["cacheScope"] = json!("private");
            }
            let meta = result
                .as_object_mut()
                .map(|o| o.entry("_meta").or_insert_with(|| json!({})));
            if let Some(meta) = meta.and_then(Value::as_object_mut) {
                meta.insert(META_SERVER_INFO.into(), lifecycle::server_info(inner));
            }
            Ok(result)
        }
    }
}
