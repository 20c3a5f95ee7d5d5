//! Named sets of recorded LLM calls, the regression suite of a prompt:
//! `save_replay_set` copies calls (by span id, or as `get_llm_calls` chooses them) into
//! a set that trace retention does not erase, `list_replay_sets` lists the sets with
//! their last runs, `delete_replay_set` deletes one. `replay_llm_calls` with `set`
//! replays a set (`replay.rs`). The work is the bot's (`bot::replay::sets`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::replay::CallFilter;
use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done, failed};
use crate::bot::replay::{self, MAX_BATCH, MAX_SET_NAME, Selection};
use crate::bot::store::ReplaySet;
use crate::mcp::{Annotations, RequestContext, ToolSpec};
use crate::trace_context::is_span_id;

/// The set's `name`, as `save_replay_set` and `delete_replay_set` take it.
#[derive(Deserialize, JsonSchema)]
pub(super) struct SetName {
    /// The set's name: letters, digits, _, - or .
    #[schemars(length(min = 1, max = MAX_SET_NAME), regex(pattern = r"^[A-Za-z0-9_.-]+$"))]
    name: String,
}

/// Writes the bot's database, destroys nothing but the set it replaces.
const SAVES: Annotations = Annotations {
    read_only: false,
    destructive: false,
    idempotent: true,
    open_world: false,
};

pub(super) struct SaveReplaySet;

#[derive(Deserialize, JsonSchema)]
pub(super) struct SaveArgs {
    #[serde(flatten)]
    name: SetName,
    /// What the set checks
    #[serde(default)]
    #[schemars(length(max = 1000))]
    description: String,
    /// The LLM calls to save (get_llm_calls); or choose them with the filters
    #[schemars(length(min = 1, max = MAX_BATCH), inner(regex(pattern = r"^[0-9a-f]{16}$")))]
    span_ids: Option<Vec<String>>,
    #[serde(flatten)]
    filter: CallFilter,
}

/// `save_replay_set`'s answer: the set as saved, and the calls it holds.
#[derive(Serialize, JsonSchema)]
struct Saved {
    #[serde(flatten)]
    set: ReplaySet,
    /// The saved calls' span ids, in order.
    span_ids: Vec<String>,
}

impl DiagnosticTool for SaveReplaySet {
    type Args = SaveArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "save_replay_set",
            "Save LLM calls as a named replay set",
            "Saves recorded LLM calls under a name, as a regression suite for a prompt: by span_ids, or chosen as \
             get_llm_calls chooses them (model, status, since, conversation_id, limit; newest first, at most 20). \
             Each call is copied whole (its request and tool definitions), so trace retention does not erase it. \
             A set of the same name is replaced. Replay it with replay_llm_calls {set, changes, expect}; \
             list_replay_sets shows the sets and their last runs.",
        )
        .output_of::<Saved>()
        .annotations(SAVES)
    }

    async fn run(&self, d: &Diagnostics, args: SaveArgs, _: &RequestContext) -> Answer {
        let filter = args.filter;
        let selection = match args.span_ids {
            Some(_) if !filter.is_empty() => {
                return Ok(failed(
                    "give either span_ids or the filters (model, status, since, conversation_id, limit), not both",
                ));
            }
            Some(ids) => match ids.iter().find(|id| !is_span_id(id)) {
                Some(bad) => {
                    return Ok(failed(format!(
                        "`{bad}` is not a span id (16 lowercase hex digits); take one from get_llm_calls"
                    )));
                }
                None => Selection::Spans(ids),
            },
            None => match filter.query() {
                Ok(query) => Selection::Query(query),
                Err(e) => return Ok(failed(e)),
            },
        };
        match replay::save_set(&d.bot, &args.name.name, &args.description, selection).await {
            Ok((set, span_ids)) => Ok(done(json!(Saved { set, span_ids }))),
            Err(e) => Ok(failed(e.to_string())),
        }
    }
}

pub(super) struct ListReplaySets;

/// `list_replay_sets`' answer.
#[derive(Serialize, JsonSchema)]
struct Sets {
    /// By name.
    sets: Vec<ReplaySet>,
}

impl DiagnosticTool for ListReplaySets {
    type Args = NoArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_replay_sets",
            "List the saved replay sets",
            "The named sets of recorded LLM calls (save_replay_set): name, description, when saved, how many calls, \
             and the summary of the last replay (replayed, changed, unchanged, errors, expect checks) and when.",
        )
        .output_of::<Sets>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        match d.bot.store.replay_sets().await {
            Ok(sets) => Ok(done(json!(Sets { sets }))),
            Err(e) => Ok(failed(format!("database error: {e}"))),
        }
    }
}

pub(super) struct DeleteReplaySet;

/// `delete_replay_set`'s answer.
#[derive(Serialize, JsonSchema)]
struct Deleted {
    name: String,
    /// false when there was no such set.
    deleted: bool,
}

impl DiagnosticTool for DeleteReplaySet {
    type Args = SetName;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "delete_replay_set",
            "Delete a saved replay set",
            "Deletes a named set of recorded LLM calls and its saved copies (the traces they came from are not touched).",
        )
        .output_of::<Deleted>()
        .annotations(Annotations {
            idempotent: true,
            ..Annotations::DESTRUCTIVE
        })
    }

    async fn run(&self, d: &Diagnostics, args: SetName, _: &RequestContext) -> Answer {
        match d.bot.store.delete_replay_set(&args.name).await {
            Ok(deleted) => Ok(done(json!(Deleted {
                name: args.name,
                deleted,
            }))),
            Err(e) => Ok(failed(format!("database error: {e}"))),
        }
    }
}
