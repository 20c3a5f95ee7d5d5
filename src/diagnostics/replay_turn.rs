//! `replay_turn`: a recorded turn re-run from one of its LLM calls with a change, the
//! agent loop continued (recorded tool results reused, nothing that changes state run),
//! step by step beside the original. The work is the bot's (`bot::replay::turn`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::replay::{ReplayChecks, SPENDS_TOKENS};
use super::trace_view::MAX_MAX_BYTES;
use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed};
use crate::bot::replay::{
    self, Changes, DEFAULT_TURN_STEPS, MAX_TURN_STEPS, ToolPolicy, TurnOptions,
};
use crate::mcp::{RequestContext, TaskSupport, ToolSpec, default_of};
use crate::trace_context::is_span_id;

pub(super) struct ReplayTurn;

/// `tools`: which tools the replay may run (a word), or the tools offered (names), as
/// `replay_llm_call` takes them.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum ToolsArgument {
    Policy(ToolPolicy),
    Offered(#[schemars(inner(length(min = 1)))] Vec<String>),
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct ReplayTurnArgs {
    /// The LLM call of a recorded turn to replay from (get_llm_calls, get_trace)
    #[schemars(regex(pattern = r"^[0-9a-f]{16}$"))]
    span_id: String,
    #[serde(flatten)]
    changes: Changes,
    // After `changes`, whose `tools` (names only) it replaces in the schema; serde gives
    // it to this field, which it names outright.
    /// Which tools the replay may run when the model calls one the recording did not call
    /// at that step: "recorded" none (it stops there), "read_only" the tools the bot
    /// marks read-only (it stops before any other). An array of names instead changes
    /// the tools offered, as in replay_llm_call (and runs none)
    #[schemars(extend("default" = "recorded"))]
    tools: Option<ToolsArgument>,
    /// Most LLM calls the replay makes
    #[serde(default = "default_of::<DEFAULT_TURN_STEPS>")]
    #[schemars(range(min = 1, max = MAX_TURN_STEPS))]
    max_steps: usize,
    #[serde(flatten)]
    checks: ReplayChecks,
}

impl DiagnosticTool for ReplayTurn {
    type Args = ReplayTurnArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "replay_turn",
            "Replay a whole turn with a change",
            "What if, for a whole turn: re-runs a recorded turn from one of its LLM calls with the changes given \
             (system, model, temperature, max_tokens, tools offered, edit_messages) and continues the agent loop. \
             A tool call with the name and arguments the recording had at that step gets the recorded result and \
             runs nothing; at any other the replay stops and says so (diverged_at, both calls side by side), or with \
             tools: \"read_only\" runs the bot's read-only tools and stops before any other. Never runs a tool that \
             changes state. Answers step by step, original beside replay (text, tool calls with arguments, finish \
             reason, tokens), the first divergence, both final answers, why it stopped and a one-line verdict. \
             At most max_steps LLM calls (default 5, at most 10), each counted against REPLAY_MAX_PER_MINUTE; \
             traced as source replay, linked to the original.",
        )
        .output_of::<replay::TurnReplay>()
        .annotations(SPENDS_TOKENS)
        .max_result_size(MAX_MAX_BYTES)
    }

    /// A replay of ten steps can take minutes: a client that supports tasks polls.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    async fn run(&self, d: &Diagnostics, args: ReplayTurnArgs, ctx: &RequestContext) -> Answer {
        if !is_span_id(&args.span_id) {
            return Ok(failed(format!(
                "`{}` is not a span id (16 lowercase hex digits); take one from get_llm_calls",
                args.span_id
            )));
        }
        let mut changes = args.changes;
        let policy = match args.tools {
            Some(ToolsArgument::Policy(policy)) => policy,
            Some(ToolsArgument::Offered(names)) => {
                changes.tools = Some(names);
                ToolPolicy::Recorded
            }
            None => ToolPolicy::Recorded,
        };
        let options = TurnOptions {
            max_steps: args.max_steps,
            tools: policy,
            allow_redacted: args.checks.allow_redacted,
            progress: &|made, most| {
                ctx.progress(made as f64, Some(most as f64), Some("LLM calls made"))
            },
        };
        if let Err(e) = args.checks.expect.check_pattern() {
            return Ok(failed(e.to_string()));
        }
        match replay::replay_turn(&d.bot, &args.span_id, &changes, options).await {
            Ok(mut replay) => {
                replay.expect(&args.checks.expect, &d.bot.tools);
                replay.fit(MAX_MAX_BYTES);
                Ok(done(json!(replay)))
            }
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}
