//! The `/mcp` endpoint's task store kept in the bot's database, so a task's result
//! outlives the request that started it and a restart (see `crate::mcp::tasks`).

use async_trait::async_trait;

use crate::bot::store::{Store, StoredTaskRow};
use crate::mcp::{TaskRecord, TaskStore};

pub struct StoredTasks {
    store: Store,
}

impl StoredTasks {
    pub fn new(store: Store) -> Self {
        StoredTasks { store }
    }
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

#[async_trait]
impl TaskStore for StoredTasks {
    async fn put(&self, task: &TaskRecord) -> Result<(), String> {
        let record = serde_json::to_string(task).map_err(|e| e.to_string())?;
        let row = StoredTaskRow {
            id: task.id.clone(),
            owner: task.owner.clone(),
            session: task.session.clone(),
            finished: task.status.is_terminal(),
            created_ms: task.created_ms,
            expires_ms: task.expires_ms(),
            record,
        };
        self.store
            .put_mcp_task(row)
            .await
            .map_err(|e| e.to_string())
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, String> {
        let record = self.store.mcp_task(id).await.map_err(|e| e.to_string())?;
        Ok(record.and_then(|text| parse(vec![text]).pop()))
    }

    async fn count_unfinished(&self, owner: &str) -> Result<usize, String> {
        self.store
            .count_unfinished_mcp_tasks(owner)
            .await
            .map_err(|e| e.to_string())
    }

    async fn list_for_session(&self, session: &str) -> Result<Vec<TaskRecord>, String> {
        let records = self.store.mcp_tasks_of_session(session).await;
        Ok(parse(records.map_err(|e| e.to_string())?))
    }

    async fn unfinished(&self) -> Result<Vec<TaskRecord>, String> {
        let records = self.store.unfinished_mcp_tasks().await;
        Ok(parse(records.map_err(|e| e.to_string())?))
    }

    async fn purge_expired(&self, now_ms: i64) -> Result<usize, String> {
        self.store
            .purge_mcp_tasks(now_ms)
            .await
            .map_err(|e| e.to_string())
    }
}
