//! Tasks: long requests answered with a handle the client polls, in both eras — the
//! Tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28) and the experimental
//! tasks of 2025-11-25 — on one engine.
//!
//! Layout: `record` (a task and its wire shapes), `store` (the [`TaskStore`] seam and an
//! in-memory store), `runner` (a tool call running as a task, its input rounds and its
//! end) and `methods` (`tasks/*` for both eras). The [`TaskEngine`] here owns what only
//! this process knows: which tasks run, how to stop them, where their inputs go.
//!
//! Every change to a task is written to the store under the task's own lock before it
//! is announced or acknowledged, so a `tasks/get` always sees what was promised.

mod methods;
pub(crate) use methods::TaskMethod;
pub(crate) mod record;
mod runner;
mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::AbortHandle;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

pub use record::{TaskRecord, TaskStatus};
pub use store::{MemoryTaskStore, StoreFailure, TaskStore};

use super::caller::Caller;
use super::jsonrpc::{self, RpcError};
use super::seal::SealingKey;
use super::subscriptions::{Change, Notifier};

/// The extension's identifier, in capabilities and `-32021` errors.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// How tasks are kept and paced.
#[derive(Clone)]
pub struct TaskConfig {
    pub store: Arc<dyn TaskStore>,
    /// How long a task (and its result) is kept after creation.
    pub ttl: Duration,
    /// The polling pace suggested to clients.
    pub poll_interval: Duration,
    /// Most unfinished tasks one caller may have at once.
    pub max_unfinished_per_caller: usize,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            store: Arc::new(MemoryTaskStore::default()),
            ttl: Duration::from_secs(3600),
            poll_interval: Duration::from_millis(500),
            max_unfinished_per_caller: 16,
        }
    }
}

impl std::fmt::Debug for TaskConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskConfig")
            .field("ttl", &self.ttl)
            .field("poll_interval", &self.poll_interval)
            .field("max_unfinished_per_caller", &self.max_unfinished_per_caller)
            .finish_non_exhaustive()
    }
}

/// A task that runs in this process.
struct Running {
    /// The current record; every change goes through this lock and then the store.
    record: Arc<tokio::sync::Mutex<TaskRecord>>,
    /// Stops the work (cooperatively: at its next await).
    abort: AbortHandle,
    /// Answers from `tasks/update`, by wire key, already checked against what is asked.
    inputs: mpsc::UnboundedSender<Map<String, Value>>,
}

/// The running tasks of a server and the store behind them.
pub(crate) struct TaskEngine {
    config: TaskConfig,
    running: Mutex<HashMap<String, Running>>,
    notifier: Notifier,
    /// Keys the hash that binds a task to its caller's credentials.
    owner_key: SealingKey,
}

/// The `-32021` error for a client that did not declare the extension.
pub fn missing_tasks_capability() -> RpcError {
    RpcError::new(
        jsonrpc::MISSING_CLIENT_CAPABILITY,
        format!("Missing required client capability: declare the `{TASKS_EXTENSION}` extension in _meta.\"io.modelcontextprotocol/clientCapabilities\".extensions to use tasks"),
    )
    .with_data(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}))
}

fn not_found(id: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "Failed to retrieve task: Task not found (`{id}`); use the taskId a tools/call returned, within its ttlMs"
    ))
}

