//! Legacy-era sessions (`Mcp-Session-Id`) and their SSE streams.
//!
//! **Self-validating ids.** A session id carries the negotiated version, the client's
//! sampling/elicitation/roots capabilities, which token opened it (a request with the
//! other token finds no such session) and an HMAC tag made with a key derived from
//! the bearer secret. When the bot restarts, a client that kept its id (Claude Code
//! does) is recognised and its session restored instead of being stranded; a forged or
//! altered id fails the tag check and gets 404.
//!
//! **Ended ids cost nothing.** An id also carries the moment it was minted and a random
//! tag of the process that minted it. One minted by this process that is no longer live
//! has ended (DELETE, eviction) and gets 404, so no list of ended ids has to grow with
//! traffic. Only restored sessions — minted before the process started, or by another
//! replica sharing the secret behind a load balancer — are remembered when they end, so
//! they are not restored twice.
//!
//! **Ids end for good.** No id is accepted past its maximum age (`max_age` from its
//! minting), and an id that ended (DELETE, eviction) is written to the
//! [`SessionLedger`] when one is given, so it is not restored after a restart either.
//!
//! Files: this one holds the session and the table of live sessions; `id.rs` what an
//! id carries, `streams.rs` the resumable SSE streams.
//!
//! **Streams.** Every SSE stream of a session has an id; its events are numbered
//! `<stream>-<seq>` and kept in a short backlog, so a client that lost the connection
//! can `GET` with `Last-Event-ID` and receive what it missed — including the result of
//! a call that finished while it was away.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::future::{AbortHandle, AbortRegistration, BoxFuture};
use serde_json::Value;
use tokio::sync::oneshot;

use super::guard::Access;
use super::protocol::{LEGACY_VERSIONS, log_level_rank};
use super::seal::SealingKey;
use super::subscriptions::Notifier;

mod config;
mod ending;
mod id;
mod streams;

pub use config::{SessionConfig, StreamLimits};
pub use id::short;
use id::{
    INSTANCE_TAG_LEN, Minted, access_bit, bit_to_access, bits_to_caps, caps_to_bits, unix_ms,
};
use streams::Streams;
pub use streams::{StreamReceiver, StreamSender};

/// Finished streams kept per session for late resumption.
const FINISHED_STREAMS_KEPT: usize = 8;
/// Ended restored sessions remembered (so they keep answering 404).
const ENDED_REMEMBERED: usize = 100_000;
/// The `retry:` hint sent on legacy streams, in milliseconds.
pub const RETRY_MS: u64 = 1000;

/// Where ended session ids outlive the process (the app keeps them in its database),
/// and, with replicas, where each says when it last served a session, so that idleness
/// is counted across them.
pub trait SessionLedger: Send + Sync {
    /// Ids that ended before this process started, read once when sessions are set up.
    fn ended(&self) -> Vec<String>;
    /// A session ended. Called on the request path: write in the background.
    fn record_end(&self, id: &str, minted_ms: u64);
    /// This replica served session `id` at `at_ms` (Unix ms). Called on the request path
    /// at most once per [`SessionConfig::seen_interval`] a session: write in the
    /// background. A lone server needs none of it (the default does nothing).
    fn record_seen(&self, _id: &str, _at_ms: u64) {}
    /// Of `ids` (idle here), those any replica served at or after `since_ms`: busy
    /// elsewhere, so not idle. The default (a lone server) says none.
    fn seen_since(&self, _ids: Vec<String>, _since_ms: u64) -> BoxFuture<'static, Vec<String>> {
        Box::pin(async { Vec::new() })
    }
}

/// One legacy-era session: what its id carries, and its pending client requests,
/// cancellable requests, resource subscriptions and SSE streams.
pub struct Session {
    /// The `Mcp-Session-Id`: its payload and HMAC tag, each base64url, joined by a dot.
    pub id: String,
    /// The protocol version negotiated at `initialize` (one of the legacy versions).
    pub version: &'static str,
    /// What the token that opened it may do.
    pub access: Access,
    /// The client's capabilities from `initialize`; in a restored session, only the
    /// sampling, elicitation and roots entries its id carries.
    pub client_capabilities: Value,
    /// Restored from its id after a restart rather than created by `initialize`.
    pub restored: bool,
    /// The client's name and version from `initialize` (none in a restored session),
    /// for the spans of the work its calls start.
    pub(crate) client_tag: std::sync::OnceLock<Arc<porthole_core::trace_context::CallerTag>>,
    /// When the id was minted, in Unix milliseconds (for the maximum age).
    minted_ms: u64,
    last_seen: AtomicU64,
    /// When this replica last told the ledger it served the session (Unix ms).
    shared_seen_ms: AtomicU64,
    log_threshold: AtomicU8,
    next_client_request: AtomicU64,
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>,
    in_flight: Mutex<HashMap<InFlightKey, AbortHandle>>,
    subscriptions: Mutex<HashSet<String>>,
    streams: Mutex<Streams>,
    /// What its streams keep for a reconnect.
    stream_limits: StreamLimits,
}

