//! What the `tasks/*` methods do to the tasks (the methods themselves, which era gets
//! which, are `methods/tasks.rs`): agree to the ids of a `subscriptions/listen`, take
//! the answers of `tasks/update`, cancel, list a session's tasks, and wait for a legacy
//! `tasks/result`. What reaches a task from other replicas is `forward.rs`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::TaskEngine;
use crate::jsonrpc::RpcError;
use crate::subscriptions::Change;
use crate::task_record::{self as record, TaskRecord, TaskStatus};
use porthole_core::replica_changes::Changed;

/// The `_meta` key that ties a legacy `tasks/result` to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

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
    /// and passes them to the running work, here or (through the store) on the replica
    /// that runs it.
    pub(crate) async fn update(
        &self,
        id: &str,
        owner: &str,
        responses: Map<String, Value>,
    ) -> Result<Value, RpcError> {
        self.find(id, owner).await?;
        if self.running().contains_key(id) {
            self.accept_input(id, responses).await?;
        } else {
            self.forward_input(id, &responses).await?;
        }
        Ok(json!({}))
    }

    /// Hands the answers to keys the task `id` running here waits on to its work; the
    /// task is working again once nothing is left to answer.
    pub(super) async fn accept_input(
        &self,
        id: &str,
        responses: Map<String, Value>,
    ) -> Result<(), RpcError> {
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
        Ok(())
    }

    /// `tasks/cancel`: records the cancellation, then stops the work (here, or on the
    /// replica that runs it). A task that has already ended is left as it is, and a
    /// cancel, once stored, is final: the work's own finish does not overwrite it.
    pub(crate) async fn cancel(&self, id: &str, owner: &str) -> Result<TaskRecord, RpcError> {
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
                self.save(&mut task).await?;
                self.notifier
                    .announce(Changed::TaskCancel { id: id.into() });
            }
        }
        if let Some(running) = self.running().get(id) {
            running.abort.abort();
        }
        Ok(task)
    }

    /// Legacy `tasks/list`: the session's tasks (newest first), a page at a time.
    pub(crate) async fn list(
        &self,
        session: &str,
        owner: &str,
        cursor: Option<&str>,
    ) -> Result<Value, RpcError> {
        let tasks = self
            .config
            .store
            .list_for_session(session)
            .await
            .map_err(|e| RpcError::internal(format!("the task store failed: {e}")))?;
        let now = record::now_ms();
        let listed: Vec<Value> = tasks
            .iter()
            .filter(|t| t.owner == owner && !t.is_expired(now))
            .map(TaskRecord::legacy)
            .collect();
        crate::params::page("tasks", &listed, cursor)
    }

    /// Legacy `tasks/result`: waits until the task ends, then answers what the request
    /// itself would have (its result, or its error).
    pub(crate) async fn wait_for_result(&self, mut task: TaskRecord) -> Result<Value, RpcError> {
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
            // A completed task's result, or the tool's own result of one that failed
            // with `isError` (2025-11-25).
            TaskStatus::Completed | TaskStatus::Failed if task.result.is_some() => {
                let mut result = task.result.unwrap_or_else(|| json!({}));
                result["_meta"] = related;
                Ok(result)
            }
            TaskStatus::Completed => Ok(json!({"_meta": related})),
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
