//! Scheduled tasks: stored in the database with a cron schedule and an action (a prompt
//! for the supervisor, or a direct tool call), run by a scheduler loop when due, or at
//! once with [`Scheduler::run_now`].
//!
//! Schedules are cron expressions with 5 fields (`min hour day month weekday`) or 6–7
//! with seconds first; times are UTC. A task never runs twice at once: starting a run
//! flips its status to `running` only if it was not already.
//!
//! Several replicas may share one database (PostgreSQL): each scheduler *claims* the due
//! tasks in one statement, so a due time is claimed by one replica at a time. A claim
//! is a lease ([`RUN_LEASE`]) that the running replica renews. When a replica dies
//! mid-run, the processes it started die with it (`child_env`), its lease runs out, the
//! run is marked interrupted, and the next claim (on any replica) runs that due time
//! again as its next attempt. A replica that cannot renew its claim for
//! [`TRUSTED_HOLD`] stops its attempt before the lease can run out, so two attempts at
//! one due time never run at once. The `task_runs` table keeps one row per task and due
//! time (its `attempts` counts the attempts); each run reaches its work as a
//! [`ScheduledRun`] (task id, due time, attempt), so a tool can make its effect
//! idempotent.

use crate::bot::trace::Tracer;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use crate::bot::agents::Supervisor;
use crate::bot::store::{Store, StoreError, Task, TaskLimits};
use crate::bot::tools::{ADMIN_ROLE, ExecContext, ScheduledRun, ToolRunner, USER_ROLE};

/// Whose rights a task runs with. A task never gets more than its creator had: one made
/// through the web page runs as a chat user, even when the scheduler runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunAs {
    User,
    Admin,
}

impl RunAs {
    pub fn as_str(self) -> &'static str {
        match self {
            RunAs::User => USER_ROLE,
            RunAs::Admin => ADMIN_ROLE,
        }
    }

    pub fn parse(text: &str) -> RunAs {
        // Anything but an explicit admin runs with the lesser rights.
        if text == ADMIN_ROLE {
            RunAs::Admin
        } else {
            RunAs::User
        }
    }

    fn context(self) -> ExecContext {
        ExecContext::new(&[self.as_str()])
    }
}

/// Most tasks the bot keeps: `/api` has no token, and the scheduler reads every task
/// twice a second, so their number must stay bounded.
pub const MAX_TASKS: usize = 1000;
/// Most tasks that run as a chat user (made through `/api`, which has no token): a
/// tenth of [`MAX_TASKS`], so the page cannot take every place an admin's task needs.
pub const MAX_USER_TASKS: usize = MAX_TASKS / 10;
/// The longest a task's name, description and action (as JSON text) may be, in
/// characters: every task is listed whole by `GET /api/tasks` and `list_tasks`, and
/// the page's form accepts tasks without a token, so a task must stay a few lines.
const MAX_NAME_CHARS: usize = 200;
/// A schedule is five or six cron fields: this is room for long lists in each.
const MAX_SCHEDULE_CHARS: usize = 200;
const MAX_DESCRIPTION_CHARS: usize = 2_000;
const MAX_ACTION_CHARS: usize = 16_384;

