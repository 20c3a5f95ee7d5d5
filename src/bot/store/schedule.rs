//! Scheduled tasks (the scheduler's jobs; the MCP Tasks extension's records are
//! `mcp_tasks`): create, list, and the run bookkeeping (claimed, running, finished, left
//! running by a stop). Every statement is shared by both backends; only the claim's
//! wording differs ([`CLAIM_DUE_SQLITE`], [`CLAIM_DUE_POSTGRES`]).

use serde_json::Value;

use super::backend::{QueryThen, Sql};
use super::rows::{Bound, FromRow, RowRead};
use super::{Store, StoreError, Task, now_rfc3339};

/// The columns [`Task::from_row`] reads, in order.
macro_rules! task_columns {
    () => {
        "id, name, description, schedule, action, enabled, status, last_run, next_run, last_result, created_at, run_as"
    };
}

const TASK_SELECT: &str = concat!("SELECT ", task_columns!(), " FROM tasks");
const TASK_COLUMNS: &str = task_columns!();

impl Store {
    /// Stores a new task unless a limit of `limits` is reached (`None`), counted and
    /// written in one statement, alone among the writers of `tasks` on every replica; a
    /// name already taken is a [`StoreError::Conflict`].
    #[allow(clippy::too_many_arguments)] // the task's own fields, then the limits
    pub async fn create_task(
        &self,
        name: &str,
        description: &str,
        schedule: &str,
        action: Value,
        next_run: Option<String>,
        run_as: &'static str,
        limits: TaskLimits,
    ) -> Result<Option<Task>, StoreError> {
        let count = |n: usize| Bound::from(i64::try_from(n).unwrap_or(i64::MAX));
        let values = vec![
            name.into(),
            description.into(),
            schedule.into(),
            action.to_string().into(),
            next_run.into(),
            now_rfc3339().into(),
            run_as.into(),
            count(limits.all),
            count(limits.run_as_user),
        ];
        let created: Vec<Task> = self
            .db
            .query_exclusive("tasks", Sql::fixed(INSERT_TASK), values)
            .await?;
        if let Some(task) = created.into_iter().next() {
            return Ok(Some(task));
        }
        let taken = Sql::fixed("SELECT id FROM tasks WHERE name = ?1");
        let taken: Option<i64> = self.db.query_one(taken, vec![name.into()]).await?;
        match taken {
            Some(_) => Err(StoreError::Conflict(format!(
                "a task named `{name}` already exists; pick another name"
            ))),
            None => Ok(None),
        }
    }

    pub async fn list_tasks(&self) -> Result<Vec<Task>, StoreError> {
        let sql = Sql::fixed(format!("{TASK_SELECT} ORDER BY id"));
        self.db.query(sql, Vec::new()).await
    }

    pub async fn count_tasks(&self) -> Result<usize, StoreError> {
        let sql = Sql::fixed("SELECT COUNT(*) FROM tasks");
        let count: Option<i64> = self.db.query_one(sql, Vec::new()).await?;
        Ok(count.unwrap_or(0) as usize)
    }

    /// How many tasks run with the rights of `run_as` (`user` or `admin`).
    pub async fn count_tasks_run_as(&self, run_as: &str) -> Result<usize, StoreError> {
        let sql = Sql::fixed("SELECT COUNT(*) FROM tasks WHERE run_as = ?1");
        let count: Option<i64> = self.db.query_one(sql, vec![run_as.into()]).await?;
        Ok(count.unwrap_or(0) as usize)
    }

    pub async fn get_task(&self, id: i64) -> Result<Option<Task>, StoreError> {
        let sql = Sql::fixed(format!("{TASK_SELECT} WHERE id = ?1"));
        self.db.query_one(sql, vec![id.into()]).await
    }

    /// Marks a task as running, claimed by `replica` until `lease_until_ms`; returns
    /// false if it already was (so it never runs twice at once).
    pub async fn mark_task_running(
        &self,
        id: i64,
        replica: &str,
        lease_until_ms: i64,
    ) -> Result<bool, StoreError> {
        self.update_claim(MARK_RUNNING, id, replica, lease_until_ms)
            .await
    }

    /// Claims every enabled task that is due at `now` and not running, for `replica`
    /// until `lease_until_ms`, and opens its row in the `task_runs` ledger (one per task
    /// and due time). On PostgreSQL, replicas claiming at once skip each other's rows
    /// (`FOR UPDATE SKIP LOCKED`), so each due time is claimed once.
    pub async fn claim_due_tasks(
        &self,
        replica: &str,
        now: &str,
        lease_until_ms: i64,
    ) -> Result<Vec<Task>, StoreError> {
        let claim = format!("{} RETURNING {TASK_COLUMNS}", self.db.dialect().claim_due);
        let (replica, started_at) = (replica.to_string(), now_rfc3339());
        let work = QueryThen {
            query: Sql::fixed(claim),
            values: vec![replica.as_str().into(), now.into(), lease_until_ms.into()],
            then: Sql::fixed(OPEN_RUN),
            values_of: Box::new(move |task: &Task| -> Vec<Bound> {
                vec![
                    task.id.into(),
                    task.next_run.clone().into(),
                    replica.as_str().into(),
                    started_at.as_str().into(),
                ]
            }),
        };
        self.db.query_then(work).await
    }