/// The log target of session events, under the `porthole::mcp` prefix the log readers
/// mark as the endpoint's own (whatever crate the code is in).
const SESSION_TARGET: &str = "porthole::mcp::session";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Session {
    fn new(id: String, minted: Minted, restored: bool, now: u64, limits: StreamLimits) -> Self {
        Session {
            id,
            version: minted.version,
            access: minted.access,
            client_capabilities: minted.client_capabilities,
            restored,
            client_tag: std::sync::OnceLock::new(),
            minted_ms: minted.minted_ms,
            last_seen: AtomicU64::new(now),
            shared_seen_ms: AtomicU64::new(0),
            // Until the client sets a level, send info and above.
            log_threshold: AtomicU8::new(log_level_rank("info").unwrap_or(1)),
            next_client_request: AtomicU64::new(1),
            pending: Mutex::default(),
            in_flight: Mutex::default(),
            subscriptions: Mutex::default(),
            streams: Mutex::default(),
            stream_limits: limits,
        }
    }

    /// The rank (in `protocol::LOG_LEVELS`) of the least severe log message the client
    /// is sent; `info` until it sets a level.
    pub fn log_threshold(&self) -> u8 {
        self.log_threshold.load(Ordering::Relaxed)
    }

    /// `logging/setLevel`: sends log messages of rank `rank` and above from now on.
    pub fn set_log_level(&self, rank: u8) {
        self.log_threshold.store(rank, Ordering::Relaxed);
    }

    /// Whether 2025-11-25 stream features (priming events) apply.
    pub fn resumable(&self) -> bool {
        self.version >= "2025-11-25"
    }

    // ---- server → client requests ----------------------------------------------------

    /// A new id for a request to the client, and where its answer (result or error)
    /// will arrive once [`Session::resolve_client_request`] delivers it.
    pub fn register_client_request(&self) -> (String, oneshot::Receiver<Result<Value, Value>>) {
        let id = format!(
            "porthole-{}",
            self.next_client_request.fetch_add(1, Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), tx);
        (id, rx)
    }

    /// Stops waiting for the answer to request `id` (it timed out).
    pub fn forget_client_request(&self, id: &str) {
        lock(&self.pending).remove(id);
    }

    /// Delivers the client's answer; false if no request with that id is waiting.
    pub fn resolve_client_request(&self, id: &Value, outcome: Result<Value, Value>) -> bool {
        let key = match id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match lock(&self.pending).remove(&key) {
            Some(tx) => tx.send(outcome).is_ok(),
            None => false,
        }
    }

    // ---- cancellation ----------------------------------------------------------------

    /// Makes a request cancellable by `notifications/cancelled` until the returned
    /// guard is dropped; the registration goes to the request's handler.
    pub fn track(self: &Arc<Self>, request_id: &Value) -> (Tracked, AbortRegistration) {
        let (handle, registration) = AbortHandle::new_pair();
        let key = InFlightKey::of(request_id);
        lock(&self.in_flight).insert(key.clone(), handle);
        let tracked = Tracked {
            session: self.clone(),
            key,
        };
        (tracked, registration)
    }

    /// `notifications/cancelled`: stops the request's work if it is still running.
    pub fn cancel(&self, request_id: &Value) -> bool {
        match lock(&self.in_flight).remove(&InFlightKey::of(request_id)) {
            Some(handle) => {
                handle.abort();
                true
            }
            None => false,
        }
    }

    // ---- resource subscriptions ------------------------------------------------------

    /// Follows `uri`, unless the session already follows `max` others; `false` then.
    pub fn subscribe(&self, uri: &str, max: usize) -> bool {
        let mut subscriptions = lock(&self.subscriptions);
        if subscriptions.len() >= max && !subscriptions.contains(uri) {
            return false;
        }
        subscriptions.insert(uri.to_string());
        true
    }

    /// Stops following `uri`.
    pub fn unsubscribe(&self, uri: &str) {
        lock(&self.subscriptions).remove(uri);
    }

    /// Whether the session follows `uri` (its updates are sent to it).
    pub fn is_subscribed(&self, uri: &str) -> bool {
        lock(&self.subscriptions).contains(uri)
    }

    fn touch(&self, now: u64) {
        self.last_seen.store(now, Ordering::Relaxed);
    }

    fn idle_since(&self) -> u64 {
        self.last_seen.load(Ordering::Relaxed)
    }
}

