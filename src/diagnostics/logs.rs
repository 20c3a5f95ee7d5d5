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
use serde_json::{Value, json};

use super::log_readers::{self, Cut, label};
use super::trace_view::MAX_MAX_BYTES;
use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed};
use crate::logs::buffer::{LogPage, LogQuery, LogSource};
use crate::mcp::logs::{LogArgs, LogLine};
use crate::mcp::{Annotations, RequestContext, ToolSpec, schema_of};

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
        .output(
            json!({
                "lines": {"type": "array", "items": line_schema(), "description": "Oldest first"},
                "cursor": {"type": "integer", "description": "Pass as `since` to get only newer lines"},
                "truncated": {"type": "boolean"},
                "note": {"type": "string", "description": "What was left out, and why"},
                "buffer": {"type": "object", "properties": {
                    "reader": {"const": "ring_buffer"},
                    "lines_held": {"type": "integer"}, "capacity": {"type": "integer"},
                    "dropped_since_start": {"type": "integer"}}},
                "readers": {"type": "array", "items": reader_schema(),
                            "description": "Where lines were looked for, and whether each was available"}
            }),
            &["lines", "cursor", "truncated", "buffer", "readers"],
        )
        .annotations(Annotations::READ_ONLY)
        .max_result_size(MAX_MAX_BYTES)
    }

    async fn run(&self, d: &Diagnostics, args: LogArgs, _: &RequestContext) -> Answer {
        let query = match args.query(self.0) {
            Ok(query) => query,
            Err(e) => return Ok(failed(e.0)),
        };
        let page = d.logs.query(&query);
        let mut lines = label(&page.records, "ring_buffer");
        let mut cut = Cut {
            by_limit: page.truncated_by_limit,
            by_budget: page.truncated_by_budget,
        };
        let log_file =
            log_readers::add_older_from_file(d, &query, &page, &mut lines, &mut cut).await;
        let database = match self.0 {
            LogSource::Web => json!({"reader": "database", "available": false,
                "reason": "only the bot's own warnings, errors and audit records are kept in the database"}),
            LogSource::Server => {
                log_readers::add_from_database(d, &query, &mut lines, &mut cut).await
            }
        };
        let mut result = json!({
            "lines": lines,
            "cursor": page.cursor,
            "truncated": cut.by_limit || cut.by_budget,
            "buffer": {
                "reader": "ring_buffer",
                "lines_held": d.logs.len(),
                "capacity": d.logs.capacity(),
                "dropped_since_start": page.dropped,
            },
            "readers": [
                {"reader": "ring_buffer", "available": true},
                log_file,
                database,
                {"reader": "audit", "available": true, "included": query.include_mcp,
                 "how": "tools/call audit lines (target porthole::mcp::audit); set include_mcp to see them"},
            ],
        });
        let notes = cut_notes(&query, &page, &cut);
        if !notes.is_empty() {
            result["note"] = json!(notes.join("; "));
        }
        Ok(done(result))
    }
}

/// One log line as the log tools return it, labelled with the reader that held it.
fn line_schema() -> Value {
    let mut line = schema_of::<LogLine>();
    line["properties"]["reader"] =
        json!({"type": "string", "enum": ["ring_buffer", "log_file", "database"]});
    line["properties"]["replica"] =
        json!({"type": "string", "description": "Database lines: the replica that wrote it"});
    if let Some(required) = line["required"].as_array_mut() {
        required.push(json!("reader"));
    }
    line
}

/// One of the places lines are read from, and what it gave.
fn reader_schema() -> Value {
    json!({"type": "object", "properties": {
        "reader": {"type": "string", "enum": ["ring_buffer", "log_file", "database", "audit"]},
        "available": {"type": "boolean"},
        "reason": {"type": "string", "description": "Why it is not available"},
        "path": {"type": "string"},
        "lines_returned": {"type": "integer"},
        "keeps": {"type": "string"},
        "persistent": {"type": "boolean"},
        "max_events": {"type": "integer"},
        "dropped_when_busy": {"type": "integer"},
        "note": {"type": "string"},
        "included": {"type": "boolean"},
        "how": {"type": "string"},
    }, "required": ["reader", "available"]})
}

/// What the answer says was left out, and why: by the budget (in the ring buffer), by
/// the ring buffer's own size between a cursor and now, by the limit (anywhere).
fn cut_notes(query: &LogQuery, page: &LogPage, cut: &Cut) -> Vec<String> {
    let mut notes = Vec::new();
    if page.truncated_by_budget {
        notes.push("max_bytes cut older lines".to_string());
    }
    if page.dropped > 0 && query.after_seq.is_some_and(|s| s < page.dropped) {
        notes.push(format!(
            "{} lines between your cursor and the oldest kept line were dropped by the ring buffer (MCP_LOG_BUFFER_SIZE)",
            page.dropped - query.after_seq.unwrap_or(0)
        ));
    }
    if cut.by_limit {
        notes.push(format!("more lines matched than limit={}; older ones were left out (narrow the filter or page with `since`)", query.limit));
    }
    notes
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
