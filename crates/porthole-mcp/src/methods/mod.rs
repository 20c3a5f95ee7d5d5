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
use super::params::read;
use super::protocol::{Era, META_SERVER_INFO};
use super::tool::Outcome;

pub(crate) use lifecycle::{check_initialize, initialize};
pub(crate) use tasks::TaskMethod;
pub(crate) use tools::{Memo, ToolCall};

/// Every request method the server knows. Adding one is a variant here and its arms in
/// [`Method::name`], [`Method::profile`] and [`dispatch`]: each is an exhaustive
/// `match`, so the compiler asks for every one of them.
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

/// The protocol eras a method exists in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eras {
    Both,
    /// 2025-11-25 and before only (the 2026 revision dropped it).
    Legacy,
    /// 2026-07-28 only.
    Modern,
}

/// What the protocol says of a method, beside what it does.
#[derive(Debug, Clone, Copy)]
struct Profile {
    eras: Eras,
    /// It needs no session state, so a bare request (no session, no version) can be
    /// served: listing, reading and calling, but not the handshake, subscriptions or a
    /// session's log level.
    stateless: bool,
    /// Its 2026 results carry `ttlMs`/`cacheScope`.
    cacheable: bool,
}

impl Profile {
    const fn new(eras: Eras, stateless: bool, cacheable: bool) -> Profile {
        Profile {
            eras,
            stateless,
            cacheable,
        }
    }
}

impl Method {
    /// Every method, for [`Method::parse`]; a test checks each name reads back as its
    /// method, and [`Method::name`]'s exhaustive match that none is left out of it.
    const ALL: [Method; 23] = [
        Method::Initialize,
        Method::Ping,
        Method::LoggingSetLevel,
        Method::ServerDiscover,
        Method::SubscriptionsListen,
        Method::ToolsList,
        Method::ToolsCall,
        Method::ResourcesList,
        Method::ResourcesRead,
        Method::ResourcesTemplatesList,
        Method::ResourcesSubscribe,
        Method::ResourcesUnsubscribe,
        Method::PromptsList,
        Method::PromptsGet,
        Method::CompletionComplete,
        Method::Tasks(TaskMethod::Get),
        Method::Tasks(TaskMethod::Update),
        Method::Tasks(TaskMethod::Cancel),
        Method::Tasks(TaskMethod::Result),
        Method::Tasks(TaskMethod::List),
        Method::SkillsList,
        Method::SkillsGet,
        Method::ResourcesDirectoryRead,
    ];

