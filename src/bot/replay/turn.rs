//! A whole turn replayed: from one of its LLM calls, with a change, the agent loop goes
//! on as the bot runs it — ask the model, answer its tool calls, ask again — for at
//! most `max_steps` LLM calls, so a prompt change shows where it takes the turn two or
//! three steps later, not only in the first answer.
//!
//! Nothing changes state. A tool call the recording made at the same step, with the
//! same arguments, gets the recorded result and runs nothing. Any other call is where
//! the replay leaves the recording: by default it stops there and says so; with
//! [`ToolPolicy::ReadOnly`] it runs the tools the bot marks read-only
//! ([`ToolDef::read_only`](crate::model::ToolDef)) and stops before any other. A
//! recorded result the store cut is reported as cut, never sent as if whole.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::recorded_turn::{RecordedResult, RecordedStep, steps_from};
use super::{
    Answer, Changes, Check, CheckCount, Expect, Options, ReplayError, Seen, check, conversation_of,
    find_span, replay_root, request_to_send,
};
use crate::bot::Bot;
use crate::bot::llm::{ChatMessage, ChatRequest, ChatResponse};
use crate::bot::store::is_admin_conversation;
use crate::bot::tools::{ADMIN_ROLE, ExecContext, USER_ROLE};
use crate::bot::trace::traced_chat;
use crate::model::{Role, SpanRecord};
use crate::text::elide_middle;

/// Most LLM calls one turn replay makes.
pub const MAX_TURN_STEPS: usize = 10;
/// LLM calls a turn replay makes unless told otherwise.
pub const DEFAULT_TURN_STEPS: usize = 5;
/// The characters a tool result's preview keeps.
const RESULT_PREVIEW_CHARS: usize = 200;

/// Which tools a turn replay may run when the model leaves the recording.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ToolPolicy {
    /// None: only recorded results; the first call that differs stops the replay.
    #[default]
    Recorded,
    /// The tools the bot marks read-only; the replay stops before any other.
    ReadOnly,
}

/// How one turn replay runs.
#[derive(Clone, Copy)]
pub struct TurnOptions<'a> {
    pub max_steps: usize,
    pub tools: ToolPolicy,
    pub allow_redacted: bool,
    /// Hears (LLM calls made, `max_steps`) after each.
    pub progress: &'a (dyn Fn(usize, usize) + Sync),
}

/// Why a turn replay stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The model answered without calling a tool.
    FinalAnswer,
    /// `max_steps` LLM calls were made.
    MaxSteps,
    /// A call the recording did not make, with `tools: "recorded"`.
    Diverged,
    /// A call the recording did not make, of a tool that is not read-only.
    StateChangingTool,
    /// The recorded result of a matching call was cut when stored.
    RecordedResultCut,
    /// The recorded result of a matching call is not in the store.
    RecordedResultMissing,
    /// The next request would show the model redaction placeholders.
    Redacted,
    /// `REPLAY_MAX_PER_MINUTE` was spent.
    RateLimited,
    /// The provider failed.
    ProviderError,
}

/// Where a replayed tool call's result came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultSource {
    /// The recording: the same call at the same step.
    Recording,
    /// The tool ran (read-only, `tools: "read_only"`).
    Ran,
    /// Nothing ran: the replay stopped here.
    NotRun,
}

/// One tool call of a replayed step and what answered it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ToolOutcome {
    pub name: String,
    pub result: ResultSource,
    /// The start of the text the model read back (none when nothing ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    pub is_error: bool,
}

/// One LLM call of the replay beside the recording's at the same step.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TurnStep {
    pub step: usize,
    /// The recording's answer at this step; none past the recording's end.
    pub original: Option<Answer>,
    pub replay: Answer,
    pub same_tool_calls: bool,
    pub text_changed: bool,
    pub tools: Vec<ToolOutcome>,
}

