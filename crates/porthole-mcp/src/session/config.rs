//! What a server's legacy sessions are allowed: how many, how long idle or in all, where
//! ended ids are remembered, and what their SSE streams keep for a reconnect.

use std::sync::Arc;
use std::time::Duration;

use super::SessionLedger;

/// How a server keeps its legacy (2025-era) sessions.
#[derive(Clone)]
pub struct SessionConfig {
    /// The most sessions live at once; past it, the longest-idle one a new session's
    /// credential may end gives way.
    pub max_sessions: usize,
    /// How long a session may go unused (and its GET stream closed) before it is ended.
    pub idle_timeout: Duration,
    /// No id is accepted longer than this after it was minted.
    pub max_age: Duration,
    /// Keeps ended ids across restarts; without one, only this process remembers.
    pub ledger: Option<Arc<dyn SessionLedger>>,
    /// What a session's SSE streams keep for a client that reconnects.
    pub streams: StreamLimits,
}

/// What each SSE stream of a session keeps for a client that reconnects with
/// `Last-Event-ID`: the newest events, within a count and a size, and (for its `GET`
/// notification stream) how long after the client left the stream is still fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// The most events a stream keeps for replay.
    pub backlog_events: usize,
    /// The most bytes of events a stream keeps for replay (its newest event always).
    pub backlog_bytes: usize,
    /// How long a `GET` stream whose client left keeps collecting notifications for
    /// it; past that, the stream is dropped and its id answers no resume.
    pub resume_window: Duration,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            backlog_events: 128,
            backlog_bytes: 1024 * 1024,
            resume_window: Duration::from_secs(120),
        }
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            max_sessions: 1000,
            idle_timeout: Duration::from_secs(3600),
            max_age: Duration::from_secs(24 * 3600),
            ledger: None,
            streams: StreamLimits::default(),
        }
    }
}

impl SessionConfig {
    /// How often a replica tells the ledger it serves a session: a quarter of the idle
    /// timeout (so a busy session is never taken for idle elsewhere), between 250 ms and
    /// a minute.
    pub fn seen_interval(&self) -> Duration {
        (self.idle_timeout / 4).clamp(Duration::from_millis(250), Duration::from_secs(60))
    }

    /// How often the idle sweep should run: half the idle timeout, between 500 ms and
    /// 30 s (see [`McpServer::spawn_housekeeping`](crate::McpServer::spawn_housekeeping)).
    pub fn sweep_interval(&self) -> Duration {
        (self.idle_timeout / 2).clamp(Duration::from_millis(500), Duration::from_secs(30))
    }
}

impl std::fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionConfig")
            .field("max_sessions", &self.max_sessions)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_age", &self.max_age)
            .field("ledger", &self.ledger.is_some())
            .field("streams", &self.streams)
            .finish()
    }
}
