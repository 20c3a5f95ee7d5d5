//! The `/mcp` session ledger kept in the bot's database: ids of ended sessions, so a
//! session a client ended (or that was evicted) is not restored after a restart.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::bot::store::{Store, StoreError};
use crate::mcp::SessionLedger;

pub struct StoredSessionLedger {
    store: Store,
    /// Read at start-up, before the endpoint serves.
    ended: Vec<String>,
}

impl StoredSessionLedger {
    /// Loads the ids ended within `max_age` (older ones are past their age anyway).
    pub async fn load(store: Store, max_age: Duration) -> Result<Self, StoreError> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        let cutoff = now_ms.saturating_sub(max_age.as_millis() as u64);
        let ended = store.ended_sessions(cutoff).await?;
        Ok(StoredSessionLedger { store, ended })
    }
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
        runtime.spawn(async move {
            if let Err(e) = store.record_ended_session(&id, minted_ms).await {
                tracing::warn!(error = %e, "could not record an ended MCP session; it may be restored after a restart");
            }
        });
    }
}
