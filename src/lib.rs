//! Porthole: an LLM chat bot whose running process carries its own MCP endpoint.
//!
//! Crates (the workspace's `crates/`): [`mcp`] is `porthole-mcp`, the endpoint any axum
//! service mounts; [`protocol`], [`jsonrpc`], [`redact`], [`net`], [`text`], [`skills`],
//! [`trace_context`] and [`replica_changes`] are `porthole-core`, the ground floor both
//! build on (the bot's own MCP client speaks the protocol through `protocol` and
//! `jsonrpc` too). Cargo keeps
//! them from importing the bot. Re-exported here under the names the bot's code uses.
//!
//! Layers (arrows point one way):
//! - [`bot`]: the running bot — store, LLM providers, tools, agents, scheduled tasks, web,
//!   and its client connections to other MCP servers. Knows nothing of its own endpoint.
//! - [`mcp`]: the MCP Streamable HTTP protocol, transport, guards and extensions.
//! - [`logs`]: the bot's log captured (ring buffer, log file, journal in the store).
//!   Knows nothing of the bot.
//! - [`diagnostics`]: the MCP tools, thin adapters from `mcp` onto `bot` services.
//! - [`app`]: wires them together and serves.
//! - [`replica_changes`]: what replicas sharing a database announce to each other; `bot`
//!   carries it, `mcp` and `diagnostics` say and apply it; it imports neither.
//! - [`skills`]: the one reader of `SKILL.md` skills and their live view, which `bot`
//!   and `mcp` both serve; it imports neither.

pub mod app;
pub mod bot;
pub mod config;
pub mod cpu_time;
pub mod diagnostics;
pub mod env_file;
pub mod http_client;
pub mod logs;
pub mod model;
pub mod serve;
pub mod sse_decoder;
#[cfg(test)]
pub(crate) mod test_support;
pub mod tool_filter;

pub use porthole_core::{
    jsonrpc, net, protocol, redact, replica_changes, skills, text, trace_context,
};
pub use porthole_mcp as mcp;
