//! A session's SSE streams: each numbered event kept in a short backlog (bounded in
//! events and bytes, [`StreamLimits`](super::StreamLimits)) so a client that lost the
//! connection can resume with `Last-Event-ID`, the newest GET stream as the home of
//! session-wide notifications (still fed for
//! [`StreamLimits::resume_window`](super::StreamLimits::resume_window) after its client
//! left, so a reconnect loses nothing), and finished streams kept for late resumption.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{FINISHED_STREAMS_KEPT, RETRY_MS, Session, lock};

/// A sender for one SSE stream's raw bytes.
pub type StreamSender = mpsc::UnboundedSender<Bytes>;
/// A receiver for one SSE stream's raw bytes: what its response body sends.
pub type StreamReceiver = mpsc::UnboundedReceiver<Bytes>;

pub(super) struct EventStream {
    pub(super) next_seq: u64,
    pub(super) backlog: VecDeque<(u64, Bytes)>,
    /// The bytes the backlog holds.
    pub(super) backlog_bytes: usize,
    pub(super) live: Option<StreamSender>,
    pub(super) finished: bool,
    /// When its client was last seen gone (a `GET` stream waiting for a resume).
    pub(super) left_at: Option<Instant>,
}

#[derive(Default)]
pub(super) struct Streams {
    pub(super) next_id: u64,
    pub(super) map: HashMap<u64, EventStream>,
    /// The newest GET stream: where session-wide notifications go.
    pub(super) notifications: Option<u64>,
    pub(super) finished: VecDeque<u64>,
}

pub(super) fn frame(id: &str, data: &str) -> Bytes {
    Bytes::from(format!("id: {id}\nevent: message\ndata: {data}\n\n"))
}

/// The first line of a `GET` stream opened for a `Last-Event-ID` this session no longer
/// holds: an SSE comment (clients skip it) that says why nothing was replayed.
pub(super) const NOT_RESUMED: &str = ": the stream of this Last-Event-ID is not held any more \
(it ended, its client stayed away longer than the resume window, or another replica \
served it): this is a new stream, and what was sent on the old one meanwhile is lost\n\n";