    /// The method's name on the wire.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Method::Initialize => "initialize",
            Method::Ping => "ping",
            Method::LoggingSetLevel => "logging/setLevel",
            Method::ServerDiscover => "server/discover",
            Method::SubscriptionsListen => "subscriptions/listen",
            Method::ToolsList => "tools/list",
            Method::ToolsCall => "tools/call",
            Method::ResourcesList => "resources/list",
            Method::ResourcesRead => "resources/read",
            Method::ResourcesTemplatesList => "resources/templates/list",
            Method::ResourcesSubscribe => "resources/subscribe",
            Method::ResourcesUnsubscribe => "resources/unsubscribe",
            Method::PromptsList => "prompts/list",
            Method::PromptsGet => "prompts/get",
            Method::CompletionComplete => "completion/complete",
            Method::Tasks(TaskMethod::Get) => "tasks/get",
            Method::Tasks(TaskMethod::Update) => "tasks/update",
            Method::Tasks(TaskMethod::Cancel) => "tasks/cancel",
            Method::Tasks(TaskMethod::Result) => "tasks/result",
            Method::Tasks(TaskMethod::List) => "tasks/list",
            Method::SkillsList => "skills/list",
            Method::SkillsGet => "skills/get",
            Method::ResourcesDirectoryRead => "resources/directory/read",
        }
    }

    /// The eras it exists in, whether a bare request may call it, whether its 2026
    /// results carry caching hints.
    fn profile(self) -> Profile {
        use Eras::{Both, Legacy, Modern};
        match self {
            Method::Initialize | Method::LoggingSetLevel => Profile::new(Legacy, false, false),
            Method::Ping => Profile::new(Legacy, true, false),
            Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
                Profile::new(Legacy, false, false)
            }
            Method::Tasks(TaskMethod::Result | TaskMethod::List) => {
                Profile::new(Legacy, false, false)
            }
            Method::ServerDiscover => Profile::new(Modern, false, true),
            Method::SubscriptionsListen | Method::Tasks(TaskMethod::Update) => {
                Profile::new(Modern, false, false)
            }
            Method::Tasks(TaskMethod::Get | TaskMethod::Cancel) => Profile::new(Both, false, false),
            Method::ToolsList
            | Method::PromptsList
            | Method::ResourcesList
            | Method::ResourcesTemplatesList
            | Method::ResourcesRead => Profile::new(Both, true, true),
            Method::ToolsCall | Method::PromptsGet | Method::CompletionComplete => {
                Profile::new(Both, true, false)
            }
            Method::SkillsList | Method::SkillsGet | Method::ResourcesDirectoryRead => {
                Profile::new(Both, false, true)
            }
        }
    }

    /// The method for `name` as served in `era`; methods of the other era are unknown.
    pub(crate) fn parse(name: &str, modern: bool) -> Option<Method> {
        let method = Method::ALL.into_iter().find(|m| m.name() == name)?;
        let exists = match method.profile().eras {
            Eras::Both => true,
            Eras::Legacy => !modern,
            Eras::Modern => modern,
        };
        exists.then_some(method)
    }

    /// Whether a bare request (no session, no version) can be served; see
    /// [`Profile::stateless`].
    pub(crate) fn is_stateless(self) -> bool {
        self.profile().stateless
    }

    /// Results that carry `ttlMs`/`cacheScope` in 2026.
    fn cacheable(self) -> bool {
        self.profile().cacheable
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

/// Runs `method` and returns its result shaped for the request's era. Each arm reads
/// `params` as its method's type (`porthole_core::params`) where the method needs them,
/// after the checks that come first (a server without skills answers `skills/get` as
/// unknown, whatever its params).
pub(crate) async fn dispatch(
    inner: &ServerInner,
    method: Method,
    params: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<MethodResult, RpcError> {
    let name = method.name();
    let outcome = match method {
        // Answered by the transport, which opens the session with it (`http/legacy.rs`).
        Method::Initialize => {
            return Err(RpcError::internal(
                "initialize is answered by the transport (http/legacy.rs)",
            ));
        }
        Method::Ping => Outcome::Complete(json!({})),
        Method::ServerDiscover => Outcome::Complete(lifecycle::discover(inner, &ctx.era)),
        // A long-lived stream, not a reply: `http/listen.rs` serves it before dispatch.
        Method::SubscriptionsListen => {
            return Err(RpcError::internal(
                "subscriptions/listen is served as a stream (http/listen.rs)",
            ));
        }
        Method::LoggingSetLevel => Outcome::Complete(logging::set_level(read(name, params)?, ctx)),
        Method::ToolsList => Outcome::Complete(tools::list(inner, read(name, params)?, ctx)?),
        Method::ToolsCall => {
            return tools::call(inner, ToolCall::from_params(inner, params)?, ctx).await;
        }
        Method::ResourcesList
        | Method::ResourcesTemplatesList
        | Method::ResourcesRead
        | Method::ResourcesSubscribe
        | Method::ResourcesUnsubscribe => resources::serve(inner, method, params, ctx).await?,
        Method::PromptsList => Outcome::Complete(prompts::list(inner, read(name, params)?)?),
        Method::PromptsGet => prompts::get(inner, read(name, params)?, ctx).await?,
        Method::CompletionComplete => {
            Outcome::Complete(completion::complete(inner, read(name, params)?).await?)
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_reads_back_from_its_name_in_the_eras_it_exists_in() {
        for method in Method::ALL {
            let (legacy, modern) = match method.profile().eras {
                Eras::Both => (true, true),
                Eras::Legacy => (true, false),
                Eras::Modern => (false, true),
            };
            assert_eq!(
                Method::parse(method.name(), false).is_some(),
                legacy,
                "{method:?}"
            );
            assert_eq!(
                Method::parse(method.name(), true).is_some(),
                modern,
                "{method:?}"
            );
            if legacy {
                assert_eq!(Method::parse(method.name(), false), Some(method));
            }
        }
        assert_eq!(Method::parse("tools/cal", false), None);
    }
}
