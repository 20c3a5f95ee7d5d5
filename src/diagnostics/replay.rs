//! What if, over MCP: `replay_llm_call` sends a recorded LLM call again with one thing
//! changed and shows the new answer beside the original; `replay_llm_calls` does it for
//! a batch chosen as `get_llm_calls` chooses. Both spend tokens: not read-only (so the
//! read-only token neither sees nor calls them), open-world (they reach the provider).
//! The work is the bot's (`bot::replay`); these shape its arguments and answers.

use serde::Deserialize;
use serde_json::{Value, json};

use super::trace_view::{MAX_MAX_BYTES, parse_since, since_property};
use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, conversation_id_property, done, failed};
use crate::bot::replay::{
    self, Changes, Expect, MAX_BATCH, MAX_RUNS, MAX_SET_NAME, MAX_TEMPERATURE, MAX_TOKENS, Options,
};
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

/// The changes both tools take, and `allow_redacted`.
pub(super) fn change_properties() -> Value {
    json!({
        "system": {"type": "string", "description": "Replaces the system prompt"},
        "model": {"type": "string", "minLength": 1, "description": "Sends to this model instead (same provider)"},
        "temperature": {"type": "number", "minimum": 0, "maximum": MAX_TEMPERATURE},
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS},
        "tools": {"type": "array", "items": {"type": "string", "minLength": 1},
                  "description": "Names of the tools to offer instead of the recorded ones ([] offers none)"},
        "edit_messages": {"type": "array", "items": {
            "type": "object",
            "properties": {"index": {"type": "integer", "minimum": 0}, "content": {"type": "string"}},
            "required": ["index", "content"],
            "additionalProperties": false,
        }, "description": "Replaces the text of recorded messages, numbered as get_llm_call's `request` lists them (0 is the system prompt)"},
        "allow_redacted": {"type": "boolean", "default": false,
                           "description": "Send even where the stored request holds [REDACTED] in place of a secret"},
        "expect": expect_property(),
    })
}

/// `expect`: the checks to run on every replay, described by their type.
fn expect_property() -> Value {
    let mut schema = crate::mcp::schema_of::<Expect>();
    schema["description"] = json!(
        "Checks run on every replay, each reported passed or failed with a count in the summary: \
         same_tool_calls, calls_tool, not_calls_tool, valid_arguments (against the tool's input schema), \
         text_contains, text_not_contains, text_matches (a regular expression)"
    );
    schema
}

pub(super) struct ReplayLlmCall;

#[derive(Deserialize)]
pub(super) struct ReplayLlmCallArgs {
    span_id: String,
    #[serde(flatten)]
    changes: Changes,
    runs: Option<u32>,
    #[serde(default)]
    allow_redacted: bool,
    #[serde(default)]
    expect: Expect,
}

impl DiagnosticTool for ReplayLlmCall {
    type Args = ReplayLlmCallArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        let mut properties = change_properties();
        properties["span_id"] = json!({"type": "string", "pattern": "^[0-9a-f]{16}$",
                                       "description": "An LLM call, from get_llm_calls or get_trace"});
        properties["runs"] = json!({"type": "integer", "minimum": 1, "maximum": MAX_RUNS, "default": 1,
                                    "description": "Calls to make with the same request, to see the model's variance"});
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
        .input(properties, &["span_id"])
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
            runs: args.runs.unwrap_or(1),
            allow_redacted: args.allow_redacted,
        };
        if let Err(e) = args.expect.check_pattern() {
            return Ok(failed(e.to_string()));
        }
        match replay::replay_call(&d.bot, &args.span_id, &args.changes, options).await {
            Ok(mut replay) => {
                replay.expect(&args.expect, &d.bot.tools);
                replay.fit(MAX_MAX_BYTES);
                Ok(done(json!(replay)))
            }
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}

pub(super) struct ReplayLlmCalls;

#[derive(Deserialize)]
pub(super) struct ReplayLlmCallsArgs {
    model: Option<String>,
    status: Option<String>,
    since: Option<String>,
    #[serde(alias = "conversationId")]
    conversation_id: Option<String>,
    limit: Option<usize>,
    /// A saved set to replay instead of a selection.
    set: Option<String>,
    #[serde(flatten)]
    changes: Changes,
    #[serde(default)]
    allow_redacted: bool,
    #[serde(default)]
    expect: Expect,
}

/// How a batch is chosen, as `get_llm_calls` chooses: the arguments `replay_llm_calls`
/// and `save_replay_set` share.
pub(super) struct CallFilter {
    pub(super) model: Option<String>,
    pub(super) status: Option<String>,
    pub(super) since: Option<String>,
    pub(super) conversation_id: Option<String>,
    pub(super) limit: Option<usize>,
}

impl CallFilter {
    /// The query, or what is wrong with `since`.
    pub(super) fn query(self) -> Result<SpanQuery, String> {
        let since_us = self.since.as_deref().map(parse_since).transpose()?;
        Ok(SpanQuery {
            conversation_id: self.conversation_id,
            status: self.status,
            model: self.model,
            since_us,
            limit: self.limit.unwrap_or(10),
            ..SpanQuery::default()
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.model.is_none()
            && self.status.is_none()
            && self.since.is_none()
            && self.conversation_id.is_none()
            && self.limit.is_none()
    }

    /// Their properties, added to a tool's input `properties`.
    pub(super) fn add_properties(properties: &mut Value) {
        properties["model"] = json!({"type": "string", "minLength": 1,
                                     "description": "Only calls to this model"});
        properties["status"] = json!({"type": "string", "enum": ["ok", "error"]});
        properties["since"] = since_property();
        properties["conversation_id"] =
            conversation_id_property("Only the calls of this conversation");
        properties["limit"] =
            json!({"type": "integer", "minimum": 1, "maximum": MAX_BATCH, "default": 10});
    }
}

impl DiagnosticTool for ReplayLlmCalls {
    type Args = ReplayLlmCallsArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        let mut properties = change_properties();
        CallFilter::add_properties(&mut properties);
        properties["model"]["description"] = json!(
            "Only calls to this model (a change of model is not expressible here: replay_llm_call takes it)"
        );
        properties["set"] = json!({"type": "string", "minLength": 1, "maxLength": MAX_SET_NAME,
            "description": "Replay this saved set (save_replay_set) instead of a selection; its last run is kept"});
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
        .input(properties, &[])
        .output_of::<replay::Batch>()
        .annotations(SPENDS_TOKENS)
        .max_result_size(MAX_MAX_BYTES)
    }

    /// Twenty calls to the provider can take minutes: a client that supports tasks polls.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    async fn run(&self, d: &Diagnostics, args: ReplayLlmCallsArgs, ctx: &RequestContext) -> Answer {
        let filter = CallFilter {
            model: args.model,
            status: args.status,
            since: args.since,
            conversation_id: args.conversation_id,
            limit: args.limit,
        };
        let checks = (args.allow_redacted, &args.expect);
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