/// What a task does when it runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum JobAction {
    /// Sends `prompt` to the supervisor as a user message in its own conversation.
    Prompt { prompt: String },
    /// Calls a tool directly.
    Tool {
        tool: String,
        #[serde(default)]
        arguments: Value,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "invalid cron schedule `{schedule}`: {reason}; use 5 fields `min hour day month weekday` (e.g. `*/5 * * * *`) or 6 with seconds first"
    )]
    InvalidSchedule { schedule: String, reason: String },
    #[error(
        "invalid action: {0}; use {{\"prompt\": \"…\"}} or {{\"tool\": \"name\", \"arguments\": {{…}}}}"
    )]
    InvalidAction(String),
    #[error("`{field}` is {length} characters long, over the {max} a task keeps; shorten it")]
    TooLong {
        field: &'static str,
        length: usize,
        max: usize,
    },
    #[error("no task with id {0}")]
    NotFound(i64),
    #[error(
        "`{0}` runs more than once a minute; a task a chat user creates runs at most once a \
         minute: use 5 fields (`min hour day month weekday`), or a single second first in 6 or 7"
    )]
    TooOften(String),
    #[error("`{0}` holds a control character (a line break, an escape); use plain text")]
    ControlCharacter(&'static str),
    #[error("task {0} is already running")]
    AlreadyRunning(i64),
    #[error("task {0} runs with admin rights; run it through /mcp (`run_task`) instead")]
    NeedsAdmin(i64),
    #[error("there are already {0} tasks, the most the bot keeps; delete one first (db_query)")]
    TooMany(usize),
    #[error(
        "there are already {0} tasks that run as a chat user, the most the page may make; an admin can delete some (db_query)"
    )]
    TooManyForUsers(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Parses a cron expression, accepting the common 5-field form.
pub fn parse_schedule(schedule: &str) -> Result<cron::Schedule, ScheduleError> {
    let fields = schedule.split_whitespace().count();
    let full = if fields == 5 {
        format!("0 {schedule}")
    } else {
        schedule.to_string()
    };
    cron::Schedule::from_str(&full).map_err(|e| ScheduleError::InvalidSchedule {
        schedule: schedule.to_string(),
        reason: e.to_string(),
    })
}

/// Whether `schedule` fires twice within a minute: its seconds field names more than
/// one second (`*`, `*/5`, `0,30`, `0-59`, and the same spelled with spaces inside the
/// field, which the parser accepts). Read from the times it gives, not from its text:
/// every minute that fires fires at each of those seconds, so among its next three
/// times (the first may fall late in a minute already under way) two lie less than a
/// minute apart.
fn fires_more_than_once_a_minute(schedule: &cron::Schedule) -> bool {
    let times: Vec<_> = schedule.upcoming(Utc).take(3).collect();
    times
        .windows(2)
        .any(|pair| pair[1] - pair[0] < chrono::TimeDelta::seconds(60))
}

fn next_run(schedule: &str) -> Option<String> {
    parse_schedule(schedule)
        .ok()?
        .upcoming(Utc)
        .next()
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// The outcome of one run.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct JobRun {
    pub task_id: i64,
    pub status: String,
    pub result: String,
}

/// How many attempts one due time of a task gets: an attempt that was interrupted (its
/// process stopped mid-run) is made again, but not without end.
pub const MAX_ATTEMPTS: u32 = 3;

/// How long a claim on a running task holds unless renewed.
pub const RUN_LEASE: Duration = Duration::from_secs(30);

/// How often the replica running a task renews its claim.
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// How long after it last renewed (or took) its claim a replica trusts it: a third of
/// the lease short of it. An attempt whose claim could not be renewed that long is
/// stopped, its processes killed, before the lease can run out and another replica run
/// the due time again; the third left over absorbs clocks that disagree by seconds.
const TRUSTED_HOLD: Duration = Duration::from_secs(20);

fn lease_until_ms() -> i64 {
    Utc::now().timestamp_millis() + RUN_LEASE.as_millis() as i64
}

pub struct Scheduler {
    store: Store,
    supervisor: Arc<Supervisor>,
    runner: Arc<ToolRunner>,
    tracer: Arc<Tracer>,
    /// This process among replicas sharing the database (`PORTHOLE_REPLICA_ID`).
    replica: String,
}

impl Scheduler {
    pub fn new(
        store: Store,
        supervisor: Arc<Supervisor>,
        runner: Arc<ToolRunner>,
        tracer: Arc<Tracer>,
        replica: String,
    ) -> Self {
        Scheduler {
            store,
            supervisor,
            runner,
            tracer,
            replica,
        }
    }

    /// Creates a task after checking its schedule and action: a tool action must name a
    /// tool that `run_as` may call.
    pub async fn create(
        &self,
        name: &str,
        description: &str,
        schedule: &str,
        action: Value,
        run_as: RunAs,
    ) -> Result<Task, ScheduleError> {
        let length = schedule.chars().count();
        if length > MAX_SCHEDULE_CHARS {
            return Err(ScheduleError::TooLong {
                field: "schedule",
                length,
                max: MAX_SCHEDULE_CHARS,
            });
        }
        let times = parse_schedule(schedule)?;
        if run_as == RunAs::User && fires_more_than_once_a_minute(&times) {
            return Err(ScheduleError::TooOften(schedule.to_string()));
        }
        for (field, text) in [("name", name), ("schedule", schedule)] {
            if text.chars().any(char::is_control) {
                return Err(ScheduleError::ControlCharacter(field));
            }
        }
        let action_text = action.to_string();
        for (field, text, max) in [
            ("name", name, MAX_NAME_CHARS),
            ("description", description, MAX_DESCRIPTION_CHARS),
            ("action", action_text.as_str(), MAX_ACTION_CHARS),
        ] {
            let length = text.chars().count();
            if length > max {
                return Err(ScheduleError::TooLong { field, length, max });
            }
        }
        let parsed = serde_json::from_value::<JobAction>(action.clone())
            .map_err(|e| ScheduleError::InvalidAction(e.to_string()))?;
        if let JobAction::Tool { tool, .. } = &parsed {
            let ctx = run_as.context();
            if !self
                .runner
                .available_to(&ctx)
                .iter()
                .any(|t| &t.def.name == tool)
            {
                return Err(ScheduleError::InvalidAction(format!(
                    "`{tool}` is not a tool a {} may call (GET /api/tools lists those)",
                    run_as.as_str()
                )));
            }
        }
        // The store counts and writes in one step, alone among the replicas' writers,
        // so the limits hold across replicas; a refusal is then told apart by counting.
        let limits = TaskLimits {
            all: MAX_TASKS,
            run_as_user: MAX_USER_TASKS,
        };
        let created = self
            .store
            .create_task(
                name,
                description,
                schedule,
                action,
                next_run(schedule),
                run_as.as_str(),
                limits,
            )
            .await?;
        if let Some(task) = created {
            return Ok(task);
        }
        let existing = self.store.count_tasks().await?;
        if existing >= MAX_TASKS {
            return Err(ScheduleError::TooMany(existing));
        }
        let users = self.store.count_tasks_run_as(RunAs::User.as_str()).await?;
        Err(ScheduleError::TooManyForUsers(users))
    }

    pub async fn list(&self) -> Result<Vec<Task>, ScheduleError> {
        Ok(self.store.list_tasks().await?)
    }

    /// Runs a task now, whatever its schedule, and records the result. `caller` is the
    /// most the one asking may do: a task with more rights than that is refused.
    pub async fn run_now(&self, id: i64, caller: RunAs) -> Result<JobRun, ScheduleError> {
        let task = self
            .store
            .get_task(id)
            .await?
            .ok_or(ScheduleError::NotFound(id))?;
        if caller == RunAs::User && RunAs::parse(&task.run_as) == RunAs::Admin {
            return Err(ScheduleError::NeedsAdmin(id));
        }
        let claimed_at = Instant::now();
        if !self
            .store
            .mark_task_running(id, &self.replica, lease_until_ms())
            .await?
        {
            return Err(ScheduleError::AlreadyRunning(id));
        }
        // Not a due time of the schedule: the run is named by the moment it was asked for.
        let run = ScheduledRun {
            task_id: id,
            due_at: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
            attempt: 1,
        };
        self.run_claimed(&task, run, claimed_at).await
    }

    /// Runs a task this replica has claimed (at `claimed_at`), renewing the claim while
    /// it runs, and records the result. An attempt whose claim can no longer be trusted
    /// is stopped and records nothing: the lease, left to run out, hands the due time on.
    async fn run_claimed(
        &self,
        task: &Task,
        run: ScheduledRun,
        claimed_at: Instant,
    ) -> Result<JobRun, ScheduleError> {
        let id = task.id;
        if run.attempt > MAX_ATTEMPTS {
            // Each earlier attempt ended with the process that ran it (a crash, a kill,
            // a lost lease): running it again would repeat whatever stops it, and its
            // side effects, after every restart.
            let result = format!(
                "gave up: {MAX_ATTEMPTS} attempts at the run due {} were interrupted (the process running it stopped each time); the next due time runs as usual",
                run.due_at
            );
            tracing::warn!(task = %task.name, id, due_at = %run.due_at, "{result}");
            self.store
                .finish_task_run(
                    id,
                    &self.replica,
                    "error",
                    &result,
                    next_run(&task.schedule),
                )
                .await?;
            return Ok(JobRun {
                task_id: id,
                status: "error".to_string(),
                result,
            });
        }
        tracing::info!(task = %task.name, id, replica = %self.replica, due_at = %run.due_at, attempt = run.attempt, "running task");
        let held = hold_claim(self.store.clone(), id, self.replica.clone(), claimed_at);
        let outcome = tokio::select! {
            outcome = self.execute(task, run) => outcome,
            () = held => {
                return Ok(JobRun {
                    task_id: id,
                    status: "interrupted".to_string(),
                    result: "stopped: this replica could not keep its claim on the run".to_string(),
                });
            }
        };
        let (status, result) = match outcome {
            Ok(text) => ("ok", text),
            Err(text) => ("error", text),
        };
        self.store
            .finish_task_run(id, &self.replica, status, &result, next_run(&task.schedule))
            .await?;
        tracing::info!(task = %task.name, id, status, "task finished");
        Ok(JobRun {
            task_id: id,
            status: status.to_string(),
            result,
        })
    }

    /// Which due time and attempt a claimed task runs as; `None` (logged) when the
    /// ledger cannot be read, and the claim is then left to its lease.
    async fn claimed_run(&self, task: &Task) -> Option<ScheduledRun> {
        let due_at = task.next_run.clone()?;
        match self.store.run_attempt(task.id, &due_at).await {
            Ok(Some(attempt)) => Some(ScheduledRun {
                task_id: task.id,
                due_at,
                attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
            }),
            Ok(None) | Err(_) => {
                tracing::warn!(
                    task = task.id,
                    "cannot read which attempt this run is; it runs again once its lease runs out"
                );
                None
            }
        }
    }

    async fn execute(&self, task: &Task, run: ScheduledRun) -> Result<String, String> {
        let action: JobAction = serde_json::from_value(task.action.clone())
            .map_err(|e| format!("the stored action is invalid: {e}"))?;
        let mut ctx = RunAs::parse(&task.run_as).context();
        ctx.correlation_id = format!("task-{}-{}", task.id, ctx.correlation_id);
        ctx.trace = self.tracer.root("task", None);
        ctx.scheduled_run = Some(run);
        match action {
            JobAction::Prompt { prompt } => {
                let reply = self
                    .supervisor
                    .send(None, &prompt, &ctx, None)
                    .await
                    .map_err(|e| e.to_string())?;
                match reply.error {
                    Some(e) => Err(e),
                    None => Ok(reply.response),
                }
            }
            JobAction::Tool { tool, arguments } => self
                .runner
                .call(&tool, arguments, &ctx)
                .await
                .map(|v| v.to_string())
                .map_err(|e| e.to_string()),
        }
    }

    /// Runs due tasks until `shutdown` turns true. Checks twice a second, so a task runs
    /// within half a second of its time.
    pub async fn run_scheduler(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        if let Ok(n) = self.store.reset_stale_running_tasks(&self.replica).await
            && n > 0
        {
            tracing::warn!(
                count = n,
                "tasks were left running by an earlier stop; marked interrupted"
            );
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
            match self
                .store
                .interrupt_expired_runs(Utc::now().timestamp_millis())
                .await
            {
                Ok(n) if n > 0 => tracing::warn!(
                    count = n,
                    "task runs whose replica stopped mid-run were marked interrupted; they run again"
                ),
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "cannot check for interrupted task runs"),
            }
            let now = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
            let claimed_at = Instant::now();
            let claimed = match self
                .store
                .claim_due_tasks(&self.replica, &now, lease_until_ms())
                .await
            {
                Ok(claimed) => claimed,
                Err(e) => {
                    tracing::debug!(error = %e, "cannot claim due tasks");
                    continue;
                }
            };
            for task in claimed {
                let me = self.clone();
                tokio::spawn(async move {
                    let Some(run) = me.claimed_run(&task).await else {
                        return;
                    };
                    if let Err(e) = me.run_claimed(&task, run, claimed_at).await {
                        tracing::warn!(task = task.id, error = %e, "scheduled run failed");
                    }
                });
            }
        }
        tracing::info!("scheduler stopped");
    }
}

