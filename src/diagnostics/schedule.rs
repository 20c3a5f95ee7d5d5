//! The bot's scheduled tasks: `list_tasks` and `run_task`. (The MCP endpoint's own
//! tasks, which long tool calls become, are kept by `mcp_task_store`.)

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done, failed};
use crate::bot::schedule::{JobRun, RunAs, ScheduleError};
use crate::bot::store::Task;
use crate::mcp::{Annotations, RequestContext, TaskSupport, ToolSpec};

pub(super) struct ListTasks;

impl DiagnosticTool for ListTasks {
    type Args = NoArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_tasks",
            "List scheduled tasks",
            "The bot's scheduled tasks: id, name, description, cron schedule (UTC), action (a prompt or a tool call), \
             enabled, status (idle, running, ok, error, interrupted), last run, next run and last result.",
        )
        .output_of::<Tasks>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        match d.bot.schedule.list().await {
            Ok(tasks) => Ok(done(json!(Tasks { tasks }))),
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}

/// `list_tasks`' answer.
#[derive(Serialize, JsonSchema)]
struct Tasks {
    tasks: Vec<Task>,
}

pub(super) struct RunTask;

#[derive(Deserialize, JsonSchema)]
pub(super) struct RunTaskArgs {
    /// Task id from list_tasks
    #[schemars(range(min = 1, max = i64::MAX))]
    id: i64,
}

impl DiagnosticTool for RunTask {
    type Args = RunTaskArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "run_task",
            "Run a task now",
            "Runs a scheduled task immediately, whatever its schedule, waits for it, records the run \
             (status, last result, next run) and returns the outcome. Get ids from list_tasks.",
        )
        .output_of::<JobRun>()
        .annotations(Annotations::DESTRUCTIVE)
    }

    /// Long work: a client that supports tasks gets a handle to poll.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    async fn run(&self, d: &Diagnostics, args: RunTaskArgs, ctx: &RequestContext) -> Answer {
        ctx.progress(0.0, Some(1.0), Some("task started"));
        let run = d.bot.schedule.run_now(args.id, RunAs::Admin).await;
        ctx.progress(1.0, Some(1.0), Some("task finished"));
        match run {
            Ok(run) => Ok(done(json!(run))),
            Err(e @ ScheduleError::NotFound(_)) => {
                Ok(failed(format!("{e}; call list_tasks for valid ids")))
            }
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}
