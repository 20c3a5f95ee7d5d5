//! Where tasks are kept: the [`TaskStore`] seam and an in-memory store for servers that
//! need nothing more. An application with a database implements the trait on it, so a
//! task outlives the request that made it and its result survives a restart.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::record::TaskRecord;

/// A failure of the store, in words for the log and the client.
pub type StoreFailure = String;

/// Durable task storage. Every call is on the request path; implementations that block
/// must move the work off the async threads.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Writes `task` (insert or replace). Returns only once a `get` would see it.
    async fn put(&self, task: &TaskRecord) -> Result<(), StoreFailure>;
    /// The task with this id, if it is kept (expired or not).
    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreFailure>;
    /// Unfinished tasks (working or input_required) of `owner`.
    async fn count_unfinished(&self, owner: &str) -> Result<usize, StoreFailure>;
    /// The tasks of a legacy session, newest first.
    async fn list_for_session(&self, session: &str) -> Result<Vec<TaskRecord>, StoreFailure>;
    /// Every unfinished task (read once at start-up, to fail what a restart cut short).
    async fn unfinished(&self) -> Result<Vec<TaskRecord>, StoreFailure>;
    /// Forgets tasks whose TTL ended before `now_ms`; returns how many.
    async fn purge_expired(&self, now_ms: i64) -> Result<usize, StoreFailure>;
}

/// Tasks in this process's memory: they end with it.
#[derive(Default)]
pub struct MemoryTaskStore {
    tasks: Mutex<HashMap<String, TaskRecord>>,
}

impl MemoryTaskStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, TaskRecord>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn put(&self, task: &TaskRecord) -> Result<(), StoreFailure> {
        self.lock().insert(task.id.clone(), task.clone());
        Ok(())
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

    async fn unfinished(&self) -> Result<Vec<TaskRecord>, StoreFailure> {
        Ok(self
            .lock()
            .values()
            .filter(|t| !t.status.is_terminal())
            .cloned()
            .collect())
    }

    async fn purge_expired(&self, now_ms: i64) -> Result<usize, StoreFailure> {
        let mut tasks = self.lock();
        let before = tasks.len();
        tasks.retain(|_, t| !t.is_expired(now_ms));
        Ok(before - tasks.len())
    }
}
