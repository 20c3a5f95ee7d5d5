//! Tasks: long requests answered with a handle the client polls, in both eras — the
//! Tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28) and the experimental
//! tasks of 2025-11-25 — on one engine.
//!
//! Layout: `store` (the [`TaskStore`] seam and an in-memory store), `ops` (what the
//! `tasks/*` methods do to a task) and `forward` (what crosses between replicas). The task itself and its wire shapes are
//! `mcp::task_record`; the `tasks/*` methods and a tool call running as a task are in
//! the method layer (`methods/tasks.rs`, `methods/tool_task.rs`). The [`TaskEngine`] here
//! owns what only this process knows: which tasks run, how to stop them, where their
//! inputs go.
//!
//! Every change to a task is written to the store under the task's own lock before it
//! is announced or acknowledged, so a `tasks/get` always sees what was promised.
//!
//! Replicas sharing the store: the replica that runs a task owns it and renews its lease
//! ([`TaskConfig::lease_renewal`]); `tasks/get` is answered from the store anywhere,
//! while `tasks/update` answers and `tasks/cancel` reaching another replica are passed
//! to the owner (`ops`). A task whose owner died is failed once its lease runs out.

mod forward;
mod ops;
mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{AbortHandle, AbortRegistration};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

pub use store::{MemoryTaskStore, StoreFailure, TaskStore};

use super::caller::Caller;
use super::jsonrpc::{self, RpcError};
use super::protocol::TASKS_EXTENSION;
use super::seal::SealingKey;
use super::subscriptions::{Change, Notifier};
use super::task_record::{self as record, TaskRecord, TaskStatus};

/// How tasks are kept and paced.
#[derive(Clone)]
pub struct TaskConfig {
    /// Where tasks are kept; replicas that share one share their tasks.
    pub store: Arc<dyn TaskStore>,
    /// How long a task (and its result) is kept after creation.
    pub ttl: Duration,
    /// The polling pace suggested to clients.
    pub poll_interval: Duration,
    /// Most unfinished tasks one caller may have at once.
    pub max_unfinished_per_caller: usize,
    /// How often the leases of running tasks are renewed (and tasks whose owner's lease
    /// ran out are failed): well within the store's lease.
    pub lease_renewal: Duration,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            store: Arc::new(MemoryTaskStore::default()),
            ttl: Duration::from_secs(3600),
            poll_interval: Duration::from_millis(500),
            max_unfinished_per_caller: 16,
            lease_renewal: Duration::from_secs(10),
        }
    }
}

impl std::fmt::Debug for TaskConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskConfig")
            .field("ttl", &self.ttl)
            .field("poll_interval", &self.poll_interval)
            .field("max_unfinished_per_caller", &self.max_unfinished_per_caller)
            .field("lease_renewal", &self.lease_renewal)
            .finish_non_exhaustive()
    }
}

/// Where a running task receives the answers `tasks/update` brings, by wire key.
pub(crate) type TaskInputs = mpsc::UnboundedReceiver<Map<String, Value>>;

/// A task that runs in this process.
struct Running {
    /// The current record; every change goes through this lock and then the store.
    record: Arc<tokio::sync::Mutex<TaskRecord>>,
    /// Stops the work (cooperatively: at its next await).
    abort: AbortHandle,
    /// Answers from `tasks/update`, by wire key, already checked against what is asked.
    inputs: mpsc::UnboundedSender<Map<String, Value>>,
}

/// The running tasks of a server and the store behind them. Public so that a
/// [`TaskStore`] can be tested under the engine that drives it (the bot's tests check
/// that concurrent creations keep to the limit on its database).
pub struct TaskEngine {
    config: TaskConfig,
    running: Mutex<HashMap<String, Running>>,
    notifier: Notifier,
    /// Keys the hash that binds a task to its caller's credentials.
    owner_key: SealingKey,
    /// Held from counting a caller's unfinished tasks until the new one is stored, so
    /// concurrent calls cannot all pass the limit on the same count (within a replica;
    /// replicas each check the shared store).
    creating: tokio::sync::Mutex<()>,
}

/// The `-32021` error for a client that did not declare the extension.
pub fn missing_tasks_capability() -> RpcError {
    RpcError::new(
        jsonrpc::MISSING_CLIENT_CAPABILITY,
        format!("Missing required client capability: declare the `{TASKS_EXTENSION}` extension in _meta.\"io.modelcontextprotocol/clientCapabilities\".extensions to use tasks"),
    )
    .with_data(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}))
}

