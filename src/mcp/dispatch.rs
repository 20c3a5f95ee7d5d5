//! Method dispatch: one enum of the methods we serve ([`Method`], the method table), and
//! one function per method family. Methods with a home of their own: `tasks/*` in
//! `tasks/methods.rs`, `skills/*` in `skills`, `subscriptions/listen` (a stream) in
//! `http/listen.rs`, `initialize` and session streams in `http/legacy.rs`. The transport (`http`) has already decided the era and validated headers;
//! here a method runs and its result is shaped for the era (`resultType` and caching
//! hints in 2026, bare results before).

use std::time::Instant;

use serde_json::{Map, Value, json};

use super::ServerInner;
use super::call::MethodResult;
use super::context::RequestContext;
use super::guard::Access;
use super::jsonrpc::RpcError;
use super::protocol::{self, Era, META_SERVER_INFO, log_level_rank};
use super::skills::SKILLS_EXTENSION;
use super::tasks::{TASKS_EXTENSION, TaskMethod, missing_tasks_capability};
use super::tool::{CallToolResult, InputRequired, Outcome, TaskSupport};

/// What `tools/call` came to: a task handle, or the tool's own outcome.
enum ToolCall {
    Task(Value),
    Ran(Outcome<CallToolResult>),
}

/// Every request method the server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
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
    pub fn parse(name: &str, modern: bool) -> Option<Method> {
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
    pub fn is_stateless(self) -> bool {
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

/// The TTL a 2025-11-25 client asked for in `params.task.ttl`, kept between one
/// second and a day.
fn legacy_task_ttl(params: &Map<String, Value>) -> Option<std::time::Duration> {
    let ttl_ms = params.get("task")?.get("ttl")?.as_u64()?;
    Some(std::time::Duration::from_millis(
        ttl_ms.clamp(1000, 24 * 3600 * 1000),
    ))
}

/// Page size of list results.
const PAGE_SIZE: usize = 100;

impl ServerInner {
    /// The capabilities object for `era`: tasks are the extension in the modern era and
    /// the experimental `tasks` capability from 2025-11-25 on.
    pub(crate) fn capabilities(&self, era: &Era) -> Value {
        let mut caps = json!({
            "tools": {"listChanged": true},
            "completions": {},
            "logging": {},
        });
        match era {
            Era::Modern(_) => {
                caps["extensions"] = json!({TASKS_EXTENSION: {}});
                if self.skills.is_some() {
                    caps["extensions"][SKILLS_EXTENSION] = json!({"directoryRead": true});
                }
            }
            Era::Legacy(version) if *version >= "2025-11-25" => {
                caps["tasks"] =
                    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
            }
            Era::Legacy(_) => {}
        }
        if !self.resources.is_empty() {
            caps["resources"] = json!({"subscribe": true, "listChanged": true});
        }
        if !self.prompts.is_empty() {
            caps["prompts"] = json!({"listChanged": true});
        }
        caps
    }

    pub(crate) fn server_info(&self) -> Value {
        json!({"name": self.info.name, "version": self.info.version, "title": self.info.title})
    }

    /// Runs `method` and returns its result shaped for the request's era.
    pub(crate) async fn dispatch(
        &self,
        method: Method,
        params: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Result<MethodResult, RpcError> {
        let outcome = match method {
            Method::Initialize => Outcome::Complete(self.initialize(params)),
            Method::SkillsList | Method::SkillsGet | Method::ResourcesDirectoryRead => {
                Outcome::Complete(self.skills_method(method, params)?)
            }
            Method::Tasks(task_method) => {
                Outcome::Complete(self.task_method(task_method, params, ctx).await?)
            }
            Method::Ping => Outcome::Complete(json!({})),
            Method::LoggingSetLevel => Outcome::Complete(set_level(params, ctx)?),
            Method::ServerDiscover => Outcome::Complete(json!({
                "supportedVersions": protocol::MODERN_VERSIONS,
                "capabilities": self.capabilities(&ctx.era),
                "instructions": self.info.instructions,
            })),
            // A long-lived stream, not a reply: `http/listen.rs` serves it before dispatch.
            Method::SubscriptionsListen => {
                return Err(RpcError::internal(
                    "subscriptions/listen is served as a stream (http/listen.rs)",
                ));
            }
            Method::ToolsList => {
                Outcome::Complete(page("tools", self.tools.listing(ctx.access), params)?)
            }
            Method::ToolsCall => match self.call_tool(params, ctx).await? {
                ToolCall::Task(handle) => Outcome::Complete(handle),
                ToolCall::Ran(Outcome::Complete(result)) => {
                    return Ok(MethodResult::Json(
                        result.render(self.tool_result_tail(&ctx.era)),
                    ));
                }
                ToolCall::Ran(Outcome::InputRequired(input)) => Outcome::InputRequired(input),
            },
            Method::ResourcesList => {
                let all: Vec<Value> = self.resources.iter().flat_map(|r| r.resources()).collect();
                Outcome::Complete(page("resources", &all, params)?)
            }
            Method::ResourcesTemplatesList => {
                let all: Vec<Value> = self.resources.iter().flat_map(|r| r.templates()).collect();
                Outcome::Complete(page("resourceTemplates", &all, params)?)
            }
            Method::ResourcesRead => self.read_resource(params, ctx).await?,
            Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
                let uri = required_str(params, "uri")?;
                if let Some(session) = &ctx.session {
                    if method == Method::ResourcesSubscribe {
                        session.subscribe(uri);
                    } else {
                        session.unsubscribe(uri);
                    }
                }
                Outcome::Complete(json!({}))
            }
            Method::PromptsList => {
                Outcome::Complete(page("prompts", self.prompts.listing(), params)?)
            }
            Method::PromptsGet => {
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
                match self.prompts.get(name, args, ctx).await? {
                    Outcome::Complete(messages) => {
                        // Prompts quote logs and messages: redact them like tool results.
                        let mut rendered = messages.to_json();
                        self.redactor.redact(&mut rendered);
                        Outcome::Complete(rendered)
                    }
                    Outcome::InputRequired(i) => Outcome::InputRequired(i),
                }
            }
            Method::CompletionComplete => Outcome::Complete(self.complete(params).await?),
        };
        self.shape(method, outcome, &ctx.era)
            .map(MethodResult::Value)
    }

    /// What [`ServerInner::shape`] adds to a complete tool result in `era`, as JSON
    /// members to append to it (each led by a comma): `shape` run once per era on an
    /// empty result, so a tool result written as text gets exactly what a shaped value
    /// would.
    fn tool_result_tail(&self, era: &Era) -> &str {
        self.tool_result_tail[usize::from(era.is_modern())].get_or_init(|| {
            let shaped = self
                .shape(Method::ToolsCall, Outcome::Complete(json!({})), era)
                .unwrap_or_default()
                .to_string();
            match shaped.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(members) if !members.is_empty() => format!(",{members}"),
                _ => String::new(),
            }
        })
    }

    /// `tools/list` without a cursor, served from a cache of its serialised result.
    /// `None` when the request needs the general path (a cursor, or several pages).
    pub(crate) fn cached_tools_list(
        &self,
        method: Method,
        params: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Option<&serde_json::value::RawValue> {
        let era = &ctx.era;
        let first_page = matches!(params.get("cursor"), None | Some(Value::Null));
        if method != Method::ToolsList || !first_page || self.tools.len() > PAGE_SIZE {
            return None;
        }
        let by_access = &self.tools_list_cache[usize::from(ctx.access == Access::ReadOnly)];
        let slot = &by_access[usize::from(era.is_modern())];
        let cached = slot.get_or_init(|| {
            let listing = page("tools", self.tools.listing(ctx.access), params)
                .and_then(|result| self.shape(method, Outcome::Complete(result), era))
                .unwrap_or_default();
            serde_json::value::to_raw_value(&listing).unwrap_or_else(|_| {
                serde_json::value::RawValue::from_string("{}".into()).expect("valid JSON")
            })
        });
        Some(cached)
    }

    fn initialize(&self, params: &Map<String, Value>) -> Value {
        let version =
            protocol::negotiate_legacy(params.get("protocolVersion").and_then(Value::as_str));
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": self.capabilities(&Era::Legacy(version)),
            "serverInfo": self.server_info(),
        });
        if !self.info.instructions.is_empty() {
            result["instructions"] = json!(self.info.instructions);
        }
        result
    }

    /// Adds what the era requires to a result.
    fn shape(&self, method: Method, outcome: Outcome<Value>, era: &Era) -> Result<Value, RpcError> {
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
                    result["ttlMs"] = json!(self.info.cache_ttl_ms);
                    result["cacheScope"] = json!("private");
                }
                let meta = result
                    .as_object_mut()
                    .map(|o| o.entry("_meta").or_insert_with(|| json!({})));
                if let Some(meta) = meta.and_then(Value::as_object_mut) {
                    meta.insert(META_SERVER_INFO.into(), self.server_info());
                }
                Ok(result)
            }
        }
    }

    /// `tools/call`: a task handle when the tool and the client both support tasks,
    /// otherwise the call itself.
    async fn call_tool(
        &self,
        params: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Result<ToolCall, RpcError> {
        let name = required_str(params, "name")?;
        let args = params.get("arguments").cloned().unwrap_or(Value::Null);
        if !(args.is_null() || args.is_object()) {
            return Err(RpcError::invalid_params("`arguments` must be an object"));
        }
        self.tools.check_access(name, ctx.access)?;
        if let Some(tool) = self.tools.get(name) {
            let support = tool.task_support();
            let wanted = match &ctx.era {
                Era::Modern(_) => ctx.declares_tasks(),
                // 2025-11-25: the client asks for a task with `params.task`.
                Era::Legacy(_) => {
                    ctx.session.is_some() && params.get("task").is_some_and(Value::is_object)
                }
            };
            if support != TaskSupport::Forbidden && wanted && tool.starts_task(&args, ctx) {
                let ttl = legacy_task_ttl(params);
                let task = self.start_tool_task(name, args, ctx, ttl).await?;
                return Ok(ToolCall::Task(match ctx.era {
                    Era::Modern(_) => task.create_result(),
                    Era::Legacy(_) => json!({"task": task.legacy()}),
                }));
            }
            if support == TaskSupport::Required && ctx.era.is_modern() && !ctx.declares_tasks() {
                return Err(missing_tasks_capability());
            }
        }
        self.invoke_tool(name, args, ctx).await.map(ToolCall::Ran)
    }

    /// Runs a tool and redacts its result, with an audit line; shared by plain calls
    /// and tasks.
    pub(crate) async fn invoke_tool(
        &self,
        name: &str,
        args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let started = Instant::now();
        let outcome = self.tools.call(name, args, ctx).await;
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (status, result) = match outcome {
            Ok(Outcome::Complete(mut result)) => {
                for block in &mut result.content {
                    self.redactor.redact(block);
                }
                if let Some(s) = &mut result.structured {
                    self.redactor.redact(s);
                }
                let status = if result.is_error { "tool_error" } else { "ok" };
                (status, Ok(Outcome::Complete(result)))
            }
            Ok(Outcome::InputRequired(input)) => {
                ("input_required", Ok(Outcome::InputRequired(input)))
            }
            Err(e) => ("protocol_error", Err(e)),
        };
        tracing::info!(
            target: "porthole::mcp::audit",
            tool = name,
            era = ctx.era.version(),
            session = ctx.session.as_ref().map(|s| super::session::short(&s.id)).unwrap_or("-"),
            duration_ms = format!("{elapsed_ms:.1}"),
            outcome = status,
            "tools/call"
        );
        result
    }

    /// `skills/list`, `skills/get` and `resources/directory/read` (Skills extension).
    fn skills_method(
        &self,
        method: Method,
        params: &Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let Some(skills) = &self.skills else {
            return Err(RpcError::method_not_found(match method {
                Method::SkillsList => "skills/list",
                Method::SkillsGet => "skills/get",
                _ => "resources/directory/read",
            }));
        };
        match method {
            Method::SkillsList => page("skills", &skills.entries(), params),
            Method::SkillsGet => skills.get(required_str(params, "uri")?),
            _ => page(
                "resources",
                &skills.read_directory(required_str(params, "uri")?)?,
                params,
            ),
        }
    }

    async fn read_resource(
        &self,
        params: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Result<Outcome<Value>, RpcError> {
        let uri = required_str(params, "uri")?;
        for provider in &self.resources {
            if let Some(outcome) = provider.read(uri, ctx).await? {
                return Ok(match outcome {
                    Outcome::Complete(mut contents) => {
                        for c in &mut contents {
                            self.redactor.redact(c);
                        }
                        Outcome::Complete(json!({"contents": contents}))
                    }
                    Outcome::InputRequired(i) => Outcome::InputRequired(i),
                });
            }
        }
        Err(
            RpcError::invalid_params(format!("Resource not found: {uri}"))
                .with_data(json!({"uri": uri})),
        )
    }

    async fn complete(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let reference = params
            .get("ref")
            .ok_or_else(|| RpcError::invalid_params("`ref` is required"))?;
        let argument = params
            .get("argument")
            .ok_or_else(|| RpcError::invalid_params("`argument` ({name, value}) is required"))?;
        let (arg_name, value) = (
            argument["name"].as_str().unwrap_or_default(),
            argument["value"].as_str().unwrap_or_default(),
        );
        let mut values = match reference["type"].as_str() {
            Some("ref/prompt") => {
                let name = reference["name"].as_str().unwrap_or_default();
                let (_, prompt) = self
                    .prompts
                    .find(name)
                    .ok_or_else(|| RpcError::invalid_params(format!("Unknown prompt: {name}")))?;
                prompt.complete(arg_name, value).await
            }
            Some("ref/resource") => {
                let uri = reference["uri"].as_str().unwrap_or_default();
                let mut all = Vec::new();
                for provider in &self.resources {
                    all.extend(provider.complete(uri, arg_name, value).await);
                }
                all
            }
            _ => {
                return Err(RpcError::invalid_params(
                    "`ref.type` must be \"ref/prompt\" or \"ref/resource\"",
                ));
            }
        };
        let total = values.len();
        values.truncate(100);
        Ok(json!({"completion": {"values": values, "total": total, "hasMore": total > 100}}))
    }
}

fn set_level(params: &Map<String, Value>, ctx: &RequestContext) -> Result<Value, RpcError> {
    let level = required_str(params, "level")?;
    let rank = log_level_rank(level).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "unknown log level `{level}`; use one of {}",
            protocol::LOG_LEVELS.join(", ")
        ))
    })?;
    if let Some(session) = &ctx.session {
        session.set_log_level(rank);
    }
    Ok(json!({}))
}

