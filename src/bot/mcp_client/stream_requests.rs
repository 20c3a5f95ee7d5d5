//! The request side of the transports whose answers come back on a stream of their
//! own — the stdout of a stdio server, the event stream of an HTTP+SSE server:
//! numbering requests, waiting for each answer through [`Pending`], cancelling a
//! request that timed out, and the legacy `initialize` handshake. The two transports
//! differ only in how one message is sent, which they supply as a [`SendMessage`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use super::handshake::{handshake_error, initialize_params, negotiated_version};
use super::jsonrpc::{self, CallError};
use super::pending::Pending;

/// How a transport sends one message to its server.
pub(crate) trait SendMessage: Send + Sync {
    fn send(&self, message: &Value) -> impl Future<Output = Result<(), CallError>> + Send;
}

/// The requests of one connection, sent with `S` and answered on the stream that
/// feeds `pending`.
pub(crate) struct StreamRequests<S> {
    server: String,
    sender: S,
    pending: Arc<Pending>,
    next_id: AtomicU64,
    /// The server's limit for each request.
    timeout: Duration,
    protocol_version: OnceLock<String>,
}

impl<S: SendMessage> StreamRequests<S> {
    pub(crate) fn new(server: &str, sender: S, pending: Arc<Pending>, timeout: Duration) -> Self {
        StreamRequests {
            server: server.to_string(),
            sender,
            pending,
            next_id: AtomicU64::new(1),
            timeout,
            protocol_version: OnceLock::new(),
        }
    }

    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn sender(&self) -> &S {
        &self.sender
    }

    pub(crate) fn pending(&self) -> &Pending {
        &self.pending
    }

    /// The legacy handshake: `initialize`, then `notifications/initialized`.
    pub(crate) async fn handshake(&self) -> Result<(), String> {
        let result = self
            .request("initialize", initialize_params())
            .await
            .map_err(handshake_error)?;
        let version = negotiated_version(&self.server, &result)?;
        let _ = self.protocol_version.set(version);
        self.sender
            .send(&jsonrpc::notification("notifications/initialized", None))
            .await
            .map_err(|e| format!("cannot finish the handshake: {e}"))
    }

    pub(crate) fn protocol_version(&self) -> String {
        self.protocol_version
            .get()
            .cloned()
            .unwrap_or_else(|| jsonrpc::LEGACY_VERSION.to_string())
    }

    /// Sends a request and waits for its answer, at most the server's timeout; a
    /// request that timed out is cancelled so the server can stop working on it.
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = jsonrpc::request(id, method, params);
        let outcome = self
            .pending
            .request(id, self.timeout, self.sender.send(&message))
            .await;
        if let Err(CallError::Timeout(_)) = &outcome {
            let cancel = jsonrpc::notification(
                "notifications/cancelled",
                Some(json!({"requestId": id, "reason": "timed out"})),
            );
            let _ = self.sender.send(&cancel).await;
        }
        outcome
    }
}
