//! Logs: `server_log` and `web_log` (one tool, two sources) read the log; and
//! `set_log_level` changes what is logged.
//!
//! `server_log` merges three readers in time order, each line labelled with its reader
//! and each reader's availability reported: the in-memory ring buffer, the log file
//! (`LOG_FILE`, for lines older than the buffer holds) and the database (warnings,
//! errors and audit records kept across restarts). A line two readers hold is returned
//! once. The file and database readers, and that merge, are in `log_readers`.
//!
//! Log results respect a client's context budget: a `cursor` to pass back as `since`
//! for "only what is new", a `max_bytes` budget, a `limit`, and a note of what was cut.
//! Lines caused by the MCP endpoint itself are left out unless `include_mcp` is set, so
//! a client reading logs does not mostly read about its own reads.

use chrono::Utc;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::log_readers::{self, Cut, ReadLine, Reader, ReaderStatus, label};
use super::trace_view::MAX_MAX_BYTES;
use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed};
use crate::logs::buffer::LogSource;
use crate::mcp::logs::{LogArgs, cut_notes};
use crate::mcp::{Annotations, RequestContext, ToolSpec};

/// `server_log` or `web_log`: the log of one source.
pub(super) struct ReadLog(pub LogSource);

impl DiagnosticTool for ReadLog {
    type Args = LogArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        let (name, title, what, database) = match self.0 {
            LogSource::Server => (
                "server_log",
                "Server log",
                "the bot's own server log (tracing events: level, target, message, fields)",
                ", and from the database, which keeps warnings, errors and audit records across restarts",
            ),
            LogSource::Web => (
                "web_log",
                "Web console log",
                "browser console lines forwarded by the bot's web page (console.log/info/warn/error)",
                "",
            ),
        };
        ToolSpec::new(
            name,
            title,
            format!(
                "Reads {what} from an in-memory ring buffer — and, when LOG_FILE is set, from the log file for lines \
                 older than the buffer holds{database} (each line says its `reader`; `readers` says which were available) — \
                 merged in time order, newest last. Filter by minimum level, substring (grep), \
                 and since (a time or the `cursor` from your previous call, to get only new lines). \
                 Bounded by `limit` and `max_bytes`; says when lines were cut."
            ),
        )
        .output_of::<LogAnswer>()
        .annotations(Annotations::READ_ONLY)
        .max_result_size(MAX_MAX_BYTES)
    }

    async fn run(&self, d: &Diagnostics, args: LogArgs, _: &RequestContext) -> Answer {
        let query = match args.query(self.0) {
            Ok(query) => query,
            Err(e) => return Ok(failed(e.0)),
        };
        let page = d.logs.query(&query);
        let mut lines = label(&page.records, Reader::RingBuffer);
        let mut cut = Cut {
            by_limit: page.truncated_by_limit,
            by_budget: page.truncated_by_budget,
        };
        let log_file =
            log_readers::add_older_from_file(d, &query, &page, &mut lines, &mut cut).await;
        let database = match self.0 {
            LogSource::Web => ReaderStatus::unavailable(
                Reader::Database,
                "only the bot's own warnings, errors and audit records are kept in the database",
            ),
            LogSource::Server => {
                log_readers::add_from_database(d, &query, &mut lines, &mut cut).await
            }
        };
        let notes = cut_notes(&query, &page, cut.by_limit, Some("MCP_LOG_BUFFER_SIZE"));
        Ok(done(json!(LogAnswer {
            lines,
            cursor: page.cursor,
            truncated: cut.by_limit || cut.by_budget,
            note: (!notes.is_empty()).then(|| notes.join("; ")),
            buffer: BufferState {
                reader: Reader::RingBuffer,
                lines_held: d.logs.len(),
                capacity: d.logs.capacity(),
                dropped_since_start: page.dropped,
            },
            readers: vec![
                ReaderStatus::of(Reader::RingBuffer, true),
                log_file,
                database,
                ReaderStatus::audit(query.include_mcp),
            ],
        })))
    }
}

/// `server_log`'s and `web_log`'s answer.
#[derive(Serialize, JsonSchema)]
struct LogAnswer {
    /// Oldest first
    lines: Vec<ReadLine>,
    /// Pass as `since` to get only newer lines
    cursor: u64,
    /// The limit or the byte budget left older lines out
    truncated: bool,
    /// What was left out, and why
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    buffer: BufferState,
    /// Where lines were looked for, and whether each was available
    readers: Vec<ReaderStatus>,
}

/// The ring buffer: how full it is, and what it dropped.
#[derive(Serialize, JsonSchema)]
struct BufferState {
    reader: Reader,
    lines_held: usize,
    capacity: usize,
    dropped_since_start: u64,
}

pub(super) struct SetLogLevel;

#[derive(Deserialize, JsonSchema)]
pub(super) struct SetLogLevelArgs {
    /// RUST_LOG-style filter, e.g. debug or info,porthole::bot=trace
    #[schemars(length(min = 1, max = 1000))]
    filter: String,
    /// Restore the previous filter after this many seconds
    #[schemars(range(min = 1, max = 86400))]
    duration_secs: Option<u64>,
}

impl DiagnosticTool for SetLogLevel {
    type Args = SetLogLevelArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "set_log_level",
            "Change the log level",
            "Changes what the bot logs, at runtime, in RUST_LOG syntax: a level (`debug`) or per-module \
             directives (`info,porthole::bot::agents=trace`). With duration_secs the previous filter comes \
             back by itself afterwards — turn on detail, reproduce, read server_log.",
        )
        .output_of::<LogLevelChanged>()
        .annotations(Annotations {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        })
    }

    async fn run(&self, d: &Diagnostics, args: SetLogLevelArgs, _: &RequestContext) -> Answer {
        let Some(control) = d.log_filter.clone() else {
            return Ok(failed(
                "this process has no reloadable log filter (it is only available in the porthole binary)",
            ));
        };
        let previous = control.current();
        if let Err(e) = control.set(&args.filter) {
            return Ok(failed(format!(
                "invalid filter `{}`: {e}; use a level (trace, debug, info, warn, error) or directives like info,porthole::bot=debug",
                args.filter
            )));
        }
        tracing::info!(target: "porthole::mcp::audit", from = %previous, to = %args.filter, "log filter changed");
        let restores_at = args.duration_secs.map(|secs| {
            let restore = previous.clone();
            let applied = args.filter.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
                // Only undo our own change: a later change by someone else stays.
                if control.current() == applied {
                    let _ = control.set(&restore);
                    tracing::info!(target: "porthole::mcp::audit", to = %restore, "log filter restored");
                }
            });
            (Utc::now() + chrono::Duration::seconds(secs as i64)).to_rfc3339()
        });
        Ok(done(json!(LogLevelChanged {
            previous,
            current: args.filter,
            restores_at,
        })))
    }
}

/// `set_log_level`'s answer.
#[derive(Serialize, JsonSchema)]
struct LogLevelChanged {
    /// The filter before this call.
    previous: String,
    /// The filter now.
    current: String,
    /// When the previous filter comes back (RFC 3339), with `duration_secs`.
    restores_at: Option<String>,
}
