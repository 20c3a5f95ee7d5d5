//! `replay_turn`: a recorded turn re-run from one of its LLM calls with a change, the
//! agent loop continued (recorded tool results reused, nothing that changes state run),
//! step by step beside the original. The work is the bot's (`bot::replay::turn`).

use serde::Deserialize;
use serde_json::json;

use super::replay::{SPENDS_TOKENS, change_properties};
use super::trace_view::MAX_MAX_BYTES;
use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed};
use crate::bot::replay::{
    self, Changes, DEFAULT_TURN_STEPS, Expect, MAX_TURN_STEPS, ToolPolicy, TurnOptions,
};
use crate::mcp::{RequestContext, TaskSupport, ToolSpec};
use crate::trace_context::is_span_id;

pub(super) struct ReplayTurn;

/// `tools`: which tools the replay may run (a word), or the tools offered (names), as
/// `replay_llm_call` takes them.
#[derive(Deserialize)]
#[serde(untagged)]
enum ToolsArgument {
    Policy(ToolPolicy),
    Offered(Vec<String>),
}

#[derive(Deserialize)]
pub(super) struct ReplayTurnArgs {
    span_id: String,
    #[serde(flatten)]
    changes: Changes,
    tools: Option<ToolsArgument>,
    max_steps: Option<usize>,
    #[serde(default)]
    allow_redacted: bool,
    #[serde(default)]
    expect: Expect,
}

impl DiagnosticTool for ReplayTurn {
    type Args = ReplayTurnArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        let mut properties = change_properties();
        properties["span_id"] = json!({"type": "string", "pattern": "^[0-9a-f]{16}$",
            "description": "The LLM call of a recorded turn to replay from (get_llm_calls, get_trace)"});
        properties["tools"] = json!({
            "oneOf": [
                {"type": "string", "enum": ["recorded", "read_only"]},
                {"type": "array", "items": {"type": "string", "minLength": 1}},
            ],
            "default": "recorded",
            "description": "Which tools the replay may run when the model calls one the recording did not call at that step: \
                            \"recorded\" none (it stops there), \"read_only\" the tools the bot marks read-only (it stops before any other). \
                            An array of names instead changes the tools offered, as in replay_llm_call (and runs none)",
        });
        properties["max_steps"] = json!({"type": "integer", "minimum": 1, "maximum": MAX_TURN_STEPS,
            "default": DEFAULT_TURN_STEPS, "description": "Most LLM calls the replay makes"});
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
        .input(properties, &["span_id"])
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
            max_steps: args.max_steps.unwrap_or(DEFAULT_TURN_STEPS),
            tools: policy,
            allow_redacted: args.allow_redacted,
            progress: &|made, most| {
                ctx.progress(made as f64, Some(most as f64), Some("LLM calls made"))
            },
        };
        if let Err(e) = args.expect.check_pattern() {
            return Ok(failed(e.to_string()));
        }
        match replay::replay_turn(&d.bot, &args.span_id, &changes, options).await {
            Ok(mut replay) => {
                replay.expect(&args.expect, &d.bot.tools);
                replay.fit(MAX_MAX_BYTES);
                Ok(done(json!(replay)))
            }
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}
