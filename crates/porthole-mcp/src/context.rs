//! What a handler knows about the request it serves, and what it can send back while it
//! runs: progress and log notifications, legacy server→client requests (sampling,
//! elicitation, roots), and the modern multi-round-trip inputs (MRTR).
//!
//! Anything sent through the context before the result turns the HTTP response into an
//! SSE stream (when the client accepts one); otherwise the result goes back as plain JSON.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::caller::Caller;
use super::guard::Access;
use super::jsonrpc::{self, RpcError};
use super::protocol::{Era, log_level_rank};
use super::seal::SealingKey;
use super::session::Session;
use porthole_core::redact::Redactor;
use porthole_core::trace_context::{CLIENT_NAME, CLIENT_VERSION, CallerTag, TraceParent};

/// How long a legacy server→client request waits for the client's answer.
const CLIENT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// What a handler sends on its request's response stream.
#[derive(Debug)]
pub(crate) enum StreamEvent {
    /// A JSON-RPC message (notification or server→client request).
    Message(Value),
    /// Legacy era: close the HTTP connection now; the rest of the stream (result
    /// included) waits for the client to resume with `Last-Event-ID`.
    Disconnect,
}

pub(crate) type Outbound = mpsc::UnboundedSender<StreamEvent>;

/// One request as its handler sees it (era, access, client capabilities, session), and
/// the way back to the client while the handler runs.
pub struct RequestContext {
    /// The request's era and protocol version.
    pub era: Era,
    /// What the request's token allows.
    pub access: Access,
    /// The client's declared capabilities (`initialize` or `_meta`).
    pub client_capabilities: Value,
    /// The legacy session the request belongs to; `None` in the modern era and for a
    /// request sent without a session.
    pub session: Option<Arc<Session>>,
    /// The JSON-RPC id of the request.
    pub request_id: Value,
    pub(crate) progress_token: Option<Value>,
    /// Minimum severity of log notifications the client wants; `None` = none.
    pub(crate) log_threshold: Option<u8>,
    pub(crate) outbound: Option<Outbound>,
    /// MRTR (modern): the client's answers to earlier input requests.
    pub input_responses: Option<Map<String, Value>>,
    pub(crate) request_state: Option<String>,
    pub(crate) sealer: Arc<SealingKey>,
    /// Notifications carry text from the bot too (progress messages, log data).
    pub(crate) redactor: Arc<Redactor>,
    /// Who is calling: the owner of the tasks it creates (see [`Caller`]).
    pub(crate) caller: Caller,
    /// The call runs as a task (its request has been answered with a handle).
    pub(crate) in_task: bool,
    /// The caller's W3C `traceparent` from `_meta` (either era), else from the
    /// `traceparent` header, when valid.
    pub(crate) trace_parent: Option<TraceParent>,
    /// What the caller says about itself: client name and version, its ids for the call.
    pub(crate) caller_tag: Option<Arc<CallerTag>>,
}

/// The `traceparent` of a request's `_meta`; an invalid one is ignored, as the W3C
/// specification asks (the work then starts a trace of its own).
pub(super) fn trace_parent(meta: &Value) -> Option<TraceParent> {
    meta.get("traceparent")
        .and_then(Value::as_str)
        .and_then(TraceParent::parse)
}

/// What a caller says about itself on one request: its client's name and version (the
/// session's, from `initialize`, else the request's `_meta` `clientInfo`) and the ids
/// its `_meta` gives the call. A session's own tag is shared, not copied, by its calls
/// that give no ids.
pub(super) fn caller_tag<'a>(
    session: Option<&'a Session>,
    client_info: (Option<&'a str>, Option<&'a str>),
    ids: impl IntoIterator<Item = (&'static str, &'a str)>,
) -> Option<Arc<CallerTag>> {
    let known = session.and_then(|s| s.client_tag.get());
    let mut ids = ids.into_iter().peekable();
    if ids.peek().is_none()
        && let Some(known) = known
    {
        return Some(known.clone());
    }
    let (name, version) = match known {
        Some(tag) => (tag.get(CLIENT_NAME), tag.get(CLIENT_VERSION)),
        None => client_info,
    };
    CallerTag::new(name, version, ids).map(Arc::new)
}

/// [`caller_tag`] from a `_meta` read as a `Value`.
pub(super) fn caller_tag_of_meta(
    session: Option<&Session>,
    meta: Option<&Value>,
) -> Option<Arc<CallerTag>> {
    let info = meta.and_then(|m| m.get(super::protocol::META_CLIENT_INFO));
    let text = |key: &str| info.and_then(|i| i.get(key)).and_then(Value::as_str);
    let ids = porthole_core::trace_context::CALLER_ID_KEYS
        .into_iter()
        .filter_map(|key| Some((key, meta?.get(key)?.as_str()?)));
    caller_tag(session, (text("name"), text("version")), ids)
}

impl RequestContext {
    /// The caller's trace, so the work this request starts joins it as a child.
    pub fn trace_parent(&self) -> Option<TraceParent> {
        self.trace_parent.clone()
    }

    /// What the caller says about itself (client, its ids for the call), for the span
    /// of the work this request starts.
    pub fn caller_tag(&self) -> Option<Arc<CallerTag>> {
        self.caller_tag.clone()
    }

