//! The bot's own log, captured for those who read it: a `tracing` layer that copies every
//! event into a bounded ring buffer (`buffer`), the `LOG_FILE` writer and reader with its
//! rotation (`file`), and the journal that keeps warnings, errors and `/mcp` audit
//! records in the store so they outlive a restart (`journal`), and the redaction every
//! line passes before it reaches the terminal, the file or the journal (`redaction`).
//! `server_log` and `web_log` (in `diagnostics`) merge what these readers hold.
//!
//! Nothing here knows the MCP protocol; the MCP endpoint only reads through the tools.

pub mod buffer;
pub mod file;
pub mod journal;
pub mod redaction;
