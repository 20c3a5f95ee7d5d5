//! Scheduled tasks: create, list, and the run bookkeeping (running, finished, left
//! running by a stop).

use super::*;

pub(super) const TASK_SELECT: &str = "SELECT id, name, description, schedule, action, enabled, status, last_run, next_run, last_result, created_at, run_as FROM tasks";

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
            Ok(c.query_row(&format!("{TASK_SELECT} WHERE id = ?1"), [id], task_from_row)?)
        })
        .await
    }

    pub async fn list_tasks(&self) -> Result<Vec<Task>, StoreError> {
        self.call(|c| {
            let mut stmt = c.prepare(&format!("{TASK_SELECT} ORDER BY id"))?;
            let rows = stmt.query_map([], task_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn count_tasks(&self) -> Result<usize, StoreError> {
        self.call(|c| {
            Ok(c.query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get::<_, i64>(0))? as usize)
        })
        .await
    }

    pub async fn get_task(&self, id: i64) -> Result<Option<Task>, StoreError> {
        self.call(move |c| {
            Ok(
                c.query_row(&format!("{TASK_SELECT} WHERE id = ?1"), [id], task_from_row)
                    .optional()?,
            )
        })
        .await
    }

    /// Marks a task as running; returns false if it already was (so it never runs twice at once).
    pub async fn mark_task_running(&self, id: i64) -> Result<bool, StoreError> {
        self.call(move |c| {
            let changed = c.execute(
                "UPDATE tasks SET status = 'running' WHERE id = ?1 AND status != 'running'",
                [id],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    pub async fn finish_task_run(
        &self,
        id: i64,
        status: &str,
        result: &str,
        next_run: Option<String>,
    ) -> Result<(), StoreError> {
        let (status, result) = (status.to_string(), result.to_string());
        self.call(move |c| {
            c.execute(
                "UPDATE tasks SET status = ?2, last_result = ?3, last_run = ?4, next_run = ?5 WHERE id = ?1",
                params![id, status, result, now_rfc3339(), next_run],
            )?;
            Ok(())
        })
        .await
    }

    /// Clears `running` left behind by a crash, so those tasks run again.
    pub async fn reset_stale_running_tasks(&self) -> Result<usize, StoreError> {
        self.call(|c| {
            Ok(c.execute(
                "UPDATE tasks SET status = 'interrupted' WHERE status = 'running'",
                [],
            )?)
        })
        .await
    }
}

pub(super) fn task_from_row(r: &rusqlite::Row) -> rusqlite::Result<Task> {
    let action: String = r.get(4)?;
    Ok(Task {
        id: r.get(0)?,
        name: r.get(1)?,
        description: r.get(2)?,
        schedule: r.get(3)?,
        action: serde_json::from_str(&action).unwrap_or(Value::String(action)),
        enabled: r.get(5)?,
        status: r.get(6)?,
        last_run: r.get(7)?,
        next_run: r.get(8)?,
        last_result: r.get(9)?,
        created_at: r.get(10)?,
        run_as: r.get(11)?,
    })
}
