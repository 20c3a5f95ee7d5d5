//! What if, over MCP: `replay_llm_call` sends a recorded LLM call again with one thing
//! changed and shows the new answer beside the original; `replay_llm_calls` does it for
//! a batch chosen as `get_llm_calls` chooses. Both spend tokens: not read-only (so the
//! read-only token neither sees nor calls them), open-world (they reach the provider).
//! The work is the bot's (`bot::replay`); these shape its arguments and answers.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::trace_view::{MAX_MAX_BYTES, SinceFilter, StatusFilter};
use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed};
use crate::bot::replay::{self, Changes, Expect, MAX_BATCH, MAX_RUNS, MAX_SET_NAME, Options};
use crate::bot::store::SpanQuery;
use crate::mcp::{Annotations, RequestContext, TaskSupport, ToolSpec};
use crate::trace_context::is_span_id;

/// Calls the provider: changes nothing in the bot, but is not read-only either.
pub(super) const SPENDS_TOKENS: Annotations = Annotations {
    read_only: false,
    destructive: false,
    idempotent: false,
    open_world: true,
};

/// What every replay tool takes beside its changes: whether it may show the model
/// redacted text, and the checks to run (flattened into each tool's arguments).
#[derive(Deserialize, JsonSchema)]
pub(super) struct ReplayChecks {
    /// Send even where the stored request holds [REDACTED] in place of a secret
    #[serde(default)]
    pub(super) allow_redacted: bool,
    /// Checks run on every replay, each reported passed or failed with a count in the
    /// summary: same_tool_calls, calls_tool, not_calls_tool, valid_arguments (against the
    /// tool's input schema), text_contains, text_not_contains, text_matches (a regular
    /// expression)
    #[serde(default)]
    pub(super) expect: Expect,
}

pub(super) struct ReplayLlmCall;

#[derive(Deserialize, JsonSchema)]
pub(super) struct ReplayLlmCallArgs {
    /// An LLM call, from get_llm_calls or get_trace
    #[schemars(regex(pattern = r"^[0-9a-f]{16}$"))]
    span_id: String,
    #[serde(flatten)]
    changes: Changes,
    /// Calls to make with the same request, to see the model's variance
    #[serde(default = "one_run")]
    #[schemars(range(min = 1, max = MAX_RUNS))]
    runs: u32,
    #[serde(flatten)]
    checks: ReplayChecks,
}

fn one_run() -> u32 {
    1
}

impl DiagnosticTool for ReplayLlmCall {
    type Args = ReplayLlmCallArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "replay_llm_call",
            "Replay an LLM call with a change",
            "What if: sends a recorded LLM call to the same provider again, as recorded (messages, tool definitions, \
             model, sampling parameters) except for the changes given: system prompt, model, temperature, max_tokens, \
             the tools offered, the text of messages. One LLM call per run: the tools the model asks for are shown, \
             never run. Answers the original response and each replay's (text, tool calls with arguments, finish \
             reason, tokens, latency) with a comparison. Refuses a request whose redacted parts the model would see \
             unless allow_redacted. Spends tokens; at most REPLAY_MAX_PER_MINUTE calls a minute. An answer over 1 MiB \
             has its texts cut (text_truncated).",
        )
        .output_of::<replay::Replay>()
        .annotations(SPENDS_TOKENS)
        .max_result_size(MAX_MAX_BYTES)
    }

    async fn run(&self, d: &Diagnostics, args: ReplayLlmCallArgs, _: &RequestContext) -> Answer {
        if !is_span_id(&args.span_id) {
            return Ok(failed(format!(
                "`{}` is not a span id (16 lowercase hex digits); take one from get_llm_calls",
                args.span_id
            )));
        }
        let options = Options {
            runs: args.runs,
            allow_redacted: args.checks.allow_redacted,
        };
        if let Err(e) = args.checks.expect.check_pattern() {
            return Ok(failed(e.to_string()));
        }
        match replay::replay_call(&d.bot, &args.span_id, &args.changes, options).await {
            Ok(mut replay) => {
                replay.expect(&args.checks.expect, &d.bot.tools);
                replay.fit(MAX_MAX_BYTES);
                Ok(done(json!(replay)))
            }
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}

pub(super) struct ReplayLlmCalls;

#[derive(Deserialize, JsonSchema)]
#[schemars(transform = model_selects_calls)]
pub(super) struct ReplayLlmCallsArgs {
    // Before `changes`: serde gives a member two flattened structs name to the first, and
    // in a batch `model` chooses the calls (a change of model is replay_llm_call's).
    #[serde(flatten)]
    filter: CallFilter,
    /// Replay this saved set (save_replay_set) instead of a selection; its last run is
    /// kept
    #[schemars(length(min = 1, max = MAX_SET_NAME))]
    set: Option<String>,
    #[serde(flatten)]
    changes: Changes,
    #[serde(flatten)]
    checks: ReplayChecks,
}

/// `model` as a batch takes it: the filter's (`Changes`, flattened after it, would
/// describe it as the model to send to).
fn model_selects_calls(schema: &mut schemars::Schema) {
    if let Some(model) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("model"))
    {
        model["description"] = json!(
            "Only calls to this model (a change of model is not expressible here: replay_llm_call takes it)"
        );
    }
}

