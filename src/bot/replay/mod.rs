//! What if: a recorded LLM call sent again to the same provider with one thing changed
//! (system prompt, model, temperature, `max_tokens`, tools, a message's text), as one
//! call per run: the tools the model asks for are shown, never run. With no change the
//! request goes out as it was recorded (messages, tool definitions in full, model and
//! sampling parameters; the stream settings are the provider's own).
//!
//! A replay is a trace of its own (source `replay`, its root naming the span it
//! replays), so experiments stay readable beside the turns. Replays spend tokens: every
//! provider call they make comes out of one per-minute budget ([`RateLimit`]).
//! `recorded` reads a call back as a request; `limit` keeps the budget.

mod batch;
mod expect;
mod fit;
mod limit;
mod recorded;
mod recorded_turn;
mod sets;
mod turn;

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::bot::Bot;
use crate::bot::llm::{ChatRequest, ChatResponse, LlmError};
use crate::bot::store::StoreError;
use crate::bot::trace::{Span, traced_chat};
use crate::model::{SpanKind, SpanRecord};
pub use batch::{Batch, BatchRow, Brief, Summary, replay_calls};
pub use expect::{Check, CheckCount, Expect, Seen};
pub use limit::{RateLimit, Refused};
pub use recorded::{Request, find as find_span};
pub use sets::{MAX_SET_NAME, Selection, replay_set, save_set};
pub use turn::{
    DEFAULT_TURN_STEPS, MAX_TURN_STEPS, ToolPolicy, TurnOptions, TurnReplay, replay_turn,
};

/// Most runs of one replay.
pub const MAX_RUNS: u32 = 5;
/// Most calls one batch replays.
pub const MAX_BATCH: usize = 20;
/// Highest temperature a replay may ask for.
pub const MAX_TEMPERATURE: f64 = 2.0;
/// Highest `max_tokens` a replay may ask for.
pub const MAX_TOKENS: u64 = 1_000_000;

/// What a replay changes; everything else is sent as recorded. Its derived schema is
/// the replay tools' input for these arguments (flattened into each).
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
pub struct Changes {
    /// Replaces the system prompt
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Sends to this model instead (same provider)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = MAX_TEMPERATURE))]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_TOKENS))]
    pub max_tokens: Option<u64>,
    /// Names of the tools to offer instead of the recorded ones ([] offers none)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(min = 1)))]
    pub tools: Option<Vec<String>>,
    /// Replaces the text of recorded messages, numbered as get_llm_call's `request`
    /// lists them (0 is the system prompt)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edit_messages: Vec<MessageEdit>,
}

/// One message's new text.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageEdit {
    pub index: usize,
    pub content: String,
}

impl Changes {
    /// Values out of range, named.
    fn check(&self) -> Result<(), ReplayError> {
        let invalid = |m: String| Err(ReplayError::Invalid(m));
        if let Some(t) = self.temperature
            && !(0.0..=MAX_TEMPERATURE).contains(&t)
        {
            return invalid(format!(
                "temperature {t} is out of range: 0 to {MAX_TEMPERATURE}"
            ));
        }
        if let Some(n) = self.max_tokens
            && !(1..=MAX_TOKENS).contains(&n)
        {
            return invalid(format!("max_tokens {n} is out of range: 1 to {MAX_TOKENS}"));
        }
        if self.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return invalid("model must not be empty".into());
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("no LLM call `{0}`: it never existed or its trace was pruned; call get_llm_calls")]
    UnknownSpan(String),
    #[error("span `{0}` is a {1} span, not an LLM call; replay one that get_llm_calls lists")]
    NotAnLlmCall(String, &'static str),
    #[error(
        "the request of LLM call `{0}` was cut when it was stored (TRACE_MAX_PAYLOAD_BYTES), so it cannot be sent as it was; raise TRACE_MAX_PAYLOAD_BYTES for the calls to come"
    )]
    Cut(String),
    #[error(
        "LLM call `{0}` was recorded before requests were kept in full (its tool definitions are not stored), so it cannot be replayed"
    )]
    NotRecordedInFull(String),
    #[error(
        "the offline provider has nothing to replay: no language model is configured (set LLM_PROVIDER, LLM_BASE_URL, LLM_API_KEY and LLM_MODEL)"
    )]
    Offline,
    #[error(
        "the call went to the {recorded} provider and the bot now runs {current}; a replay goes to the provider the call went to"
    )]
    OtherProvider { recorded: String, current: String },
    #[error(
        "the model would see redaction placeholders instead of secrets in {}; replace those parts (system, edit_messages, tools) or pass allow_redacted: true",
        .0.join(", ")
    )]
    Redacted(Vec<String>),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    RateLimited(Refused),
    #[error("the provider refused the replay: {0}")]
    Provider(String),
    #[error("cannot read the traces: {0}")]
    Store(String),
}

