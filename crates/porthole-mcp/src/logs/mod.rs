//! The process's own log, for the MCP clients that read it: a `tracing` layer that
//! copies every event into a bounded ring buffer ([`buffer`]), the redaction every line
//! passes on its way out ([`redaction`]), and a ready tool that reads the buffer
//! ([`ReadLogs`], `server_log`) with the arguments every log tool takes ([`LogArgs`]).
//!
//! ```
//! use porthole_mcp::logs::{LogBuffer, ReadLogs};
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let logs = LogBuffer::new(1000);
//! let subscriber = tracing_subscriber::registry().with(logs.layer());
//! // tracing::subscriber::set_global_default(subscriber)?;  (once, at start-up)
//! # drop(subscriber);
//! let tool = porthole_mcp::typed(ReadLogs::new(logs));
//! assert_eq!(tool.spec().name, "server_log");
//! ```
//!
//! Lines caused by the endpoint's own work (targets under [`buffer::MCP_TARGET`]) are
//! left out unless a call sets `include_mcp`, so a client reading logs does not mostly
//! read about its own reads.

pub mod buffer;
mod read_logs;
pub mod redaction;

pub use buffer::{BufferLayer, LogBuffer, LogPage, LogQuery, LogRecord, LogSource};
pub use read_logs::{
    DEFAULT_LOG_BYTES, LogArgs, LogLine, LogLines, MAX_LOG_BYTES, ReadLogs, cut_notes,
};
