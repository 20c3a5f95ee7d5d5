//! The `/mcp` session ledger kept in the bot's database: ids of ended sessions, so a
//! session a client ended (or that was evicted) is not restored after a restart; and,
//! with replicas (PostgreSQL), when each replica last served a session, so that one
//! replica never takes for idle a session another is serving.
//!
//! The table is kept within the sessions' maximum age and a count when the ledger is
//! loaded, and again after every [`PRUNE_EVERY_ENDED`] sessions end, so a bot that runs
//! for weeks while clients come and go does not grow it without bound.
//!
//! Ended ids are queued and written by one task at a time, [`WRITE_CHUNK`] to a
//! transaction: an idle sweep that evicts ten thousand sessions at once costs a task and
//! a few dozen transactions, not a task and a blocking thread each (that took the
//! process to 139 MB for a moment, docs/performance.md section 2).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;

use crate::bot::lock;
use crate::bot::store::{Store, StoreError};
use crate::mcp::SessionLedger;

/// Sessions ended between two prunes of the stored ids.
const PRUNE_EVERY_ENDED: u64 = 1024;
/// Ended ids written per transaction: short enough that the bot's other writes do not
/// wait long behind one.
const WRITE_CHUNK: usize = 256;

/// Ended ids not written yet, and whether a task is writing them.
#[derive(Default)]
struct Queue {
    ended: Vec<(String, u64)>,
    /// Sessions served here (id, Unix ms), for the other replicas.
    seen: Vec<(String, u64)>,
    /// The mint-time cutoff of the prune due after the next write, if one is.
    prune_before: Option<u64>,
    writing: bool,
}

pub struct StoredSessionLedger {
    store: Store,
    /// Read at start-up, before the endpoint serves.
    ended: Vec<String>,
    /// No id is accepted longer than this after it was minted, so none is kept longer.
    max_age: Duration,
    ended_since_start: AtomicU64,
    queue: Arc<Mutex<Queue>>,
    /// Whether other replicas may serve the same sessions (a shared PostgreSQL); a
    /// SQLite file has one process, and nothing to share.
    replicated: bool,
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
            replicated: store.backend_name() == "postgres",
            store,
            ended,
            max_age,
            ended_since_start: AtomicU64::new(0),
            queue: Arc::default(),
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
        let ended = self.ended_since_start.fetch_add(1, Ordering::Relaxed) + 1;
        let mut queue = lock(&self.queue);
        queue.ended.push((id.to_string(), minted_ms));
        if ended.is_multiple_of(PRUNE_EVERY_ENDED) {
            queue.prune_before = Some(minted_cutoff(self.max_age));
        }
        if !std::mem::replace(&mut queue.writing, true) {
            runtime.spawn(write_queued(self.store.clone(), self.queue.clone()));
        }
    }

    fn record_seen(&self, id: &str, at_ms: u64) {
        if !self.replicated {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut queue = lock(&self.queue);
        queue.seen.push((id.to_string(), at_ms));
        if !std::mem::replace(&mut queue.writing, true) {
            runtime.spawn(write_queued(self.store.clone(), self.queue.clone()));
        }
    }

    fn seen_since(&self, ids: Vec<String>, since_ms: u64) -> BoxFuture<'static, Vec<String>> {
        let (store, replicated) = (self.store.clone(), self.replicated);
        Box::pin(async move {
            if !replicated {
                return Vec::new();
            }
            match store.sessions_seen_since(&ids, since_ms).await {
                Ok(busy) => busy,
                Err(e) => {
                    // Unknown: take every one for busy, so none is ended on a guess
                    // (the next sweep asks again).
                    tracing::warn!(error = %e, "cannot read when the other replicas last served MCP sessions; idle ones are kept for now");
                    ids
                }
            }
        })
    }
}

/// Writes the queued ids, a chunk per transaction, until the queue is empty.
async fn write_queued(store: Store, queue: Arc<Mutex<Queue>>) {
    loop {
        let (chunk, seen, prune_before) = {
            let mut queue = lock(&queue);
            if queue.ended.is_empty() && queue.seen.is_empty() {
                queue.writing = false;
                return;
            }
            let length = queue.ended.len().min(WRITE_CHUNK);
            let chunk: Vec<_> = queue.ended.drain(..length).collect();
            let length = queue.seen.len().min(WRITE_CHUNK);
            let seen: Vec<_> = queue.seen.drain(..length).collect();
            (chunk, seen, queue.prune_before.take())
        };
        if !chunk.is_empty()
            && let Err(e) = store.record_ended_sessions(&chunk).await
        {
            tracing::warn!(error = %e, "could not record ended MCP sessions; they may be restored after a restart");
        }
        if !seen.is_empty()
            && let Err(e) = store.record_sessions_seen(&seen).await
        {
            tracing::warn!(error = %e, "could not record which MCP sessions this replica serves; another may take them for idle");
        }
        if let Some(cutoff) = prune_before
            && let Err(e) = store.prune_ended_sessions(cutoff).await
        {
            tracing::warn!(error = %e, "could not forget old ended MCP sessions; the next prune retries");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_of_ended_sessions_is_written_in_chunks_by_one_task() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let store = Store::open(path.to_str().unwrap()).unwrap();
        let ledger = StoredSessionLedger::load(store.clone(), Duration::from_secs(3600))
            .await
            .unwrap();
        let before = crate::test_support::threads();
        let burst = 5_000;
        for i in 0..burst {
            ledger.record_end(&format!("session-{i}"), now_ms());
        }
        let mut stored = 0;
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            stored = store.ended_sessions(0).await.unwrap().len();
            if stored == burst {
                break;
            }
        }
        assert_eq!(stored, burst, "every ended id is written");
        // A task and a blocking thread per id took hundreds of threads (tokio's blocking
        // pool grows to 512), each with its stack and allocator heap.
        let grown = crate::test_support::threads().saturating_sub(before);
        assert!(grown < 64, "{grown} more threads after the burst");
        assert!(!lock(&ledger.queue).writing, "the writer is done");
    }
}
