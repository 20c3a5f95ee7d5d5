//! `server_log`, ready to serve: the newest lines of the ring buffer, filtered by level,
//! text and time, bounded by a count and a byte budget, with a `cursor` for "only what
//! is new". [`LogArgs`] are the arguments every log tool takes (the bot's `server_log`
//! and `web_log`, which add the log file and the database, take the same).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::buffer::{LogBuffer, LogPage, LogQuery, LogRecord, LogSource, level_name, parse_level};
use crate::context::RequestContext;
use crate::schema::default_of;
use crate::tool::{Annotations, ToolSpec};
use crate::typed_tool::{ToolError, TypedTool};

/// The size budget of a log read that names none: room for 500 ordinary lines, not for
/// 500 lines of the longest kind.
pub const DEFAULT_LOG_BYTES: usize = 256 * 1024;
/// The largest size budget a log read may ask for.
pub const MAX_LOG_BYTES: usize = 1024 * 1024;

/// The most lines a log read returns when it names no `limit`.
const DEFAULT_LIMIT: usize = 50;

/// What a log read asks for; its input schema is derived from this type.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct LogArgs {
    /// Minimum level to include: `log` = info and above (everything a console.log would
    /// show), `warn` = warnings and errors, `error` = errors only; tracing's `trace`,
    /// `debug` and `info` work too. Omit for all levels the log filter keeps.
    #[schemars(extend("enum" = ["log", "warn", "error", "trace", "debug", "info"]))]
    level: Option<String>,
    /// Only lines containing this text (message, target or fields)
    #[schemars(length(max = 1000))]
    grep: Option<String>,
    /// Match grep ignoring case
    #[serde(default)]
    case_insensitive: bool,
    /// Only lines after this: an ISO 8601 time (UTC when it has no offset), or the
    /// `cursor` returned by an earlier call
    #[schemars(extend("type" = ["string", "integer"]))]
    since: Option<Value>,
    /// Most lines to return (the newest win)
    #[serde(default = "default_of::<DEFAULT_LIMIT>")]
    #[schemars(range(min = 1, max = 500))]
    limit: usize,
    /// Approximate size budget for the returned lines
    #[serde(default = "default_of::<DEFAULT_LOG_BYTES>")]
    #[schemars(range(min = 256, max = MAX_LOG_BYTES))]
    max_bytes: usize,
    /// Also include lines caused by MCP requests (audit of tools/call etc.)
    #[serde(default)]
    include_mcp: bool,
}

impl LogArgs {
    /// The query these arguments ask of `source`; an unreadable `since` is the error.
    pub fn query(self, source: LogSource) -> Result<LogQuery, ToolError> {
        let mut query = LogQuery {
            min_level: self.level.as_deref().and_then(parse_level),
            grep: self.grep.filter(|g| !g.is_empty()),
            case_insensitive: self.case_insensitive,
            source: Some(source),
            include_mcp: self.include_mcp,
            limit: self.limit.clamp(1, 500),
            byte_budget: Some(self.max_bytes),
            ..LogQuery::default()
        };
        match self.since.as_ref().map(parse_since).transpose()? {
            None => {}
            Some(Since::Seq(n)) => query.after_seq = Some(n),
            Some(Since::Time(t)) => query.since = Some(t),
        }
        Ok(query)
    }
}

/// `since` is a sequence number (the `cursor` of an earlier result) or an ISO 8601 time.
enum Since {
    Seq(u64),
    Time(DateTime<Utc>),
}

fn parse_since(value: &Value) -> Result<Since, ToolError> {
    let bad = || {
        ToolError::new(format!(
            "`since` must be a sequence number (the `cursor` of an earlier result) or an ISO 8601 time such as 2026-01-31T12:00:00Z (without an offset: UTC), not {value}"
        ))
    };
    match value {
        Value::Number(n) => n.as_u64().map(Since::Seq).ok_or_else(bad),
        Value::String(s) => {
            if let Ok(n) = s.trim().parse::<u64>() {
                Ok(Since::Seq(n))
            } else {
                porthole_core::text::parse_iso8601(s)
                    .map(Since::Time)
                    .ok_or_else(bad)
            }
        }
        _ => Err(bad()),
    }
}

/// One log line as the log tools return it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LogLine {
    /// Its number: later lines have larger ones.
    pub seq: u64,
    /// Microseconds since the Unix epoch
    pub time_us: i64,
    /// RFC 3339, UTC
    pub timestamp: String,
    /// Its level
    #[schemars(extend("enum" = ["trace", "debug", "info", "warn", "error"]))]
    pub level: String,
    /// The `tracing` target (a module path), or `browser`
    pub target: String,
    /// The message
    pub message: String,
    /// The event's other fields, as text
    pub fields: BTreeMap<String, String>,
    /// `server` (the process's own events) or `web` (a browser's console)
    #[schemars(extend("enum" = ["server", "web"]))]
    pub source: String,
}

impl From<&LogRecord> for LogLine {
    fn from(record: &LogRecord) -> Self {
        LogLine {
            seq: record.seq,
            time_us: record.time_us,
            timestamp: record.timestamp(),
            level: level_name(record.level).to_string(),
            target: record.target.clone(),
            message: record.message.clone(),
            fields: record
                .fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            source: record.source.as_str().to_string(),
        }
    }
}

