//! The `/mcp` guards: small checks that every `/mcp` handler runs first, in this order
//! ([`admit`]; called by the handlers, not put around them as a layer: a layer costs a
//! boxed future and a copy of the route per request, and the checks never wait):
//!
//! 1. **localhost** — the peer address must be loopback, even when the bot binds wider;
//! 2. **misconfiguration** — enabled without a secret (and auth not disabled) answers
//!    500 to everything, so a forgotten secret never means an open endpoint;
//! 3. **DNS rebinding** — `Host` must be a loopback name and `Origin`, when present, a
//!    loopback origin (plus configured extras); checked before auth, so a bad `Host`
//!    is refused even with a valid token;
//! 4. **bearer token** — compared in constant time over SHA-256 digests, so neither the
//!    length nor the first differing byte shows in the timing. The token decides the
//!    request's [`Access`]: the full token may do everything, the optional read-only
//!    token only what changes nothing (tools annotated read-only, resources, prompts).
//!
//! Every refusal is a JSON-RPC error body (no `id`) with a message that says what to fix,
//! and leaves a WARN line in the bot's log (a refused token at most once per
//! [`TOKEN_WARN_PERIOD`], never the token itself), so the bot's terminal says why a
//! client sees 401.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
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
    /// Bearer authentication with `token`; only its SHA-256 digest is kept.
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

/// What a request may do, decided by the token it carries (`admit` says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Every tool, resource and prompt.
    Full,
    /// Only tools annotated read-only, resources and prompts.
    ReadOnly,
}

/// What the `/mcp` guards check a request against: how it authenticates, and the
/// origins and hosts allowed besides loopback ones.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// How requests authenticate.
    pub auth: Auth,
    /// SHA-256 of the read-only token, when one is configured (bearer auth only).
    pub read_only_token: Option<[u8; 32]>,
    /// Extra allowed `Origin` values (exact, e.g. `https://tool.example`).
    pub allowed_origins: Vec<String>,
    /// Extra allowed `Host` names (without port).
    pub allowed_hosts: Vec<String>,
    /// When a refused token was last logged, and how many were refused since.
    pub(crate) token_warnings: Arc<TokenWarnings>,
}

/// A client retrying with a bad token would fill the log with one line per request:
/// refused tokens are logged at most once per period, the rest counted on the next line.
pub(crate) const TOKEN_WARN_PERIOD: Duration = Duration::from_secs(10);

/// The state of [`TOKEN_WARN_PERIOD`]'s limit: the last line's time and the refusals
/// not logged since. Locked only on a refusal, never on an admitted request.
#[derive(Debug, Default)]
pub(crate) struct TokenWarnings(Mutex<(Option<Instant>, u64)>);

impl TokenWarnings {
    /// Logs `reason` unless a line went out less than a period ago (then counts it).
    fn warn(&self, reason: &str) {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (last, suppressed) = &mut *state;
        if last.is_some_and(|at| at.elapsed() < TOKEN_WARN_PERIOD) {
            *suppressed += 1;
            return;
        }
        *last = Some(Instant::now());
        let suppressed = std::mem::take(suppressed);
        drop(state);
        tracing::warn!(target: "porthole::mcp::guard", suppressed, "refused /mcp request: {reason}");
    }
}

/// A refusal: HTTP status plus a JSON-RPC error body without id.
pub(crate) fn refuse(status: StatusCode, code: i64, message: impl Into<String>) -> Response {
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

/// One check: `Some` holds the refusal sent instead of running the request.
type Check = fn(&GuardConfig, &HeaderMap, &Extensions) -> Option<Response>;

/// The checks, in the order they run; the token comes last ([`authenticate`]).
const CHECKS: [Check; 3] = [localhost_only, not_misconfigured, same_machine_origin];

/// The request's access, or the refusal of the first check it fails.
// The error is the refusal itself, built only on that path: boxing it saves nothing.
#[allow(clippy::result_large_err)]
pub(crate) fn admit(
    config: &GuardConfig,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<Access, Response> {
    for check in CHECKS {
        if let Some(refusal) = check(config, headers, extensions) {
            return Err(refusal);
        }
    }
    authenticate(config, headers).map_err(|reason| {
        config.token_warnings.warn(reason);
        unauthorized(reason)
    })
}

fn localhost_only(_: &GuardConfig, _: &HeaderMap, extensions: &Extensions) -> Option<Response> {
    let peer = extensions
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
        return Some(refuse(
            StatusCode::FORBIDDEN,
            jsonrpc::INVALID_REQUEST,
            "Forbidden: /mcp only answers requests from this machine (loopback)",
        ));
    }
    None
}

fn not_misconfigured(config: &GuardConfig, _: &HeaderMap, _: &Extensions) -> Option<Response> {
    if matches!(config.auth, Auth::Misconfigured) {
        return Some(refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            jsonrpc::INTERNAL_ERROR,
            "Server misconfigured: MCP_SERVER_ENABLED is true but MCP_SERVER_SECRET is not set. Run `cargo run --release -- token` (or set MCP_SERVER_SECRET to the output of `openssl rand -hex 32`) and restart the bot.",
        ));
    }
    None
}

