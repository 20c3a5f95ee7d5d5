//! The `/mcp` session ledger kept in the bot's database: ids of ended sessions, so a
//! session a client ended (or that was evicted) is not restored after a restart.
//!
//! The table is kept within the sessions' maximum age and a count when the ledger is
//! loaded, and again after every [`PRUNE_EVERY_ENDED`] sessions end, so a bot that runs
//! for weeks while clients come and go does not grow it without bound.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::bot::store::{Store, StoreError};
use crate::mcp::SessionLedger;

/// Sessions ended between two prunes of the stored ids.
const PRUNE_EVERY_ENDED: u64 = 1024;

pub struct StoredSessionLedger {
    store: Store,
    /// Read at start-up, before the endpoint serves.
    ended: Vec<String>,
    /// No id is accepted longer than this after it was minted, so none is kept longer.
    max_age: Duration,
    ended_since_start: AtomicU64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

impl StoredSessionLedger {
    /// Loads the ids ended within `max_age` (older ones are past their age anyway).
    pub async fn load(store: Store, max_age: Duration) -> Result<Self, StoreError> {
        let ended = store.ended_sessions(minted_cutoff(max_age)).await?;
        Ok(StoredSessionLedger {
            store,
            ended,
            max_age,
            ended_since_start: AtomicU64::new(0),
        })
    }
}

/// Ids minted before this (Unix ms) are past their maximum age.
fn minted_cutoff(max_age: Duration) -> u64 {
    now_ms().saturating_sub(max_age.as_millis() as u64)
}

impl SessionLedger for StoredSessionLedger {
    fn ended(&self) -> Vec<String> {
        self.ended.clone()
    }

    fn record_end(&self, id: &str, minted_ms: u64) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.store.clone();
        let id = id.to_string();
        let ended = self.ended_since_start.fetch_add(1, Ordering::Relaxed) + 1;
        let prune_before = ended
            .is_multiple_of(PRUNE_EVERY_ENDED)
            .then(|| minted_cutoff(self.max_age));
        runtime.spawn(async move {
            if let Err(e) = store.record_ended_session(&id, minted_ms).await {
                tracing::warn!(error = %e, "could not record an ended MCP session; it may be restored after a restart");
            }
            if let Some(cutoff) = prune_before
                && let Err(e) = store.prune_ended_sessions(cutoff).await
            {
                tracing::warn!(error = %e, "could not forget old ended MCP sessions; the next prune retries");
            }
        });
    }
}