/// `server_log`'s answer (the ready tool's).
#[derive(Debug, Serialize, JsonSchema)]
pub struct LogLines {
    /// Oldest first
    pub lines: Vec<LogLine>,
    /// Pass as `since` to get only newer lines
    pub cursor: u64,
    /// The limit or the byte budget left older lines out
    pub truncated: bool,
    /// What was left out, and why
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Lines the ring buffer holds now, of how many it can
    pub lines_held: usize,
    /// The most lines the ring buffer holds
    pub capacity: usize,
    /// Lines the ring buffer dropped since start (older than its capacity)
    pub dropped_since_start: u64,
}

/// `server_log` over a [`LogBuffer`]: the process's own log, read in-process.
pub struct ReadLogs {
    buffer: Arc<LogBuffer>,
}

impl ReadLogs {
    /// The tool reading `buffer`.
    pub fn new(buffer: Arc<LogBuffer>) -> Self {
        ReadLogs { buffer }
    }

    /// The lines `args` ask for.
    pub fn read(&self, args: LogArgs) -> Result<LogLines, ToolError> {
        let query = args.query(LogSource::Server)?;
        let page = self.buffer.query(&query);
        Ok(LogLines {
            lines: page.records.iter().map(LogLine::from).collect(),
            cursor: page.cursor,
            truncated: page.truncated_by_limit || page.truncated_by_budget,
            note: Some(cut_notes(&query, &page, page.truncated_by_limit, None).join("; "))
                .filter(|note| !note.is_empty()),
            lines_held: self.buffer.len(),
            capacity: self.buffer.capacity(),
            dropped_since_start: page.dropped,
        })
    }
}

#[async_trait]
impl TypedTool for ReadLogs {
    type Args = LogArgs;
    type Answer = LogLines;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "server_log",
            "Server log",
            "Reads the server's own log (tracing events: level, target, message, fields) from an in-memory \
             ring buffer, newest last. Filter by minimum level, substring (grep), and since (a time or the \
             `cursor` from your previous call, to get only new lines). Bounded by `limit` and `max_bytes`; \
             says when lines were cut.",
        )
        .annotations(Annotations::READ_ONLY)
        .max_result_size(MAX_LOG_BYTES)
    }

    async fn run(&self, args: LogArgs, _: &RequestContext) -> Result<LogLines, ToolError> {
        self.read(args)
    }
}

/// What an answer to `query` left out, and why: lines the byte budget cut (in the ring
/// buffer's `page`), lines the ring buffer dropped between a cursor and now (naming the
/// setting of its size, when there is one), lines past the limit (`cut_by_limit`, which
/// readers beside the buffer may set too).
pub fn cut_notes(
    query: &LogQuery,
    page: &LogPage,
    cut_by_limit: bool,
    size_setting: Option<&str>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if page.truncated_by_budget {
        notes.push("max_bytes cut older lines".to_string());
    }
    if let Some(after) = query.after_seq.filter(|&after| after < page.dropped) {
        let setting = size_setting.map(|s| format!(" ({s})")).unwrap_or_default();
        notes.push(format!(
            "{} lines between your cursor and the oldest kept line were dropped by the ring buffer{setting}",
            page.dropped - after
        ));
    }
    if cut_by_limit {
        notes.push(format!(
            "more lines matched than limit={}; older ones were left out (narrow the filter or page with `since`)",
            query.limit
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::input_schema_of;
    use serde_json::json;
    use tracing_subscriber::layer::SubscriberExt;

    fn args(value: Value) -> LogArgs {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn since_takes_a_cursor_or_a_time_and_names_what_it_takes_otherwise() {
        let cursor = args(json!({"since": "42"}))
            .query(LogSource::Server)
            .unwrap();
        assert_eq!(cursor.after_seq, Some(42));
        let time = args(json!({"since": "2026-01-31T12:00:00Z"}));
        assert!(time.query(LogSource::Server).unwrap().since.is_some());
        let bad = args(json!({"since": "yesterday"})).query(LogSource::Server);
        assert!(bad.unwrap_err().0.contains("ISO 8601"));
    }

    #[test]
    fn the_schema_lists_the_defaults_the_query_uses() {
        let schema = input_schema_of::<LogArgs>();
        let query = args(json!({})).query(LogSource::Server).unwrap();
        assert_eq!(schema["properties"]["limit"]["default"], json!(query.limit));
        assert_eq!(
            schema["properties"]["max_bytes"]["default"],
            json!(query.byte_budget)
        );
        assert_eq!(
            schema["properties"]["since"]["type"],
            json!(["string", "integer"])
        );
    }

    #[test]
    fn the_ready_tool_reads_the_newest_lines_and_a_cursor_gives_only_new_ones() {
        let buffer = LogBuffer::new(100);
        let subscriber = tracing_subscriber::registry().with(buffer.layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "shop", "first");
            tracing::warn!(target: "shop", item = "tea", "second");
            tracing::info!(target: "porthole::mcp::audit", "tools/call");
        });
        let tool = ReadLogs::new(buffer.clone());
        let all = tool.read(args(json!({}))).unwrap();
        let messages: Vec<_> = all.lines.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(
            messages,
            ["first", "second"],
            "the endpoint's own line left out"
        );
        assert_eq!(all.lines[1].fields["item"], "tea");
        let warn = tool.read(args(json!({"level": "warn"}))).unwrap();
        assert_eq!(warn.lines.len(), 1);
        let newer = json!({"since": all.cursor});
        assert!(tool.read(args(newer)).unwrap().lines.is_empty());
    }
}
