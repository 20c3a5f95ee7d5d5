//! Requests waiting for answers that arrive on a stream of their own — the stdout of a
//! stdio server, the event stream of an HTTP+SSE server — shared by both transports:
//! registering a request, matching each incoming message to the request it answers,
//! failing every waiting request when the stream ends, and sorting out what else a
//! server sends (its own requests, notifications).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::events::{ConnEvent, handle_notification, shorten};
use super::jsonrpc::{self, CallError, Incoming};
use crate::bot::lock;

type Reply = oneshot::Sender<Result<Value, CallError>>;

#[derive(Default)]
struct State {
    waiting: HashMap<u64, Reply>,
    /// Why the stream ended, once it has.
    closed: Option<String>,
}

/// The requests of one connection that wait for their answers.
#[derive(Default)]
pub(crate) struct Pending {
    state: Mutex<State>,
}

impl Pending {
    /// Registers request `id`, sends it with `send`, and waits at most `timeout` for
    /// its answer. The request is forgotten however this ends (answer, error, timeout,
    /// or the future being dropped).
    pub(crate) async fn request(
        &self,
        id: u64,
        timeout: Duration,
        send: impl Future<Output = Result<(), CallError>>,
    ) -> Result<Value, CallError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut state = lock(&self.state);
            if let Some(reason) = &state.closed {
                return Err(CallError::Lost(reason.clone()));
            }
            state.waiting.insert(id, tx);
        }
        let _forget = Forget { pending: self, id };
        send.await?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(CallError::Lost("the connection closed".into())),
            Err(_) => Err(CallError::Timeout(timeout)),
        }
    }

    /// Marks the connection closed and fails every waiting request with `reason`.
    /// Returns false if it was already closed.
    pub(crate) fn fail_all(&self, reason: String) -> bool {
        let mut state = lock(&self.state);
        if state.closed.is_some() {
            return false;
        }
        state.closed = Some(reason.clone());
        for (_, reply) in state.waiting.drain() {
            let _ = reply.send(Err(CallError::Lost(reason.clone())));
        }
        true
    }

    /// Handles one message the server sent (its JSON text): an answer goes to its
    /// request, a notification to `events`. A request from the server returns the
    /// answer to send back.
    pub(crate) fn route(
        &self,
        server: &str,
        text: &str,
        events: &mpsc::UnboundedSender<ConnEvent>,
    ) -> Option<Value> {
        let Ok(message) = serde_json::from_str::<Value>(text) else {
            tracing::warn!(
                server,
                "the MCP server sent something that is not JSON: {}",
                shorten(text)
            );
            return None;
        };
        match jsonrpc::classify(message) {
            Incoming::Response { id, outcome } => {
                let reply = id
                    .as_u64()
                    .or_else(|| id.as_str().and_then(|s| s.parse().ok()))
                    .and_then(|id| lock(&self.state).waiting.remove(&id));
                match reply {
                    Some(reply) => {
                        let _ = reply.send(outcome);
                    }
                    None => {
                        tracing::debug!(server, %id, "answer to an unknown or abandoned request")
                    }
                }
                None
            }
            Incoming::Request { id, method } => Some(jsonrpc::answer_server_request(&id, &method)),
            Incoming::Notification { method, params } => {
                handle_notification(server, &method, &params, events);
                None
            }
            Incoming::Invalid => {
                tracing::warn!(
                    server,
                    "the MCP server sent an invalid JSON-RPC message: {}",
                    shorten(text)
                );
                None
            }
        }
    }
}

struct Forget<'a> {
    pending: &'a Pending,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.pending.state).waiting.remove(&self.id);
    }
}
