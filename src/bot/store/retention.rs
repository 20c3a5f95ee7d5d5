//! Conversation retention in the store: keeps the chat history within a count (the
//! newest conversations by last activity, `CONVERSATION_MAX_COUNT`) and an age
//! (`CONVERSATION_MAX_AGE_SECS`). Both are off unless configured.
//!
//! - A prune ([`Store::prune_conversations`]) is one transaction: a conversation and its
//!   messages (`ON DELETE CASCADE`, on both backends) go together or not at all.
//! - A turn holds its conversation ([`Store::hold_conversation`],
//!   [`Store::create_held_conversation`]) from before it first reads or writes it until
//!   it ends, and a prune never deletes a held conversation. The hold is registered
//!   under a gate that a prune takes exclusively from the moment it reads the held ids
//!   until it commits, so a turn cannot start on a conversation a prune is deleting: it
//!   either registers first (and is skipped) or starts after the commit (and finds the
//!   conversation gone, as if it never existed).
//! - The store counts the conversations it creates ([`Store::conversations_created`]),
//!   so the retention task (`bot::retention`) prunes every few hundred new conversations
//!   or once a second, never once per message.
//!
//! Holds are per process: with several replicas on one PostgreSQL database, a replica
//! protects its own turns; a turn running on another replica is protected only by being
//! among the newest conversations and younger than the age limit (each message a turn
//! stores makes its conversation the newest). Replicas prune one at a time (an advisory
//! lock; one that finds it taken skips its turn).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::backend::ConversationPrune;
use super::{Conversation, Store, StoreError};
use crate::bot::lock;
use crate::model::ConversationLimits;
use chrono::{SecondsFormat, Utc};

/// The conversations turns are working on in this process, and how many were created.
#[derive(Default)]
pub(super) struct ConversationActivity {
    /// Shared while a turn registers its hold, exclusive during a prune (see the module
    /// documentation): a tokio lock, because the prune holds it across its transaction.
    gate: tokio::sync::RwLock<()>,
    /// Held conversation ids, with how many turns hold each.
    held: Mutex<HashMap<String, usize>>,
    created: AtomicU64,
}

impl ConversationActivity {
    fn held_ids(&self) -> Vec<String> {
        lock(&self.held).keys().cloned().collect()
    }
}

/// Keeps a conversation from being pruned for as long as it lives (a turn's lifetime).
#[must_use = "the conversation is protected only while the hold lives"]
pub struct ConversationHold {
    activity: Arc<ConversationActivity>,
    id: String,
}

impl Drop for ConversationHold {
    fn drop(&mut self) {
        let mut held = lock(&self.activity.held);
        if let Some(turns) = held.get_mut(&self.id) {
            *turns -= 1;
            if *turns == 0 {
                held.remove(&self.id);
            }
        }
    }
}

impl Store {
    /// Protects conversation `id` from pruning until the hold is dropped. Waits for a
    /// prune in progress to commit first (milliseconds).
    pub async fn hold_conversation(&self, id: &str) -> ConversationHold {
        let _registering = self.activity.gate.read().await;
        *lock(&self.activity.held).entry(id.to_string()).or_default() += 1;
        ConversationHold {
            activity: self.activity.clone(),
            id: id.to_string(),
        }
    }

    /// Creates a conversation that is held from before it exists, for a turn that
    /// starts a new conversation.
    pub async fn create_held_conversation(
        &self,
        title: &str,
        admin: bool,
    ) -> Result<(Conversation, ConversationHold), StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        let id = if admin {
            format!("{}{id}", super::conversations::ADMIN_CONVERSATION_PREFIX)
        } else {
            id
        };
        let hold = self.hold_conversation(&id).await;
        let conversation = self.insert_conversation(id, title).await?;
        Ok((conversation, hold))
    }

    /// How many conversations this process created since it started (only grows).
    pub fn conversations_created(&self) -> u64 {
        self.activity.created.load(Ordering::Relaxed)
    }

    pub(super) fn count_created_conversation(&self) {
        self.activity.created.fetch_add(1, Ordering::Relaxed);
    }

    /// Deletes the conversations (with their messages) beyond `limits`, in one
    /// transaction, except those a turn holds; returns how many conversations went.
    pub async fn prune_conversations(
        &self,
        limits: ConversationLimits,
    ) -> Result<usize, StoreError> {
        if !limits.is_set() {
            return Ok(0);
        }
        let _pruning = self.activity.gate.write().await;
        let held = self.activity.held_ids();
        let keep = limits
            .max_count
            .map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        // An age reaching back before the calendar starts: nothing is that old.
        let cutoff = limits
            .max_age
            .and_then(|age| chrono::Duration::from_std(age).ok())
            .and_then(|age| Utc::now().checked_sub_signed(age))
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true));
        let prune = ConversationPrune { keep, cutoff, held };
        self.db.prune_conversations(prune).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_turn_cannot_take_a_hold_while_a_prune_runs() {
        let store = Store::open(":memory:").unwrap();
        let pruning = store.activity.gate.write().await;
        let hold = tokio::spawn({
            let store = store.clone();
            async move { store.hold_conversation("c").await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !hold.is_finished(),
            "the hold waits for the prune to commit"
        );
        assert!(store.activity.held_ids().is_empty());
        drop(pruning);
        let hold = hold.await.unwrap();
        assert_eq!(store.activity.held_ids(), vec!["c".to_string()]);
        drop(hold);
        assert!(store.activity.held_ids().is_empty());
    }

    #[tokio::test]
    async fn conversations_created_are_counted() {
        let store = Store::open(":memory:").unwrap();
        store.create_conversation("a").await.unwrap();
        let _held = store.create_held_conversation("b", false).await.unwrap();
        assert_eq!(store.conversations_created(), 2);
    }
}
