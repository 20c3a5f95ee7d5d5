//! The bot's own log, captured for those who read it: the ring buffer every event is
//! copied into and the redaction every line passes before it leaves (`buffer` and
//! `redaction`, the endpoint crate's, which any service mounting it uses the same way),
//! the `LOG_FILE` writer and reader with its rotation (`file`), and the journal that
//! keeps warnings, errors and `/mcp` audit records in the store so they outlive a
//! restart (`journal`). `server_log` and `web_log` (in `diagnostics`) merge what these
//! readers hold.

pub use porthole_mcp::logs::{buffer, redaction};
pub mod file;
pub mod journal;