/// Every session is taken, and none may give way to a new one of this credential.
#[derive(Debug, thiserror::Error)]
#[error(
    "all {cap} MCP sessions are taken by the full-access token's clients, and a read-only \
     token's session may not end one of them: end an idle session (DELETE /mcp) or raise \
     MCP_MAX_SESSIONS"
)]
pub struct SessionsFull {
    /// The most sessions allowed at once (`MCP_MAX_SESSIONS`).
    pub cap: usize,
}

/// The outcome of looking up a session id.
pub enum Lookup {
    /// Live, or restored from its id just now.
    Found(Arc<Session>),
    /// Never issued by this server (or altered).
    Unknown,
    /// Deleted by the client or evicted.
    Ended,
}

/// The live sessions of a server: mints, looks up, restores and ends them.
pub struct Sessions {
    sealer: SealingKey,
    config: SessionConfig,
    /// Looked up on every legacy request: a fast hash, seeded per process (so ids a
    /// client picks cannot be made to collide), rather than SipHash.
    live: Mutex<LiveSessions>,
    /// Ended ids of restored sessions, and the order they ended in (oldest forgotten
    /// first, in O(1)).
    ended: Mutex<(HashSet<String>, VecDeque<String>)>,
    epoch: Instant,
    /// When this process started, in Unix milliseconds.
    started_ms: u64,
    /// A random tag this process puts in the ids it mints: an id with another tag was
    /// minted before a restart or by another replica, and may be restored.
    instance: [u8; INSTANCE_TAG_LEN],
    /// Where a session this replica ends (idle, or giving way at the cap) is announced,
    /// so the others refuse it too.
    notifier: Notifier,
}

impl Sessions {
    /// No sessions yet: ids are tagged with a key derived from `secret`, sessions this
    /// replica ends are announced on `notifier`, and ids the ledger lists as ended stay
    /// ended.
    pub fn new(secret: Option<&str>, config: SessionConfig, notifier: Notifier) -> Self {
        let sessions = Sessions {
            notifier,
            sealer: SealingKey::new(secret, "session-id"),
            config,
            live: Mutex::default(),
            ended: Mutex::default(),
            epoch: Instant::now(),
            started_ms: unix_ms(),
            instance: rand::random(),
        };
        if let Some(ledger) = &sessions.config.ledger {
            for id in ledger.ended() {
                sessions.remember_ended(id);
            }
        }
        sessions
    }

    /// Whether an id minted at `minted_ms` is past its maximum age.
    fn too_old(&self, minted_ms: u64) -> bool {
        unix_ms().saturating_sub(minted_ms) > self.config.max_age.as_millis() as u64
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Mints a session for a client that just initialized; `Err` when every session is
    /// taken and none may give way to this one (see `Sessions::insert`).
    pub fn create(
        &self,
        version: &'static str,
        caps: Value,
        access: Access,
    ) -> Result<Arc<Session>, SessionsFull> {
        let version_index = LEGACY_VERSIONS
            .iter()
            .position(|v| *v == version)
            .unwrap_or(LEGACY_VERSIONS.len() - 1) as u8;
        let minted_ms = unix_ms().max(self.started_ms);
        let mut payload = Vec::with_capacity(22);
        payload.push(version_index);
        payload.push(caps_to_bits(&caps) | access_bit(access));
        payload.extend_from_slice(&minted_ms.to_be_bytes());
        payload.extend_from_slice(&self.instance);
        payload.extend_from_slice(&rand::random::<[u8; 12 - INSTANCE_TAG_LEN]>());
        let id = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(self.sealer.tag(&payload))
        );
        let minted = Minted {
            version,
            client_capabilities: caps,
            access,
            minted_ms,
            instance: self.instance,
        };
        let session = Arc::new(Session::new(
            id.clone(),
            minted,
            false,
            self.now(),
            self.config.streams,
        ));
        if !self.insert(session.clone()) {
            return Err(SessionsFull {
                cap: self.config.max_sessions,
            });
        }
        Ok(session)
    }

    /// Finds a session, restoring one minted before a restart from its id.
    pub fn get(&self, id: &str) -> Lookup {
        self.find(id, None)
    }

    /// [`Sessions::get`] for a request carrying a token of `access`: a session opened
    /// with the other token is unknown to it, so one client's token can neither read
    /// another's session stream nor end its session.
    pub fn get_for(&self, id: &str, access: Access) -> Lookup {
        self.find(id, Some(access))
    }

