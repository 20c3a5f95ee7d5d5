//! `tools/list` and `tools/call`. A call runs the tool (or starts it as a task, see
//! `tool_task.rs`), redacts its result and writes one audit line; a complete result is
//! written as JSON text once, with what its era adds appended.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use porthole_core::params::{CallToolParams, PageParams};
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{Method, MethodResult, shape, tool_task};
use crate::ServerInner;
use crate::context::RequestContext;
use crate::guard::Access;
use crate::jsonrpc::RpcError;
use crate::params::{PAGE_SIZE, page, read};
use crate::protocol::Era;
use crate::session;
use crate::tasks::missing_tasks_capability;
use crate::tool::{Outcome, TaskSupport};
use crate::tool_result::CallToolResult;

/// Answers shaped once and kept: the tool set never changes after build.
#[derive(Default)]
pub(crate) struct Memo {
    /// The serialised first page of `tools/list`, by access (full, read-only), then
    /// era (legacy, modern).
    tools_list: [[OnceLock<Box<RawValue>>; 2]; 2],
    /// What each era adds to every complete tool result, as JSON members (legacy,
    /// modern).
    tool_result_tail: [OnceLock<String>; 2],
}

pub(super) fn list(
    inner: &ServerInner,
    params: PageParams,
    ctx: &RequestContext,
) -> Result<Value, RpcError> {
    page(
        "tools",
        inner.tools.listing(ctx.access),
        params.cursor.as_deref(),
    )
}

/// `tools/list` without a cursor, served from a cache of its serialised result.
/// `None` when the request needs the general path (a cursor, or several pages).
pub(super) fn cached_list<'a>(
    inner: &'a ServerInner,
    params: &Map<String, Value>,
    ctx: &RequestContext,
) -> Option<&'a RawValue> {
    let first_page = read::<PageParams>("tools/list", params).is_ok_and(|p| p.cursor.is_none());
    if !first_page || inner.tools.len() > PAGE_SIZE {
        return None;
    }
    let by_access = &inner.memo.tools_list[usize::from(ctx.access == Access::ReadOnly)];
    let slot = &by_access[usize::from(ctx.era.is_modern())];
    let cached = slot.get_or_init(|| {
        let listing = list(inner, PageParams::default(), ctx)
            .and_then(|result| {
                shape(
                    inner,
                    Method::ToolsList,
                    Outcome::Complete(result),
                    &ctx.era,
                )
            })
            .unwrap_or_default();
        serde_json::value::to_raw_value(&listing)
            .unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("valid JSON"))
    });
    Some(cached)
}

/// What `tools/call` runs, from its `params` however they were read: from a map (the
/// general path) or straight from the body (`http/tool_call.rs`), as the same type.
#[derive(Debug, PartialEq)]
pub(crate) struct ToolCall {
    /// The registered tool's own name when there is one (no new string per call).
    pub(crate) name: Arc<str>,
    /// `Null` when absent.
    pub(crate) arguments: Value,
    /// `params.task`, how a 2025-11-25 client asks for a task; `None` when absent or null.
    pub(crate) task: Option<Value>,
}

impl ToolCall {
    /// The call `params` ask for, its name the registered tool's own when there is one.
    pub(crate) fn new<M>(inner: &ServerInner, params: CallToolParams<'_, M>) -> ToolCall {
        let name = &*params.name;
        ToolCall {
            name: inner.tools.shared_name(name).unwrap_or_else(|| name.into()),
            arguments: params.arguments.map_or(Value::Null, Value::Object),
            task: params.task,
        }
    }

    /// Reads the general path's `params`.
    pub(crate) fn from_params(
        inner: &ServerInner,
        params: &Map<String, Value>,
    ) -> Result<ToolCall, RpcError> {
        let params: CallToolParams<IgnoredAny> = read("tools/call", params)?;
        Ok(ToolCall::new(inner, params))
    }
}

