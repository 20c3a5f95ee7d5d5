//! The older HTTP+SSE transport (MCP 2024-11-05), spoken by servers configured with
//! `"type": "sse"`: a `GET` on the configured URL opens an event stream whose first
//! `endpoint` event names the URL to `POST` each JSON-RPC message to (usually relative,
//! with a session id in its query); every answer and notification then arrives as a
//! `message` event on that stream. The handshake is the legacy `initialize`.
//!
//! Answers are matched to requests by the shared `StreamRequests` and [`Pending`], as
//! for stdio, with a POST as the way to send; the stream ending fails what is waiting
//! and reports the connection lost. The endpoint must be on the same origin as the
//! stream, so configured headers (often credentials) are never sent to another host.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::events::{ConnEvent, shorten};
use super::http_client::{http_setup, redacted, transport_error};
use super::jsonrpc::{self, CallError};
use super::pending::Pending;
use super::stream_requests::{SendMessage, StreamRequests};
use crate::sse_decoder::SseDecoder;

/// Where messages go, and how.
#[derive(Clone)]
pub(crate) struct Poster {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
}

impl Poster {
    /// POSTs one message; the server acknowledges it (its answer comes on the stream).
    async fn post(&self, message: &Value) -> Result<(), CallError> {
        let response = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .json(message)
            .send()
            .await
            .map_err(|e| transport_error(&e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let text = crate::http_client::error_body(response).await;
        Err(CallError::Protocol(format!(
            "the server refused the message with HTTP status {}{}",
            status.as_u16(),
            if text.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", shorten(text.trim()))
            }
        )))
    }
}

impl SendMessage for Poster {
    fn send(&self, message: &Value) -> impl Future<Output = Result<(), CallError>> + Send {
        self.post(message)
    }
}

pub(crate) struct SseConn {
    requests: StreamRequests<Poster>,
    reader: JoinHandle<()>,
}

impl SseConn {
    /// Opens the stream and waits for the `endpoint` event, each step within `timeout`;
    /// `Conn::connect` then completes the handshake.
    pub(crate) async fn open(
        server: &str,
        url: &str,
        headers: &BTreeMap<String, String>,
        timeout: Duration,
        events: mpsc::UnboundedSender<ConnEvent>,
    ) -> Result<SseConn, String> {
        let (client, stream_url, headers) = http_setup(url, headers, timeout)?;
        let mut response = open_stream(&client, &stream_url, &headers, timeout).await?;
        let mut decoder = SseDecoder::default();
        let endpoint = tokio::time::timeout(timeout, read_endpoint(&mut response, &mut decoder))
            .await
            .map_err(|_| {
                format!(
                    "{} sent no `endpoint` event within {} ms (is it an HTTP+SSE server? for Streamable HTTP leave out \"type\": \"sse\")",
                    redacted(&stream_url),
                    timeout.as_millis()
                )
            })??;
        let poster = Poster {
            client,
            url: post_url(&stream_url, &endpoint)?,
            headers,
        };
        let pending: Arc<Pending> = Arc::default();
        let reader = tokio::spawn(read_stream(
            server.to_string(),
            response,
            decoder,
            pending.clone(),
            poster.clone(),
            events,
        ));
        let conn = SseConn {
            requests: StreamRequests::new(server, poster, pending, timeout),
            reader,
        };
        Ok(conn)
    }

    pub(crate) fn requests(&self) -> &StreamRequests<Poster> {
        &self.requests
    }

    /// Ends the connection: waiting requests fail at once, and closing the stream ends
    /// the server's session.
    pub(crate) async fn close(&self) {
        self.requests
            .pending()
            .fail_all("the connection was closed by porthole".into());
        self.reader.abort();
    }
}

impl Drop for SseConn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Opens the event stream (the `GET` on the configured URL).
async fn open_stream(
    client: &reqwest::Client,
    stream_url: &reqwest::Url,
    headers: &HeaderMap,
    timeout: Duration,
) -> Result<reqwest::Response, String> {
    let shown = redacted(stream_url);
    let response = tokio::time::timeout(
        timeout,
        client
            .get(stream_url.clone())
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send(),
    )
    .await
    .map_err(|_| format!("{shown} did not answer within {} ms", timeout.as_millis()))?
    .map_err(|e| format!("cannot reach {shown}: {}", transport_error(&e)))?;
    if !response.status().is_success() {
        return Err(format!(
            "{shown} answered HTTP status {} instead of an event stream",
            response.status().as_u16()
        ));
    }
    Ok(response)
}

/// Reads the stream up to its first `endpoint` event and returns that event's data.
async fn read_endpoint(
    response: &mut reqwest::Response,
    decoder: &mut SseDecoder,
) -> Result<String, String> {
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return Err("the stream ended before its `endpoint` event".to_string()),
            Err(e) => return Err(transport_error(&e).to_string()),
        };
        if let Some(endpoint) = decoder
            .push_events(&chunk)
            .into_iter()
            .find(|e| e.event == "endpoint")
        {
            return Ok(endpoint.data);
        }
        if decoder.pending_len() > jsonrpc::MAX_MESSAGE_BYTES {
            return Err("the stream sent too much before its `endpoint` event".into());
        }
    }
}

/// The URL the `endpoint` event names, which must be on the stream's own origin so
/// the configured headers (often credentials) never go to another host.
fn post_url(stream_url: &reqwest::Url, endpoint: &str) -> Result<reqwest::Url, String> {
    let post_url = stream_url
        .join(endpoint.trim())
        .map_err(|e| format!("the `endpoint` event is not a URL ({e})"))?;
    if post_url.origin() != stream_url.origin() {
        return Err(format!(
            "the server named an endpoint on another origin ({}); refusing to send it this server's headers",
            redacted(&post_url)
        ));
    }
    Ok(post_url)
}

/// Reads the event stream until it ends: `message` events go to [`Pending::route`],
/// requests from the server are answered with a POST. Then fails what is waiting and
/// reports the loss.
async fn read_stream(
    server: String,
    mut response: reqwest::Response,
    mut decoder: SseDecoder,
    pending: Arc<Pending>,
    poster: Poster,
    events: mpsc::UnboundedSender<ConnEvent>,
) {
    let reason = loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break "the server closed the event stream".to_string(),
            Err(e) => break transport_error(&e).to_string(),
        };
        for event in decoder.push_events(&chunk) {
            if event.event != "message" {
                tracing::debug!(server = %server, event = %event.event, "SSE event ignored");
                continue;
            }
            if let Some(answer) = pending.route(&server, &event.data, &events) {
                let poster = poster.clone();
                // Posted from a task so a slow POST never stalls reading.
                tokio::spawn(async move {
                    let _ = poster.post(&answer).await;
                });
            }
        }
        if decoder.pending_len() > jsonrpc::MAX_MESSAGE_BYTES {
            break format!(
                "the server sent an event over {} bytes",
                jsonrpc::MAX_MESSAGE_BYTES
            );
        }
    };
    if pending.fail_all(reason.clone()) {
        let _ = events.send(ConnEvent::Closed(reason));
    }
}