/// Renews the claim of `replica` on running task `id` every [`RENEW_EVERY`]; returns
/// once the claim can no longer be trusted: it was lost (the lease ran out and the run
/// was marked interrupted), or no renewal went through for [`TRUSTED_HOLD`].
async fn hold_claim(store: Store, id: i64, replica: String, claimed_at: Instant) {
    let mut trusted_until = claimed_at + TRUSTED_HOLD;
    loop {
        let renewal = async {
            tokio::time::sleep(RENEW_EVERY).await;
            let asked = Instant::now();
            let renewed = store.renew_task_lease(id, &replica, lease_until_ms()).await;
            (asked, renewed)
        };
        tokio::select! {
            () = tokio::time::sleep_until(trusted_until.into()) => {
                tracing::warn!(
                    task = id,
                    "the claim on this run could not be renewed in time; the attempt is stopped so another replica can run it again without overlap"
                );
                return;
            }
            (asked, renewed) = renewal => match renewed {
                Ok(true) => trusted_until = asked + TRUSTED_HOLD,
                Ok(false) => {
                    tracing::warn!(
                        task = id,
                        "the claim on this run was lost (its lease ran out); the attempt is stopped"
                    );
                    return;
                }
                Err(e) => tracing::warn!(task = id, error = %e, "cannot renew the claim on a running task"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_accept_five_or_six_fields_and_reject_nonsense() {
        assert!(parse_schedule("*/5 * * * *").is_ok());
        assert!(parse_schedule("30 */5 * * * *").is_ok());
        let err = parse_schedule("every tuesday").unwrap_err().to_string();
        assert!(
            err.contains("every tuesday") && err.contains("5 fields"),
            "{err}"
        );
    }

    #[test]
    fn actions_parse_both_forms() {
        let prompt: JobAction =
            serde_json::from_value(serde_json::json!({"prompt": "hi"})).unwrap();
        assert_eq!(
            prompt,
            JobAction::Prompt {
                prompt: "hi".into()
            }
        );
        let tool: JobAction =
            serde_json::from_value(serde_json::json!({"tool": "current_time"})).unwrap();
        assert!(matches!(tool, JobAction::Tool { .. }));
        assert!(serde_json::from_value::<JobAction>(serde_json::json!({"nope": 1})).is_err());
    }
}
