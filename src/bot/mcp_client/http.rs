//! The Streamable HTTP transport, in both eras. A connection first probes the modern
//! era (`server/discover` with per-request `_meta` and the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers); when the server does not support
//! `2026-07-28` it falls back to the legacy `initialize` handshake with an
//! `Mcp-Session-Id`, re-initializing when the server forgets the session (HTTP 404).
//! Answers arrive as JSON or as an SSE stream. A background stream
//! (`subscriptions/listen`, or the legacy GET stream) carries `tools/list_changed`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::events::{ConnEvent, handle_notification, shorten};
use super::jsonrpc::{self, CallError, Incoming, MODERN_VERSION};
use crate::sse::SseDecoder;

const ACCEPT_BOTH: &str = "application/json, text/event-stream";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// Largest error body kept for messages.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Where to send requests, and the configured headers.
#[derive(Clone)]
struct Endpoint {
    server: String,
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    events: mpsc::UnboundedSender<ConnEvent>,
}

/// Why a POST did not produce the answer.
#[derive(Debug)]
enum PostError {
    /// The server answered with a non-success HTTP status.
    Status {
        status: u16,
        rpc: Option<CallError>,
        text: String,
    },
    Call(CallError),
}

impl PostError {
    fn into_call_error(self) -> CallError {
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
struct Posted {
    value: Option<Value>,
    session: Option<String>,
}

pub(crate) struct HttpConn {
    endpoint: Endpoint,
    modern: bool,
    /// The negotiated legacy version, or the modern one.
    protocol_version: Mutex<String>,
    session: Mutex<Option<String>>,
    next_id: AtomicU64,
    reinit: tokio::sync::Mutex<()>,
    listener: Mutex<Option<JoinHandle<()>>>,
    timeout: Duration,
}

impl HttpConn {
    /// Connects: modern era if the server supports it, else the legacy handshake.
    pub(crate) async fn connect(
        server: &str,
        url: &str,
        headers: &std::collections::BTreeMap<String, String>,
        timeout: Duration,
        events: mpsc::UnboundedSender<ConnEvent>,
    ) -> Result<HttpConn, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("invalid url: {e}"))?;
        let header_map = header_map(headers)?;
        let client = http_client(timeout)?;
        let mut conn = HttpConn {
            endpoint: Endpoint {
                server: server.to_string(),
                client,
                url,
                headers: header_map,
                events,
            },
            modern: true,
            protocol_version: Mutex::new(MODERN_VERSION.to_string()),
            session: Mutex::new(None),
            next_id: AtomicU64::new(1),
            reinit: tokio::sync::Mutex::new(()),
            listener: Mutex::new(None),
            timeout,
        };

        let modern_problem = match conn.request("server/discover", json!({}), timeout).await {
            Ok(result) => {
                let versions: Vec<&str> = result["supportedVersions"]
                    .as_array()
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if versions.contains(&MODERN_VERSION) {
                    if result["capabilities"]["tools"]["listChanged"] == json!(true) {
                        conn.start_listener();
                    }
                    return Ok(conn);
                }
                format!("server/discover lists versions {versions:?}, not {MODERN_VERSION}")
            }
            Err(CallError::Lost(reason)) => {
                return Err(format!(
                    "cannot reach {}: {reason}",
                    redacted(&conn.endpoint.url)
                ));
            }
            Err(CallError::Timeout(t)) => {
                return Err(format!(
                    "the server did not answer `server/discover` within {} ms",
                    t.as_millis()
                ));
            }
            Err(other) => other.to_string(),
        };
        tracing::debug!(server, reason = %modern_problem, "no modern MCP era; falling back to initialize");

        conn.modern = false;
        conn.initialize().await.map_err(|e| {
            format!(
                "the server speaks neither MCP {MODERN_VERSION} ({modern_problem}) nor the legacy handshake: {e}"
            )
        })?;
        conn.start_listener();
        Ok(conn)
    }

    pub(crate) fn protocol_version(&self) -> String {
        lock(&self.protocol_version).clone()
    }

