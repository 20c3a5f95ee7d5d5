//! One Streamable HTTP endpoint as the connection uses it: POSTing a message and
//! reading its answer from a JSON body or an SSE stream, acting on the notifications
//! and answering the requests the server sends on the way, and the background stream
//! that carries its notifications. The era and session logic lives in `http.rs`.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::events::{ConnEvent, handle_notification, shorten};
use super::http_client::transport_error;
use super::jsonrpc::{self, CallError, Incoming, MODERN_VERSION};
use crate::protocol::{
    HEADER_METHOD, HEADER_SESSION_ID, META_CLIENT_CAPABILITIES, META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
};
use crate::sse_decoder::SseDecoder;

const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// Where to send requests, and the configured headers.
#[derive(Clone)]
pub(super) struct Endpoint {
    pub(super) server: String,
    pub(super) client: reqwest::Client,
    pub(super) url: reqwest::Url,
    pub(super) headers: HeaderMap,
    pub(super) events: mpsc::UnboundedSender<ConnEvent>,
}

/// Why a POST did not produce the answer.
#[derive(Debug)]
pub(super) enum PostError {
    /// The server answered with a non-success HTTP status.
    Status {
        status: u16,
        rpc: Option<CallError>,
        text: String,
    },
    Call(CallError),
}

impl PostError {
    pub(super) fn into_call_error(self) -> CallError {
        match self {
            PostError::Status {
                rpc: Some(error), ..
            } => error,
            PostError::Status { status, text, .. } => {
                CallError::Protocol(if text.trim().is_empty() {
                    format!("HTTP status {status}")
                } else {
                    format!("HTTP status {status}: {}", shorten(text.trim()))
                })
            }
            PostError::Call(error) => error,
        }
    }
}

/// A successful POST: the matching response (none for notifications) and the
/// session id the server set, if any.
pub(super) struct Posted {
    pub(super) value: Option<Value>,
    pub(super) session: Option<String>,
}

/// The `_meta` every modern request carries.
pub(super) fn modern_meta() -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(META_PROTOCOL_VERSION.into(), json!(MODERN_VERSION));
    meta.insert(META_CLIENT_CAPABILITIES.into(), json!({}));
    meta.insert(META_CLIENT_INFO.into(), json!(jsonrpc::client_info()));
    meta
}

impl Endpoint {
    pub(super) fn builder(
        &self,
        request: reqwest::RequestBuilder,
        headers: &[(String, String)],
    ) -> reqwest::RequestBuilder {
        let mut request = request.headers(self.headers.clone());
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request
    }