    /// Which attempt at its due time `due_at` the run of task `id` is (1 for the first),
    /// as the `task_runs` ledger counts them.
    pub async fn run_attempt(&self, id: i64, due_at: &str) -> Result<Option<i64>, StoreError> {
        let sql = Sql::fixed("SELECT attempts FROM task_runs WHERE task_id = ?1 AND due_at = ?2");
        self.db.query_one(sql, vec![id.into(), due_at.into()]).await
    }

    /// Extends the claim of `replica` on a running task; false when the claim was lost
    /// (it expired and the run was marked interrupted).
    pub async fn renew_task_lease(
        &self,
        id: i64,
        replica: &str,
        lease_until_ms: i64,
    ) -> Result<bool, StoreError> {
        self.update_claim(RENEW_LEASE, id, replica, lease_until_ms)
            .await
    }

    /// Runs a claim statement (`MARK_RUNNING`, `RENEW_LEASE`) on one task for `replica`:
    /// whether it changed the task's row, that is whether the claim holds.
    async fn update_claim(
        &self,
        sql: &'static str,
        id: i64,
        replica: &str,
        lease_until_ms: i64,
    ) -> Result<bool, StoreError> {
        let params = vec![id.into(), replica.into(), lease_until_ms.into()];
        Ok(self.execute_shared(sql, params).await? == 1)
    }

    /// Marks interrupted the runs whose claim expired before `now_ms` (their replica
    /// stopped mid-run), so the next claim runs them again; returns how many.
    pub async fn interrupt_expired_runs(&self, now_ms: i64) -> Result<usize, StoreError> {
        let ledger = vec![now_ms.into(), now_rfc3339().into()];
        self.execute_shared(INTERRUPT_RUNS_LEDGER, ledger).await?;
        Ok(self
            .execute_shared(INTERRUPT_EXPIRED, vec![now_ms.into()])
            .await? as usize)
    }

    /// Records the end of a run by `replica` (and of its ledger row); a replica whose
    /// claim was taken over changes nothing.
    pub async fn finish_task_run(
        &self,
        id: i64,
        replica: &str,
        status: &str,
        result: &str,
        next_run: Option<String>,
    ) -> Result<(), StoreError> {
        let now = now_rfc3339();
        let ledger = vec![id.into(), replica.into(), status.into(), now.clone().into()];
        self.execute_shared(CLOSE_RUN, ledger).await?;
        // A run's result quotes a tool or the model, as a message does: stored redacted.
        let params = vec![
            id.into(),
            replica.into(),
            status.into(),
            self.for_storage(result).as_ref().into(),
            now.into(),
            next_run.into(),
        ];
        self.execute_shared(FINISH_RUN, params).await?;
        Ok(())
    }

    /// Marks interrupted the runs an earlier stop left `running`: on SQLite (one
    /// process owns the file) every one of them; on a shared PostgreSQL only those
    /// claimed under this replica's id (others are left to their lease).
    pub async fn reset_stale_running_tasks(&self, replica: &str) -> Result<usize, StoreError> {
        let only = self.db.dialect().shared_by_replicas.then_some(replica);
        let ledger = vec![only.into(), now_rfc3339().into()];
        self.execute_shared(RESET_STALE_LEDGER, ledger).await?;
        Ok(self.execute_shared(RESET_STALE, vec![only.into()]).await? as usize)
    }

    /// Runs one of the statements both backends share; returns how many rows it changed.
    async fn execute_shared(
        &self,
        sql: &'static str,
        values: Vec<Bound>,
    ) -> Result<u64, StoreError> {
        self.db.execute(Sql::fixed(sql), values).await
    }
}

const MARK_RUNNING: &str = "UPDATE tasks SET status = 'running', claimed_by = ?2, lease_until_ms = ?3 \
    WHERE id = ?1 AND status != 'running'";

