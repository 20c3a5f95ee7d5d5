//! `initialize` (legacy), `server/discover` (modern) and what both say about the
//! server: its identity and its capabilities in each era. `ping` is answered in the
//! table itself.

use porthole_core::params::InitializeParams;
use serde_json::{Map, Value, json};

use crate::ServerInner;
use crate::jsonrpc::RpcError;
use crate::params::read;
use crate::protocol::{self, Era, SKILLS_EXTENSION, TASKS_EXTENSION};

/// The most JSON a client's declared capabilities may take.
const MAX_CAPABILITIES_BYTES: usize = 64 * 1024;

/// `initialize`'s params read as the schema's `InitializeRequestParams`: the version
/// asked for, the client's capabilities and who the client is. A session is opened only
/// for a request that has them, so a client that sends `protocolVersion: 5` learns what
/// to fix instead of getting a session negotiated on a guess.
pub(crate) fn check_initialize(params: &Map<String, Value>) -> Result<InitializeParams, RpcError> {
    let wrong = |what: &str| {
        RpcError::invalid_params(format!(
            "{what}; send {{\"protocolVersion\": \"2025-11-25\", \"capabilities\": {{}}, \
             \"clientInfo\": {{\"name\": \"…\", \"version\": \"…\"}}}}"
        ))
    };
    let hello: InitializeParams = read("initialize", params).map_err(|e| wrong(&e.message))?;
    // The session keeps them for its life: they must stay a declaration, not a store.
    if serde_json::to_string(&hello.capabilities).map_or(0, |json| json.len())
        > MAX_CAPABILITIES_BYTES
    {
        return Err(wrong(&format!(
            "initialize: `capabilities` is over {MAX_CAPABILITIES_BYTES} bytes of JSON; declare what the client supports, nothing more"
        )));
    }
    Ok(hello)
}

/// `initialize`'s result: the version negotiated, the capabilities and who the server
/// is. The transport answers `initialize` itself, as it opens the session.
pub(crate) fn initialize(inner: &ServerInner, version: &'static str) -> Value {
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities(inner, &Era::Legacy(version)),
        "serverInfo": server_info(inner),
    });
    if !inner.info.instructions.is_empty() {
        result["instructions"] = json!(inner.info.instructions);
    }
    result
}

/// `server/discover`: the modern versions and the capabilities.
pub(super) fn discover(inner: &ServerInner, era: &Era) -> Value {
    json!({
        "supportedVersions": protocol::MODERN_VERSIONS,
        "capabilities": capabilities(inner, era),
        "instructions": inner.info.instructions,
    })
}

/// The capabilities object for `era`: tasks are the extension in the modern era and
/// the experimental `tasks` capability from 2025-11-25 on.
fn capabilities(inner: &ServerInner, era: &Era) -> Value {
    let mut caps = json!({
        "tools": {"listChanged": true},
        "completions": {},
        "logging": {},
    });
    match era {
        Era::Modern(_) => {
            caps["extensions"] = json!({TASKS_EXTENSION: {}});
            if inner.skills.is_some() {
                caps["extensions"][SKILLS_EXTENSION] = json!({"directoryRead": true});
            }
        }
        Era::Legacy(version) if protocol::legacy_has_tasks(version) => {
            caps["tasks"] = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
        }
        Era::Legacy(_) => {}
    }
    if !inner.resources.is_empty() {
        caps["resources"] = json!({"subscribe": true, "listChanged": true});
    }
    if !inner.prompts.is_empty() {
        caps["prompts"] = json!({"listChanged": true});
    }
    caps
}

/// The server's identity, as `serverInfo` and in every modern result's `_meta`.
pub(super) fn server_info(inner: &ServerInner) -> Value {
    json!({"name": inner.info.name, "version": inner.info.version, "title": inner.info.title})
}
