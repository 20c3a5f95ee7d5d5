//! `/mcp` tasks in the database: rows of opaque JSON records with the few columns the
//! endpoint looks them up by (owner, session, finished, expiry). What a record holds is
//! the endpoint's business; the store only keeps it until it expires.
//!
//! Shared by replicas, a task has the shape every shared thing has (scheduled runs too):
//! an owner replica, a lease it renews while it runs the task, and a recovery that
//! fails only tasks whose lease ran out. An ended task is final: no write replaces it,
//! so a cancel stored by one replica survives the work's own finish on another.

use super::backend::Sql;
use super::rows::Bound;
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
    /// The replica running it, and until when (Unix ms) it holds it.
    pub owner_replica: String,
    pub lease_until_ms: i64,
}

impl StoredTaskRow {
    /// Its columns as the statements below bind them, `?1` to `?9`.
    fn into_values(self) -> Vec<Bound> {
        vec![
            self.id.into(),
            self.owner.into(),
            self.session.into(),
            i64::from(self.finished).into(),
            self.created_ms.into(),
            self.expires_ms.into(),
            self.record.into(),
            self.owner_replica.into(),
            self.lease_until_ms.into(),
        ]
    }
}

impl Store {
    /// Inserts or replaces a task unless the stored one has ended (a conditional
    /// update, so whatever ended it first stands); whether it was written. Returns once
    /// it is committed.
    pub async fn put_mcp_task(&self, row: StoredTaskRow) -> Result<bool, StoreError> {
        let sql = Sql::fixed(
            "INSERT INTO mcp_tasks (id, owner, session, finished, created_ms, expires_ms, record,
               owner_replica, lease_until_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, session = excluded.session,
               finished = excluded.finished, created_ms = excluded.created_ms,
               expires_ms = excluded.expires_ms, record = excluded.record,
               owner_replica = excluded.owner_replica, lease_until_ms = excluded.lease_until_ms
             WHERE mcp_tasks.finished = 0",
        );
        Ok(self.db.execute(sql, row.into_values()).await? == 1)
    }

    /// Stores new task `row` unless its owner already has `max_unfinished` unfinished
    /// tasks, counted and written in one statement, alone among the writers of that
    /// owner's tasks on every replica; whether it was stored.
    pub async fn put_new_mcp_task(
        &self,
        row: StoredTaskRow,
        max_unfinished: usize,
    ) -> Result<bool, StoreError> {
        // The casts give PostgreSQL the types an INSERT … SELECT does not infer.
        let sql = Sql::fixed(
            "INSERT INTO mcp_tasks (id, owner, session, finished, created_ms, expires_ms, record,
               owner_replica, lease_until_ms)
             SELECT CAST(?1 AS TEXT), CAST(?2 AS TEXT), CAST(?3 AS TEXT), CAST(?4 AS INTEGER),
               CAST(?5 AS BIGINT), CAST(?6 AS BIGINT), CAST(?7 AS TEXT), CAST(?8 AS TEXT),
               CAST(?9 AS BIGINT)
             WHERE (SELECT COUNT(*) FROM mcp_tasks WHERE owner = ?2 AND finished = 0) < ?10
             RETURNING id",
        );
        let key = format!("mcp_tasks:{}", row.owner);
        let mut values = row.into_values();
        values.push(i64::try_from(max_unfinished).unwrap_or(i64::MAX).into());
        let stored: Vec<String> = self.db.query_exclusive(&key, sql, values).await?;
        Ok(stored.len() == 1)
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

    /// Records of the unfinished tasks whose lease ended before `now_ms`, or that
    /// `replica` owns (at its start-up: what it ran before it restarted).
    pub async fn orphaned_mcp_tasks(
        &self,
        now_ms: i64,
        replica: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let sql = Sql::fixed(
            "SELECT record FROM mcp_tasks
             WHERE finished = 0 AND (lease_until_ms < ?1 OR owner_replica = ?2)",
        );
        self.db
            .query(sql, vec![now_ms.into(), replica.into()])
            .await
    }

    /// Extends to `lease_until_ms` the lease of every unfinished task `replica` owns.
    pub async fn renew_mcp_task_leases(
        &self,
        replica: &str,
        lease_until_ms: i64,
    ) -> Result<(), StoreError> {
        let sql = Sql::fixed(
            "UPDATE mcp_tasks SET lease_until_ms = ?2 WHERE owner_replica = ?1 AND finished = 0",
        );
        self.db
            .execute(sql, vec![replica.into(), lease_until_ms.into()])
            .await?;
        Ok(())
    }