impl TaskEngine {
    pub(crate) fn new(config: TaskConfig, notifier: Notifier, secret: Option<&str>) -> Self {
        TaskEngine {
            config,
            running: Mutex::new(HashMap::new()),
            notifier,
            owner_key: SealingKey::new(secret, "task-owner"),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The owner key of a caller's `Authorization` header (or its absence): a keyed
    /// hash in hex, so the store never holds a credential.
    pub(crate) fn owner(&self, caller: &Caller) -> Arc<str> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut data = b"caller\0".to_vec();
        if let Some(authorization) = &caller.authorization {
            data.extend_from_slice(authorization.as_bytes());
        }
        let tag = self.owner_key.tag(&data);
        let mut hex = String::with_capacity(2 * tag.len());
        for byte in tag {
            hex.push(HEX[usize::from(byte >> 4)] as char);
            hex.push(HEX[usize::from(byte & 0xf)] as char);
        }
        hex.into()
    }

    /// The task `id` of `owner`. Unknown, someone else's and expired tasks are all
    /// `-32602`, so ids of other callers cannot be probed.
    pub(crate) async fn find(&self, id: &str, owner: &str) -> Result<TaskRecord, RpcError> {
        let record = self
            .config
            .store
            .get(id)
            .await
            .map_err(|e| RpcError::internal(format!("the task store failed: {e}")))?
            .filter(|t| t.owner == owner)
            .ok_or_else(|| not_found(id))?;
        if record.is_expired(record::now_ms()) {
            return Err(RpcError::invalid_params(format!(
                "Failed to retrieve task: Task has expired (`{id}`); its ttlMs has passed"
            )));
        }
        Ok(record)
    }

    /// A new working task for `owner`, durably stored; refused when the caller already
    /// has as many unfinished tasks as allowed.
    async fn create(
        &self,
        owner: &str,
        session: Option<String>,
        ttl: Option<Duration>,
    ) -> Result<TaskRecord, RpcError> {
        let store = &self.config.store;
        let unfinished = store
            .count_unfinished(owner)
            .await
            .map_err(|e| RpcError::internal(format!("the task store failed: {e}")))?;
        let limit = self.config.max_unfinished_per_caller;
        if unfinished >= limit {
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!(
                    "too many unfinished tasks ({unfinished}, the limit is {limit}): wait for one to finish, or stop one with tasks/cancel"
                ),
            ));
        }
        let ttl = ttl.unwrap_or(self.config.ttl);
        let record = TaskRecord::new(
            owner,
            session,
            u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            u64::try_from(self.config.poll_interval.as_millis()).unwrap_or(1000),
        );
        self.save(&record).await?;
        Ok(record)
    }

    /// Writes a task and tells listeners about it.
    async fn save(&self, record: &TaskRecord) -> Result<(), RpcError> {
        self.config
            .store
            .put(record)
            .await
            .map_err(|e| RpcError::internal(format!("the task could not be stored: {e}")))?;
        self.notifier.send(Change::Task(Arc::new(record.clone())));
        Ok(())
    }

    /// Applies `change` to a running task's record under its lock and saves it.
    /// `None` when the task does not run here (finished, or from before a restart).
    async fn change_running<R>(
        &self,
        id: &str,
        change: impl FnOnce(&mut TaskRecord) -> R,
    ) -> Option<Result<R, RpcError>> {
        let record = self.running().get(id).map(|r| r.record.clone())?;
        let mut record = record.lock().await;
        let outcome = change(&mut record);
        Some(self.save(&record).await.map(|()| outcome))
    }

    /// Start-up: tasks that were unfinished when the process stopped can never finish;
    /// they read `failed` with the reason until their TTL ends.
    pub(crate) async fn recover(&self) -> Result<usize, StoreFailure> {
        let unfinished = self.config.store.unfinished().await?;
        let reason = RpcError::internal(
            "the server restarted while this task was running, so its work was lost; run the request again",
        );
        for mut task in unfinished.iter().cloned() {
            task.fail(&reason);
            self.config.store.put(&task).await?;
        }
        Ok(unfinished.len())
    }

    /// Forgets tasks past their TTL.
    pub(crate) async fn purge_expired(&self) {
        if let Err(e) = self.config.store.purge_expired(record::now_ms()).await {
            tracing::warn!(target: "porthole::mcp::tasks", error = %e, "could not purge expired tasks");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(limit: usize) -> TaskEngine {
        let config = TaskConfig {
            max_unfinished_per_caller: limit,
            ..TaskConfig::default()
        };
        TaskEngine::new(config, Notifier::default(), Some("secret"))
    }

    fn owner_of(engine: &TaskEngine, authorization: Option<&'static str>) -> Arc<str> {
        engine.owner(&Caller {
            authorization: authorization.map(axum::http::HeaderValue::from_static),
        })
    }

    #[tokio::test]
    async fn tasks_are_bound_to_their_caller_and_bounded() {
        let engine = engine(2);
        let alice = owner_of(&engine, Some("Bearer alice"));
        let mallory = owner_of(&engine, Some("Bearer mallory"));
        assert_ne!(alice, mallory);
        assert_eq!(
            alice,
            owner_of(&engine, Some("Bearer alice")),
            "stable per token"
        );
        let task = engine.create(&alice, None, None).await.unwrap();
        assert_eq!(engine.find(&task.id, &alice).await.unwrap().id, task.id);
        let hidden = engine.find(&task.id, &mallory).await.unwrap_err();
        assert_eq!(hidden.code, jsonrpc::INVALID_PARAMS);
        engine.create(&alice, None, None).await.unwrap();
        let refused = engine.create(&alice, None, None).await.unwrap_err();
        assert!(
            refused.message.contains("too many unfinished tasks"),
            "{}",
            refused.message
        );
        engine
            .create(&mallory, None, None)
            .await
            .expect("another caller has its own bound");
    }

    #[tokio::test]
    async fn recovery_fails_what_a_restart_cut_short() {
        let engine = engine(4);
        let owner = owner_of(&engine, None);
        let task = engine.create(&owner, None, None).await.unwrap();
        assert_eq!(engine.recover().await.unwrap(), 1);
        let failed = engine.find(&task.id, &owner).await.unwrap();
        assert_eq!(failed.status, TaskStatus::Failed);
        assert!(
            failed.detailed()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("restarted")
        );
    }
}
