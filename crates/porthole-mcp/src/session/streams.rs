//! A session's SSE streams: each numbered event kept in a short backlog so a client that
//! lost the connection can resume with `Last-Event-ID`, the newest GET stream as the
//! home of session-wide notifications, and finished streams kept for late resumption.

use super::*;

/// A sender for one SSE stream's raw bytes.
pub type StreamSender = mpsc::UnboundedSender<Bytes>;
pub type StreamReceiver = mpsc::UnboundedReceiver<Bytes>;

pub(super) struct EventStream {
    pub(super) next_seq: u64,
    pub(super) backlog: VecDeque<(u64, Bytes)>,
    pub(super) live: Option<StreamSender>,
    pub(super) finished: bool,
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
                live: Some(tx.clone()),
                finished: false,
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
        if s.backlog.len() == BACKLOG {
            s.backlog.pop_front();
        }
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

    /// Drops a stream whose client went away, unless it still has work pending.
    pub fn close_notification_stream(&self, stream: u64) {
        let mut streams = lock(&self.streams);
        streams.map.remove(&stream);
        if streams.notifications == Some(stream) {
            streams.notifications = None;
        }
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