    /// Leaves `input` (JSON text) for the owner of unfinished task `id` to take.
    pub async fn forward_mcp_task_input(&self, id: &str, input: &str) -> Result<(), StoreError> {
        let sql =
            Sql::fixed("UPDATE mcp_tasks SET forwarded_input = ?2 WHERE id = ?1 AND finished = 0");
        self.db.execute(sql, vec![id.into(), input.into()]).await?;
        Ok(())
    }

    /// Takes the input left for task `id`: read, then cleared only if unchanged, so each
    /// input is taken once even by two takers at once.
    pub async fn take_mcp_task_input(&self, id: &str) -> Result<Option<String>, StoreError> {
        let read = Sql::fixed("SELECT COALESCE(forwarded_input, '') FROM mcp_tasks WHERE id = ?1");
        let left: Option<String> = self.db.query_one(read, vec![id.into()]).await?;
        let Some(input) = left.filter(|input| !input.is_empty()) else {
            return Ok(None);
        };
        let clear = Sql::fixed(
            "UPDATE mcp_tasks SET forwarded_input = NULL WHERE id = ?1 AND forwarded_input = ?2",
        );
        let cleared = self
            .db
            .execute(clear, vec![id.into(), input.as_str().into()])
            .await?;
        Ok((cleared == 1).then_some(input))
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

    fn row(id: &str, finished: bool, expires_ms: i64) -> StoredTaskRow {
        StoredTaskRow {
            id: id.into(),
            owner: "o".into(),
            session: Some("s".into()),
            finished,
            created_ms: 1,
            expires_ms,
            record: format!("{{\"id\":\"{id}\"}}"),
            owner_replica: "r1".into(),
            lease_until_ms: 50,
        }
    }

    async fn kept_counted_and_purged(store: Store) {
        assert!(store.put_mcp_task(row("a", false, 100)).await.unwrap());
        assert!(store.put_mcp_task(row("b", true, 200)).await.unwrap());
        assert_eq!(store.count_unfinished_mcp_tasks("o").await.unwrap(), 1);
        assert_eq!(store.orphaned_mcp_tasks(10, None).await.unwrap().len(), 0);
        assert_eq!(store.orphaned_mcp_tasks(60, None).await.unwrap().len(), 1);
        assert_eq!(store.mcp_tasks_of_session("s").await.unwrap().len(), 2);
        assert_eq!(
            store.mcp_task("b").await.unwrap().unwrap(),
            "{\"id\":\"b\"}"
        );
        assert_eq!(store.purge_mcp_tasks(150).await.unwrap(), 1);
        assert!(store.mcp_task("a").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_ended_task_is_final_and_leases_and_inputs_belong_to_the_owner() {
        for store in crate::bot::store::test_stores() {
            final_ends_leases_and_inputs(store).await;
        }
    }

    async fn final_ends_leases_and_inputs(store: Store) {
        store.put_mcp_task(row("t", false, 1000)).await.unwrap();
        // Another replica's restart leaves it alone; its owner's restart fails it.
        assert!(
            store
                .orphaned_mcp_tasks(10, Some("r2"))
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store
                .orphaned_mcp_tasks(10, Some("r1"))
                .await
                .unwrap()
                .len(),
            1
        );
        store.renew_mcp_task_leases("r2", 500).await.unwrap();
        assert_eq!(
            store.orphaned_mcp_tasks(60, None).await.unwrap().len(),
            1,
            "not r2's"
        );
        store.renew_mcp_task_leases("r1", 500).await.unwrap();
        assert!(store.orphaned_mcp_tasks(60, None).await.unwrap().is_empty());

        store
            .forward_mcp_task_input("t", "{\"k\":1}")
            .await
            .unwrap();
        let taken = store.take_mcp_task_input("t").await.unwrap();
        assert_eq!(taken.as_deref(), Some("{\"k\":1}"));
        assert_eq!(store.take_mcp_task_input("t").await.unwrap(), None, "once");

        let mut cancelled = row("t", true, 1000);
        cancelled.record = "cancelled".into();
        assert!(store.put_mcp_task(cancelled).await.unwrap());
        let mut finish = row("t", true, 1000);
        finish.record = "completed".into();
        assert!(
            !store.put_mcp_task(finish).await.unwrap(),
            "the cancel stands"
        );
        assert_eq!(store.mcp_task("t").await.unwrap().unwrap(), "cancelled");
        store.forward_mcp_task_input("t", "{}").await.unwrap();
        assert_eq!(store.take_mcp_task_input("t").await.unwrap(), None, "ended");
    }
}