    /// One request with its answer, at most `timeout`.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        self.request_named(method, params, None, &[], timeout).await
    }

    /// `tools/call`, with the `Mcp-Name` and `Mcp-Param-*` headers of the modern era.
    pub(crate) async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        param_headers: &[jsonrpc::ParamHeader],
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let extra = jsonrpc::param_header_values(param_headers, &arguments);
        let params = json!({"name": name, "arguments": arguments});
        self.request_named("tools/call", params, Some(name), &extra, timeout)
            .await
    }

    async fn request_named(
        &self,
        method: &str,
        params: Value,
        name: Option<&str>,
        extra: &[(String, String)],
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let outcome = tokio::time::timeout(timeout, self.exchange(method, params, name, extra))
            .await
            .unwrap_or(Err(CallError::Timeout(timeout)));
        if let Err(CallError::Lost(reason)) = &outcome {
            let _ = self.endpoint.events.send(ConnEvent::Closed(reason.clone()));
        }
        let result = outcome?;
        if self.modern && result["resultType"] == json!("input_required") {
            return Err(CallError::Protocol(
                "the server asked for more input (input_required), which porthole does not support"
                    .into(),
            ));
        }
        Ok(result)
    }

    async fn exchange(
        &self,
        method: &str,
        params: Value,
        name: Option<&str>,
        extra: &[(String, String)],
    ) -> Result<Value, CallError> {
        let session = lock(&self.session).clone();
        match self.post_request(method, params.clone(), name, extra).await {
            Err(PostError::Status { status: 404, .. }) if !self.modern && session.is_some() => {
                self.reinitialize(session).await?;
                self.post_request(method, params, name, extra)
                    .await
                    .map_err(PostError::into_call_error)
            }
            other => other.map_err(PostError::into_call_error),
        }
    }

    async fn post_request(
        &self,
        method: &str,
        params: Value,
        name: Option<&str>,
        extra: &[(String, String)],
    ) -> Result<Value, PostError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut headers = self.era_headers();
        let params = if self.modern {
            headers.push(("Mcp-Method".into(), method.to_string()));
            if let Some(name) = name {
                headers.push(("Mcp-Name".into(), jsonrpc::header_value(name)));
            }
            headers.extend(extra.iter().cloned());
            jsonrpc::with_meta(params, &modern_meta())
        } else {
            params
        };
        let body = jsonrpc::request(id, method, params);
        let posted = self.endpoint.post(&body, &headers, Some(id)).await?;
        posted.value.ok_or_else(|| {
            PostError::Call(CallError::Protocol(
                "the server accepted the request but sent no answer".into(),
            ))
        })
    }

    /// The headers every request of the current era carries.
    fn era_headers(&self) -> Vec<(String, String)> {
        let mut headers = vec![(VERSION_HEADER.to_string(), self.protocol_version())];
        if let Some(session) = lock(&self.session).clone() {
            headers.push((SESSION_HEADER.to_string(), session));
        }
        headers
    }

    /// The legacy handshake: `initialize`, keep the session id, `notifications/initialized`.
    async fn initialize(&self) -> Result<(), String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = jsonrpc::request(
            id,
            "initialize",
            json!({
                "protocolVersion": jsonrpc::LEGACY_VERSION,
                "capabilities": {},
                "clientInfo": jsonrpc::client_info(),
            }),
        );
        let posted = tokio::time::timeout(self.timeout, self.endpoint.post(&body, &[], Some(id)))
            .await
            .map_err(|_| {
                format!(
                    "the server did not answer `initialize` within {} ms",
                    self.timeout.as_millis()
                )
            })?
            .map_err(|e| e.into_call_error().to_string())?;
        let result = posted.value.unwrap_or_default();
        let version = result["protocolVersion"]
            .as_str()
            .ok_or("the `initialize` result has no protocolVersion")?;
        if !jsonrpc::KNOWN_LEGACY_VERSIONS.contains(&version) {
            return Err(format!(
                "the server chose protocol version {version}, which this client does not speak"
            ));
        }
        *lock(&self.protocol_version) = version.to_string();
        *lock(&self.session) = posted.session;

        let initialized = jsonrpc::notification("notifications/initialized", None);
        tokio::time::timeout(
            self.timeout,
            self.endpoint.post(&initialized, &self.era_headers(), None),
        )
        .await
        .map_err(|_| "the server did not accept `notifications/initialized` in time".to_string())?
        .map_err(|e| {
            format!(
                "`notifications/initialized` failed: {}",
                e.into_call_error()
            )
        })?;
        Ok(())
    }

    /// Starts a new legacy session after the server forgot ours (HTTP 404). Concurrent
    /// callers that saw the same dead session share one re-initialization.
    async fn reinitialize(&self, dead_session: Option<String>) -> Result<(), CallError> {
        let _one_at_a_time = self.reinit.lock().await;
        if *lock(&self.session) != dead_session {
            return Ok(());
        }
        tracing::info!(server = %self.endpoint.server, "MCP session expired; initializing a new one");
        self.initialize().await.map_err(|e| {
            CallError::Lost(format!(
                "the session expired and a new one could not be started: {e}"
            ))
        })?;
        self.start_listener();
        Ok(())
    }

    /// (Re)starts the background stream that carries server notifications.
    fn start_listener(&self) {
        let endpoint = self.endpoint.clone();
        let headers = self.era_headers();
        let modern = self.modern;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let task = tokio::spawn(async move { endpoint.listen(modern, id, headers).await });
        if let Some(old) = lock(&self.listener).replace(task) {
            old.abort();
        }
    }

    /// Stops the notification stream and ends a legacy session (best effort).
    pub(crate) async fn close(&self) {
        if let Some(task) = lock(&self.listener).take() {
            task.abort();
        }
        let session = lock(&self.session).take();
        if let (false, Some(session)) = (self.modern, session) {
            let request = self
                .endpoint
                .client
                .delete(self.endpoint.url.clone())
                .headers(self.endpoint.headers.clone())
                .header(SESSION_HEADER, session)
                .header(VERSION_HEADER, self.protocol_version());
            let _ = tokio::time::timeout(Duration::from_secs(2), request.send()).await;
        }
    }
}

