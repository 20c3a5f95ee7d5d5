//! The ground floor of Porthole and its MCP endpoint: what both the endpoint
//! (`porthole-mcp`) and the bot use, and which imports neither.
//!
//! - [`protocol`] and [`jsonrpc`]: MCP's vocabulary (versions, eras, header and `_meta`
//!   names, error codes) and its JSON-RPC messages, for the endpoint and for the bot's
//!   own client of other MCP servers alike;
//! - [`params`]: every request method's `params` as a type, read by the endpoint and
//!   written by the bot's client;
//! - [`redact`]: secrets taken out of every text that leaves the process;
//! - [`text`]: cutting and formatting text on character boundaries;
//! - [`net`]: loopback `Host`/`Origin` checks and single-header reads;
//! - [`skills`]: the one reader of `SKILL.md` skills and their live view;
//! - [`trace_context`]: W3C trace context ids and what a caller says about itself;
//! - [`replica_changes`]: what replicas sharing a database announce to each other.

#![forbid(unsafe_code)]

pub mod jsonrpc;
pub mod net;
pub mod params;
pub mod protocol;
pub mod redact;
pub mod replica_changes;
pub mod skills;
pub mod text;
pub mod trace_context;
