//! The `/mcp` endpoint's task store kept in the bot's database, so a task's result
//! outlives the request that started it and a restart (see `crate::mcp::tasks`). With
//! replicas sharing PostgreSQL, each task is owned by the replica that runs it, under a
//! lease of [`RUN_LEASE`] (the scheduled runs' lease) that this replica renews; on
//! SQLite, one process, every unfinished task at start-up is this process's own.

use async_trait::async_trait;
use chrono::Utc;
use serde_json::{Map, Value};

use crate::bot::schedule::RUN_LEASE;
use crate::bot::store::{Store, StoredTaskRow};
use crate::mcp::{StoreFailure, TaskRecord, TaskStore};

pub struct StoredTasks {
    store: Store,
    /// The replica this process is (`PORTHOLE_REPLICA_ID`): the owner of what it runs.
    replica: String,
}

impl StoredTasks {
    pub fn new(store: Store, replica: String) -> Self {
        StoredTasks { store, replica }
    }
}

fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

fn lease_until_ms() -> i64 {
    now_ms() + i64::try_from(RUN_LEASE.as_millis()).unwrap_or(i64::MAX)
}

fn parse(records: Vec<String>) -> Vec<TaskRecord> {
    records
        .iter()
        .filter_map(|text| match serde_json::from_str(text) {
            Ok(record) => Some(record),
            Err(e) => {
                tracing::warn!(error = %e, "skipping an unreadable MCP task record");
                None
            }
        })
        .collect()
}

impl StoredTasks {
    /// `task` as its row, run by this replica under a fresh lease.
    fn row(&self, task: &TaskRecord) -> Result<StoredTaskRow, StoreFailure> {
        Ok(StoredTaskRow {
            id: task.id.clone(),
            owner: task.owner.clone(),
            session: task.session.clone(),
            finished: task.status.is_terminal(),
            created_ms: task.created_ms,
            expires_ms: task.expires_ms(),
            record: serde_json::to_string(task).map_err(store_failure)?,
            owner_replica: self.replica.clone(),
            lease_until_ms: lease_until_ms(),
        })
    }
}

/// A store error as the task engine reports it (to the log and the client).
fn store_failure(e: impl std::fmt::Display) -> StoreFailure {
    StoreFailure::new(e.to_string())
}

#[async_trait]
impl TaskStore for StoredTasks {
    async fn put(&self, task: &TaskRecord) -> Result<bool, StoreFailure> {
        self.store
            .put_mcp_task(self.row(task)?)
            .await
            .map_err(store_failure)
    }

    async fn put_new(
        &self,
        task: &TaskRecord,
        max_unfinished: usize,
    ) -> Result<bool, StoreFailure> {
        self.store
            .put_new_mcp_task(self.row(task)?, max_unfinished)
            .await
            .map_err(store_failure)
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreFailure> {
        let record = self.store.mcp_task(id).await.map_err(store_failure)?;
        Ok(record.and_then(|text| parse(vec![text]).pop()))
    }

    async fn count_unfinished(&self, owner: &str) -> Result<usize, StoreFailure> {
        self.store
            .count_unfinished_mcp_tasks(owner)
            .await
            .map_err(store_failure)
    }

    async fn list_for_session(&self, session: &str) -> Result<Vec<TaskRecord>, StoreFailure> {
        let records = self.store.mcp_tasks_of_session(session).await;
        Ok(parse(records.map_err(store_failure)?))
    }

    async fn orphaned(&self, starting: bool) -> Result<Vec<TaskRecord>, StoreFailure> {
        // SQLite's file has one process: at its start, nothing unfinished runs anywhere.
        let before = if starting && !self.store.is_shared() {
            i64::MAX
        } else {
            now_ms()
        };
        let replica = starting.then_some(self.replica.as_str());
        let records = self.store.orphaned_mcp_tasks(before, replica).await;
        Ok(parse(records.map_err(store_failure)?))
    }

    async fn renew_leases(&self) -> Result<(), StoreFailure> {
        self.store
            .renew_mcp_task_leases(&self.replica, lease_until_ms())
            .await
            .map_err(store_failure)
    }

    async fn forward_input(
        &self,
        id: &str,
        answers: &Map<String, Value>,
    ) -> Result<(), StoreFailure> {
        let text = Value::Object(answers.clone()).to_string();
        self.store
            .forward_mcp_task_input(id, &text)
            .await
            .map_err(store_failure)
    }

    async fn take_forwarded_input(
        &self,
        id: &str,
    ) -> Result<Option<Map<String, Value>>, StoreFailure> {
        let taken = self.store.take_mcp_task_input(id).await;
        Ok(taken
            .map_err(store_failure)?
            .and_then(|text| serde_json::from_str(&text).ok()))
    }

    async fn purge_expired(&self, now_ms: i64) -> Result<usize, StoreFailure> {
        self.store
            .purge_mcp_tasks(now_ms)
            .await
            .map_err(store_failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::mcp::Notifier;
    use crate::mcp::tasks::{TaskConfig, TaskEngine};

    /// Calls that ask for tasks at the same moment cannot all pass the limit on the same
    /// count: the store's round trips between counting and storing are where they did.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_calls_keep_to_the_limit_of_unfinished_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("bot.db").to_str().unwrap()).unwrap();
        let config = TaskConfig {
            store: Arc::new(StoredTasks::new(store, "replica-a".into())),
            max_unfinished_per_caller: 3,
            ..TaskConfig::default()
        };
        let engine = Arc::new(TaskEngine::new(config, Notifier::default(), Some("secret")));
        let created = futures::future::join_all((0..12).map(|_| {
            let engine = Arc::clone(&engine);
            async move { engine.create("owner", None, None).await }
        }))
        .await;
        let started = created.iter().filter(|result| result.is_ok()).count();
        assert_eq!(started, 3, "{created:?}");
    }
}