/// The first step where the replay called other tools (or other arguments) than the
/// recording, both sides shown.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Divergence {
    pub step: usize,
    /// What the recording called there (none: the recording had ended).
    #[schemars(with = "Option<Vec<super::AskedCall>>")]
    pub recorded: Option<Vec<serde_json::Value>>,
    #[schemars(with = "Vec<super::AskedCall>")]
    pub replay: Vec<serde_json::Value>,
}

/// Both turns' last words.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FinalAnswers {
    /// The recording's final answer (none if the turn ended without one).
    pub original: Option<String>,
    /// The replay's (none if it stopped before the model answered).
    pub replay: Option<String>,
}

/// What a turn replay found.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TurnReplay {
    pub span_id: String,
    pub trace_id: String,
    pub replay_trace_id: Option<String>,
    pub model: String,
    pub changes: Changes,
    pub tools: ToolPolicy,
    pub max_steps: usize,
    pub redacted: Vec<String>,
    pub steps: Vec<TurnStep>,
    pub diverged_at: Option<Divergence>,
    pub stopped: Stop,
    pub stop_detail: String,
    #[serde(rename = "final")]
    pub final_answers: FinalAnswers,
    pub tools_reused: usize,
    pub tools_run: usize,
    pub verdict: String,
    /// The `expect` checks, run on the whole replay: its tool calls over every step,
    /// its final answer's text, and whether it followed the recording.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// How they went (none when none were asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_count: Option<CheckCount>,
}

impl TurnReplay {
    /// Runs `expect`'s checks on the replay. A replay that stopped before the model could
    /// go where it would (the provider failed, the budget ran out, a recorded result was
    /// missing or cut, placeholders) did not do what the checks ask about: each fails,
    /// saying why, rather than passing on what little was seen.
    pub fn expect(&mut self, expect: &Expect, tools: &crate::bot::tools::ToolRunner) {
        if expect.is_empty() {
            return;
        }
        let seen = Seen {
            text: self.final_answers.replay.as_deref(),
            tool_calls: self
                .steps
                .iter()
                .flat_map(|s| &s.replay.tool_calls)
                .collect(),
            same_tool_calls: self.diverged_at.is_none(),
        };
        self.checks = expect.run(&seen, tools);
        if self.stopped.cut_short() {
            for check in &mut self.checks {
                check.passed = false;
                check.seen = Some(format!("not checked: {}", self.stop_detail));
            }
        }
        self.check_count = Some(CheckCount::of(&self.checks));
    }
}

/// Replays the turn of LLM call `span_id` from that call on, with `changes`.
pub async fn replay_turn(
    bot: &Bot,
    span_id: &str,
    changes: &Changes,
    options: TurnOptions<'_>,
) -> Result<TurnReplay, ReplayError> {
    if !(1..=MAX_TURN_STEPS).contains(&options.max_steps) {
        return Err(ReplayError::Invalid(format!(
            "max_steps {} is out of range: 1 to {MAX_TURN_STEPS}",
            options.max_steps
        )));
    }
    let once = Options {
        runs: 1,
        allow_redacted: options.allow_redacted,
    };
    check(bot, changes, once)?;
    let Some(span) = find_span(bot, span_id).await? else {
        return Err(ReplayError::UnknownSpan(span_id.into()));
    };
    let (recorded, request) = request_to_send(bot, &span, changes, options.allow_redacted).await?;
    let steps = steps_from(bot, &span).await?;
    bot.replay_limit.take(1).map_err(ReplayError::RateLimited)?;
    let mut run = Run {
        bot,
        options,
        recorded: steps,
        ctx: tool_context(bot, &span).await,
        messages: request.messages.clone(),
        steps: Vec::new(),
        diverged_at: None,
        stop: (Stop::MaxSteps, String::new()),
    };
    let root = replay_root(bot, &span, changes, format!("replay turn {}", span.span_id)).await;
    run.ctx.trace = root.scope();
    let replay_trace_id = root.ids().map(|(trace, _)| trace.to_string());
    run.go(&request).await;
    let mut replay = run.report(&span, changes, recorded.redacted_parts());
    replay.replay_trace_id = replay_trace_id;
    replay.model = request
        .parameters
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut root = root;
    root.set_attribute("output", replay.verdict.clone());
    match replay.stopped {
        Stop::ProviderError => root.fail(replay.stop_detail.clone()),
        _ => root.end(),
    }
    Ok(replay)
}

