//! Replays in a batch: the LLM calls a filter selects (as `get_llm_calls` selects
//! them, or those of one conversation), each replayed once with the same changes: the
//! prompt-fix regression check. One row per call, before and after, and a summary.

use serde::Serialize;

use super::{
    Answer, Changes, Check, CheckCount, Comparison, Expect, MAX_BATCH, Options, ReplayError, check,
    replay_span,
};
use crate::bot::Bot;
use crate::bot::store::SpanQuery;
use crate::model::{SpanKind, SpanRecord};

/// One call of a batch, before and after.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BatchRow {
    pub span_id: String,
    pub model: Option<String>,
    pub before: Brief,
    /// `None` when the replay failed (see `error`).
    pub after: Option<Brief>,
    pub changed: bool,
    pub error: Option<String>,
    /// The `expect` checks run on the replay's answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
}

/// An answer in short: finish reason, the tools asked for, the start of the text.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Brief {
    pub finish_reason: Option<String>,
    pub tool_calls: Vec<String>,
    pub text_preview: String,
}

const PREVIEW_CHARS: usize = 160;
/// The characters a row's error keeps (its middle goes), so 20 rows stay short.
const ERROR_CHARS: usize = 600;

impl Brief {
    fn of(answer: &Answer) -> Brief {
        Brief {
            finish_reason: answer.finish_reason.clone(),
            tool_calls: answer
                .tool_calls
                .iter()
                .map(|c| c["name"].as_str().unwrap_or_default().to_string())
                .collect(),
            text_preview: preview(&answer.text),
        }
    }
}

/// The first [`PREVIEW_CHARS`] characters of `text`, `…` when there is more.
fn preview(text: &str) -> String {
    let mut shown: String = text.chars().take(PREVIEW_CHARS).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}

#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct Summary {
    pub replayed: usize,
    pub changed: usize,
    pub unchanged: usize,
    pub errors: usize,
    /// How the `expect` checks went over the batch (none when none were asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<CheckCount>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Batch {
    pub changes: Changes,
    pub rows: Vec<BatchRow>,
    pub summary: Summary,
}

/// Replays, once each, the LLM calls `query` selects (newest first, at most
/// [`MAX_BATCH`]) with the same `changes`; each call counts against the rate limit.
/// `progress` hears (calls replayed, calls selected) after each.
pub async fn replay_calls(
    bot: &Bot,
    mut query: SpanQuery,
    changes: &Changes,
    (allow_redacted, expect): (bool, &Expect),
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Batch, ReplayError> {
    check_batch(bot, changes, (allow_redacted, expect))?;
    query.limit = query.limit.clamp(1, MAX_BATCH);
    bot.tracer.flush().await;
    let calls = select(bot, query).await?;
    replay_each(bot, calls, changes, (allow_redacted, expect), progress).await
}

/// What every batch checks before it sends anything: the changes and options each of its
/// calls is replayed with ([`check`], once each), and `expect`'s pattern.
pub(super) fn check_batch(
    bot: &Bot,
    changes: &Changes,
    (allow_redacted, expect): (bool, &Expect),
) -> Result<(), ReplayError> {
    let once = Options {
        runs: 1,
        allow_redacted,
    };
    check(bot, changes, once)?;
    expect.check_pattern()
}

/// Replays each of `calls` once with `changes`, as [`replay_calls`] does.
pub(super) async fn replay_each(
    bot: &Bot,
    calls: Vec<SpanRecord>,
    changes: &Changes,
    (allow_redacted, expect): (bool, &Expect),
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Batch, ReplayError> {
    let options = Options {
        runs: 1,
        allow_redacted,
    };
    let selected = calls.len();
    let mut rows = Vec::with_capacity(selected);
    let mut summary = Summary::default();
    for call in calls {
        let before = Brief::of(&Answer::recorded(&call));
        let row = match replay_span(bot, call.clone(), changes, options).await {
            Ok(mut replay) => {
                replay.expect(expect, &bot.tools);
                let changed = replay.comparison.iter().any(Comparison::changed);
                summary.replayed += 1;
                *if changed {
                    &mut summary.changed
                } else {
                    &mut summary.unchanged
                } += 1;
                BatchRow {
                    after: Some(Brief::of(&replay.replays[0])),
                    changed,
                    error: None,
                    checks: std::mem::take(&mut replay.comparison[0].checks),
                    ..row_of(&call, before)
                }
            }
            Err(error) => {
                summary.errors += 1;
                BatchRow {
                    error: Some(crate::text::elide_middle(&error.to_string(), ERROR_CHARS)),
                    ..row_of(&call, before)
                }
            }
        };
        rows.push(row);
        progress(rows.len(), selected);
    }
    if !expect.is_empty() {
        summary.checks = Some(CheckCount::of(rows.iter().flat_map(|r| &r.checks)));
    }
    Ok(Batch {
        changes: changes.clone(),
        rows,
        summary,
    })
}

fn row_of(call: &SpanRecord, before: Brief) -> BatchRow {
    BatchRow {
        span_id: call.span_id.clone(),
        model: call.model.clone(),
        before,
        after: None,
        changed: false,
        error: None,
        checks: Vec::new(),
    }
}

/// The LLM calls `query` selects, newest first. The store finds a conversation's turns
/// by their root; their LLM calls are read turn by turn, newest turn first.
pub(super) async fn select(bot: &Bot, query: SpanQuery) -> Result<Vec<SpanRecord>, ReplayError> {
    let Some(conversation) = query.conversation_id.clone() else {
        return Ok(bot.store.list_spans(SpanKind::Llm, query).await?.items);
    };
    let mut calls = Vec::new();
    let mut after = None;
    loop {
        let turns = SpanQuery {
            conversation_id: Some(conversation.clone()),
            after,
            limit: MAX_BATCH,
            ..SpanQuery::default()
        };
        let page = bot.store.list_traces(turns).await?;
        for turn in &page.items {
            let mut spans = bot.store.trace_spans(&turn.root.trace_id).await?;
            spans
                .retain(|s| s.root_span_id == turn.root.span_id && query.selects(SpanKind::Llm, s));
            spans.reverse();
            calls.extend(spans);
        }
        if calls.len() >= query.limit || page.next.is_none() {
            calls.truncate(query.limit);
            return Ok(calls);
        }
        after = page.next;
    }
}
