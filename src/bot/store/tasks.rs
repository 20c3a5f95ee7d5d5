//! Scheduled tasks: create, list, and the run bookkeeping (running, finished, left
//! running by a stop).

use super::rows::Bound;
use super::*;

/// The columns [`task_from_row`] reads, in order.
macro_rules! task_columns {
    () => {
        "id, name, description, schedule, action, enabled, status, last_run, next_run, last_result, created_at, run_as"
    };
}

pub(super) const TASK_SELECT: &str = concat!("SELECT ", task_columns!(), " FROM tasks");
pub(super) const TASK_COLUMNS: &str = task_columns!();

impl Store {
    pub async fn create_task(
        &self,
        name: &str,
        description: &str,
        schedule: &str,
        action: Value,
        next_run: Option<String>,
        run_as: &'static str,
    ) -> Result<Task, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg
                .create_task(name, description, schedule, &action, next_run, run_as)
                .await;
        }
        let (name, description, schedule) = (
            name.to_string(),
            description.to_string(),
            schedule.to_string(),
        );
        self.call(move |c| {
            let inserted = c.execute(
                "INSERT INTO tasks (name, description, schedule, action, next_run, created_at, run_as)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    name,
                    description,
                    schedule,
                    action.to_string(),
                    next_run,
                    now_rfc3339(),
                    run_as
                ],
            );
            match inserted {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    return Err(StoreError::Conflict(format!(
                        "a task named `{name}` already exists; pick another name"
                    )));
                }
                other => other?,
            };
            let id = c.last_insert_rowid();
            Ok(c.query_row(&format!("{TASK_SELECT} WHERE id = ?1"), [id], |r| task_from_row(r))?)
        })
        .await
    }

    pub async fn list_tasks(&self) -> Result<Vec<Task>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.list_tasks().await;
        }
        self.call(|c| {
            let mut stmt = c.prepare(&format!("{TASK_SELECT} ORDER BY id"))?;
            let rows = stmt.query_map([], |r| task_from_row(r))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn count_tasks(&self) -> Result<usize, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.count_tasks().await;
        }
        self.call(|c| {
            Ok(c.query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get::<_, i64>(0))? as usize)
        })
        .await
    }

    pub async fn get_task(&self, id: i64) -> Result<Option<Task>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.get_task(id).await;
        }
        self.call(move |c| {
            Ok(
                c.query_row(&format!("{TASK_SELECT} WHERE id = ?1"), [id], |r| {
                    task_from_row(r)
                })
                .optional()?,
            )
        })
        .await
    }

    /// Marks a task as running, claimed by `replica` until `lease_until_ms`; returns
    /// false if it already was (so it never runs twice at once).
    pub async fn mark_task_running(
        &self,
        id: i64,
        replica: &str,
        lease_until_ms: i64,
    ) -> Result<bool, StoreError> {
        let params = vec![id.into(), replica.into(), lease_until_ms.into()];
        Ok(self.execute_shared(MARK_RUNNING, params).await? == 1)
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
        if let Some(pg) = self.postgres() {
            return pg.claim_due_tasks(replica, now, lease_until_ms).await;
        }
        let (replica, now) = (replica.to_string(), now.to_string());
        self.call(move |c| {
            let tx = c.transaction()?;
            let claimed = {
                let mut claim =
                    tx.prepare(&format!("{CLAIM_DUE_SQLITE} RETURNING {TASK_COLUMNS}"))?;
                claim
                    .query_map(params![replica, now, lease_until_ms], |r| task_from_row(r))?
                    .collect::<Result<Vec<_>, _>>()?
            };
            for task in &claimed {
                tx.execute(
                    OPEN_RUN,
                    params![task.id, task.next_run, replica, now_rfc3339()],
                )?;
            }
            tx.commit()?;
            Ok(claimed)
        })
        .await
    }

    /// Extends the claim of `replica` on a running task; false when the claim was lost
    /// (it expired and the run was marked interrupted).
    pub async fn renew_task_lease(
        &self,
        id: i64,
        replica: &str,
        lease_until_ms: i64,
    ) -> Result<bool, StoreError> {
        let params = vec![id.into(), replica.into(), lease_until_ms.into()];
        Ok(self.execute_shared(RENEW_LEASE, params).await? == 1)
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
        let params = vec![
            id.into(),
            replica.into(),
            status.into(),
            result.into(),
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
        let only = self.postgres().map(|_| replica);
        let ledger = vec![only.into(), now_rfc3339().into()];
        self.execute_shared(RESET_STALE_LEDGER, ledger).await?;
        Ok(self.execute_shared(RESET_STALE, vec![only.into()]).await? as usize)
    }

    /// Runs one of the statements both backends share (`?N` placeholders) and returns
    /// how many rows it changed.
    pub(super) async fn execute_shared(
        &self,
        sql: &'static str,
        params: Vec<Bound>,
    ) -> Result<u64, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.execute_shared(sql, &params).await;
        }
        self.call(move |c| Ok(c.execute(sql, rusqlite::params_from_iter(params.iter()))? as u64))
            .await
    }
}

const MARK_RUNNING: &str = "UPDATE tasks SET status = 'running', claimed_by = ?2, lease_until_ms = ?3 \
    WHERE id = ?1 AND status != 'running'";

/// SQLite has one writer at a time, so a plain conditional update claims; the
/// PostgreSQL form (in `pg::records`) adds `FOR UPDATE SKIP LOCKED`.
const CLAIM_DUE_SQLITE: &str = "UPDATE tasks SET status = 'running', claimed_by = ?1, lease_until_ms = ?3 \
    WHERE enabled = 1 AND status != 'running' AND next_run IS NOT NULL AND next_run <= ?2";

/// A claimed run's ledger row: a due time claimed again (after an interrupted run)
/// counts another attempt instead of a second row.
pub(super) const OPEN_RUN: &str = "INSERT INTO task_runs (task_id, due_at, replica, attempts, started_at, status) \
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

pub(super) fn task_from_row<R: RowRead>(r: &R) -> Result<Task, R::Error> {
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
