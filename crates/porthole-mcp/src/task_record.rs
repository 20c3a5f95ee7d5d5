//! One task as the server keeps it ([`TaskRecord`]) and as each era shows it: the
//! Tasks extension's flat `Result & Task` shapes (2026-07-28) and the experimental
//! `Task` of 2025-11-25 (`ttl`, `pollInterval`, `notifications/tasks/status`).

use chrono::{SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::jsonrpc;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running; the status every task starts in.
    Working,
    /// Paused until the client answers the task's input requests (`tasks/update`).
    InputRequired,
    /// Finished with a result.
    Completed,
    /// Ended in error: a JSON-RPC error, or (2025-11-25) a tool result with `isError`.
    Failed,
    /// Stopped by `tasks/cancel`.
    Cancelled,
}

impl TaskStatus {
    /// The status as the wire spells it: `working`, `input_required`, and so on.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Completed, failed and cancelled tasks never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// A task: who owns it, where it is, and its result or error once it has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// 128 random bits, hex: unguessable, so it can be shown to its owner only.
    pub id: String,
    /// A keyed hash of the caller's credentials; only the same caller sees the task.
    pub owner: String,
    /// The legacy session that created it (`tasks/list` and status notifications are
    /// scoped to it); `None` for the modern era.
    pub session: Option<String>,
    /// Where the task is in its life.
    pub status: TaskStatus,
    /// A human-readable note on the status (`statusMessage`); `None` shows none.
    pub status_message: Option<String>,
    /// When the task was created, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// When the status last changed, in milliseconds since the Unix epoch.
    pub updated_ms: i64,
    /// How long after creation the task and its result are kept, in milliseconds.
    pub ttl_ms: u64,
    /// The polling pace suggested to the client, in milliseconds.
    pub poll_interval_ms: u64,
    /// Outstanding input requests (status `input_required`), by wire key.
    #[serde(default)]
    pub input_requests: Map<String, Value>,
    /// The request's result (status `completed`).
    pub result: Option<Value>,
    /// The JSON-RPC error that ended it (status `failed`).
    pub error: Option<Value>,
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

fn iso8601(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl TaskRecord {
    /// A new working task.
    pub fn new(owner: &str, session: Option<String>, ttl_ms: u64, poll_interval_ms: u64) -> Self {
        let now = now_ms();
        TaskRecord {
            id: new_task_id(),
            owner: owner.to_string(),
            session,
            status: TaskStatus::Working,
            status_message: Some("The operation is now in progress.".into()),
            created_ms: now,
            updated_ms: now,
            ttl_ms,
            poll_interval_ms,
            input_requests: Map::new(),
            result: None,
            error: None,
        }
    }

    /// When the server may forget the task.
    pub fn expires_ms(&self) -> i64 {
        self.created_ms
            .saturating_add(i64::try_from(self.ttl_ms).unwrap_or(i64::MAX))
    }

    /// Whether the task's ttl has run out at `now` (milliseconds since the Unix epoch).
    pub fn is_expired(&self, now: i64) -> bool {
        now >= self.expires_ms()
    }

    /// Moves to `status`, stamping the time; a terminal task does not move.
    pub fn set_status(&mut self, status: TaskStatus, message: Option<String>) -> bool {
        if self.status.is_terminal() {
            return false;
        }
        self.status = status;
        self.status_message = message;
        self.updated_ms = now_ms();
        if status != TaskStatus::InputRequired {
            self.input_requests.clear();
        }
        true
    }

    /// Ends the task with a JSON-RPC error (status `failed`).
    pub fn fail(&mut self, error: &jsonrpc::RpcError) -> bool {
        let moved = self.set_status(TaskStatus::Failed, Some(error.message.clone()));
        if moved {
            self.error = Some(error.to_value());
        }
        moved
    }

    /// The fields every shape shares (`Task` of the extension).
    fn base(&self) -> Value {
        let mut task = json!({
            "taskId": self.id,
            "status": self.status.as_str(),
            "createdAt": iso8601(self.created_ms),
            "lastUpdatedAt": iso8601(self.updated_ms),
        });
        if let Some(message) = &self.status_message {
            task["statusMessage"] = json!(message);
        }
        task
    }

    /// 2026-07-28 `CreateTaskResult`: the flat task with `resultType: "task"`.
    pub fn create_result(&self) -> Value {
        let mut task = self.base();
        task["ttlMs"] = json!(self.ttl_ms);
        task["pollIntervalMs"] = json!(self.poll_interval_ms);
        task["resultType"] = json!("task");
        task
    }

    /// 2026-07-28 `DetailedTask`: the task with its inputs, result or error inlined.
    pub fn detailed(&self) -> Value {
        let mut task = self.base();
        task["ttlMs"] = json!(self.ttl_ms);
        task["pollIntervalMs"] = json!(self.poll_interval_ms);
        match self.status {
            TaskStatus::InputRequired => {
                task["inputRequests"] = Value::Object(self.input_requests.clone());
            }
            TaskStatus::Completed => {
                task["result"] = self.result.clone().unwrap_or_else(|| json!({}));
            }
            TaskStatus::Failed => {
                task["error"] = self.error.clone().unwrap_or_else(
                    || json!({"code": jsonrpc::INTERNAL_ERROR, "message": "the task failed"}),
                );
            }
            TaskStatus::Working | TaskStatus::Cancelled => {}
        }
        task
    }

    /// 2025-11-25 `Task` (experimental tasks): `ttl` and `pollInterval`.
    pub fn legacy(&self) -> Value {
        let mut task = self.base();
        task["ttl"] = json!(self.ttl_ms);
        task["pollInterval"] = json!(self.poll_interval_ms);
        task
    }
}

/// A fresh task id: 128 bits from the OS's random source, as 32 hex digits.
fn new_task_id() -> String {
    porthole_core::text::hex(&rand::random::<[u8; 16]>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_status() {
        let mut task = TaskRecord::new("owner", None, 60_000, 500);
        assert_eq!(task.id.len(), 32);
        let created = task.create_result();
        assert_eq!(created["resultType"], "task");
        assert_eq!(created["ttlMs"], 60_000);
        assert!(created.get("result").is_none());
        task.result = Some(json!({"content": []}));
        assert!(task.set_status(TaskStatus::Completed, None));
        assert_eq!(task.detailed()["result"], json!({"content": []}));
        assert!(
            !task.fail(&jsonrpc::RpcError::internal("late")),
            "terminal stays"
        );
        assert_eq!(task.legacy()["ttl"], 60_000);
        assert!(task.legacy().get("ttlMs").is_none());
    }
}