/// `tools/call`: a task handle when the tool and the client both support tasks,
/// otherwise the call itself. The token's access is checked here, once, before anything
/// starts (a task included).
pub(super) async fn call(
    inner: &ServerInner,
    call: ToolCall,
    ctx: &RequestContext,
) -> Result<MethodResult, RpcError> {
    let ToolCall {
        name,
        arguments: args,
        task,
    } = call;
    let name = &*name;
    inner.tools.check_access(name, ctx.access)?;
    if let Some(tool) = inner.tools.get(name) {
        let support = tool.task_support();
        let wanted = match &ctx.era {
            Era::Modern(_) => ctx.declares_tasks(),
            // 2025-11-25: the client asks for a task with `params.task`; an older
            // session ignores it (the revision says to, without the capability).
            Era::Legacy(version) => {
                crate::protocol::legacy_has_tasks(version)
                    && ctx.session.is_some()
                    && task.as_ref().is_some_and(Value::is_object)
            }
        };
        // 2025-11-25: a task asked of a tool that lists no `execution.taskSupport` SHOULD
        // get -32601 (the 2026 extension has no `task` parameter to ask with).
        if wanted && support == TaskSupport::Forbidden && !ctx.era.is_modern() {
            return Err(RpcError::method_not_found(&format!(
                "`{name}` as a task: it lists no execution.taskSupport, so it runs only as a \
                 plain call; send it without `task`"
            )));
        }
        if support != TaskSupport::Forbidden && wanted && tool.starts_task(&args, ctx) {
            let ttl = task.as_ref().and_then(legacy_task_ttl);
            let task = tool_task::start(inner, name, args, ctx, ttl).await?;
            let handle = match ctx.era {
                Era::Modern(_) => task.create_result(),
                Era::Legacy(_) => json!({"task": task.legacy()}),
            };
            return shape(
                inner,
                Method::ToolsCall,
                Outcome::Complete(handle),
                &ctx.era,
            )
            .map(MethodResult::Value);
        }
        if support == TaskSupport::Required && ctx.era.is_modern() && !ctx.declares_tasks() {
            return Err(missing_tasks_capability());
        }
    }
    match invoke(inner, name, args, ctx).await? {
        Outcome::Complete(result) => Ok(MethodResult::Json(
            result.render(result_tail(inner, &ctx.era)),
        )),
        Outcome::InputRequired(input) => shape(
            inner,
            Method::ToolsCall,
            Outcome::InputRequired(input),
            &ctx.era,
        )
        .map(MethodResult::Value),
    }
}

/// Runs a tool whose access was checked and redacts its result, with an audit line;
/// shared by plain calls and tasks.
pub(super) async fn invoke(
    inner: &ServerInner,
    name: &str,
    args: Value,
    ctx: &RequestContext,
) -> Result<Outcome<CallToolResult>, RpcError> {
    let started = Instant::now();
    let outcome = inner.tools.call(name, args, ctx).await;
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (status, result) = match outcome {
        Ok(Outcome::Complete(mut result)) => {
            result.redact(&inner.redactor);
            let status = if result.is_error { "tool_error" } else { "ok" };
            (status, Ok(Outcome::Complete(result)))
        }
        Ok(Outcome::InputRequired(input)) => ("input_required", Ok(Outcome::InputRequired(input))),
        Err(e) => ("protocol_error", Err(e)),
    };
    tracing::info!(
        target: "porthole::mcp::audit",
        // A name no tool has can be any length: the audit line keeps its start.
        tool = porthole_core::text::head(name, 128),
        era = ctx.era.version(),
        session = ctx.session.as_ref().map(|s| session::short(&s.id)).unwrap_or("-"),
        duration_ms = format!("{elapsed_ms:.1}"),
        outcome = status,
        "tools/call"
    );
    result
}

/// What [`shape`] adds to a complete tool result in `era`, as JSON members to append to
/// it (each led by a comma): `shape` run once per era on an empty result, so a tool
/// result written as text gets exactly what a shaped value would.
fn result_tail<'a>(inner: &'a ServerInner, era: &Era) -> &'a str {
    inner.memo.tool_result_tail[usize::from(era.is_modern())].get_or_init(|| {
        let shaped = shape(inner, Method::ToolsCall, Outcome::Complete(json!({})), era)
            .unwrap_or_default()
            .to_string();
        match shaped.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(members) if !members.is_empty() => format!(",{members}"),
            _ => String::new(),
        }
    })
}

/// The TTL a 2025-11-25 client asked for in `params.task.ttl`, kept between one
/// second and a day.
fn legacy_task_ttl(task: &Value) -> Option<Duration> {
    let ttl_ms = task.get("ttl")?.as_u64()?;
    Some(Duration::from_millis(ttl_ms.clamp(1000, 24 * 3600 * 1000)))
}
