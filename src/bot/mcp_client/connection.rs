//! One live connection to a server, whatever its transport: connecting, requests,
//! tool calls and closing. The transports it picks from (`stdio`, `http`, `http_sse`)
//! share what they need through `events` and `handshake`, never through this file,
//! so no import runs in a circle.

use porthole_core::params::PageParams;
use serde_json::Value;
use tokio::sync::mpsc;

use super::config::{ServerConfig, TransportConfig};
use super::events::ConnEvent;
use super::http::HttpConn;
use super::http_sse::SseConn;
use super::jsonrpc::{self, CallError, ParamHeader};
use super::stdio::StdioConn;

pub(crate) enum Conn {
    Stdio(StdioConn),
    Http(Box<HttpConn>),
    Sse(SseConn),
}

impl Conn {
    /// Opens the connection and completes the handshake, each request within the
    /// server's timeout.
    pub(crate) async fn connect(
        config: &ServerConfig,
        events: mpsc::UnboundedSender<ConnEvent>,
    ) -> Result<Conn, String> {
        match &config.transport {
            TransportConfig::Stdio(stdio) => {
                let conn = StdioConn::start(&config.name, stdio, config.timeout, events).await?;
                Conn::Stdio(conn).legacy_handshake().await
            }
            TransportConfig::Http { url, headers } => {
                HttpConn::connect(&config.name, url, headers, config.timeout, events)
                    .await
                    .map(|conn| Conn::Http(Box::new(conn)))
            }
            TransportConfig::Sse { url, headers } => {
                let conn =
                    SseConn::open(&config.name, url, headers, config.timeout, events).await?;
                Conn::Sse(conn).legacy_handshake().await
            }
        }
    }

    /// Completes the legacy `initialize` handshake of a stream transport (stdio,
    /// HTTP+SSE), closing the connection if it fails. Streamable HTTP shakes hands
    /// in its own connect, as it first probes the modern era.
    async fn legacy_handshake(self) -> Result<Conn, String> {
        let outcome = match &self {
            Conn::Stdio(conn) => conn.requests().handshake().await,
            Conn::Sse(conn) => conn.requests().handshake().await,
            Conn::Http(_) => Ok(()),
        };
        match outcome {
            Ok(()) => Ok(self),
            Err(e) => {
                self.close().await;
                Err(e)
            }
        }
    }

    pub(crate) fn protocol_version(&self) -> String {
        match self {
            Conn::Stdio(conn) => conn.requests().protocol_version(),
            Conn::Http(conn) => conn.protocol_version(),
            Conn::Sse(conn) => conn.requests().protocol_version(),
        }
    }

    /// One request with its answer, at most the server's timeout (every transport
    /// was given it when connecting).
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, CallError> {
        match self {
            Conn::Stdio(conn) => conn.requests().request(method, params).await,
            Conn::Http(conn) => conn.request(method, params).await,
            Conn::Sse(conn) => conn.requests().request(method, params).await,
        }
    }

    pub(crate) async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        param_headers: &[ParamHeader],
    ) -> Result<Value, CallError> {
        match self {
            // Only Streamable HTTP mirrors the call in headers.
            Conn::Http(conn) => conn.call_tool(name, arguments, param_headers).await,
            Conn::Stdio(_) | Conn::Sse(_) => {
                let params = jsonrpc::call_tool_params(name, arguments);
                self.request("tools/call", params).await
            }
        }
    }

    /// Every tool the server lists, following `nextCursor` through all pages.
    pub(crate) async fn list_tools(&self) -> Result<Vec<Value>, CallError> {
        const MAX_PAGES: usize = 100;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = jsonrpc::params_of(&PageParams {
                cursor: cursor.clone(),
            });
            let page = self.request("tools/list", params).await?;
            match page.get("tools") {
                Some(Value::Array(list)) => tools.extend(list.iter().cloned()),
                _ => {
                    return Err(CallError::Protocol(
                        "the `tools/list` result has no `tools` array".into(),
                    ));
                }
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if cursor.as_deref() != Some(next) => cursor = Some(next.to_string()),
                _ => return Ok(tools),
            }
        }
        Err(CallError::Protocol(format!(
            "`tools/list` went on for more than {MAX_PAGES} pages"
        )))
    }

    pub(crate) async fn close(&self) {
        match self {
            Conn::Stdio(conn) => conn.close().await,
            Conn::Http(conn) => conn.close().await,
            Conn::Sse(conn) => conn.close().await,
        }
    }
}
