//! The `tasks/*` methods. Modern (the extension): `tasks/get` (the detailed task),
//! `tasks/update` (answers to its input requests) and `tasks/cancel`, all acknowledged
//! with plain results and only for clients that declare the extension. Legacy
//! (2025-11-25 experimental tasks): `tasks/get`, `tasks/result` (waits for the end and
//! returns what the request itself would have), `tasks/list` (the session's tasks) and
//! `tasks/cancel` (returns the task).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::record::{TaskRecord, TaskStatus};
use super::{TaskEngine, missing_tasks_capability};
use crate::mcp::ServerInner;
use crate::mcp::context::RequestContext;
use crate::mcp::dispatch::required_str;
use crate::mcp::jsonrpc::RpcError;
use crate::mcp::subscriptions::Change;

/// The `_meta` key that ties a legacy `tasks/result` to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Which `tasks/*` method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskMethod {
    Get,
    Update,
    Cancel,
    Result,
    List,
}

impl ServerInner {
    /// Serves a `tasks/*` method for `ctx`'s era.
    pub(crate) async fn task_method(
        &self,
        method: TaskMethod,
        params: &Map<String, Value>,
        ctx: &RequestContext,
    ) -> Result<Value, RpcError> {
        let tasks = &self.tasks;
        let owner = tasks.owner(&ctx.caller);
        if ctx.era.is_modern() {
            if !ctx.declares_tasks() {
                return Err(missing_tasks_capability());
            }
            let id = required_str(params, "taskId")?;
            return match method {
                TaskMethod::Get => Ok(tasks.find(id, &owner).await?.detailed()),
                TaskMethod::Update => tasks.update(id, &owner, params).await,
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
        if method == TaskMethod::List {
            return tasks.list(&session.id, &owner).await;
        }
        let id = required_str(params, "taskId")?;
        let task = tasks.find(id, &owner).await?;
        if task.session.as_deref() != Some(session.id.as_str()) {
            return Err(super::not_found(id));
        }
        match method {
            TaskMethod::Get => Ok(task.legacy()),
            // 2025-11-25: a terminal task MUST be refused with -32602 (the extension
            // instead acknowledges any cancel, as eventually consistent).
            TaskMethod::Cancel if task.status.is_terminal() => {
                Err(RpcError::invalid_params(format!(
                    "Cannot cancel task: already in terminal status '{}'",
                    task.status.as_str()
                )))
            }
            TaskMethod::Cancel => tasks.cancel(id, &owner).await.map(|t| t.legacy()),
            TaskMethod::Result => tasks.wait_for_result(task).await,
            TaskMethod::Update | TaskMethod::List => {
                Err(RpcError::method_not_found("tasks/update"))
            }
        }
    }
}

/// Most task ids one `subscriptions/listen` may name.
const MAX_LISTENED_TASKS: usize = 100;

impl TaskEngine {
    /// The ids of a `subscriptions/listen` the server agrees to report on: the caller's
    /// own tasks within their TTL. Others are left out of the acknowledgment.
    pub(crate) async fn agreed_task_ids(
        &self,
        ids: &[Value],
        owner: &str,
    ) -> Result<Vec<String>, RpcError> {
        if ids.len() > MAX_LISTENED_TASKS {
            return Err(RpcError::invalid_params(format!(
                "`notifications.taskIds` names {} tasks; listen to at most {MAX_LISTENED_TASKS} per stream",
                ids.len()
            )));
        }
        let mut agreed = Vec::new();
        for id in ids.iter().filter_map(Value::as_str) {
            if self.find(id, owner).await.is_ok() && !agreed.iter().any(|a| a == id) {
                agreed.push(id.to_string());
            }
        }
        Ok(agreed)
    }

    /// `tasks/update`: keeps the answers to keys the task is waiting on, drops the rest,
    /// and passes them to the running work.
    async fn update(
        &self,
        id: &str,
        owner: &str,
        params: &Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let responses = match params.get("inputResponses") {
            Some(Value::Object(responses)) => responses.clone(),
            _ => {
                return Err(RpcError::invalid_params(
                    "`inputResponses` is required: an object keyed by the task's inputRequests keys",
                ));
            }
        };
        self.find(id, owner).await?;
        let accepted = self.change_running(id, move |task| {
            let mut accepted = Map::new();
            if task.status != TaskStatus::InputRequired {
                return accepted;
            }
            for (key, answer) in responses {
                if task.input_requests.remove(&key).is_some() {
                    accepted.insert(key, answer);
                }
            }
            if !accepted.is_empty() && task.input_requests.is_empty() {
                task.set_status(
                    TaskStatus::Working,
                    Some("Resumed with the client's input.".into()),
                );
            }
            accepted
        });
        if let Some(accepted) = accepted.await.transpose()?
            && !accepted.is_empty()
            && let Some(running) = self.running().get(id)
        {
            let _ = running.inputs.send(accepted);
        }
        Ok(json!({}))
    }

    /// `tasks/cancel`: records the cancellation, then stops the work. A task that has
    /// already ended is left as it is.
    async fn cancel(&self, id: &str, owner: &str) -> Result<TaskRecord, RpcError> {
        let mut task = self.find(id, owner).await?;
        if task.status.is_terminal() {
            return Ok(task);
        }
        let message = Some("Cancelled at the client's request.".to_string());
        let recorded = self.change_running(id, |t| {
            t.set_status(TaskStatus::Cancelled, message.clone());
            t.clone()
        });
        match recorded.await {
            Some(recorded) => task = recorded?,
            None => {
                task.set_status(TaskStatus::Cancelled, message);
                self.save(&task).await?;
            }
        }
        if let Some(running) = self.running().get(id) {
            running.abort.abort();
        }
        Ok(task)
    }

    /// Legacy `tasks/list`: the session's tasks (newest first).
    async fn list(&self, session: &str, owner: &str) -> Result<Value, RpcError> {
        let tasks = self
            .config
            .store
            .list_for_session(session)
            .await
            .map_err(|e| RpcError::internal(format!("the task store failed: {e}")))?;
        let now = super::record::now_ms();
        let listed: Vec<Value> = tasks
            .iter()
            .filter(|t| t.owner == owner && !t.is_expired(now))
            .take(100)
            .map(TaskRecord::legacy)
            .collect();
        Ok(json!({"tasks": listed}))
    }

    /// Legacy `tasks/result`: waits until the task ends, then answers what the request
    /// itself would have (its result, or its error).
    async fn wait_for_result(&self, mut task: TaskRecord) -> Result<Value, RpcError> {
        let mut changes = self.notifier.subscribe();
        let poll = Duration::from_millis(task.poll_interval_ms.clamp(100, 5000));
        while !task.status.is_terminal() {
            let changed = tokio::time::timeout(poll, async {
                loop {
                    match changes.recv().await {
                        Ok(Change::Task(t)) if t.id == task.id => return Some(t),
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(_) => return None,
                    }
                }
            });
            task = match changed.await {
                Ok(Some(changed)) => Arc::unwrap_or_clone(changed),
                _ => self.find(&task.id, &task.owner).await?,
            };
        }
        let related = json!({RELATED_TASK: {"taskId": task.id}});
        match task.status {
            TaskStatus::Completed => {
                let mut result = task.result.unwrap_or_else(|| json!({}));
                result["_meta"] = related;
                Ok(result)
            }
            TaskStatus::Failed => Err(task
                .error
                .and_then(|e| serde_json::from_value::<ErrorShape>(e).ok())
                .map(|e| RpcError {
                    code: e.code,
                    message: e.message,
                    data: e.data,
                })
                .unwrap_or_else(|| RpcError::internal("the task failed"))),
            _ => Err(RpcError::invalid_params(format!(
                "task `{}` was cancelled, so it has no result",
                task.id
            ))),
        }
    }
}

#[derive(serde::Deserialize)]
struct ErrorShape {
    code: i64,
    message: String,
    data: Option<Value>,
}
