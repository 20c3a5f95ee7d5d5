//! The conformance suite's Tasks-extension fixture tools (`greet`, `slow_compute`,
//! `failing_job`, `protocol_error_job`, `confirm_delete`, `multi_input`,
//! `test_tool_with_task`). Each is an ordinary [`Tool`] that declares its task support;
//! the `mcp` module decides when a call becomes a task and runs it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use porthole_mcp::input_request;
use porthole_mcp::{
    CallToolResult, InputRequired, Outcome, RequestContext, RpcError, TaskSupport, Tool, ToolSpec,
};
use serde_json::{Value, json};

type Result = std::result::Result<Outcome<CallToolResult>, RpcError>;

struct TaskFixture {
    name: &'static str,
    description: &'static str,
    schema: Value,
    support: TaskSupport,
}

fn text(t: impl Into<String>) -> Result {
    Ok(Outcome::Complete(CallToolResult::text(t)))
}

fn confirm_request(message: &str) -> Value {
    input_request(
        "elicitation/create",
        json!({"mode": "form", "message": message, "requestedSchema": {"type": "object",
               "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}),
    )
}

fn name_request(message: &str) -> Value {
    input_request(
        "elicitation/create",
        json!({"mode": "form", "message": message, "requestedSchema": {"type": "object",
               "properties": {"name": {"type": "string"}}, "required": ["name"]}}),
    )
}

/// An accepted elicitation answer's content, if the client sent one for `key`.
fn accepted_content<'a>(ctx: &'a RequestContext, key: &str) -> Option<&'a Value> {
    let answer = ctx.input_response(key)?;
    (answer["action"] == "accept").then(|| &answer["content"])
}

impl TaskFixture {
    async fn slow_compute(&self, args: &Value) -> Result {
        let seconds = args["seconds"].as_f64().unwrap_or(1.0).clamp(0.0, 600.0);
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        let label = args["label"].as_str().unwrap_or("job");
        text(format!("Computed {label} in {seconds} s"))
    }

    fn confirm_delete(&self, args: &Value, ctx: &RequestContext) -> Result {
        let filename = args["filename"].as_str().unwrap_or("the file");
        match accepted_content(ctx, "confirm") {
            Some(content) if content["confirm"] == true => text(format!("Deleted {filename}")),
            Some(_) => text(format!("Kept {filename}")),
            None if ctx.input_response("confirm").is_some() => text(format!("Kept {filename}")),
            None => Ok(Outcome::InputRequired(InputRequired::ask(
                "confirm",
                confirm_request(&format!("Delete {filename}?")),
                None,
            ))),
        }
    }

    fn multi_input(&self, ctx: &RequestContext) -> Result {
        let (name, confirm) = (ctx.input_response("name"), ctx.input_response("confirm"));
        if name.is_some() && confirm.is_some() {
            return text("Both inputs received");
        }
        Ok(Outcome::InputRequired(InputRequired {
            input_requests: [
                ("name".to_string(), name_request("Your name?")),
                ("confirm".to_string(), confirm_request("Proceed?")),
            ]
            .into_iter()
            .collect(),
            request_state: None,
        }))
    }
}

#[async_trait]
impl Tool for TaskFixture {
    fn spec(&self) -> ToolSpec {
        super::fixture_spec(self.name, self.description, &self.schema)
    }

    fn task_support(&self) -> TaskSupport {
        self.support
    }

    fn starts_task(&self, _args: &Value, ctx: &RequestContext) -> bool {
        // test_tool_with_task gathers its input through MRTR before it becomes a task.
        self.name != "test_tool_with_task" || ctx.input_response("user_name").is_some()
    }

    async fn call(&self, args: Value, ctx: &RequestContext) -> Result {
        match self.name {
            "greet" => text(format!(
                "Hello, {}!",
                args["name"].as_str().unwrap_or("World")
            )),
            "slow_compute" => self.slow_compute(&args).await,
            "failing_job" => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                Ok(Outcome::Complete(CallToolResult::error(
                    "the job failed on purpose",
                )))
            }
            "protocol_error_job" => Err(RpcError::internal("the job hit an internal error")),
            "confirm_delete" => self.confirm_delete(&args, ctx),
            "multi_input" => self.multi_input(ctx),
            "test_tool_with_task" => match accepted_content(ctx, "user_name") {
                Some(content) => text(format!(
                    "Hello, {}!",
                    content["name"].as_str().unwrap_or("stranger")
                )),
                None => Ok(Outcome::InputRequired(InputRequired::ask(
                    "user_name",
                    name_request("What is your name?"),
                    None,
                ))),
            },
            other => Err(RpcError::internal(format!(
                "fixture tool {other} has no behaviour"
            ))),
        }
    }
}

/// The task fixtures, with the task support the suite expects of each.
pub(crate) fn tools() -> Vec<Arc<dyn Tool>> {
    let object = |properties: Value| json!({"type": "object", "properties": properties});
    let fixtures = [
        (
            "greet",
            "Says hello (never a task)",
            object(json!({"name": {"type": "string"}})),
            TaskSupport::Forbidden,
        ),
        (
            "slow_compute",
            "Sleeps `seconds`, then answers (a task when the client supports tasks)",
            object(
                json!({"seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}}),
            ),
            TaskSupport::Optional,
        ),
        (
            "failing_job",
            "Ends with a tool error (tasks only)",
            object(json!({})),
            TaskSupport::Required,
        ),
        (
            "protocol_error_job",
            "Ends with a JSON-RPC error",
            object(json!({})),
            TaskSupport::Optional,
        ),
        (
            "confirm_delete",
            "Asks for confirmation, then answers",
            object(json!({"filename": {"type": "string"}})),
            TaskSupport::Optional,
        ),
        (
            "multi_input",
            "Asks for two inputs at once",
            object(json!({})),
            TaskSupport::Optional,
        ),
        (
            "test_tool_with_task",
            "Asks for a name (MRTR), then becomes a task",
            object(json!({})),
            TaskSupport::Required,
        ),
    ];
    fixtures
        .into_iter()
        .map(|(name, description, schema, support)| {
            Arc::new(TaskFixture {
                name,
                description,
                schema,
                support,
            }) as Arc<dyn Tool>
        })
        .collect()
}
