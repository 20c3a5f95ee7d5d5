//! A tool call running as a task: it runs in a tokio task of its own, outlives the HTTP
//! request that started it, and stops when `tasks/cancel` aborts it.
//!
//! A tool asks for input the way it does in a plain modern call, by returning
//! `InputRequired`; here the engine parks the task in `input_required`, publishes the
//! requests under round-prefixed keys (`r1-confirm`, `r2-confirm`: a key is never
//! reused within a task), gathers the answers `tasks/update` brings, and calls the tool
//! again with them and its sealed state — so a tool needs no task-specific code.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::Abortable;
use serde_json::{Map, Value};

use super::tools;
use crate::ServerInner;
use crate::caller::Caller;
use crate::context::RequestContext;
use crate::guard::Access;
use crate::jsonrpc::RpcError;
use crate::protocol::Era;
use crate::session::Session;
use crate::task_record::TaskRecord;
use crate::tasks::TaskInputs;
use crate::tool::{InputRequired, Outcome};

/// What a task's calls inherit from the request that created it.
struct Origin {
    /// What the token that started the task allows; its tool calls keep to it.
    access: Access,
    era: Era,
    session: Option<Arc<Session>>,
    request_id: Value,
    client_capabilities: Value,
    caller: Caller,
}

/// The client's answers and the tool's sealed state for the next call of the tool.
#[derive(Default)]
struct Round {
    responses: Option<Map<String, Value>>,
    state: Option<String>,
}

/// Creates a task for `tools/call` of `name` and starts it; returns the stored task.
pub(super) async fn start(
    inner: &ServerInner,
    name: &str,
    args: Value,
    ctx: &RequestContext,
    ttl: Option<Duration>,
) -> Result<TaskRecord, RpcError> {
    let inner = inner
        .this
        .upgrade()
        .ok_or_else(|| RpcError::internal("the server is shutting down"))?;
    let session = ctx.session.as_ref().map(|s| s.id.clone());
    let record = inner
        .tasks
        .create(&inner.tasks.owner(&ctx.caller), session, ttl)
        .await?;
    let (registration, inputs) = inner.tasks.track(&record);
    let origin = Origin {
        access: ctx.access,
        era: ctx.era.clone(),
        session: ctx.session.clone(),
        request_id: ctx.request_id.clone(),
        client_capabilities: ctx.client_capabilities.clone(),
        caller: ctx.caller.clone(),
    };
    let first = Round {
        responses: ctx.input_responses.clone(),
        state: ctx.request_state.clone(),
    };
    let (id, name) = (record.id.clone(), name.to_string());
    tokio::spawn(async move {
        let work = drive(&inner, &id, &name, args, origin, first, inputs);
        let end = match AssertUnwindSafe(Abortable::new(work, registration))
            .catch_unwind()
            .await
        {
            Ok(Ok(end)) => Some(end.map_err(|error| redacted_error(&inner, error))),
            // Cancelled: tasks/cancel recorded it before aborting.
            Ok(Err(_aborted)) => None,
            Err(_panic) => {
                tracing::error!(target: "porthole::mcp::tasks", task = %id, tool = %name, "a tool panicked in a task");
                Some(Err(RpcError::internal(
                    "the tool crashed; the server log has details",
                )))
            }
        };
        inner.tasks.finish(&id, end).await;
    });
    Ok(record)
}

/// A protocol error as it may be stored and shown: its message and data redacted like
/// tool results.
fn redacted_error(inner: &ServerInner, mut error: RpcError) -> RpcError {
    let mut message = Value::String(std::mem::take(&mut error.message));
    inner.redactor.redact(&mut message);
    error.message = message.as_str().unwrap_or_default().to_string();
    if let Some(data) = &mut error.data {
        inner.redactor.redact(data);
    }
    error
}

/// Calls the tool until it completes, parking the task for input between calls.
async fn drive(
    inner: &ServerInner,
    id: &str,
    name: &str,
    args: Value,
    origin: Origin,
    mut round: Round,
    mut inputs: TaskInputs,
) -> Result<Value, RpcError> {
    let mut number = 0u32;
    loop {
        let mut ctx = inner.context(
            origin.access,
            origin.era.clone(),
            origin.session.clone(),
            origin.request_id.clone(),
            None,
            None,
        );
        ctx.client_capabilities = origin.client_capabilities.clone();
        ctx.caller = origin.caller.clone();
        ctx.in_task = true;
        ctx.input_responses = round.responses.take();
        ctx.request_state = round.state.take();
        match tools::invoke(inner, name, args.clone(), &ctx).await? {
            Outcome::Complete(result) => return Ok(result.to_json()),
            Outcome::InputRequired(input) => {
                number += 1;
                round = await_inputs(inner, id, number, input, &mut inputs).await?;
            }
        }
    }
}

/// Publishes round `number`'s input requests and waits until each has an answer.
async fn await_inputs(
    inner: &ServerInner,
    id: &str,
    number: u32,
    input: InputRequired,
    inputs: &mut TaskInputs,
) -> Result<Round, RpcError> {
    let prefix = format!("r{number}-");
    let mut asked = Value::Object(
        input
            .input_requests
            .into_iter()
            .map(|(key, request)| (format!("{prefix}{key}"), request))
            .collect(),
    );
    inner.redactor.redact(&mut asked);
    let Value::Object(asked) = asked else {
        return Err(RpcError::internal("input requests must be an object"));
    };
    let pending: HashSet<String> = asked.keys().cloned().collect();
    inner.tasks.park_for_input(id, asked).await?;
    let mut answers = Map::new();
    while answers.len() < pending.len() {
        let Some(batch) = inputs.recv().await else {
            return Err(RpcError::internal("the task stopped waiting for input"));
        };
        for (key, answer) in batch {
            if pending.contains(&key)
                && let Some(tool_key) = key.strip_prefix(&prefix)
            {
                answers.insert(tool_key.to_string(), answer);
            }
        }
    }
    Ok(Round {
        responses: Some(answers),
        state: input.request_state,
    })
}