/// The rights a read-only tool runs with in a replay: the recorded turn's (an admin's
/// only in an admin conversation), never more.
async fn tool_context(bot: &Bot, span: &SpanRecord) -> ExecContext {
    let conversation = conversation_of(bot, span).await.ok().flatten();
    let role = match &conversation {
        Some(id) if is_admin_conversation(id) => ADMIN_ROLE,
        _ => USER_ROLE,
    };
    let mut ctx = ExecContext::new(&[role]);
    ctx.conversation_id = conversation;
    ctx
}

/// A turn replay under way.
struct Run<'a> {
    bot: &'a Bot,
    options: TurnOptions<'a>,
    recorded: Vec<RecordedStep>,
    ctx: ExecContext,
    messages: Vec<ChatMessage>,
    steps: Vec<TurnStep>,
    diverged_at: Option<Divergence>,
    stop: (Stop, String),
}

impl Run<'_> {
    /// Runs the loop with `request`'s system prompt, tools and parameters over
    /// `self.messages`, until the model answers or the replay stops.
    async fn go(&mut self, request: &super::Request) {
        for n in 0..self.options.max_steps {
            if n > 0
                && let Some(stop) = self.before_next_call(request)
            {
                self.stop = stop;
                return;
            }
            let chat = ChatRequest {
                system: &request.system,
                messages: &self.messages,
                tools: &request.tools,
                parameters: Some(&request.parameters),
            };
            let started = Instant::now();
            let result = traced_chat(&*self.bot.llm, &chat, &|_| {}, &self.ctx.trace).await;
            let answer = Answer::replayed(&result, started);
            (self.options.progress)(n + 1, self.options.max_steps);
            let Ok(response) = result else {
                let error = answer.error.clone().unwrap_or_default();
                self.push_step(n, answer, Vec::new());
                self.stop = (Stop::ProviderError, error);
                return;
            };
            if let Some(stop) = self.answer_step(n, answer, response).await {
                self.stop = stop;
                return;
            }
        }
        self.stop = (
            Stop::MaxSteps,
            format!(
                "{} LLM calls made (max_steps) without a final answer",
                self.options.max_steps
            ),
        );
    }

    /// Refusals before a further LLM call: placeholders the model would see, the budget.
    fn before_next_call(&self, request: &super::Request) -> Option<(Stop, String)> {
        let mut next = request.clone();
        next.messages = self.messages.clone();
        let redacted = next.redacted_parts();
        if !redacted.is_empty() && !self.options.allow_redacted {
            let detail = format!(
                "the next request would show the model redaction placeholders in {}; pass allow_redacted: true to send it",
                redacted.join(", ")
            );
            return Some((Stop::Redacted, detail));
        }
        match self.bot.replay_limit.take(1) {
            Ok(()) => None,
            Err(refused) => Some((Stop::RateLimited, refused.to_string())),
        }
    }

    /// Records step `n`'s answer and answers its tool calls; `Some` when the replay stops.
    async fn answer_step(
        &mut self,
        n: usize,
        answer: Answer,
        response: ChatResponse,
    ) -> Option<(Stop, String)> {
        let original = self.recorded.get(n).map(|s| s.answer.clone());
        if original
            .as_ref()
            .is_none_or(|o| !o.same_tool_calls(&answer))
            && self.diverged_at.is_none()
        {
            self.diverged_at = Some(Divergence {
                step: n + 1,
                recorded: original.map(|o| o.tool_calls),
                replay: answer.tool_calls.clone(),
            });
        }
        if response.tool_calls.is_empty() {
            self.push_step(n, answer, Vec::new());
            return Some((Stop::FinalAnswer, "the model answered".into()));
        }
        self.messages.push(ChatMessage {
            role: Role::Assistant,
            content: response.content.clone(),
            tool_calls: response.tool_calls.clone(),
            tool_call_id: None,
            name: None,
        });
        let mut outcomes = Vec::new();
        let mut stop = None;
        for call in &response.tool_calls {
            let (outcome, content) = match stop {
                Some(_) => (not_run(&call.name), None),
                None => match self.answer_call(n, &call.name, &call.arguments).await {
                    Ok((outcome, content)) => (outcome, Some(content)),
                    Err(why) => {
                        stop = Some(why);
                        (not_run(&call.name), None)
                    }
                },
            };
            outcomes.push(outcome);
            self.messages.push(ChatMessage {
                role: Role::Tool,
                content: content.unwrap_or_default(),
                tool_calls: Vec::new(),
                tool_call_id: Some(call.id.clone()),
                name: Some(call.name.clone()),
            });
        }
        self.push_step(n, answer, outcomes);
        stop
    }

    /// The text the model reads back for one call: recorded, or read-only and run.
    async fn answer_call(
        &mut self,
        n: usize,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Result<(ToolOutcome, String), (Stop, String)> {
        let recorded = self
            .recorded
            .get_mut(n)
            .and_then(|s| s.take_result(name, arguments));
        let shown = |source, text: &str, is_error| ToolOutcome {
            name: name.to_string(),
            result: source,
            preview: Some(elide_middle(text, RESULT_PREVIEW_CHARS)),
            is_error,
        };
        match recorded {
            Some(RecordedResult::Whole(text)) => {
                let is_error = text.starts_with("Error: ");
                Ok((shown(ResultSource::Recording, &text, is_error), text))
            }
            Some(RecordedResult::Cut) => Err((
                Stop::RecordedResultCut,
                format!(
                    "step {}: the recorded result of `{name}` was cut when stored (TRACE_MAX_PAYLOAD_BYTES), so the model cannot be given what it read",
                    n + 1
                ),
            )),
            Some(RecordedResult::Missing) => Err((
                Stop::RecordedResultMissing,
                format!(
                    "step {}: the recorded result of `{name}` is not in the store",
                    n + 1
                ),
            )),
            None => self.run_read_only(n, name, arguments).await,
        }
    }

    /// A call the recording did not make: run when allowed and read-only, else stop.
    async fn run_read_only(
        &self,
        n: usize,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Result<(ToolOutcome, String), (Stop, String)> {
        let call = json!({"name": name, "arguments": arguments});
        if self.options.tools == ToolPolicy::Recorded {
            return Err((
                Stop::Diverged,
                format!(
                    "step {}: the model called {call}, which the recording did not call there; stopped before running it (tools: \"recorded\"; \"read_only\" runs read-only tools)",
                    n + 1
                ),
            ));
        }
        let runner = &self.bot.tools;
        if !runner.get(name).is_some_and(|t| t.def.read_only) {
            return Err((
                Stop::StateChangingTool,
                format!(
                    "step {}: the model called {call}; `{name}` is not marked read-only, so the replay stopped before running it",
                    n + 1
                ),
            ));
        }
        let (text, is_error) = runner.call_for_model(name, arguments, &self.ctx).await;
        let outcome = ToolOutcome {
            name: name.to_string(),
            result: ResultSource::Ran,
            preview: Some(elide_middle(&text, RESULT_PREVIEW_CHARS)),
            is_error,
        };
        Ok((outcome, text))
    }

    fn push_step(&mut self, n: usize, replay: Answer, tools: Vec<ToolOutcome>) {
        let original = self.recorded.get(n).map(|s| s.answer.clone());
        let same_tool_calls = original
            .as_ref()
            .is_some_and(|o| o.same_tool_calls(&replay));
        let text_changed = original.as_ref().is_none_or(|o| o.text != replay.text);
        self.steps.push(TurnStep {
            step: n + 1,
            original,
            replay,
            same_tool_calls,
            text_changed,
            tools,
        });
    }

    fn report(self, span: &SpanRecord, changes: &Changes, redacted: Vec<String>) -> TurnReplay {
        let count = |source| {
            self.steps
                .iter()
                .flat_map(|s| &s.tools)
                .filter(|t| t.result == source)
                .count()
        };
        let (tools_reused, tools_run) = (count(ResultSource::Recording), count(ResultSource::Ran));
        let recorded_final = self
            .recorded
            .last()
            .filter(|s| s.answer.tool_calls.is_empty() && s.answer.error.is_none())
            .map(|s| s.answer.text.clone());
        let replay_final = (self.stop.0 == Stop::FinalAnswer)
            .then(|| self.steps.last().map(|s| s.replay.text.clone()))
            .flatten();
        let final_answers = FinalAnswers {
            original: recorded_final,
            replay: replay_final,
        };
        let verdict = verdict(&self, &final_answers, tools_run);
        TurnReplay {
            span_id: span.span_id.clone(),
            trace_id: span.trace_id.clone(),
            replay_trace_id: None,
            model: String::new(),
            changes: changes.clone(),
            tools: self.options.tools,
            max_steps: self.options.max_steps,
            redacted,
            steps: self.steps,
            diverged_at: self.diverged_at,
            stopped: self.stop.0,
            stop_detail: self.stop.1,
            final_answers,
            tools_reused,
            tools_run,
            verdict,
            checks: Vec::new(),
            check_count: None,
        }
    }
}

impl Stop {
    /// Whether the replay stopped for a reason of its own, before the model went where it
    /// would: not an answer, the step budget, or a call the rules keep from running.
    fn cut_short(self) -> bool {
        !matches!(
            self,
            Stop::FinalAnswer | Stop::MaxSteps | Stop::Diverged | Stop::StateChangingTool
        )
    }
}

fn not_run(name: &str) -> ToolOutcome {
    ToolOutcome {
        name: name.to_string(),
        result: ResultSource::NotRun,
        preview: None,
        is_error: false,
    }
}

/// One line: did the replay take the recorded path, how did it end, did the answer change.
fn verdict(run: &Run<'_>, answers: &FinalAnswers, tools_run: usize) -> String {
    let steps = run.steps.len();
    let path = match &run.diverged_at {
        None => format!("followed the recording for {steps} step(s)"),
        Some(d) => format!("left the recording at step {}", d.step),
    };
    let ran = match tools_run {
        0 => String::new(),
        n => format!(", ran {n} read-only tool call(s)"),
    };
    let end = match (run.stop.0, &answers.replay) {
        (Stop::FinalAnswer, Some(replay)) => match &answers.original {
            Some(original) if original == replay => "same final answer".to_string(),
            Some(_) => "final answer changed".to_string(),
            None => "answered where the recording had no final answer".to_string(),
        },
        (stop, _) => format!("stopped: {}", stop_words(stop)),
    };
    format!("Replay {path}{ran}; {end}.")
}

fn stop_words(stop: Stop) -> &'static str {
    match stop {
        Stop::FinalAnswer => "final answer",
        Stop::MaxSteps => "max_steps reached without a final answer",
        Stop::Diverged => "a tool call the recording did not make",
        Stop::StateChangingTool => "a tool that is not read-only",
        Stop::RecordedResultCut => "a recorded result was cut when stored",
        Stop::RecordedResultMissing => "a recorded result is not in the store",
        Stop::Redacted => "the model would see redaction placeholders",
        Stop::RateLimited => "REPLAY_MAX_PER_MINUTE spent",
        Stop::ProviderError => "the provider failed",
    }
}