impl From<StoreError> for ReplayError {
    fn from(error: StoreError) -> Self {
        ReplayError::Store(error.to_string())
    }
}

/// How one replay runs.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Calls to make with the same request (1–5), to see the model's variance.
    pub runs: u32,
    /// Send the request even where it holds redaction placeholders.
    pub allow_redacted: bool,
}

/// One answer of the model: the recorded one, or a replay's.
#[derive(Debug, Clone, Default, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Answer {
    pub text: String,
    /// What the model asked to call (never run by a replay).
    #[schemars(with = "Vec<AskedCall>")]
    pub tool_calls: Vec<Value>,
    pub finish_reason: Option<String>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub latency_ms: f64,
    pub error: Option<String>,
    /// The text was cut to keep the answer within its size ([`Replay::fit`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub text_truncated: bool,
    /// The tool calls' arguments were left out for the same reason.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tool_calls_truncated: bool,
}

/// A tool call the model asked for.
// The shape of each of `Answer::tool_calls`, for its schema: read by the derive only.
#[derive(schemars::JsonSchema)]
#[allow(dead_code)]
struct AskedCall {
    name: String,
    /// The arguments as the model gave them; `null` once cut to keep the answer within
    /// its size (`tool_calls_truncated`).
    arguments: Value,
}

fn is_false(flag: &bool) -> bool {
    !flag
}

impl Answer {
    pub(super) fn recorded(span: &SpanRecord) -> Answer {
        let response = &span.attributes.get("response").cloned().unwrap_or_default();
        Answer {
            text: response["content"].as_str().unwrap_or_default().to_string(),
            tool_calls: asked(response["tool_calls"].as_array().into_iter().flatten()),
            finish_reason: span
                .attributes
                .get("finish_reason")
                .unwrap_or(&Value::Null)
                .as_str()
                .map(str::to_string),
            input_tokens: span.input_tokens,
            output_tokens: span.output_tokens,
            latency_ms: span.duration_us as f64 / 1000.0,
            error: span.error.clone(),
            ..Answer::default()
        }
    }

    fn replayed(result: &Result<ChatResponse, LlmError>, started: Instant) -> Answer {
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        match result {
            Ok(r) => Answer {
                text: r.content.clone(),
                tool_calls: asked(
                    r.tool_calls
                        .iter()
                        .map(|c| json!(c))
                        .collect::<Vec<_>>()
                        .iter(),
                ),
                finish_reason: r.finish_reason.clone(),
                input_tokens: r.usage.and_then(|u| u.input_tokens).map(|n| n as i64),
                output_tokens: r.usage.and_then(|u| u.output_tokens).map(|n| n as i64),
                latency_ms,
                ..Answer::default()
            },
            Err(e) => Answer {
                latency_ms,
                error: Some(crate::text::with_causes(e)),
                ..Answer::default()
            },
        }
    }

    /// Whether `other` behaves the same: the same tool calls with the same arguments.
    fn same_tool_calls(&self, other: &Answer) -> bool {
        self.tool_calls == other.tool_calls
    }
}

/// Tool calls by name and arguments (their ids differ from call to call).
fn asked<'a>(calls: impl Iterator<Item = &'a Value>) -> Vec<Value> {
    calls
        .map(|c| json!({"name": c["name"], "arguments": c["arguments"]}))
        .collect()
}

