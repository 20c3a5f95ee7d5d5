//! Keeping stored history within its limits, off the request path.
//!
//! [`Pruning`] decides when a limit is applied: a delete costs more than an insert, so
//! not after every write, but after every few writes and at least once a period while
//! writes arrive. The trace writer (turns) and the conversation retention task below
//! (conversations) both schedule their prunes with it.
//!
//! The conversation retention task ([`spawn_conversation_retention`]) runs only when
//! `CONVERSATION_MAX_COUNT` or `CONVERSATION_MAX_AGE_SECS` is set. Four times a second
//! it reads how many conversations the store created (an atomic counter, no query), and
//! prunes when [`Pruning`] says so (every [`PRUNE_EVERY_CONVERSATIONS`] new ones, or
//! once a second while they arrive), and in any case every [`AGE_SWEEP`], so
//! conversations that age out while nobody chats still go. The prune itself
//! ([`Store::prune_conversations`]) is one transaction and skips the conversations turns
//! hold.

use std::time::{Duration, Instant};

use super::store::Store;
use crate::model::ConversationLimits;

/// When to apply a stored table's limits.
pub(crate) struct Pruning {
    every_items: usize,
    every: Duration,
    items_since: usize,
    last: Option<Instant>,
}

impl Pruning {
    /// Prunes after `every_items` new items, or after `every` once any item arrived.
    pub(crate) fn new(every_items: usize, every: Duration) -> Self {
        Pruning {
            every_items,
            every,
            items_since: 0,
            last: None,
        }
    }

    /// Whether to prune now, with `new_items` stored since the last call; `flushing`
    /// (a reader wants to read within the limits) prunes whatever waited.
    pub(crate) fn due(&mut self, new_items: usize, flushing: bool) -> bool {
        self.items_since += new_items;
        let stale = self.last.is_none_or(|t| t.elapsed() >= self.every);
        let due =
            (self.items_since > 0 && (flushing || stale)) || self.items_since >= self.every_items;
        if due {
            self.items_since = 0;
            self.last = Some(Instant::now());
        }
        due
    }
}

/// How often the retention task reads the count of new conversations: shorter than
/// [`PRUNE_EVERY`], so a prune that is due is not put off by a whole period.
const TICK: Duration = Duration::from_millis(250);
/// New conversations between two prunes at most. At the soak's rate (about 280 a
/// second) that is a prune about every second, each deleting a few hundred
/// conversations, instead of one small delete per conversation.
const PRUNE_EVERY_CONVERSATIONS: usize = 256;
/// While conversations arrive more slowly, a prune at least this often.
const PRUNE_EVERY: Duration = Duration::from_secs(1);
/// A prune at least this often even without new conversations, for the age limit.
pub(crate) const AGE_SWEEP: Duration = Duration::from_secs(60);

/// Starts the conversation retention task when a limit is set (`None` otherwise: with
/// the default, nothing runs and nothing is ever deleted).
pub fn spawn_conversation_retention(
    store: Store,
    limits: ConversationLimits,
) -> Option<tokio::task::JoinHandle<()>> {
    if !limits.is_set() {
        return None;
    }
    tracing::info!(
        max_count = limits.max_count,
        max_age_secs = limits.max_age.map(|age| age.as_secs()),
        "conversation retention on: older conversations and their messages are deleted"
    );
    Some(tokio::spawn(async move {
        let mut pruning = Pruning::new(PRUNE_EVERY_CONVERSATIONS, PRUNE_EVERY);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen = 0;
        // `None`: the first tick prunes, so limits set on an existing database apply at
        // start-up rather than after the first new conversation.
        let mut last_sweep: Option<Instant> = None;
        let mut failures: u64 = 0;
        loop {
            tick.tick().await;
            let created = store.conversations_created();
            let new = usize::try_from(created - seen).unwrap_or(usize::MAX);
            seen = created;
            let sweep = last_sweep.is_none_or(|t| t.elapsed() >= AGE_SWEEP);
            if !(pruning.due(new, false) || sweep) {
                continue;
            }
            last_sweep = Some(Instant::now());
            match store.prune_conversations(limits).await {
                Ok(0) => {}
                Ok(deleted) => tracing::debug!(deleted, "old conversations deleted"),
                Err(error) => {
                    failures += 1;
                    // Every failure would flood the log while the database is down.
                    if failures.is_power_of_two() {
                        tracing::warn!(%error, failures, "cannot delete old conversations; the next prune retries");
                    }
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_applied_every_few_items_and_on_every_flush() {
        let mut pruning = Pruning::new(16, Duration::from_secs(1));
        assert!(
            pruning.due(1, false),
            "the first item prunes (nothing pruned yet)"
        );
        assert!(
            !pruning.due(1, false),
            "the next one within the period waits"
        );
        assert!(pruning.due(0, true), "a reader's flush prunes what waited");
        assert!(!pruning.due(0, true), "nothing new: nothing to prune");
        assert!(pruning.due(16, false), "many items at once prune");
    }

    #[test]
    fn a_period_without_items_prunes_nothing() {
        let mut pruning = Pruning::new(16, Duration::ZERO);
        assert!(!pruning.due(0, false));
        assert!(pruning.due(1, false), "a period passed and an item arrived");
    }
}
