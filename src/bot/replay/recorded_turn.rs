//! A recorded turn read back as steps, from one of its LLM calls on: what the model
//! answered at each step, the tools it called, and the result each call got — the text
//! the model read back, taken from the next LLM call's request (where the loop sent
//! it), or from the tool's own span when no call followed. A result the store cut
//! (`TRACE_MAX_PAYLOAD_BYTES`) is known as cut, never passed off as whole.

use serde_json::Value;

use super::{Answer, ReplayError};
use crate::bot::Bot;
use crate::bot::tools::render_value;
use crate::model::{SpanKind, SpanRecord};

/// One LLM call of a recorded turn and the tool calls it made.
#[derive(Debug, Clone)]
pub(super) struct RecordedStep {
    pub(super) answer: Answer,
    calls: Vec<RecordedCall>,
}

#[derive(Debug, Clone)]
struct RecordedCall {
    name: String,
    arguments: Value,
    result: RecordedResult,
    /// Already matched by a call of the replay (two equal calls get a result each).
    taken: bool,
}

/// What a recorded tool call returned to the model.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RecordedResult {
    /// The text the model read, whole.
    Whole(String),
    /// Cut when it was stored: the replay cannot give the model what it read.
    Cut,
    /// Not in the store (the turn broke off, or the call was refused before it ran).
    Missing,
}

impl RecordedStep {
    /// The result of the recorded call with this name and these arguments, if the
    /// recording made that call at this step (each recorded call answers once).
    pub(super) fn take_result(&mut self, name: &str, arguments: &Value) -> Option<RecordedResult> {
        let call = self
            .calls
            .iter_mut()
            .find(|c| !c.taken && c.name == name && &c.arguments == arguments)?;
        call.taken = true;
        Some(call.result.clone())
    }
}

/// The steps of `span`'s turn from `span` on: the LLM calls of the same agent loop
/// (same parent), oldest first. A worker's calls, nested under a tool, are not steps.
pub(super) async fn steps_from(
    bot: &Bot,
    span: &SpanRecord,
) -> Result<Vec<RecordedStep>, ReplayError> {
    let spans = bot.store.trace_spans(&span.trace_id).await?;
    let same_loop = |s: &&SpanRecord| {
        s.root_span_id == span.root_span_id && s.parent_span_id == span.parent_span_id
    };
    let mut calls: Vec<&SpanRecord> = spans
        .iter()
        .filter(same_loop)
        .filter(|s| s.kind == SpanKind::Llm && s.start_us >= span.start_us)
        .collect();
    calls.sort_by_key(|s| s.start_us);
    let tools: Vec<&SpanRecord> = spans
        .iter()
        .filter(same_loop)
        .filter(|s| s.kind == SpanKind::Tool)
        .collect();
    let steps = calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let next = calls.get(i + 1).copied();
            let window = (call.start_us, next.map_or(i64::MAX, |n| n.start_us));
            step(call, next, &tools, window)
        })
        .collect();
    Ok(steps)
}

fn step(
    call: &SpanRecord,
    next: Option<&SpanRecord>,
    tools: &[&SpanRecord],
    (from_us, to_us): (i64, i64),
) -> RecordedStep {
    let asked = call
        .attributes
        .get("response")
        .and_then(|r| r["tool_calls"].as_array())
        .cloned()
        .unwrap_or_default();
    let mut spans_left: Vec<&SpanRecord> = tools
        .iter()
        .copied()
        .filter(|t| (from_us..to_us).contains(&t.start_us))
        .collect();
    let calls = asked
        .iter()
        .map(|asked| {
            let name = asked["name"].as_str().unwrap_or_default().to_string();
            let arguments = asked["arguments"].clone();
            let id = asked["id"].as_str().unwrap_or_default();
            let result = next
                .and_then(|next| read_back(next, id))
                .unwrap_or_else(|| tool_span_result(&mut spans_left, &name, &arguments));
            RecordedCall {
                name,
                arguments,
                result,
                taken: false,
            }
        })
        .collect();
    RecordedStep {
        answer: Answer::recorded(call),
        calls,
    }
}

/// What the model read back for the call `id`: the tool message of the next call's
/// request (the last with that id: the request repeats the conversation's history, and
/// some providers reuse ids from turn to turn). `None` when that request was cut or does
/// not hold it.
fn read_back(next: &SpanRecord, id: &str) -> Option<RecordedResult> {
    if is_cut(next, "request") {
        return None;
    }
    next.attributes
        .get("request")?
        .as_array()?
        .iter()
        .rev()
        .find_map(|m| {
            (m["role"] == "tool" && m["tool_call_id"] == id)
                .then(|| RecordedResult::Whole(m["content"].as_str().unwrap_or_default().into()))
        })
}

/// The result the tool's own span holds, as the loop turned it into text.
fn tool_span_result(spans: &mut Vec<&SpanRecord>, name: &str, arguments: &Value) -> RecordedResult {
    let Some(at) = spans.iter().position(|t| {
        t.tool.as_deref() == Some(name) && t.attributes.get("arguments") == Some(arguments)
    }) else {
        return RecordedResult::Missing;
    };
    let span = spans.remove(at);
    if let Some(error) = &span.error {
        if is_cut(span, "error") {
            return RecordedResult::Cut;
        }
        return RecordedResult::Whole(format!("Error: {error}"));
    }
    if is_cut(span, "result") {
        return RecordedResult::Cut;
    }
    match span.attributes.get("result") {
        Some(result) => RecordedResult::Whole(render_value(result)),
        None => RecordedResult::Missing,
    }
}

/// Whether the store cut `span`'s `attribute` (`TRACE_MAX_PAYLOAD_BYTES`).
pub(super) fn is_cut(span: &SpanRecord, attribute: &str) -> bool {
    span.attributes
        .get("cut_attributes")
        .and_then(Value::as_array)
        .is_some_and(|cut| cut.iter().any(|a| a == attribute))
}