/// How a replay's answer compares with the original.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Comparison {
    pub run: u32,
    pub same_tool_calls: bool,
    pub text_changed: bool,
    pub finish_reason_changed: bool,
    /// The `expect` checks run on this run's answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
}

impl Comparison {
    fn of(run: u32, original: &Answer, replay: &Answer) -> Comparison {
        Comparison {
            run,
            same_tool_calls: original.same_tool_calls(replay),
            text_changed: original.text != replay.text,
            finish_reason_changed: original.finish_reason != replay.finish_reason,
            checks: Vec::new(),
        }
    }

    pub(super) fn changed(&self) -> bool {
        !self.same_tool_calls || self.text_changed || self.finish_reason_changed
    }
}

/// What one replay found.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Replay {
    /// The replayed call and its trace.
    pub span_id: String,
    pub trace_id: String,
    /// The replay's own trace (none when tracing is off).
    pub replay_trace_id: Option<String>,
    pub model: String,
    pub changes: Changes,
    /// Parts of the recorded request that hold redaction placeholders.
    pub redacted: Vec<String>,
    pub original: Answer,
    pub replays: Vec<Answer>,
    pub comparison: Vec<Comparison>,
    /// How the `expect` checks went over every run (none when none were asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<CheckCount>,
}

impl Replay {
    /// Runs `expect`'s checks on every run's answer.
    pub fn expect(&mut self, expect: &Expect, tools: &crate::bot::tools::ToolRunner) {
        if expect.is_empty() {
            return;
        }
        for (comparison, replay) in self.comparison.iter_mut().zip(&self.replays) {
            let seen = Seen {
                text: Some(&replay.text),
                tool_calls: replay.tool_calls.iter().collect(),
                same_tool_calls: comparison.same_tool_calls,
            };
            comparison.checks = expect.run(&seen, tools);
        }
        self.checks = Some(CheckCount::of(
            self.comparison.iter().flat_map(|c| &c.checks),
        ));
    }
}

/// Replays the LLM call `span_id` with `changes`, `options.runs` times.
pub async fn replay_call(
    bot: &Bot,
    span_id: &str,
    changes: &Changes,
    options: Options,
) -> Result<Replay, ReplayError> {
    check(bot, changes, options)?;
    let Some(span) = find_span(bot, span_id).await? else {
        return Err(ReplayError::UnknownSpan(span_id.into()));
    };
    replay_found(bot, span, changes, options).await
}

/// Replays `span`, already read (by [`find_span`], or in a batch), as [`replay_call`].
pub async fn replay_span(
    bot: &Bot,
    span: SpanRecord,
    changes: &Changes,
    options: Options,
) -> Result<Replay, ReplayError> {
    check(bot, changes, options)?;
    replay_found(bot, span, changes, options).await
}

/// What is refused before any span is read: values out of range, no provider.
fn check(bot: &Bot, changes: &Changes, options: Options) -> Result<(), ReplayError> {
    if !(1..=MAX_RUNS).contains(&options.runs) {
        return Err(ReplayError::Invalid(format!(
            "runs {} is out of range: 1 to {MAX_RUNS}",
            options.runs
        )));
    }
    changes.check()?;
    if bot.llm.provider() == "offline" {
        return Err(ReplayError::Offline);
    }
    Ok(())
}

async fn replay_found(
    bot: &Bot,
    span: SpanRecord,
    changes: &Changes,
    options: Options,
) -> Result<Replay, ReplayError> {
    let (recorded, request) = request_to_send(bot, &span, changes, options.allow_redacted).await?;
    bot.replay_limit
        .take(options.runs)
        .map_err(ReplayError::RateLimited)?;
    let original = Answer::recorded(&span);
    let (replay_trace_id, replays) = send(bot, &span, &request, changes, options.runs).await;
    if let Some(error) = replays
        .iter()
        .map(|r| r.error.as_ref())
        .collect::<Option<Vec<_>>>()
    {
        return Err(ReplayError::Provider(error[0].clone()));
    }
    let comparison = (1..)
        .zip(&replays)
        .map(|(run, replay)| Comparison::of(run, &original, replay))
        .collect();
    Ok(Replay {
        span_id: span.span_id.clone(),
        trace_id: span.trace_id.clone(),
        replay_trace_id,
        model: request
            .parameters
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        changes: changes.clone(),
        redacted: recorded.redacted_parts(),
        original,
        replays,
        comparison,
        checks: None,
    })
}

