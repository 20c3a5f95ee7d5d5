//! Named sets of recorded LLM calls: saved by span id or as `get_llm_calls` selects
//! them, each call copied whole with its tool definitions (so trace retention does not
//! erase it), replayed together with a change and `expect` checks, each set keeping the
//! summary of its last run. A set is what a user replays before and after editing a
//! prompt.

use serde_json::{Value, json};

use super::batch::{check_batch, replay_each, select};
use super::{Batch, Changes, Expect, MAX_BATCH, ReplayError, find_span, recorded};
use crate::bot::Bot;
use crate::bot::store::{ReplaySet, SpanQuery, TOOLS_HASH};
use crate::model::SpanRecord;

/// The attribute a saved call keeps its tool definitions under.
pub const SAVED_TOOLS: &str = "saved_tool_definitions";
/// The longest set name.
pub const MAX_SET_NAME: usize = 100;

/// Which calls to save: these span ids, or those a filter selects.
pub enum Selection {
    Spans(Vec<String>),
    Query(SpanQuery),
}

/// Saves the calls `selection` names as the set `name` (replacing one of that name).
pub async fn save_set(
    bot: &Bot,
    name: &str,
    description: &str,
    selection: Selection,
) -> Result<(ReplaySet, Vec<String>), ReplayError> {
    check_name(name)?;
    bot.tracer.flush().await;
    let calls = match selection {
        Selection::Spans(ids) => {
            let mut calls = Vec::with_capacity(ids.len());
            for id in ids.iter().take(MAX_BATCH) {
                let Some(span) = find_span(bot, id).await? else {
                    return Err(ReplayError::UnknownSpan(id.clone()));
                };
                calls.push(span);
            }
            calls
        }
        Selection::Query(mut query) => {
            query.limit = query.limit.clamp(1, MAX_BATCH);
            select(bot, query).await?
        }
    };
    if calls.is_empty() {
        return Err(ReplayError::Invalid(
            "no LLM call matches: nothing to save (get_llm_calls lists them)".into(),
        ));
    }
    let mut saved = Vec::with_capacity(calls.len());
    for call in calls {
        saved.push(with_its_tools(bot, call).await?);
    }
    bot.store.save_replay_set(name, description, &saved).await?;
    let set = bot.store.replay_set(name).await?.ok_or_else(|| {
        ReplayError::Store(format!(
            "the set `{name}` was saved but cannot be read back"
        ))
    })?;
    Ok((set, saved.into_iter().map(|c| c.span_id).collect()))
}

/// `call`, checked replayable (an LLM call whose request was kept in full), with its
/// tool definitions copied in.
async fn with_its_tools(bot: &Bot, mut call: SpanRecord) -> Result<SpanRecord, ReplayError> {
    recorded::request_of(bot, &call).await?;
    let hash = call.attributes.get(TOOLS_HASH).and_then(Value::as_str);
    if let Some(hash) = hash
        && let Some(definitions) = bot.store.tool_set(hash).await?
    {
        call.attributes
            .insert(SAVED_TOOLS.into(), Value::String(definitions));
    }
    Ok(call)
}

/// Replays the set `name` with `changes` and `expect`, and keeps the summary as its last run.
pub async fn replay_set(
    bot: &Bot,
    name: &str,
    changes: &Changes,
    (allow_redacted, expect): (bool, &Expect),
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Batch, ReplayError> {
    check_batch(bot, changes, (allow_redacted, expect))?;
    if bot.store.replay_set(name).await?.is_none() {
        return Err(ReplayError::Invalid(format!(
            "no replay set `{name}`; list_replay_sets lists them, save_replay_set saves one"
        )));
    }
    let calls = bot.store.replay_set_calls(name).await?;
    let batch = replay_each(bot, calls, changes, (allow_redacted, expect), progress).await?;
    bot.store
        .record_replay_set_run(name, &json!(batch.summary))
        .await?;
    Ok(batch)
}

/// A set name: 1 to 100 letters, digits, `_`, `-` or `.`.
pub fn check_name(name: &str) -> Result<(), ReplayError> {
    let fits = (1..=MAX_SET_NAME).contains(&name.chars().count())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if fits {
        Ok(())
    } else {
        Err(ReplayError::Invalid(format!(
            "set name `{name}` must be 1 to {MAX_SET_NAME} letters, digits, `_`, `-` or `.`"
        )))
    }
}