pub(crate) fn not_found(id: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "Failed to retrieve task: Task not found (`{id}`); use the taskId a tools/call returned, within its ttlMs"
    ))
}

impl TaskEngine {
    /// An engine over `config`'s store, announcing status changes on `notifier`; task
    /// owners are keyed hashes under `secret`.
    pub fn new(config: TaskConfig, notifier: Notifier, secret: Option<&str>) -> Self {
        TaskEngine {
            config,
            running: Mutex::new(HashMap::new()),
            notifier,
            owner_key: SealingKey::new(secret, "task-owner"),
            creating: tokio::sync::Mutex::new(()),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The owner key of a caller's `Authorization` header (or its absence): a keyed
    /// hash in hex, so the store never holds a credential. A bearer token is hashed as
    /// the guard reads it (`Bearer <token>` whatever the scheme's case and the spaces),
    /// so the same token owns the same tasks however a client spells the header.
    pub(crate) fn owner(&self, caller: &Caller) -> Arc<str> {
        let mut data = b"caller\0".to_vec();
        if let Some(authorization) = &caller.authorization {
            let value = authorization.to_str().ok();
            match value.and_then(crate::guard::bearer_token) {
                Some(token) => {
                    data.extend_from_slice(b"Bearer ");
                    data.extend_from_slice(token.as_bytes());
                }
                None => data.extend_from_slice(authorization.as_bytes()),
            }
        }
        porthole_core::text::hex(&self.owner_key.tag(&data)).into()
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
    /// has as many unfinished tasks as allowed (checked by the store as it writes, so
    /// the limit holds across replicas sharing it).
    pub async fn create(
        &self,
        owner: &str,
        session: Option<String>,
        ttl: Option<Duration>,
    ) -> Result<TaskRecord, RpcError> {
        let store = &self.config.store;
        let failed = |e| RpcError::internal(format!("the task store failed: {e}"));
        let ttl = ttl.unwrap_or(self.config.ttl);
        let record = TaskRecord::new(
            owner,
            session,
            u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            u64::try_from(self.config.poll_interval.as_millis()).unwrap_or(1000),
        );
        let limit = self.config.max_unfinished_per_caller;
        // Within this process, creations wait for each other (a store that counts, then
        // writes, relies on it); the store holds the limit against other replicas.
        let created = {
            let _creating = self.creating.lock().await;
            store.put_new(&record, limit).await.map_err(failed)?
        };
        if !created {
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!(
                    "too many unfinished tasks (the limit is {limit}): wait for one to finish, or stop one with tasks/cancel"
                ),
            ));
        }
        self.notifier.send(Change::Task(Arc::new(record.clone())));
        Ok(record)
    }

    /// Writes a task and tells listeners about it. When the stored task had already
    /// ended (cancelled on another replica), that end stands: `record` becomes it, and
    /// whoever ended it has told the listeners.
    async fn save(&self, record: &mut TaskRecord) -> Result<(), RpcError> {
        let store = &self.config.store;
        let failed = |e| RpcError::internal(format!("the task could not be stored: {e}"));
        if !store.put(record).await.map_err(failed)? {
            if let Some(kept) = store.get(&record.id).await.map_err(failed)? {
                *record = kept;
            }
            return Ok(());
        }
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
        Some(self.save(&mut record).await.map(|()| outcome))
    }

    /// Marks `record` as running here: returns what stops its work and where
    /// `tasks/update` delivers its inputs. [`TaskEngine::finish`] ends it.
    pub(crate) fn track(&self, record: &TaskRecord) -> (AbortRegistration, TaskInputs) {
        let (inputs, inputs_rx) = mpsc::unbounded_channel();
        let (abort, registration) = AbortHandle::new_pair();
        let running = Running {
            record: Arc::new(tokio::sync::Mutex::new(record.clone())),
            abort,
            inputs,
        };
        self.running().insert(record.id.clone(), running);
        (registration, inputs_rx)
    }

    /// Parks a running task in `input_required`, asking the client for `asked` (keys as
    /// the client sees them).
    pub(crate) async fn park_for_input(
        &self,
        id: &str,
        asked: Map<String, Value>,
    ) -> Result<(), RpcError> {
        let parked = self.change_running(id, move |task| {
            task.set_status(
                TaskStatus::InputRequired,
                Some("Waiting for the client: answer inputRequests with tasks/update.".into()),
            );
            task.input_requests = asked;
        });
        parked.await.unwrap_or(Ok(()))
    }

    /// Records how a task's work ended (`None`: it was cancelled, which `tasks/cancel`
    /// recorded already) and forgets it as running; a cancelled task stays cancelled.
    pub(crate) async fn finish(&self, id: &str, end: Option<Result<Value, RpcError>>) {
        if let Some(end) = end {
            let saved = self.change_running(id, |task| match end {
                // 2025-11-25: a tool result with `isError` fails the task (its tasks page,
                // "Task Execution Errors"); `tasks/result` still gives the tool's result.
                // The 2026 extension keeps such a task `completed`.
                Ok(result) if task.session.is_some() && result["isError"] == true => {
                    let message = tool_error_text(&result);
                    if task.set_status(TaskStatus::Failed, Some(message)) {
                        task.result = Some(result);
                    }
                }
                Ok(result) => {
                    if task.set_status(
                        TaskStatus::Completed,
                        Some("The operation completed.".into()),
                    ) {
                        task.result = Some(result);
                    }
                }
                Err(error) => {
                    task.fail(&error);
                }
            });
            if let Some(Err(e)) = saved.await {
                tracing::error!(target: "porthole::mcp::tasks", task = %id, error = %e.message, "could not store a task's end");
            }
        }
        self.running().remove(id);
    }

    /// Tasks whose server stopped (this one before a restart, when `starting`; another
    /// replica whose lease ran out) can never finish: they read `failed` with the reason
    /// until their TTL ends. Returns how many.
    pub(crate) async fn recover(&self, starting: bool) -> Result<usize, StoreFailure> {
        let orphaned = self.config.store.orphaned(starting).await?;
        let reason = RpcError::internal(
            "the server running this task restarted or stopped while it ran, so its work was lost; run the request again",
        );
        let mut failed = 0;
        for mut task in orphaned {
            task.fail(&reason);
            self.save(&mut task)
                .await
                .map_err(|e| StoreFailure::new(e.message))?;
            failed += usize::from(task.status == TaskStatus::Failed);
        }
        Ok(failed)
    }

    /// Renews the leases of the tasks running here, then fails those whose owner's lease
    /// ran out (its replica died); every `lease_renewal`, for as long as the server runs.
    pub(crate) async fn keep_leases(&self) {
        let mut tick = tokio::time::interval(self.config.lease_renewal);
        loop {
            tick.tick().await;
            if let Err(e) = self.config.store.renew_leases().await {
                tracing::warn!(target: "porthole::mcp::tasks", error = %e, "could not renew the leases of the running tasks");
            }
            match self.recover(false).await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::warn!(target: "porthole::mcp::tasks", "{n} MCP task(s) of a replica that stopped now read `failed` with the reason")
                }
                Err(e) => {
                    tracing::warn!(target: "porthole::mcp::tasks", error = %e, "could not fail the tasks of a replica that stopped")
                }
            }
        }
    }

    /// Forgets tasks past their TTL.
    pub(crate) async fn purge_expired(&self) {
        if let Err(e) = self.config.store.purge_expired(record::now_ms()).await {
            tracing::warn!(target: "porthole::mcp::tasks", error = %e, "could not purge expired tasks");
        }
    }
}

/// What a failed tool said, for a task's status message: its first text, shortened.
fn tool_error_text(result: &Value) -> String {
    let text = result["content"]
        .as_array()
        .and_then(|items| items.iter().find_map(|c| c["text"].as_str()))
        .unwrap_or("the tool reported an error");
    let short: String = text.chars().take(300).collect();
    format!("The tool failed: {short}")
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
        for spelling in ["bearer alice", "BEARER  alice ", " Bearer alice"] {
            assert_eq!(alice, owner_of(&engine, Some(spelling)), "{spelling:?}");
        }
        assert_ne!(alice, owner_of(&engine, Some("Basic alice")));
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
        assert_eq!(engine.recover(false).await.unwrap(), 0, "it runs");
        assert_eq!(engine.recover(true).await.unwrap(), 1);
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