/// Stores a task unless its name is taken (then it returns no row).
/// A new task, written only while the table holds fewer than ?8 tasks and, for one
/// that runs as a chat user, fewer than ?9 such (the casts give PostgreSQL the types an
/// `INSERT … SELECT` does not infer).
const INSERT_TASK: &str = concat!(
    "INSERT INTO tasks (name, description, schedule, action, next_run, created_at, run_as) \
     SELECT CAST(?1 AS TEXT), CAST(?2 AS TEXT), CAST(?3 AS TEXT), CAST(?4 AS TEXT), \
       CAST(?5 AS TEXT), CAST(?6 AS TEXT), CAST(?7 AS TEXT) \
     WHERE (SELECT COUNT(*) FROM tasks) < ?8 \
       AND (CAST(?7 AS TEXT) <> 'user' OR (SELECT COUNT(*) FROM tasks WHERE run_as = 'user') < ?9) \
     ON CONFLICT (name) DO NOTHING RETURNING ",
    task_columns!()
);

/// The most tasks the table may hold, and the most of them that run as a chat user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    pub all: usize,
    pub run_as_user: usize,
}

/// SQLite has one writer at a time, so a plain conditional update claims.
pub(super) const CLAIM_DUE_SQLITE: &str = "UPDATE tasks SET status = 'running', claimed_by = ?1, lease_until_ms = ?3 \
    WHERE enabled = 1 AND status != 'running' AND next_run IS NOT NULL AND next_run <= ?2";

/// Replicas claiming at once skip each other's rows (`SKIP LOCKED`), and a row one
/// claimed just before no longer matches once its lock is released (PostgreSQL re-checks
/// the condition on the newest version).
pub(super) const CLAIM_DUE_POSTGRES: &str = "UPDATE tasks SET status = 'running', claimed_by = ?1, lease_until_ms = ?3 \
    WHERE id IN (SELECT id FROM tasks WHERE enabled = 1 AND status <> 'running' \
    AND next_run IS NOT NULL AND next_run <= ?2 FOR UPDATE SKIP LOCKED)";

/// A claimed run's ledger row: a due time claimed again (after an interrupted run)
/// counts another attempt instead of a second row.
const OPEN_RUN: &str = "INSERT INTO task_runs (task_id, due_at, replica, attempts, started_at, status) \
    VALUES (?1, ?2, ?3, 1, ?4, 'running') ON CONFLICT (task_id, due_at) DO UPDATE SET \
    replica = excluded.replica, attempts = task_runs.attempts + 1, started_at = excluded.started_at, \
    finished_at = NULL, status = 'running'";

const RENEW_LEASE: &str = "UPDATE tasks SET lease_until_ms = ?3 \
    WHERE id = ?1 AND claimed_by = ?2 AND status = 'running'";

const INTERRUPT_RUNS_LEDGER: &str = "UPDATE task_runs SET status = 'interrupted', finished_at = ?2 \
    WHERE status = 'running' AND task_id IN \
    (SELECT id FROM tasks WHERE status = 'running' AND lease_until_ms < ?1)";

const INTERRUPT_EXPIRED: &str = "UPDATE tasks SET status = 'interrupted', \
    last_result = 'interrupted: replica ' || COALESCE(claimed_by, 'unknown') || ' stopped while running it; the next claim runs it again', \
    claimed_by = NULL, lease_until_ms = NULL \
    WHERE status = 'running' AND lease_until_ms < ?1";

const CLOSE_RUN: &str = "UPDATE task_runs SET status = ?3, finished_at = ?4 \
    WHERE task_id = ?1 AND replica = ?2 AND status = 'running'";

const FINISH_RUN: &str = "UPDATE tasks SET status = ?3, last_result = ?4, last_run = ?5, next_run = ?6, \
    claimed_by = NULL, lease_until_ms = NULL \
    WHERE id = ?1 AND (claimed_by IS NULL OR claimed_by = ?2)";

/// `?1` is NULL on SQLite (every stale run) or this replica's id on PostgreSQL.
const RESET_STALE_LEDGER: &str = "UPDATE task_runs SET status = 'interrupted', finished_at = ?2 \
    WHERE status = 'running' AND (CAST(?1 AS TEXT) IS NULL OR replica = ?1)";

const RESET_STALE: &str = "UPDATE tasks SET status = 'interrupted', claimed_by = NULL, lease_until_ms = NULL \
    WHERE status = 'running' AND (CAST(?1 AS TEXT) IS NULL OR claimed_by = ?1 OR claimed_by IS NULL)";

impl FromRow for Task {
    fn from_row<R: RowRead>(r: &R) -> Result<Task, R::Error> {
        let action = r.text(4)?;
        Ok(Task {
            id: r.int(0)?,
            name: r.text(1)?,
            description: r.text(2)?,
            schedule: r.text(3)?,
            action: serde_json::from_str(&action).unwrap_or(Value::String(action)),
            enabled: r.flag(5)?,
            status: r.text(6)?,
            last_run: r.optional_text(7)?,
            next_run: r.optional_text(8)?,
            last_result: r.optional_text(9)?,
            created_at: r.text(10)?,
            run_as: r.text(11)?,
        })
    }
}