impl Session {
    /// Opens a new stream; returns its id and the receiver feeding the HTTP body.
    pub fn open_stream(&self, for_notifications: bool) -> (u64, StreamReceiver) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut streams = lock(&self.streams);
        streams.next_id += 1;
        let id = streams.next_id;
        streams.map.insert(
            id,
            EventStream {
                next_seq: 1,
                backlog: VecDeque::new(),
                backlog_bytes: 0,
                live: Some(tx.clone()),
                finished: false,
                left_at: None,
            },
        );
        if for_notifications {
            streams.notifications = Some(id);
        }
        drop(streams);
        if self.resumable() {
            // Priming event: gives the client an id to resume from and a retry delay.
            let _ = tx.send(Bytes::from(format!(
                "id: {id}-0\nretry: {RETRY_MS}\ndata: \n\n"
            )));
        }
        (id, rx)
    }

    /// Opens the session's `GET` notification stream; `lost` when the client asked to
    /// resume a stream this session no longer holds, which the stream's first lines
    /// then say (`NOT_RESUMED`).
    pub fn open_notification_stream(&self, lost: bool) -> (u64, StreamReceiver) {
        let (id, rx) = self.open_stream(true);
        if lost
            && let Some(live) = lock(&self.streams)
                .map
                .get(&id)
                .and_then(|s| s.live.as_ref())
        {
            let _ = live.send(Bytes::from_static(NOT_RESUMED.as_bytes()));
        }
        (id, rx)
    }

    /// Sends a JSON-RPC message on a stream (kept for replay).
    pub fn push(&self, stream: u64, message: &Value) {
        let data = serde_json::to_string(message).unwrap_or_default();
        let mut streams = lock(&self.streams);
        let Some(s) = streams.map.get_mut(&stream) else {
            return;
        };
        let seq = s.next_seq;
        s.next_seq += 1;
        let bytes = frame(&format!("{stream}-{seq}"), &data);
        let limits = self.stream_limits;
        while !s.backlog.is_empty()
            && (s.backlog.len() >= limits.backlog_events
                || s.backlog_bytes + bytes.len() > limits.backlog_bytes)
        {
            if let Some((_, old)) = s.backlog.pop_front() {
                s.backlog_bytes -= old.len();
            }
        }
        s.backlog_bytes += bytes.len();
        s.backlog.push_back((seq, bytes.clone()));
        if let Some(live) = &s.live
            && live.send(bytes).is_err()
        {
            s.live = None;
        }
    }

    /// Closes a stream's current connection but keeps the stream: later events wait
    /// in the backlog for a resume.
    pub fn detach(&self, stream: u64) {
        if let Some(s) = lock(&self.streams).map.get_mut(&stream) {
            s.live = None;
        }
    }

    /// Ends a stream: its body closes; its backlog stays for a late resume.
    pub fn finish(&self, stream: u64) {
        let mut streams = lock(&self.streams);
        if let Some(s) = streams.map.get_mut(&stream) {
            s.finished = true;
            s.live = None;
        }
        streams.finished.push_back(stream);
        while streams.finished.len() > FINISHED_STREAMS_KEPT {
            if let Some(old) = streams.finished.pop_front() {
                streams.map.remove(&old);
            }
        }
    }

    /// Whether `GET` stream `stream` is still worth feeding: it is the session's
    /// notification stream, and its client is connected or left less than the resume
    /// window ago. A stream that is not (another `GET` took its place, or its client
    /// stayed away too long) is dropped here, so its id answers no resume.
    pub fn keep_notification_stream(&self, stream: u64) -> bool {
        let mut streams = lock(&self.streams);
        let current = streams.notifications == Some(stream);
        let waited_out = match streams.map.get_mut(&stream) {
            None => return false,
            Some(_) if !current => true,
            Some(s) if s.live.as_ref().is_some_and(|live| !live.is_closed()) => {
                s.left_at = None;
                false
            }
            Some(s) => {
                let left = *s.left_at.get_or_insert_with(Instant::now);
                left.elapsed() >= self.stream_limits.resume_window
            }
        };
        if waited_out {
            streams.map.remove(&stream);
            if current {
                streams.notifications = None;
            }
        }
        !waited_out
    }

    /// Whether a client holds the session's GET stream open right now.
    pub(super) fn listening(&self) -> bool {
        let streams = lock(&self.streams);
        streams
            .notifications
            .and_then(|id| streams.map.get(&id))
            .and_then(|stream| stream.live.as_ref())
            .is_some_and(|live| !live.is_closed())
    }

    /// Sends a session-wide notification, but only on the newest GET stream: a message
    /// must go out on one stream, not be broadcast to several.
    pub fn push_if_current(&self, stream: u64, message: &Value) {
        let current = lock(&self.streams).notifications == Some(stream);
        if current {
            self.push(stream, message);
        }
    }

    /// `GET` with `Last-Event-ID: <stream>-<seq>`: replays what followed on that stream
    /// and keeps delivering to the new connection. `None` if the id is unknown.
    pub fn resume(&self, last_event_id: &str) -> Option<StreamReceiver> {
        let (stream, seq) = last_event_id.trim().split_once('-')?;
        let (stream, seq): (u64, u64) = (stream.parse().ok()?, seq.parse().ok()?);
        let mut streams = lock(&self.streams);
        let s = streams.map.get_mut(&stream)?;
        let (tx, rx) = mpsc::unbounded_channel();
        for (n, bytes) in &s.backlog {
            if *n > seq {
                let _ = tx.send(bytes.clone());
            }
        }
        if !s.finished {
            s.live = Some(tx);
        }
        Some(rx)
    }

    /// Ends every stream of the session (it was deleted or evicted): open GET streams
    /// and replies in flight close instead of idling on keep-alives.
    pub(super) fn close_streams(&self) {
        let mut streams = lock(&self.streams);
        streams.map.clear();
        streams.notifications = None;
        streams.finished.clear();
    }
}
