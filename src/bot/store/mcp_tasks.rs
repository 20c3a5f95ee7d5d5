//! `/mcp` tasks in the database: rows of opaque JSON records with the few columns the
//! endpoint looks them up by (owner, session, finished, expiry). What a record holds is
//! the endpoint's business; the store only keeps it until it expires.

use super::backend::Sql;
use super::{Store, StoreError};

/// One stored task.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTaskRow {
    pub id: String,
    /// A keyed hash of the credentials of the caller that created it.
    pub owner: String,
    pub session: Option<String>,
    pub finished: bool,
    pub created_ms: i64,
    pub expires_ms: i64,
    /// The task as JSON text.
    pub record: String,
}

impl Store {
    /// Inserts or replaces a task; returns once it is committed.
    pub async fn put_mcp_task(&self, row: StoredTaskRow) -> Result<(), StoreError> {
        let sql = Sql::fixed(
            "INSERT INTO mcp_tasks (id, owner, session, finished, created_ms, expires_ms, record)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, session = excluded.session,
               finished = excluded.finished, created_ms = excluded.created_ms,
               expires_ms = excluded.expires_ms, record = excluded.record",
        );
        let values = vec![
            row.id.into(),
            row.owner.into(),
            row.session.into(),
            i64::from(row.finished).into(),
            row.created_ms.into(),
            row.expires_ms.into(),
            row.record.into(),
        ];
        self.db.execute(sql, values).await?;
        Ok(())
    }

    /// The record (JSON text) of task `id`.
    pub async fn mcp_task(&self, id: &str) -> Result<Option<String>, StoreError> {
        let sql = Sql::fixed("SELECT record FROM mcp_tasks WHERE id = ?1");
        self.db.query_one(sql, vec![id.into()]).await
    }

    /// How many of `owner`'s tasks have not finished.
    pub async fn count_unfinished_mcp_tasks(&self, owner: &str) -> Result<usize, StoreError> {
        let sql = Sql::fixed("SELECT COUNT(*) FROM mcp_tasks WHERE owner = ?1 AND finished = 0");
        let count: Option<i64> = self.db.query_one(sql, vec![owner.into()]).await?;
        Ok(usize::try_from(count.unwrap_or(0)).unwrap_or(0))
    }

    /// Records of a session's tasks, newest first (at most 1000).
    pub async fn mcp_tasks_of_session(&self, session: &str) -> Result<Vec<String>, StoreError> {
        let sql = Sql::fixed(
            "SELECT record FROM mcp_tasks WHERE session = ?1 ORDER BY created_ms DESC LIMIT 1000",
        );
        self.db.query(sql, vec![session.into()]).await
    }

    /// Records of every unfinished task.
    pub async fn unfinished_mcp_tasks(&self) -> Result<Vec<String>, StoreError> {
        let sql = Sql::fixed("SELECT record FROM mcp_tasks WHERE finished = 0");
        self.db.query(sql, Vec::new()).await
    }

    /// Deletes tasks that expired before `now_ms`; returns how many.
    pub async fn purge_mcp_tasks(&self, now_ms: i64) -> Result<usize, StoreError> {
        let sql = Sql::fixed("DELETE FROM mcp_tasks WHERE expires_ms <= ?1");
        Ok(self.db.execute(sql, vec![now_ms.into()]).await? as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_are_kept_counted_and_purged() {
        for store in crate::bot::store::test_stores() {
            kept_counted_and_purged(store).await;
        }
    }

    async fn kept_counted_and_purged(store: Store) {
        let row = |id: &str, finished: bool, expires_ms: i64| StoredTaskRow {
            id: id.into(),
            owner: "o".into(),
            session: Some("s".into()),
            finished,
            created_ms: 1,
            expires_ms,
            record: format!("{{\"id\":\"{id}\"}}"),
        };
        store.put_mcp_task(row("a", false, 100)).await.unwrap();
        store.put_mcp_task(row("b", true, 200)).await.unwrap();
        assert_eq!(store.count_unfinished_mcp_tasks("o").await.unwrap(), 1);
        assert_eq!(store.unfinished_mcp_tasks().await.unwrap().len(), 1);
        assert_eq!(store.mcp_tasks_of_session("s").await.unwrap().len(), 2);
        assert_eq!(
            store.mcp_task("b").await.unwrap().unwrap(),
            "{\"id\":\"b\"}"
        );
        assert_eq!(store.purge_mcp_tasks(150).await.unwrap(), 1);
        assert!(store.mcp_task("a").await.unwrap().is_none());
    }
}