pub(crate) fn required_str<'a>(
    params: &'a Map<String, Value>,
    key: &str,
) -> Result<&'a str, RpcError> {
    params.get(key).and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params(format!("`{key}` is required and must be a string"))
    })
}

/// One page of a list result. Cursors are opaque offsets.
fn page(key: &str, all: &[Value], params: &Map<String, Value>) -> Result<Value, RpcError> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) if c.is_empty() => 0,
        Some(Value::String(c)) => c
            .strip_prefix("offset-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n <= all.len())
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "invalid cursor `{c}`; pass back a nextCursor unchanged"
                ))
            })?,
        Some(_) => return Err(RpcError::invalid_params("`cursor` must be a string")),
    };
    let end = (start + PAGE_SIZE).min(all.len());
    let mut result = json!({key: &all[start..end]});
    if end < all.len() {
        result["nextCursor"] = json!(format!("offset-{end}"));
    }
    Ok(result)
}

/// An MRTR input request: `{"method": …, "params": …}`.
pub fn input_request(method: &str, params: Value) -> Value {
    json!({"method": method, "params": params})
}

/// An MRTR result asking the client for one input under `key`.
pub fn ask(key: &str, request: Value, state: Option<String>) -> InputRequired {
    let mut input_requests = Map::new();
    input_requests.insert(key.to_string(), request);
    InputRequired {
        input_requests,
        request_state: state,
    }
}
