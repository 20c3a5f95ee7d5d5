//! Protocol versions and eras, and the names MCP fixes on the wire (headers, `_meta`
//! keys).
//!
//! Two eras share the endpoint: the legacy, session-based one (`initialize`,
//! `Mcp-Session-Id`) for 2025-03-26 … 2025-11-25, and the modern, stateless one
//! (per-request `_meta`, `server/discover`) from 2026-07-28.

/// Legacy versions, oldest first. `initialize` answers with the client's version when
/// it is listed here, else with the newest.
pub const LEGACY_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
/// Modern (stateless) versions.
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];
/// Assumed for a legacy request without `MCP-Protocol-Version` (per the 2025 spec).
pub const DEFAULT_LEGACY_VERSION: &str = "2025-03-26";

/// `Mcp-Session-Id` (legacy): the session a request belongs to, given by `initialize`.
pub const HEADER_SESSION_ID: &str = "mcp-session-id";
/// `MCP-Protocol-Version`: the protocol version the request speaks.
pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Mcp-Method` (2026): the request's method, which must match the body's.
pub const HEADER_METHOD: &str = "mcp-method";
/// `Mcp-Name` (2026): the tool or prompt name, resource URI or task id the body routes by.
pub const HEADER_NAME: &str = "mcp-name";
/// `Mcp-Param-<Name>` (2026): a tool argument its schema asks to be mirrored in a header.
pub const HEADER_PARAM_PREFIX: &str = "mcp-param-";
/// `Last-Event-ID`: where a client resumes an SSE stream it lost.
pub const HEADER_LAST_EVENT_ID: &str = "last-event-id";

/// `_meta` (2026): the protocol version of a request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` (2026): the capabilities the client declares for a request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` (2026): the client's name and version (its `clientInfo`).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` (2026): the least severe log level the client wants sent during a request.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` of a 2026 result: the server's name and version.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` of a notification on a `subscriptions/listen` stream: that request's id.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The Tasks extension's identifier, in capabilities and `-32021` errors.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The Skills extension's identifier, in capabilities.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// Which era a request belongs to, with its protocol version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// Session-based (2025): one of [`LEGACY_VERSIONS`].
    Legacy(&'static str),
    /// Stateless (2026 on): one of [`MODERN_VERSIONS`].
    Modern(&'static str),
}

impl Era {
    /// The request's protocol version.
    pub fn version(&self) -> &'static str {
        match self {
            Era::Legacy(v) | Era::Modern(v) => v,
        }
    }

    /// Whether the request is of the stateless era.
    pub fn is_modern(&self) -> bool {
        matches!(self, Era::Modern(_))
    }
}

/// `text` as a legacy version this server speaks; `None` when it is not one.
pub fn legacy_version(text: &str) -> Option<&'static str> {
    LEGACY_VERSIONS.iter().copied().find(|v| *v == text)
}

/// Whether a 2025 session of `version` has tasks (the experimental capability came
/// with 2025-11-25; the versions compare as dates).
pub fn legacy_has_tasks(version: &str) -> bool {
    version >= "2025-11-25"
}

/// `text` as a modern version this server speaks; `None` when it is not one.
pub fn modern_version(text: &str) -> Option<&'static str> {
    MODERN_VERSIONS.iter().copied().find(|v| *v == text)
}

/// The version `initialize` answers with for a client asking for `requested`.
pub fn negotiate_legacy(requested: Option<&str>) -> &'static str {
    requested
        .and_then(legacy_version)
        .unwrap_or(LEGACY_VERSIONS[LEGACY_VERSIONS.len() - 1])
}

/// Every version, newest first (for error data and `server/discover`).
pub fn all_versions() -> Vec<&'static str> {
    MODERN_VERSIONS
        .iter()
        .rev()
        .chain(LEGACY_VERSIONS.iter().rev())
        .copied()
        .collect()
}

/// Log levels in increasing severity (RFC 5424 names, as MCP uses them).
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The level's place in [`LOG_LEVELS`] (0 for `debug`); `None` for an unknown level.
pub fn log_level_rank(level: &str) -> Option<u8> {
    LOG_LEVELS.iter().position(|l| *l == level).map(|p| p as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_known_versions_and_falls_back_to_newest() {
        assert_eq!(negotiate_legacy(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate_legacy(Some("1999-01-01")), "2025-11-25");
        assert_eq!(negotiate_legacy(None), "2025-11-25");
        assert_eq!(all_versions()[0], "2026-07-28");
    }
}
