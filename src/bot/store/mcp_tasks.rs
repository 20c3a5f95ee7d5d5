//! `/mcp` tasks in the database: rows of opaque JSON records with the few columns the
//! endpoint looks them up by (owner, session, finished, expiry). What a record holds is
//! the endpoint's business; the store only keeps it until it expires.

use rusqlite::{OptionalExtension, params};

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
        if let Some(pg) = self.postgres() {
            return pg.put_mcp_task(row).await;
        }
        self.call(move |c| {
            c.execute(
                "INSERT OR REPLACE INTO mcp_tasks (id, owner, session, finished, created_ms, expires_ms, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    row.id,
                    row.owner,
                    row.session,
                    row.finished,
                    row.created_ms,
                    row.expires_ms,
                    row.record
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// The record (JSON text) of task `id`.
    pub async fn mcp_task(&self, id: &str) -> Result<Option<String>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.mcp_task(id).await;
        }
        let id = id.to_string();
        self.call(move |c| {
            Ok(
                c.query_row("SELECT record FROM mcp_tasks WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .optional()?,
            )
        })
        .await
    }

    /// How many of `owner`'s tasks have not finished.
    pub async fn count_unfinished_mcp_tasks(&self, owner: &str) -> Result<usize, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.count_unfinished_mcp_tasks(owner).await;
        }
        let owner = owner.to_string();
        self.call(move |c| {
            let count: i64 = c.query_row(
                "SELECT COUNT(*) FROM mcp_tasks WHERE owner = ?1 AND finished = 0",
                [owner],
                |r| r.get(0),
            )?;
            Ok(usize::try_from(count).unwrap_or(0))
        })
        .await
    }

    /// Records of a session's tasks, newest first (at most 1000).
    pub async fn mcp_tasks_of_session(&self, session: &str) -> Result<Vec<String>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.mcp_tasks_of_session(session).await;
        }
        let session = session.to_string();
        self.call(move |c| {
            let mut stmt = c.prepare(
                "SELECT record FROM mcp_tasks WHERE session = ?1 ORDER BY created_ms DESC LIMIT 1000",
            )?;
            let records = stmt
                .query_map([session], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            Ok(records)
        })
        .await
    }

    /// Records of every unfinished task.
    pub async fn unfinished_mcp_tasks(&self) -> Result<Vec<String>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.unfinished_mcp_tasks().await;
        }
        self.call(|c| {
            let mut stmt = c.prepare("SELECT record FROM mcp_tasks WHERE finished = 0")?;
            let records = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            Ok(records)
        })
        .await
    }

    /// Deletes tasks that expired before `now_ms`; returns how many.
    pub async fn purge_mcp_tasks(&self, now_ms: i64) -> Result<usize, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.purge_mcp_tasks(now_ms).await;
        }
        self.call(move |c| Ok(c.execute("DELETE FROM mcp_tasks WHERE expires_ms <= ?1", [now_ms])?))
            .await
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
