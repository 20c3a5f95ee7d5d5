//! The legacy `initialize` handshake's pieces that every transport with it shares: the
//! request's params, the chosen version, and a failure in words.

use porthole_core::params::InitializeParams;
use serde_json::{Map, Value};

use super::jsonrpc::{self, CallError};

/// The params of the legacy `initialize` request, for every transport with that
/// handshake.
pub(crate) fn initialize_params() -> Value {
    jsonrpc::params_of(&InitializeParams {
        protocol_version: jsonrpc::LEGACY_VERSION.into(),
        capabilities: Map::new(),
        client_info: jsonrpc::client_info(),
    })
}

/// Why `initialize` failed, in words for the server's `last_error`.
pub(crate) fn handshake_error(error: CallError) -> String {
    match error {
        CallError::Timeout(t) => format!(
            "the server did not answer `initialize` within {} ms",
            t.as_millis()
        ),
        CallError::Lost(reason) => format!("the server ended during the handshake: {reason}"),
        other => format!("the server rejected `initialize`: {other}"),
    }
}

/// The protocol version an `initialize` result chose; an unknown one is tried anyway.
pub(crate) fn negotiated_version(server: &str, result: &Value) -> Result<String, String> {
    let version = result["protocolVersion"]
        .as_str()
        .ok_or("the `initialize` result has no protocolVersion")?;
    if !jsonrpc::is_known_legacy_version(version) {
        tracing::warn!(
            server,
            version,
            "the server chose a protocol version this client does not know; trying it anyway"
        );
    }
    Ok(version.to_string())
}