impl Drop for HttpConn {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.listener).take() {
            task.abort();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The `_meta` every modern request carries.
fn modern_meta() -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(
        "io.modelcontextprotocol/protocolVersion".into(),
        json!(MODERN_VERSION),
    );
    meta.insert(
        "io.modelcontextprotocol/clientCapabilities".into(),
        json!({}),
    );
    meta.insert(
        "io.modelcontextprotocol/clientInfo".into(),
        jsonrpc::client_info(),
    );
    meta
}

impl Endpoint {
    fn builder(
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
    async fn post(
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
        let mut response = request
            .send()
            .await
            .map_err(|e| PostError::Call(transport_error(&e)))?;
        let status = response.status();
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if !status.is_success() {
            let mut text = Vec::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                text.extend_from_slice(&chunk);
                if text.len() > MAX_ERROR_BODY {
                    break;
                }
            }
            let text = String::from_utf8_lossy(&text).into_owned();
            let rpc = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.get("error").map(CallError::from_error_object));
            return Err(PostError::Status {
                status: status.as_u16(),
                rpc,
                text,
            });
        }
        let Some(id) = expect_id else {
            return Ok(Posted {
                value: None,
                session,
            });
        };
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
                        return Ok(Posted {
                            value: Some(answer?),
                            session,
                        });
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
            return Ok(Posted {
                value: Some(answer?),
                session,
            });
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
    async fn listen(self, modern: bool, id: u64, mut headers: Vec<(String, String)>) {
        let request = if modern {
            headers.push(("Mcp-Method".into(), "subscriptions/listen".into()));
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

/// A transport failure as a lost connection, with the underlying cause spelled out.
/// The configured headers of a server entry, checked.
pub(super) fn header_map(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("invalid header `{name}`: {e}"))?;
        let value =
            HeaderValue::from_str(value).map_err(|e| format!("invalid header value: {e}"))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// The HTTP client of one server connection.
pub(super) fn http_client(connect_timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

pub(super) fn transport_error(error: &reqwest::Error) -> CallError {
    let mut text = crate::text::with_causes(error);
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), &redacted(url));
    }
    CallError::Lost(text)
}

/// A URL without credentials, query or fragment, for messages that admins see.
pub(super) fn redacted(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}