    /// POSTs one message. With `expect_id`, waits for the response with that id (from a
    /// JSON body or an SSE stream); without, any success status will do.
    pub(super) async fn post(
        &self,
        body: &Value,
        headers: &[(String, String)],
        expect_id: Option<u64>,
    ) -> Result<Posted, PostError> {
        let request = self
            .builder(self.client.post(self.url.clone()), headers)
            .header(ACCEPT, ACCEPT_BOTH)
            .header(CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).unwrap_or_default());
        let response = request
            .send()
            .await
            .map_err(|e| PostError::Call(transport_error(&e)))?;
        let session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if !response.status().is_success() {
            return Err(refusal(response).await);
        }
        let value = match expect_id {
            Some(id) => Some(self.read_answer(response, id, headers).await?),
            None => None,
        };
        Ok(Posted { value, session })
    }

    /// Reads the answer to request `id` from a JSON body or an SSE stream, acting on
    /// whatever else the server sends on the way.
    async fn read_answer(
        &self,
        mut response: reqwest::Response,
        id: u64,
        headers: &[(String, String)],
    ) -> Result<Value, PostError> {
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));

        let mut decoder = SseDecoder::default();
        let mut body = Vec::new();
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| PostError::Call(transport_error(&e)))?;
            let Some(chunk) = chunk else { break };
            if is_sse {
                for data in decoder.push(&chunk) {
                    if let Some(answer) = self.take_message(&data, id, headers) {
                        return answer;
                    }
                }
                if decoder.pending_len() > jsonrpc::MAX_MESSAGE_BYTES {
                    return Err(PostError::Call(CallError::Protocol(
                        "an SSE event from the server is too large".into(),
                    )));
                }
            } else {
                body.extend_from_slice(&chunk);
                if body.len() > jsonrpc::MAX_MESSAGE_BYTES {
                    return Err(PostError::Call(CallError::Protocol(format!(
                        "the server's answer is over {} bytes",
                        jsonrpc::MAX_MESSAGE_BYTES
                    ))));
                }
            }
        }
        let leftover = if is_sse {
            decoder.finish()
        } else {
            Some(String::from_utf8_lossy(&body).into_owned())
        };
        if let Some(answer) = leftover.and_then(|data| self.take_message(&data, id, headers)) {
            return answer;
        }
        Err(PostError::Call(CallError::Protocol(
            "the server's reply did not contain the answer to the request".into(),
        )))
    }

    /// Handles one received JSON text (a message or a batch); returns the outcome of
    /// the response with id `ours` if it is among them.
    fn take_message(
        &self,
        data: &str,
        ours: u64,
        headers: &[(String, String)],
    ) -> Option<Result<Value, PostError>> {
        let data = data.trim();
        if data.is_empty() {
            return None;
        }
        let messages = match serde_json::from_str::<Value>(data) {
            Ok(Value::Array(batch)) => batch,
            Ok(message) => vec![message],
            Err(e) => {
                return Some(Err(PostError::Call(CallError::Protocol(format!(
                    "the server sent invalid JSON: {e}"
                )))));
            }
        };
        let mut found = None;
        for message in messages {
            match jsonrpc::classify(message) {
                Incoming::Response { id, outcome } if jsonrpc::id_matches(&id, ours) => {
                    found = Some(outcome.map_err(PostError::Call));
                }
                other => self.handle_other(other, headers),
            }
        }
        found
    }

    /// A message that is not the awaited answer: notifications are acted on, requests
    /// from the server answered.
    fn handle_other(&self, message: Incoming, headers: &[(String, String)]) {
        match message {
            Incoming::Notification { method, params } => {
                handle_notification(&self.server, &method, &params, &self.events);
            }
            Incoming::Request { id, method } => {
                let answer = jsonrpc::answer_server_request(&id, &method);
                let endpoint = self.clone();
                let headers = headers.to_vec();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(
                        Duration::from_secs(10),
                        endpoint.post(&answer, &headers, None),
                    )
                    .await;
                });
            }
            Incoming::Response { id, .. } => {
                tracing::debug!(server = %self.server, %id, "answer to an unknown request ignored");
            }
            Incoming::Invalid => {
                tracing::debug!(server = %self.server, "invalid JSON-RPC message ignored");
            }
        }
    }

    /// Reads the server's notification stream until it ends: `subscriptions/listen` in
    /// the modern era, the GET stream in the legacy one. Servers without one are fine.
    pub(super) async fn listen(self, modern: bool, id: u64, mut headers: Vec<(String, String)>) {
        let request = if modern {
            headers.push((HEADER_METHOD.into(), "subscriptions/listen".into()));
            let params = jsonrpc::with_meta(
                json!({"notifications": {"toolsListChanged": true}}),
                &modern_meta(),
            );
            self.builder(self.client.post(self.url.clone()), &headers)
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, ACCEPT_BOTH)
                .body(
                    serde_json::to_vec(&jsonrpc::request(id, "subscriptions/listen", params))
                        .unwrap_or_default(),
                )
        } else {
            self.builder(self.client.get(self.url.clone()), &headers)
                .header(ACCEPT, "text/event-stream")
        };
        let mut response = match request.send().await {
            Ok(response) if response.status().is_success() => response,
            Ok(response) => {
                tracing::debug!(server = %self.server, status = %response.status(), "no notification stream from this MCP server");
                return;
            }
            Err(e) => {
                tracing::debug!(server = %self.server, error = %transport_error(&e), "cannot open the notification stream");
                return;
            }
        };
        let mut decoder = SseDecoder::default();
        while let Ok(Some(chunk)) = response.chunk().await {
            for data in decoder.push(&chunk) {
                // Our own id never answers a listen stream except at its end.
                if let Some(ending) = self.take_message(&data, id, &headers) {
                    tracing::debug!(server = %self.server, ended = ?ending.is_ok(), "notification stream ended by the server");
                    return;
                }
            }
            if decoder.pending_len() > jsonrpc::MAX_MESSAGE_BYTES {
                break;
            }
        }
        tracing::debug!(server = %self.server, "notification stream closed");
    }
}

/// The error of a POST the server refused: its status, its body (at most
/// [`MAX_ERROR_BODY`](crate::http_client::MAX_ERROR_BODY)) and the JSON-RPC error in
/// the body, if any.
async fn refusal(response: reqwest::Response) -> PostError {
    let status = response.status();
    let text = crate::http_client::error_body(response).await;
    let rpc = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("error").map(CallError::from_error_object));
    PostError::Status {
        status: status.as_u16(),
        rpc,
        text,
    }
}