/// How a batch is chosen, as `get_llm_calls` chooses: the arguments `replay_llm_calls`
/// and `save_replay_set` share (flattened into each).
#[derive(Deserialize, JsonSchema)]
pub(super) struct CallFilter {
    /// Only calls to this model
    #[schemars(length(min = 1))]
    model: Option<String>,
    status: Option<StatusFilter>,
    #[serde(flatten)]
    since: SinceFilter,
    /// Only the calls of this conversation
    #[schemars(length(min = 1), extend("x-aliases" = ["conversationId"]))]
    conversation_id: Option<String>,
    #[schemars(range(min = 1, max = MAX_BATCH), extend("default" = DEFAULT_BATCH))]
    limit: Option<usize>,
}

/// The calls a batch chooses when `limit` is not given.
const DEFAULT_BATCH: usize = 10;

impl CallFilter {
    /// The query, or what is wrong with `since`.
    pub(super) fn query(self) -> Result<SpanQuery, String> {
        Ok(SpanQuery {
            since_us: self.since.micros()?,
            conversation_id: self.conversation_id,
            status: self.status.map(|s| s.as_str().to_string()),
            model: self.model,
            limit: self.limit.unwrap_or(DEFAULT_BATCH),
            ..SpanQuery::default()
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.model.is_none()
            && self.status.is_none()
            && self.since.since.is_none()
            && self.conversation_id.is_none()
            && self.limit.is_none()
    }
}

impl DiagnosticTool for ReplayLlmCalls {
    type Args = ReplayLlmCallsArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "replay_llm_calls",
            "Replay a batch of LLM calls with a change",
            "The prompt-fix regression check: replays, once each, the LLM calls chosen as get_llm_calls chooses \
             (model, status, since, conversation_id; newest first, at most 20) with the same changes as \
             replay_llm_call (system, temperature, max_tokens, tools, edit_messages). No tool is run. Answers one row \
             per call, before and after (finish reason, tools called, a text preview), and a summary: replayed, \
             changed, unchanged, errors. `set` replays a saved set (save_replay_set) instead, and keeps the summary \
             as its last run. Each call counts against REPLAY_MAX_PER_MINUTE.",
        )
        .output_of::<replay::Batch>()
        .annotations(SPENDS_TOKENS)
        .max_result_size(MAX_MAX_BYTES)
    }

    /// Twenty calls to the provider can take minutes: a client that supports tasks polls.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    async fn run(&self, d: &Diagnostics, args: ReplayLlmCallsArgs, ctx: &RequestContext) -> Answer {
        let filter = args.filter;
        let checks = (args.checks.allow_redacted, &args.checks.expect);
        let progress =
            |done, of| ctx.progress(done as f64, Some(of as f64), Some("calls replayed"));
        let batch = match args.set {
            Some(_) if !filter.is_empty() => {
                return Ok(failed(
                    "give either `set` or a selection (model, status, since, conversation_id, limit), not both",
                ));
            }
            Some(set) => replay::replay_set(&d.bot, &set, &args.changes, checks, &progress).await,
            None => match filter.query() {
                Ok(query) => {
                    replay::replay_calls(&d.bot, query, &args.changes, checks, &progress).await
                }
                Err(e) => return Ok(failed(e)),
            },
        };
        match batch {
            Ok(mut batch) => {
                batch.fit(MAX_MAX_BYTES);
                Ok(done(json!(batch)))
            }
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}