fn host_allowed(config: &GuardConfig, headers: &HeaderMap) -> Result<(), String> {
    let Some(host) = porthole_core::net::single_header(headers, header::HOST)? else {
        return Err("a Host header is required".into());
    };
    if porthole_core::net::host_is_allowed(host, &config.allowed_hosts) {
        Ok(())
    } else {
        Err(format!(
            "Host `{host}` is not a loopback name; connect to 127.0.0.1 or localhost (or add it to MCP_ALLOWED_HOSTS)"
        ))
    }
}

fn origin_allowed(config: &GuardConfig, headers: &HeaderMap) -> Result<(), String> {
    let Some(origin) = porthole_core::net::single_header(headers, header::ORIGIN)? else {
        return Ok(());
    };
    if porthole_core::net::origin_is_allowed(origin, &config.allowed_origins) {
        Ok(())
    } else {
        Err(format!(
            "Origin `{origin}` is not a loopback origin (possible DNS rebinding); add it to MCP_ALLOWED_ORIGINS if it is yours"
        ))
    }
}

fn same_machine_origin(
    config: &GuardConfig,
    headers: &HeaderMap,
    _: &Extensions,
) -> Option<Response> {
    if let Err(reason) = porthole_core::net::single_header(headers, header::HOST) {
        return Some(refuse(
            StatusCode::BAD_REQUEST,
            jsonrpc::INVALID_REQUEST,
            format!("Bad Request: {reason}"),
        ));
    }
    if let Err(reason) = host_allowed(config, headers).and_then(|_| origin_allowed(config, headers))
    {
        tracing::warn!(target: "porthole::mcp::guard", %reason, "refused /mcp request");
        return Some(refuse(
            StatusCode::FORBIDDEN,
            jsonrpc::INVALID_REQUEST,
            format!("Forbidden: {reason}"),
        ));
    }
    None
}

/// The request's access, or why its token is refused.
/// The token of an `Authorization: Bearer <token>` value, however the scheme is cased
/// and spaced: what the guard checks, and so what identifies a caller (task owners).
pub(crate) fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn authenticate(config: &GuardConfig, headers: &HeaderMap) -> Result<Access, &'static str> {
    let Auth::Bearer(expected) = &config.auth else {
        return Ok(Access::Full);
    };
    let Ok(header) = porthole_core::net::single_header(headers, header::AUTHORIZATION) else {
        return Err("Unauthorized: send exactly one Authorization header");
    };
    let provided = header.and_then(bearer_token);
    if let Some(token) = provided {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Both compared every time, so the timing does not tell which token matched.
        let full = digest.ct_eq(expected);
        let read_only = config
            .read_only_token
            .map_or(subtle::Choice::from(0), |d| digest.ct_eq(&d));
        if bool::from(full) {
            return Ok(Access::Full);
        }
        if bool::from(read_only) {
            return Ok(Access::ReadOnly);
        }
    }
    Err(match (header, provided) {
        (Some(value), None) if value.trim().eq_ignore_ascii_case("bearer") => {
            "Unauthorized: the Authorization header says `Bearer` with no token after it; the line that \
             added this server probably read an empty variable. Add it again from the bot's folder with \
             --header \"Authorization: Bearer $(cargo run -q --release -- token --print)\""
        }
        (_, None) => {
            "Unauthorized: send the header `Authorization` with the value `Bearer <MCP_SERVER_SECRET>`"
        }
        _ if config.read_only_token.is_some() => {
            "Unauthorized: the bearer token matches neither MCP_SERVER_SECRET nor MCP_SERVER_READONLY_SECRET"
        }
        _ => "Unauthorized: the bearer token does not match MCP_SERVER_SECRET",
    })
}

fn unauthorized(message: &str) -> Response {
    let mut response = refuse(StatusCode::UNAUTHORIZED, jsonrpc::INVALID_REQUEST, message);
    // A plain Bearer challenge: no resource metadata, so clients do not start OAuth.
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"porthole\""),
    );
    response
}