    /// The live session `id`, or the one it restores; with `access`, only one opened with
    /// that token. Only ids whose seal verified enter the table, so a live one is found
    /// without verifying it again (this runs on every legacy request).
    fn find(&self, id: &str, access: Option<Access>) -> Lookup {
        let opened_with = |session_access: Access| access.is_none_or(|a| a == session_access);
        // Bound first: the table's lock must be released before `end` takes it again.
        let live = lock(&self.live).get(id).cloned();
        if let Some(session) = live {
            if !opened_with(session.access) {
                return Lookup::Unknown;
            }
            if self.too_old(session.minted_ms) {
                tracing::info!(target: SESSION_TARGET, session = %short(id), "ended an MCP session past its maximum age (MCP_SESSION_MAX_AGE_SECS)");
                self.end(id);
                return Lookup::Ended;
            }
            session.touch(self.now());
            self.share_seen(&session);
            return Lookup::Found(session);
        }
        let Some(minted) = self.verify(id) else {
            return Lookup::Unknown;
        };
        if !opened_with(minted.access) {
            return Lookup::Unknown;
        }
        if minted.instance == self.instance
            || self.too_old(minted.minted_ms)
            || lock(&self.ended).0.contains(id)
        {
            return Lookup::Ended;
        }
        let session = Arc::new(Session::new(
            id.to_string(),
            minted,
            true,
            self.now(),
            self.config.streams,
        ));
        if !self.insert(session.clone()) {
            // No room for it: the client starts over, and `initialize` says why.
            return Lookup::Ended;
        }
        tracing::info!(target: SESSION_TARGET, session = %short(id), version = session.version, "restored an MCP session minted before a restart or by another replica");
        self.share_seen(&session);
        Lookup::Found(session)
    }

    /// What a genuine id says; `None` for a forged, altered or malformed one.
    fn verify(&self, id: &str) -> Option<Minted> {
        let (payload, tag) = id.split_once('.')?;
        // Decoded on the stack (this runs on every legacy request); anything longer than
        // the buffers is no id of ours.
        let (mut payload_buffer, mut tag_buffer) = ([0u8; 32], [0u8; 32]);
        let payload_len = URL_SAFE_NO_PAD
            .decode_slice(payload, &mut payload_buffer)
            .ok()?;
        let tag_len = URL_SAFE_NO_PAD.decode_slice(tag, &mut tag_buffer).ok()?;
        let (payload, tag) = (&payload_buffer[..payload_len], &tag_buffer[..tag_len]);
        if payload.len() != 22 || !self.sealer.verify(payload, tag) {
            return None;
        }
        Some(Minted {
            version: LEGACY_VERSIONS.get(payload[0] as usize)?,
            client_capabilities: bits_to_caps(payload[1]),
            access: bit_to_access(payload[1]),
            minted_ms: u64::from_be_bytes(payload[2..10].try_into().ok()?),
            instance: payload[10..10 + INSTANCE_TAG_LEN].try_into().ok()?,
        })
    }

    /// Ends a session (DELETE); its id answers 404 from now on.
    pub fn end(&self, id: &str) -> bool {
        let removed = remove_live(&mut lock(&self.live), id);
        if let Some(session) = &removed {
            session.close_streams();
        }
        let existed = removed.is_some() || self.verify(id).is_some();
        if existed {
            self.forget(id.to_string());
        }
        existed
    }

    /// How often the idle sweep runs ([`SessionConfig::sweep_interval`]).
    pub fn sweep_interval(&self) -> std::time::Duration {
        self.config.sweep_interval()
    }

    /// How many sessions are live in this process.
    pub fn live_count(&self) -> usize {
        lock(&self.live).len()
    }

    /// Every live session (for notification fan-out).
    pub fn all(&self) -> Vec<Arc<Session>> {
        lock(&self.live).values().cloned().collect()
    }
}

type LiveSessions = HashMap<String, Arc<Session>, foldhash::fast::RandomState>;

/// Removes a live session. The table gives memory back once it is mostly empty (a hash
/// map never shrinks by itself), halving at most as often as it emptied, so the cost
/// stays O(1) per removal.
fn remove_live(live: &mut LiveSessions, id: &str) -> Option<Arc<Session>> {
    let removed = live.remove(id);
    if live.capacity() > 64 && live.len() * 4 < live.capacity() {
        live.shrink_to(live.len() * 2);
    }
    removed
}

/// A request of a session that can still be cancelled; dropping it forgets the request.
pub struct Tracked {
    session: Arc<Session>,
    key: InFlightKey,
}

/// A request id as the key of the requests in flight: the id's JSON text, so `7` and
/// `"7"` stay apart, except that an integer id (most are) is kept as its number, not
/// written out into a string on every request.
#[derive(Clone, PartialEq, Eq, Hash)]
enum InFlightKey {
    Integer(i128),
    Text(String),
}

impl InFlightKey {
    fn of(id: &Value) -> InFlightKey {
        match id.as_i64().map(i128::from).or(id.as_u64().map(i128::from)) {
            Some(n) => InFlightKey::Integer(n),
            // Other numbers never print as bare digits (`7.0`, `1e300`), so no text
            // key equals an integer's.
            None => InFlightKey::Text(id.to_string()),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        lock(&self.session.in_flight).remove(&self.key);
    }
}

#[cfg(test)]
mod tests;