    /// Whether the client declared a capability (`sampling`, `elicitation`, `roots`…).
    pub fn has_capability(&self, name: &str) -> bool {
        self.client_capabilities
            .get(name)
            .is_some_and(|v| !v.is_null())
    }

    /// Whether the client declared the Tasks extension on this request (modern era).
    pub fn declares_tasks(&self) -> bool {
        self.client_capabilities["extensions"]
            .get(super::protocol::TASKS_EXTENSION)
            .is_some_and(Value::is_object)
    }

    /// Whether the client asked for progress (sent a `progressToken`).
    pub fn wants_progress(&self) -> bool {
        self.progress_token.is_some()
    }

    /// Sends `notifications/progress` if the client asked for progress.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        let mut params = json!({"progressToken": token, "progress": progress});
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        if let Some(message) = message {
            params["message"] = json!(message);
        }
        self.send(jsonrpc::notification("notifications/progress", params));
    }

    /// Sends `notifications/message` if the client wants messages at `level`.
    pub fn log(&self, level: &str, logger: &str, data: Value) {
        let (Some(threshold), Some(rank)) = (self.log_threshold, log_level_rank(level)) else {
            return;
        };
        if rank >= threshold {
            self.send(jsonrpc::notification(
                "notifications/message",
                json!({"level": level, "logger": logger, "data": data}),
            ));
        }
    }

    /// Whether this request could send anything before its result: progress needs the
    /// client's token, log lines its threshold, and the legacy era may also send
    /// server→client requests or a disconnect. Keep in step with the senders here.
    pub(crate) fn may_send(&self) -> bool {
        self.progress_token.is_some() || self.log_threshold.is_some() || !self.era.is_modern()
    }

    fn send(&self, mut message: Value) {
        self.redactor.redact(&mut message);
        if let Some(out) = &self.outbound {
            // The stream may be gone (client left); the work goes on regardless.
            let _ = out.send(StreamEvent::Message(message));
        }
    }

    /// Legacy era: ends the client's current SSE connection mid-request (after the
    /// priming event told it how to resume). The work goes on; its remaining events,
    /// result included, are replayed when the client reconnects with `GET` and
    /// `Last-Event-ID`. Does nothing in the modern era or without an SSE stream.
    pub fn disconnect_stream(&self) {
        if let (Era::Legacy(_), Some(out)) = (&self.era, &self.outbound) {
            let _ = out.send(StreamEvent::Disconnect);
        }
    }

    /// Whether this request can put a question to the client (elicitation, sampling):
    /// the client declared `capability`, and the request has a way to reach it (the
    /// modern era's input requests; in the legacy era, this request's SSE stream, which
    /// a client that accepts only JSON, or a 2025-11-25 task, does not have).
    pub fn can_ask_client(&self, capability: &str) -> bool {
        self.has_capability(capability)
            && match self.era {
                Era::Modern(_) => true,
                Era::Legacy(_) => {
                    self.session.is_some() && self.outbound.is_some() && !self.in_task
                }
            }
    }

    /// Legacy era: sends a request to the client on this request's stream and waits for
    /// its answer (sampling, elicitation, roots). Fails when the client did not declare
    /// the capability, when there is no session, or in the modern era (use MRTR).
    pub async fn request_client(
        &self,
        method: &str,
        params: Value,
        capability: &str,
    ) -> Result<Value, RpcError> {
        if self.in_task && !self.era.is_modern() {
            return Err(RpcError::internal(format!(
                "`{method}` needs a stream to the client, which a 2025-11-25 task does not have: \
                 call the tool without `task`, or use protocol 2026-07-28, whose tasks take input through tasks/update"
            )));
        }
        let (Era::Legacy(_), Some(session)) = (&self.era, &self.session) else {
            return Err(RpcError::internal(format!(
                "`{method}` can only be sent to a client in a legacy session"
            )));
        };
        if self.outbound.is_none() {
            return Err(RpcError::internal(format!(
                "`{method}` needs an SSE stream to the client: send the request with \
                 `Accept: application/json, text/event-stream`"
            )));
        }
        if !self.has_capability(capability) {
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!(
                    "the client did not declare the `{capability}` capability needed for `{method}`"
                ),
            ));
        }
        let (id, answer) = session.register_client_request();
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            request["params"] = params;
        }
        self.send(request);
        match tokio::time::timeout(CLIENT_REQUEST_TIMEOUT, answer).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => Err(RpcError::internal(format!(
                "the client answered `{method}` with an error: {error}"
            ))),
            Ok(Err(_)) => Err(RpcError::internal(
                "the session ended before the client answered",
            )),
            Err(_) => {
                session.forget_client_request(&id);
                Err(RpcError::internal(format!(
                    "the client did not answer `{method}` within {} s",
                    CLIENT_REQUEST_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// MRTR: the verified `requestState` the client echoed, or `None` if it sent none.
    /// A state that was altered is a `-32602` error.
    pub fn request_state(&self) -> Result<Option<Value>, RpcError> {
        match &self.request_state {
            None => Ok(None),
            Some(token) => self.sealer.open(token).map(Some),
        }
    }

    /// MRTR: seals `state` so the client can echo it back without being able to alter it.
    pub fn seal_state(&self, state: &Value) -> String {
        self.sealer.seal(state)
    }

    /// MRTR: the client's answer for `key`, if it sent one.
    pub fn input_response(&self, key: &str) -> Option<&Value> {
        self.input_responses.as_ref()?.get(key)
    }
}