/// The request a replay of `span` sends: the recorded one with `changes`, for the
/// provider the call went to; refused where the model would see redaction placeholders
/// unless `allow_redacted`. Returns the recorded request too.
async fn request_to_send(
    bot: &Bot,
    span: &SpanRecord,
    changes: &Changes,
    allow_redacted: bool,
) -> Result<(Request, Request), ReplayError> {
    let recorded = recorded::request_of(bot, span).await?;
    let recorded_provider = span
        .attributes
        .get("provider")
        .unwrap_or(&Value::Null)
        .as_str()
        .unwrap_or_default();
    if recorded_provider != bot.llm.provider() {
        return Err(ReplayError::OtherProvider {
            recorded: recorded_provider.to_string(),
            current: bot.llm.provider().to_string(),
        });
    }
    let request = recorded.changed(changes, bot)?;
    let seen_redacted = request.redacted_parts();
    if !seen_redacted.is_empty() && !allow_redacted {
        return Err(ReplayError::Redacted(seen_redacted));
    }
    Ok((recorded, request))
}

/// The conversation a span belongs to: its turn's (only a turn's root names it).
pub async fn conversation_of(bot: &Bot, span: &SpanRecord) -> Result<Option<String>, StoreError> {
    if span.conversation_id.is_some() {
        return Ok(span.conversation_id.clone());
    }
    let trace = bot.store.trace_spans(&span.trace_id).await?;
    Ok(trace
        .into_iter()
        .filter(|s| s.root_span_id == span.root_span_id)
        .find_map(|s| s.conversation_id))
}

/// The root span of a replay of `span`: a trace of its own (source `replay`) that names
/// the call it replays and the changes.
async fn replay_root(bot: &Bot, span: &SpanRecord, changes: &Changes, name: String) -> Span {
    // Whose call it was decides who may see the replay (the page shows replays of its
    // own conversations only); the replay itself belongs to no conversation.
    let replayed_conversation = conversation_of(bot, span).await.ok().flatten();
    let scope = bot
        .tracer
        .root(crate::model::REPLAY_SOURCE, None)
        .with_root_attribute("replay.span_id", span.span_id.clone())
        .with_root_attribute("replay.trace_id", span.trace_id.clone())
        .with_root_attribute("replay.conversation_id", replayed_conversation);
    // No conversation: a batch selecting a conversation's calls must not find replays.
    let mut root = scope.start(SpanKind::Turn, name);
    root.set_attribute("input", json!(changes));
    root
}

/// Sends `request` `runs` times under a trace of its own; returns its id and the answers.
async fn send(
    bot: &Bot,
    span: &SpanRecord,
    request: &Request,
    changes: &Changes,
    runs: u32,
) -> (Option<String>, Vec<Answer>) {
    let mut root = replay_root(bot, span, changes, format!("replay {}", span.span_id)).await;
    let trace_id = root.ids().map(|(trace, _)| trace.to_string());
    let chat = ChatRequest {
        system: &request.system,
        messages: &request.messages,
        tools: &request.tools,
        parameters: Some(&request.parameters),
    };
    let mut answers = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let result = traced_chat(&*bot.llm, &chat, &|_| {}, &root.scope()).await;
        answers.push(Answer::replayed(&result, started));
    }
    root.set_attribute("output", answers[0].text.clone());
    match answers.iter().find_map(|a| a.error.clone()) {
        Some(error) => root.fail(error),
        None => root.end(),
    }
    (trace_id, answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_out_of_range_are_named() {
        let too_hot = Changes {
            temperature: Some(2.5),
            ..Changes::default()
        };
        assert!(
            too_hot
                .check()
                .unwrap_err()
                .to_string()
                .contains("temperature 2.5")
        );
        let none = Changes {
            max_tokens: Some(0),
            ..Changes::default()
        };
        assert!(
            none.check()
                .unwrap_err()
                .to_string()
                .contains("max_tokens 0")
        );
    }
}
