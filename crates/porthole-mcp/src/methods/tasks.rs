//! The `tasks/*` methods. Modern (the extension): `tasks/get` (the detailed task),
//! `tasks/update` (answers to its input requests) and `tasks/cancel`, all acknowledged
//! with plain results and only for clients that declare the extension. Legacy
//! (2025-11-25 experimental tasks): `tasks/get`, `tasks/result` (waits for the end and
//! returns what the request itself would have), `tasks/list` (the session's tasks) and
//! `tasks/cancel` (returns the task). What each does to a task is the engine's
//! (`mcp::tasks`).

use porthole_core::params::{PageParams, TaskParams, UpdateTaskParams};
use serde_json::{Map, Value, json};

use crate::ServerInner;
use crate::context::RequestContext;
use crate::jsonrpc::RpcError;
use crate::params::read;
use crate::tasks::{missing_tasks_capability, not_found};

/// Which `tasks/*` method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskMethod {
    Get,
    Update,
    Cancel,
    Result,
    List,
}

/// Serves a `tasks/*` method for `ctx`'s era.
pub(super) async fn serve(
    inner: &ServerInner,
    method: TaskMethod,
    params: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<Value, RpcError> {
    let name = super::Method::Tasks(method).name();
    let tasks = &inner.tasks;
    let owner = tasks.owner(&ctx.caller);
    if ctx.era.is_modern() {
        if !ctx.declares_tasks() {
            return Err(missing_tasks_capability());
        }
        let TaskParams { task_id: id } = read(name, params)?;
        let id = id.as_str();
        // A 2025-11-25 session's task is that session's only (docs/tasks.md), also for
        // the same credential speaking 2026-07-28.
        let task = tasks.find(id, &owner).await?;
        if task.session.is_some() {
            return Err(not_found(id));
        }
        return match method {
            TaskMethod::Get => Ok(task.detailed()),
            TaskMethod::Update => {
                let update: UpdateTaskParams = read(name, params)?;
                tasks.update(id, &owner, update.input_responses).await
            }
            TaskMethod::Cancel => tasks.cancel(id, &owner).await.map(|_| json!({})),
            TaskMethod::Result | TaskMethod::List => {
                Err(RpcError::method_not_found("tasks/result and tasks/list"))
            }
        };
    }
    let Some(session) = &ctx.session else {
        return Err(RpcError::invalid_params(
            "tasks belong to a session: call initialize first",
        ));
    };
    // Tasks came with 2025-11-25: in an older session `tasks/*` do not exist.
    if !crate::protocol::legacy_has_tasks(ctx.era.version()) {
        return Err(RpcError::method_not_found(&format!(
            "tasks/* in a {} session (tasks came with protocol 2025-11-25)",
            ctx.era.version()
        )));
    }
    if method == TaskMethod::List {
        let PageParams { cursor } = read(name, params)?;
        return tasks.list(&session.id, &owner, cursor.as_deref()).await;
    }
    let TaskParams { task_id: id } = read(name, params)?;
    let id = id.as_str();
    let task = tasks.find(id, &owner).await?;
    if task.session.as_deref() != Some(session.id.as_str()) {
        return Err(not_found(id));
    }
    match method {
        TaskMethod::Get => Ok(task.legacy()),
        // 2025-11-25: a terminal task MUST be refused with -32602 (the extension
        // instead acknowledges any cancel, as eventually consistent).
        TaskMethod::Cancel if task.status.is_terminal() => Err(RpcError::invalid_params(format!(
            "Cannot cancel task: already in terminal status '{}'",
            task.status.as_str()
        ))),
        TaskMethod::Cancel => tasks.cancel(id, &owner).await.map(|t| t.legacy()),
        TaskMethod::Result => tasks.wait_for_result(task).await,
        TaskMethod::Update | TaskMethod::List => Err(RpcError::method_not_found("tasks/update")),
    }
}
