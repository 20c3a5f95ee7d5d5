//! Where tasks are kept: the [`TaskStore`] seam and an in-memory store for servers that
//! need nothing more. An application with a database implements the trait on it, so a
//! task outlives the request that made it and its result survives a restart; with
//! replicas sharing the database, each task has an owner (the replica that runs it)
//! holding a lease it renews, and an answer for it waits in the store for its owner.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::record::TaskRecord;

/// A failure of the store, in words for the log and the client (what failed and, where
/// the store knows it, what to do).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StoreFailure {
    /// What failed.
    pub message: String,
}

impl StoreFailure {
    /// A failure that says `message`.
    pub fn new(message: impl Into<String>) -> Self {
        StoreFailure {
            message: message.into(),
        }
    }
}

/// Durable task storage. Every call is on the request path; implementations that block
/// must move the work off the async threads.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Writes `task` (insert or replace) as run by this server, unless the stored task
    /// has already ended: an end is final (a cancel is not overwritten by the work's own
    /// finish). Whether it was written; returns only once a `get` would see it.
    async fn put(&self, task: &TaskRecord) -> Result<bool, StoreFailure>;
    /// Writes new task `task` unless its owner already has `max_unfinished` unfinished
    /// tasks; whether it was written. A store that replicas share checks and writes in
    /// one step (one statement, or under a lock the store holds), so two replicas cannot
    /// both pass the same count. This default counts, then writes: enough within one
    /// process, where the engine holds a lock across both.
    async fn put_new(
        &self,
        task: &TaskRecord,
        max_unfinished: usize,
    ) -> Result<bool, StoreFailure> {
        if self.count_unfinished(&task.owner).await? >= max_unfinished {
            return Ok(false);
        }
        self.put(task).await
    }
    /// The task with this id, if it is kept (expired or not).
    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreFailure>;
    /// Unfinished tasks (working or input_required) of `owner`.
    async fn count_unfinished(&self, owner: &str) -> Result<usize, StoreFailure>;
    /// The tasks of a legacy session, newest first.
    async fn list_for_session(&self, session: &str) -> Result<Vec<TaskRecord>, StoreFailure>;
    /// Unfinished tasks no server runs any more: those whose owner's lease ran out and,
    /// when `starting`, those this server ran before it restarted.
    async fn orphaned(&self, starting: bool) -> Result<Vec<TaskRecord>, StoreFailure>;
    /// Extends the lease of every unfinished task this server runs.
    async fn renew_leases(&self) -> Result<(), StoreFailure>;
    /// Leaves `tasks/update` answers for the server that runs unfinished task `id`.
    async fn forward_input(
        &self,
        id: &str,
        answers: &Map<String, Value>,
    ) -> Result<(), StoreFailure>;
    /// Takes the answers left for task `id`, if any (each is taken once).
    async fn take_forwarded_input(
        &self,
        id: &str,
    ) -> Result<Option<Map<String, Value>>, StoreFailure>;
    /// Forgets tasks whose TTL ended before `now_ms`; returns how many.
    async fn purge_expired(&self, now_ms: i64) -> Result<usize, StoreFailure>;
}

/// Tasks in this process's memory: they end with it, so none is ever another's.
#[derive(Default)]
pub struct MemoryTaskStore {
    tasks: Mutex<HashMap<String, TaskRecord>>,
    forwarded: Mutex<HashMap<String, Map<String, Value>>>,
}

impl MemoryTaskStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, TaskRecord>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn forwarded(&self) -> std::sync::MutexGuard<'_, HashMap<String, Map<String, Value>>> {
        self.forwarded.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn put(&self, task: &TaskRecord) -> Result<bool, StoreFailure> {
        let mut tasks = self.lock();
        if tasks.get(&task.id).is_some_and(|t| t.status.is_terminal()) {
            return Ok(false);
        }
        tasks.insert(task.id.clone(), task.clone());
        Ok(true)
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreFailure> {
        Ok(self.lock().get(id).cloned())
    }

    async fn count_unfinished(&self, owner: &str) -> Result<usize, StoreFailure> {
        Ok(self
            .lock()
            .values()
            .filter(|t| t.owner == owner && !t.status.is_terminal())
            .count())
    }

    async fn list_for_session(&self, session: &str) -> Result<Vec<TaskRecord>, StoreFailure> {
        let mut tasks: Vec<TaskRecord> = self
            .lock()
            .values()
            .filter(|t| t.session.as_deref() == Some(session))
            .cloned()
            .collect();
        tasks.sort_by_key(|t| std::cmp::Reverse(t.created_ms));
        Ok(tasks)
    }

    /// Only a restart leaves orphans here (the store outlives a server in tests).
    async fn orphaned(&self, starting: bool) -> Result<Vec<TaskRecord>, StoreFailure> {
        Ok(self
            .lock()
            .values()
            .filter(|t| starting && !t.status.is_terminal())
            .cloned()
            .collect())
    }

    async fn renew_leases(&self) -> Result<(), StoreFailure> {
        Ok(())
    }

    async fn forward_input(
        &self,
        id: &str,
        answers: &Map<String, Value>,
    ) -> Result<(), StoreFailure> {
        if self.lock().get(id).is_some_and(|t| !t.status.is_terminal()) {
            self.forwarded().insert(id.to_string(), answers.clone());
        }
        Ok(())
    }

    async fn take_forwarded_input(
        &self,
        id: &str,
    ) -> Result<Option<Map<String, Value>>, StoreFailure> {
        Ok(self.forwarded().remove(id))
    }

    async fn purge_expired(&self, now_ms: i64) -> Result<usize, StoreFailure> {
        let mut tasks = self.lock();
        let before = tasks.len();
        tasks.retain(|_, t| !t.is_expired(now_ms));
        Ok(before - tasks.len())
    }
}
