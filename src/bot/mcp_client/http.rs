//! The Streamable HTTP transport, in both eras. A connection first probes the modern
//! era (`server/discover` with per-request `_meta` and the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers); when the server does not support
//! `2026-07-28` it falls back to the legacy `initialize` handshake with an
//! `Mcp-Session-Id`, re-initializing when the server forgets the session (HTTP 404).
//! Answers arrive as JSON or as an SSE stream. A background stream
//! (`subscriptions/listen`, or the legacy GET stream) carries `tools/list_changed`.
//!
//! This file holds the eras and the session; `http_endpoint.rs` the POST and its
//! answer, and the notification stream.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::events::ConnEvent;
use super::http_client::{http_setup, redacted};
use super::http_endpoint::{Endpoint, PostError, modern_meta};
use super::jsonrpc::{self, CallError, MODERN_VERSION};
use crate::bot::lock;
use crate::protocol::{HEADER_METHOD, HEADER_NAME, HEADER_PROTOCOL_VERSION, HEADER_SESSION_ID};

/// One request to send, with what the modern era mirrors in its headers.
#[derive(Clone)]
struct Outgoing<'a> {
    method: &'a str,
    params: Value,
    /// The tool a `tools/call` names, sent as `Mcp-Name`.
    name: Option<&'a str>,
    /// The `Mcp-Param-*` headers of a `tools/call`.
    param_headers: Vec<(String, String)>,
}

impl<'a> Outgoing<'a> {
    fn plain(method: &'a str, params: Value) -> Self {
        Outgoing {
            method,
            params,
            name: None,
            param_headers: Vec::new(),
        }
    }
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
        let (client, url, headers) = http_setup(url, headers, timeout)?;
        let mut conn = HttpConn {
            endpoint: Endpoint {
                server: server.to_string(),
                client,
                url,
                headers,
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
        let modern_problem = match conn.discover().await? {
            Discovered::Modern => return Ok(conn),
            Discovered::NotModern(problem) => problem,
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

    /// Probes the modern era with `server/discover`; on success its notification
    /// stream is started. An unreachable or silent server is an error: no point in
    /// trying the legacy handshake then.
    async fn discover(&self) -> Result<Discovered, String> {
        match self.request("server/discover", json!({})).await {
            Ok(result) => {
                let versions: Vec<&str> = result["supportedVersions"]
                    .as_array()
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if versions.contains(&MODERN_VERSION) {
                    if result["capabilities"]["tools"]["listChanged"] == json!(true) {
                        self.start_listener();
                    }
                    return Ok(Discovered::Modern);
                }
                Ok(Discovered::NotModern(format!(
                    "server/discover lists versions {versions:?}, not {MODERN_VERSION}"
                )))
            }
            Err(CallError::Lost(reason)) => Err(format!(
                "cannot reach {}: {reason}",
                redacted(&self.endpoint.url)
            )),
            Err(CallError::Timeout(t)) => Err(format!(
                "the server did not answer `server/discover` within {} ms",
                t.as_millis()
            )),
            Err(other) => Ok(Discovered::NotModern(other.to_string())),
        }
    }

    pub(crate) fn protocol_version(&self) -> String {
        lock(&self.protocol_version).clone()
    }

    /// One request with its answer, at most the server's timeout.
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.send(Outgoing::plain(method, params)).await
    }

    /// `tools/call`, with the `Mcp-Name` and `Mcp-Param-*` headers of the modern era.
    pub(crate) async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        param_headers: &[jsonrpc::ParamHeader],
    ) -> Result<Value, CallError> {
        let param_headers = jsonrpc::param_header_values(param_headers, &arguments);
        let params = jsonrpc::call_tool_params(name, arguments);
        self.send(Outgoing {
            method: "tools/call",
            params,
            name: Some(name),
            param_headers,
        })
        .await
    }

    /// Sends `request` within the server's timeout; a lost connection is reported to
    /// the supervisor.
    async fn send(&self, request: Outgoing<'_>) -> Result<Value, CallError> {
        let timeout = self.timeout;
        let outcome = tokio::time::timeout(timeout, self.exchange(request))
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

    /// Posts `request`; when a legacy server forgot our session (HTTP 404), starts a
    /// new one and posts it again.
    async fn exchange(&self, request: Outgoing<'_>) -> Result<Value, CallError> {
        let session = lock(&self.session).clone();
        match self.post_request(request.clone()).await {
            Err(PostError::Status { status: 404, .. }) if !self.modern && session.is_some() => {
                self.reinitialize(session).await?;
                self.post_request(request)
                    .await
                    .map_err(PostError::into_call_error)
            }
            other => other.map_err(PostError::into_call_error),
        }
    }

    async fn post_request(&self, request: Outgoing<'_>) -> Result<Value, PostError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut headers = self.era_headers();
        let params = if self.modern {
            headers.push((HEADER_METHOD.into(), request.method.to_string()));
            if let Some(name) = request.name {
                headers.push((HEADER_NAME.into(), jsonrpc::header_value(name)));
            }
            headers.extend(request.param_headers);
            jsonrpc::with_meta(request.params, &modern_meta())
        } else {
            request.params
        };
        let body = jsonrpc::request(id, request.method, params);
        let posted = self.endpoint.post(&body, &headers, Some(id)).await?;
        posted.value.ok_or_else(|| {
            PostError::Call(CallError::Protocol(
                "the server accepted the request but sent no answer".into(),
            ))
        })
    }

    /// The headers every request of the current era carries.
    fn era_headers(&self) -> Vec<(String, String)> {
        let mut headers = vec![(HEADER_PROTOCOL_VERSION.to_string(), self.protocol_version())];
        if let Some(session) = lock(&self.session).clone() {
            headers.push((HEADER_SESSION_ID.to_string(), session));
        }
        headers
    }

    /// The legacy handshake: `initialize`, keep the session id, `notifications/initialized`.
    async fn initialize(&self) -> Result<(), String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = jsonrpc::request(id, "initialize", super::handshake::initialize_params());
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
        if !jsonrpc::is_known_legacy_version(version) {
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
                .header(HEADER_SESSION_ID, session)
                .header(HEADER_PROTOCOL_VERSION, self.protocol_version());
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

/// What `server/discover` showed about the modern era.
enum Discovered {
    Modern,
    /// Why not, for the message if the legacy handshake fails too.
    NotModern(String),
}
