//! How legacy sessions end besides a client's `DELETE`: going idle (counted across
//! replicas through the ledger's record of when each replica last served a session),
//! ended by another replica, or giving way at this replica's cap. An idle session's end
//! is recorded in the ledger, so no restart restores it, and announced, so no replica
//! serves it. Giving way at the cap frees this replica's memory and ends the session
//! here only: the longest-idle session here may be one a client uses through another
//! replica, which keeps serving it (and ends it there when it goes idle everywhere).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use porthole_core::replica_changes::Changed;

use super::id::unix_ms;
use super::{
    Access, ENDED_REMEMBERED, SESSION_TARGET, Session, Sessions, lock, remove_live, short,
};

impl Sessions {
    /// Makes `session` live. At the cap, the session idle the longest here gives way (on
    /// this replica only: see the module doc), but never to a lesser credential: a
    /// read-only token's session evicts only read-only ones, so that token cannot end the
    /// full token's sessions by opening many. `false` when nothing may give way (the
    /// session is not kept).
    pub(super) fn insert(&self, session: Arc<Session>) -> bool {
        let mut live = lock(&self.live);
        if live.len() >= self.config.max_sessions {
            let oldest = live
                .values()
                .filter(|s| session.access == Access::Full || s.access == session.access)
                .min_by_key(|s| s.idle_since())
                .map(|s| s.id.clone());
            let Some(oldest) = oldest else {
                return false;
            };
            {
                if let Some(evicted) = live.remove(&oldest) {
                    evicted.close_streams();
                }
                tracing::info!(
                    target: SESSION_TARGET,
                    session = %short(&oldest),
                    cap = self.config.max_sessions,
                    "evicted the longest-idle MCP session (MCP_MAX_SESSIONS reached)"
                );
                self.forget(oldest);
            }
        }
        live.insert(session.id.clone(), session);
        true
    }

    /// After a session ends: its id must answer 404 from now on. Ids minted here do so
    /// by themselves; a restored one has to be remembered, and the ledger keeps every
    /// one for the processes after this one.
    pub(super) fn forget(&self, id: String) {
        let Some(minted) = self.verify(&id) else {
            return;
        };
        if let Some(ledger) = &self.config.ledger {
            ledger.record_end(&id, minted.minted_ms);
        }
        if minted.instance != self.instance {
            self.remember_ended(id);
        }
    }

    pub(super) fn remember_ended(&self, id: String) {
        let mut guard = lock(&self.ended);
        let (ids, order) = &mut *guard;
        if ids.len() >= ENDED_REMEMBERED
            && let Some(oldest) = order.pop_front()
        {
            ids.remove(&oldest);
        }
        if ids.insert(id.clone()) {
            order.push_back(id);
        }
    }

    /// Tells the ledger this replica serves `session`, at most once per
    /// [`SessionConfig::seen_interval`], so another replica does not take it for idle.
    pub(super) fn share_seen(&self, session: &Session) {
        let Some(ledger) = &self.config.ledger else {
            return;
        };
        let now = unix_ms();
        let last = session.shared_seen_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= self.config.seen_interval().as_millis() as u64
            && session
                .shared_seen_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            ledger.record_seen(&session.id, now);
        }
    }

    /// Another replica ended this session (DELETE): its id answers 404 here too, from
    /// now on. The ledger is the ending replica's to write.
    pub fn ended_elsewhere(&self, id: &str) {
        if let Some(session) = remove_live(&mut lock(&self.live), id) {
            session.close_streams();
        }
        if let Some(minted) = self.verify(id)
            && minted.instance != self.instance
        {
            self.remember_ended(id.to_string());
        }
    }

    /// Ends sessions idle longer than the idle timeout, on every replica (announced);
    /// returns how many. A session whose client holds its GET stream open is listening,
    /// not idle, and stays. With replicas, idleness is counted across them: a session
    /// idle here that another replica served within the timeout is busy there, and
    /// stays here too, as if served now (an id this replica minted and no longer holds
    /// would read as ended).
    pub async fn evict_idle(&self) -> usize {
        let timeout = self.config.idle_timeout.as_millis() as u64;
        let cutoff = self.now().saturating_sub(timeout);
        let is_idle = |s: &Session| s.idle_since() < cutoff && !s.listening();
        let live: Vec<Arc<Session>> = lock(&self.live).values().cloned().collect();
        // A client listening on its GET stream here sends no requests: say it is served,
        // so another replica's sweep does not take its session for idle.
        for session in live.iter().filter(|s| s.listening()) {
            self.share_seen(session);
        }
        let idle: Vec<String> = live
            .iter()
            .filter(|s| is_idle(s))
            .map(|s| s.id.clone())
            .collect();
        drop(live);
        let busy_elsewhere = match &self.config.ledger {
            Some(ledger) if !idle.is_empty() => {
                let since = unix_ms().saturating_sub(timeout);
                ledger.seen_since(idle.clone(), since).await
            }
            _ => Vec::new(),
        };
        let mut ended = 0;
        for id in idle {
            // Looked at again: a request may have come in while the ledger answered.
            let removed = {
                let mut live = lock(&self.live);
                match live.get(&id) {
                    Some(session) if busy_elsewhere.contains(&id) => {
                        session.touch(self.now());
                        None
                    }
                    Some(session) if is_idle(session) => remove_live(&mut live, &id),
                    _ => None,
                }
            };
            let Some(session) = removed else { continue };
            session.close_streams();
            tracing::info!(target: SESSION_TARGET, session = %short(&id), "evicted an idle MCP session (MCP_SESSION_IDLE_SECS)");
            self.forget(id.clone());
            self.notifier.announce(Changed::SessionEnded { id });
            ended += 1;
        }
        ended
    }
}
