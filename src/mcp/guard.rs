//! The `/mcp` guards, each a small middleware, run in this order:
//!
//! 1. **localhost** — the peer address must be loopback, even when the bot binds wider;
//! 2. **misconfiguration** — enabled without a secret (and auth not disabled) answers
//!    500 to everything, so a forgotten secret never means an open endpoint;
//! 3. **DNS rebinding** — `Host` must be a loopback name and `Origin`, when present, a
//!    loopback origin (plus configured extras); checked before auth, so a bad `Host`
//!    is refused even with a valid token;
//! 4. **bearer token** — compared in constant time over SHA-256 digests, so neither the
//!    length nor the first differing byte shows in the timing.
//!
//! Every refusal is a JSON-RPC error body (no `id`) with a message that says what to fix.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::jsonrpc::{self, RpcError};

/// How `/mcp` authenticates.
#[derive(Clone)]
pub enum Auth {
    /// `Authorization: Bearer <token>` required; holds the token's SHA-256.
    Bearer([u8; 32]),
    /// No token needed (`MCP_SERVER_AUTH_DISABLED=true`).
    Disabled,
    /// Enabled without a secret: refuse everything with 500.
    Misconfigured,
}

impl Auth {
    pub fn bearer(token: &str) -> Self {
        Auth::Bearer(Sha256::digest(token.as_bytes()).into())
    }
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token digest.
        f.write_str(match self {
            Auth::Bearer(_) => "Bearer(…)",
            Auth::Disabled => "Disabled",
            Auth::Misconfigured => "Misconfigured",
        })
    }
}

#[derive(Debug, Clone)]
pub struct GuardConfig {
    pub auth: Auth,
    /// Extra allowed `Origin` values (exact, e.g. `https://tool.example`).
    pub allowed_origins: Vec<String>,
    /// Extra allowed `Host` names (without port).
    pub allowed_hosts: Vec<String>,
}

/// A refusal: HTTP status plus a JSON-RPC error body without id.
pub fn refuse(status: StatusCode, code: i64, message: impl Into<String>) -> Response {
    let body = jsonrpc::error_response(None, &RpcError::new(code, message));
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        serde_json::to_vec(&body).unwrap_or_default(),
    )
        .into_response()
}

pub async fn localhost_only(request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let loopback = peer.is_some_and(|ip| match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    });
    if !loopback {
        tracing::warn!(target: "porthole::mcp::guard", peer = ?peer, "refused /mcp request from a non-loopback address");
        return refuse(
            StatusCode::FORBIDDEN,
            jsonrpc::INVALID_REQUEST,
            "Forbidden: /mcp only answers requests from this machine (loopback)",
        );
    }
    next.run(request).await
}

pub async fn not_misconfigured(
    State(config): State<Arc<GuardConfig>>,
    request: Request,
    next: Next,
) -> Response {
    if matches!(config.auth, Auth::Misconfigured) {
        return refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            jsonrpc::INTERNAL_ERROR,
            "Server misconfigured: MCP_SERVER_ENABLED is true but MCP_SERVER_SECRET is not set. Run `porthole token` (or set MCP_SERVER_SECRET to the output of `openssl rand -hex 32`) and restart the bot.",
        );
    }
    next.run(request).await
}

fn host_allowed(config: &GuardConfig, headers: &HeaderMap) -> Result<(), String> {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return Err("a Host header is required".into());
    };
    if crate::net::host_is_allowed(host, &config.allowed_hosts) {
        Ok(())
    } else {
        Err(format!(
            "Host `{host}` is not a loopback name; connect to 127.0.0.1 or localhost (or add it to MCP_ALLOWED_HOSTS)"
        ))
    }
}

fn origin_allowed(config: &GuardConfig, headers: &HeaderMap) -> Result<(), String> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or_default();
    if crate::net::origin_is_allowed(origin, &config.allowed_origins) {
        Ok(())
    } else {
        Err(format!(
            "Origin `{origin}` is not a loopback origin (possible DNS rebinding); add it to MCP_ALLOWED_ORIGINS if it is yours"
        ))
    }
}

pub async fn same_machine_origin(
    State(config): State<Arc<GuardConfig>>,
    request: Request,
    next: Next,
) -> Response {
    if let Err(reason) = host_allowed(&config, request.headers())
        .and_then(|_| origin_allowed(&config, request.headers()))
    {
        tracing::warn!(target: "porthole::mcp::guard", %reason, "refused /mcp request");
        return refuse(
            StatusCode::FORBIDDEN,
            jsonrpc::INVALID_REQUEST,
            format!("Forbidden: {reason}"),
        );
    }
    next.run(request).await
}

pub async fn bearer_token(
    State(config): State<Arc<GuardConfig>>,
    request: Request,
    next: Next,
) -> Response {
    let Auth::Bearer(expected) = &config.auth else {
        return next.run(request).await;
    };
    let provided = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    let ok = provided.is_some_and(|token| {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        bool::from(digest.ct_eq(expected))
    });
    if ok {
        return next.run(request).await;
    }
    let message = if provided.is_none() {
        "Unauthorized: send `Authorization: Bearer <MCP_SERVER_SECRET>`"
    } else {
        "Unauthorized: the bearer token does not match MCP_SERVER_SECRET"
    };
    let mut response = refuse(StatusCode::UNAUTHORIZED, jsonrpc::INVALID_REQUEST, message);
    // A plain Bearer challenge: no resource metadata, so clients do not start OAuth.
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"porthole\""),
    );
    response
}
