//! Logs and health: `server_log`, `web_log` (one tool, two sources) and `health`.
//!
//! `server_log` merges three readers in time order, each line labelled with its reader
//! and each reader's availability reported: the in-memory ring buffer, the log file
//! (`LOG_FILE`, for lines older than the buffer holds) and the database (warnings,
//! errors and audit records kept across restarts). A line two readers hold is returned
//! once.
//!
//! Log results respect a client's context budget: a `cursor` to pass back as `since`
//! for "only what is new", a `max_bytes` budget, a `limit`, and a note of what was cut.
//! Lines caused by the MCP endpoint itself are left out unless `include_mcp` is set, so
//! a client reading logs does not mostly read about its own reads.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Diagnostics, done, failed, object_schema, output_schema};
use crate::logs::buffer::{LogQuery, LogRecord, LogSource, parse_level, select};
use crate::mcp::{Annotations, CallToolResult, Outcome, RequestContext, RpcError, Tool, ToolSpec};

pub fn tools(d: &Arc<Diagnostics>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(LogTool {
            d: d.clone(),
            source: LogSource::Server,
        }),
        Arc::new(LogTool {
            d: d.clone(),
            source: LogSource::Web,
        }),
        Arc::new(Health(d.clone())),
        Arc::new(SetLogLevel(d.clone())),
    ]
}

struct SetLogLevel(Arc<Diagnostics>);

#[derive(Deserialize)]
struct SetLogLevelArgs {
    filter: String,
    duration_secs: Option<u64>,
}

#[async_trait]
impl Tool for SetLogLevel {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "set_log_level".into(),
            title: Some("Change the log level".into()),
            description: "Changes what the bot logs, at runtime, in RUST_LOG syntax: a level (`debug`) or per-module \
                          directives (`info,porthole::bot::agents=trace`). With duration_secs the previous filter comes \
                          back by itself afterwards — turn on detail, reproduce, read server_log."
                .into(),
            input_schema: object_schema(
                json!({
                    "filter": {"type": "string", "minLength": 1, "maxLength": 1000,
                               "description": "RUST_LOG-style filter, e.g. debug or info,porthole::bot=trace"},
                    "duration_secs": {"type": "integer", "minimum": 1, "maximum": 86400,
                                      "description": "Restore the previous filter after this many seconds"}
                }),
                &["filter"],
            ),
            output_schema: Some(output_schema(
                json!({"previous": {"type": "string"}, "current": {"type": "string"},
                       "restores_at": {"type": ["string", "null"]}}),
                &["previous", "current"],
            )),
            annotations: Annotations {
                read_only: false,
                destructive: false,
                idempotent: true,
                open_world: false,
            },
        }
    }

    async fn call(
        &self,
        args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: SetLogLevelArgs = args_or_error!("set_log_level", args);
        let Some(control) = self.0.log_filter.clone() else {
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
        Ok(done(
            json!({"previous": previous, "current": args.filter, "restores_at": restores_at}),
        ))
    }
}

struct LogTool {
    d: Arc<Diagnostics>,
    source: LogSource,
}

#[derive(Deserialize)]
struct LogArgs {
    level: Option<String>,
    grep: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    since: Option<Value>,
    limit: Option<usize>,
    max_bytes: Option<usize>,
    #[serde(default)]
    include_mcp: bool,
}

/// `since` is a sequence number (the `cursor` of an earlier result) or an RFC 3339 time.
enum Since {
    Seq(u64),
    Time(DateTime<Utc>),
}

fn parse_since(value: &Value) -> Result<Since, String> {
    let bad = || {
        format!(
            "`since` must be a sequence number (the `cursor` of an earlier result) or an RFC 3339 time such as 2026-01-31T12:00:00Z, not {value}"
        )
    };
    match value {
        Value::Number(n) => n.as_u64().map(Since::Seq).ok_or_else(bad),
        Value::String(s) => {
            if let Ok(n) = s.trim().parse::<u64>() {
                Ok(Since::Seq(n))
            } else {
                DateTime::parse_from_rfc3339(s.trim())
                    .map(|t| Since::Time(t.with_timezone(&Utc)))
                    .map_err(|_| bad())
            }
        }
        _ => Err(bad()),
    }
}

#[async_trait]
impl Tool for LogTool {
    fn spec(&self) -> ToolSpec {
        let database = match self.source {
            LogSource::Server => {
                ", and from the database, which keeps warnings, errors and audit records across restarts"
            }
            LogSource::Web => "",
        };
        let (name, what) = match self.source {
            LogSource::Server => (
                "server_log",
                "the bot's own server log (tracing events: level, target, message, fields)",
            ),
            LogSource::Web => (
                "web_log",
                "browser console lines forwarded by the bot's web page (console.log/info/warn/error)",
            ),
        };
        ToolSpec {
            name: name.into(),
            title: Some(
                if self.source == LogSource::Server {
                    "Server log"
                } else {
                    "Web console log"
                }
                .into(),
            ),
            description: format!(
                "Reads {what} from an in-memory ring buffer — and, when LOG_FILE is set, from the log file for lines \
                 older than the buffer holds{database} (each line says its `reader`; `readers` says which were available) — \
                 merged in time order, newest last. Filter by minimum level, substring (grep), \
                 and since (a time or the `cursor` from your previous call, to get only new lines). \
                 Bounded by `limit` and `max_bytes`; says when lines were cut."
            ),
            input_schema: object_schema(
                json!({
                    "level": {"type": "string", "enum": ["log", "warn", "error", "trace", "debug", "info"],
                              "description": "Minimum level to include: `log` = info and above (everything a console.log \
                                              would show), `warn` = warnings and errors, `error` = errors only; tracing's \
                                              `trace`, `debug` and `info` work too. Omit for all levels the log filter keeps."},
                    "grep": {"type": "string", "maxLength": 1000, "description": "Only lines containing this text (message, target or fields)"},
                    "case_insensitive": {"type": "boolean", "default": false, "description": "Match grep ignoring case"},
                    "since": {"type": ["string", "integer"],
                              "description": "Only lines after this: an RFC 3339 time, or the `cursor` returned by an earlier call"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50,
                              "description": "Most lines to return (the newest win)"},
                    "max_bytes": {"type": "integer", "minimum": 256, "maximum": 1048576,
                                  "description": "Approximate size budget for the returned lines"},
                    "include_mcp": {"type": "boolean", "default": false,
                                    "description": "Also include lines caused by MCP requests (audit of tools/call etc.)"}
                }),
                &[],
            ),
            output_schema: Some(output_schema(
                json!({
                    "lines": {"type": "array", "items": {"type": "object"}},
                    "cursor": {"type": "integer", "description": "Pass as `since` to get only newer lines"},
                    "truncated": {"type": "boolean"},
                    "note": {"type": "string"},
                    "buffer": {"type": "object"}
                }),
                &["lines", "cursor", "truncated", "buffer"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let args: LogArgs = args_or_error!("log", args);
        let mut query = LogQuery {
            min_level: args.level.as_deref().and_then(parse_level),
            grep: args.grep.filter(|g| !g.is_empty()),
            case_insensitive: args.case_insensitive,
            source: Some(self.source),
            include_mcp: args.include_mcp,
            limit: args.limit.unwrap_or(50).clamp(1, 500),
            byte_budget: args.max_bytes,
            ..LogQuery::default()
        };
        match args.since.as_ref().map(parse_since) {
            None => {}
            Some(Ok(Since::Seq(n))) => query.after_seq = Some(n),
            Some(Ok(Since::Time(t))) => query.since = Some(t),
            Some(Err(message)) => return Ok(failed(message)),
        }
        let page = self.d.logs.query(&query);
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
        let label = |records: &[LogRecord], reader: &str| -> Vec<Value> {
            records
                .iter()
                .map(|r| {
                    let mut line = r.to_json();
                    line["reader"] = json!(reader);
                    line
                })
                .collect()
        };
        let mut lines = label(&page.records, "ring_buffer");
        let mut truncated_by_limit = page.truncated_by_limit;
        let mut truncated = page.truncated_by_budget;

        // Older lines than the buffer holds come from the log file, when there is one
        // and the page still has room. A cursor (`since` a sequence) only asks for new
        // lines, which the buffer has.
        let log_file = match &self.d.log_file {
            None => json!({"reader": "log_file", "available": false,
                           "reason": "LOG_FILE is not set; only the ring buffer is searched"}),
            Some(file) => {
                let mut from_file = 0;
                if !truncated_by_limit
                    && !truncated
                    && query.after_seq.is_none()
                    && page.records.len() < query.limit
                {
                    // The budget counts the buffer's lines the way `select` does.
                    let used: usize = page.records.iter().map(LogRecord::weight).sum();
                    let older = LogQuery {
                        limit: query.limit - page.records.len(),
                        bytes_used: used,
                        ..query.clone()
                    };
                    let before = self.d.logs.oldest_time_us();
                    let file = file.clone();
                    let picked = tokio::task::spawn_blocking(move || {
                        let records: Vec<LogRecord> = file.newest_first(before).collect();
                        select(records.iter(), &older)
                    })
                    .await;
                    if let Ok((records, by_limit, by_budget)) = picked {
                        from_file = records.len();
                        let mut merged = label(&records, "log_file");
                        merged.append(&mut lines);
                        lines = merged;
                        truncated_by_limit = by_limit;
                        truncated = truncated || by_budget;
                    }
                }
                json!({"reader": "log_file", "available": true, "path": file.path().display().to_string(),
                       "lines_returned": from_file})
            }
        };
        let database = match self.source {
            LogSource::Web => json!({"reader": "database", "available": false,
                "reason": "only the bot's own warnings, errors and audit records are kept in the database"}),
            LogSource::Server => {
                let used: usize = lines.iter().map(|l| l.to_string().len()).sum();
                let (status, stored) = self.database_lines(&query, used).await;
                let added = merge_lines(&mut lines, stored, query.limit);
                truncated_by_limit |= added.cut_by_limit;
                let mut status = status;
                if status["available"] == true {
                    status["lines_returned"] = json!(added.added);
                }
                status
            }
        };
        if truncated_by_limit {
            notes.push(format!("more lines matched than limit={}; older ones were left out (narrow the filter or page with `since`)", query.limit));
        }
        let mut result = json!({
            "lines": lines,
            "cursor": page.cursor,
            "truncated": truncated_by_limit || truncated,
            "buffer": {
                "reader": "ring_buffer",
                "lines_held": self.d.logs.len(),
                "capacity": self.d.logs.capacity(),
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
        if !notes.is_empty() {
            result["note"] = json!(notes.join("; "));
        }
        Ok(done(result))
    }
}

impl LogTool {
    /// The database reader: warnings, errors and audit records this and earlier runs
    /// stored, filtered like the other readers. Only asked for lines by time (a cursor
    /// from `since` is a sequence of this run's ring buffer). Returns the reader's
    /// status and its lines labelled `database`, oldest first.
    async fn database_lines(&self, query: &LogQuery, bytes_used: usize) -> (Value, Vec<Value>) {
        let store = &self.d.bot.store;
        let mut status = json!({
            "reader": "database",
            "available": true,
            "keeps": "the bot's warnings, errors and MCP audit records",
            "persistent": store.path() != ":memory:",
            "max_events": self.d.bot.config.log_db_max_events,
            "dropped_when_busy": self.d.journal.dropped(),
        });
        if query.after_seq.is_some() {
            status["note"] = json!(
                "not read for a cursor: it only holds what the ring buffer had when it was new"
            );
            return (status, Vec::new());
        }
        let levels: Vec<String> = query
            .min_level
            .map(|min| {
                ["trace", "debug", "info", "warn", "error"]
                    .into_iter()
                    .filter(|name| parse_level(name).is_some_and(|l| l <= min))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        // The rows hold JSON text: a needle that JSON would escape cannot be searched in
        // SQL, and case-insensitive matching is done exactly afterwards anyway.
        let prefilter = query.grep.clone().filter(|g| {
            !query.case_insensitive && !g.contains(['"', '\\']) && !g.contains(char::is_control)
        });
        let rows = store
            .log_events(
                levels,
                query.since.map(|t| t.timestamp_micros() - 1),
                prefilter,
                (query.limit * 2).min(1000),
            )
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                return (
                    json!({"reader": "database", "available": false, "reason": format!("cannot read the log events: {e}")}),
                    Vec::new(),
                );
            }
        };
        // Each row names the replica that wrote it (several may share the database);
        // a line shows it, keyed by the record's time and sequence number.
        let mut replicas = std::collections::HashMap::new();
        let records: Vec<LogRecord> = rows
            .iter()
            .filter_map(|(row, replica)| {
                let record = LogRecord::from_json(&serde_json::from_str::<Value>(row).ok()?)?;
                if let Some(replica) = replica {
                    replicas.insert((record.time_us, record.seq), replica.clone());
                }
                Some(record)
            })
            .collect();
        let wanted = LogQuery {
            bytes_used,
            ..query.clone()
        };
        let (picked, _, _) = select(records.iter(), &wanted);
        let lines = picked
            .iter()
            .map(|r| {
                let mut line = r.to_json();
                line["reader"] = json!("database");
                if let Some(replica) = replicas.get(&(r.time_us, r.seq)) {
                    line["replica"] = json!(replica);
                }
                line
            })
            .collect();
        (status, lines)
    }
}

/// What merging one reader's lines into the others' did.
struct Merged {
    added: usize,
    cut_by_limit: bool,
}

/// Two readers' copies of one event differ in time by the few microseconds between the
/// layers that recorded them (more when a file write was slow); a copy is looked for
/// within this window.
const SAME_EVENT_WINDOW_US: i64 = 50_000;

/// Merges `more` into `lines` in time order, skipping lines another reader already
/// returned (same level, target, message and fields, within [`SAME_EVENT_WINDOW_US`];
/// each earlier line stands for one copy only, so repeated identical lines keep their
/// count, and the first reader's label stays), and keeps the newest `limit`.
fn merge_lines(lines: &mut Vec<Value>, more: Vec<Value>, limit: usize) -> Merged {
    let key = |line: &Value| {
        (
            line["level"].as_str().unwrap_or_default().to_string(),
            line["target"].as_str().unwrap_or_default().to_string(),
            line["message"].as_str().unwrap_or_default().to_string(),
            line["fields"].to_string(),
        )
    };
    let time = |line: &Value| line["time_us"].as_i64().unwrap_or_default();
    let mut unmatched: std::collections::HashMap<_, Vec<i64>> = std::collections::HashMap::new();
    for line in lines.iter() {
        unmatched.entry(key(line)).or_default().push(time(line));
    }
    let fresh: Vec<Value> = more
        .into_iter()
        .filter(|line| {
            let Some(times) = unmatched.get_mut(&key(line)) else {
                return true;
            };
            let at = time(line);
            match times
                .iter()
                .position(|t| (t - at).abs() <= SAME_EVENT_WINDOW_US)
            {
                Some(copy) => {
                    times.swap_remove(copy);
                    false
                }
                None => true,
            }
        })
        .collect();
    let mut added = fresh.len();
    lines.extend(fresh);
    lines.sort_by_key(|l| l["time_us"].as_i64().unwrap_or_default());
    let mut cut_by_limit = false;
    if lines.len() > limit {
        let cut = lines.len() - limit;
        added -= lines[..cut]
            .iter()
            .filter(|l| l["reader"] == "database")
            .count()
            .min(added);
        lines.drain(..cut);
        cut_by_limit = true;
    }
    Merged {
        added,
        cut_by_limit,
    }
}

struct Health(Arc<Diagnostics>);

#[async_trait]
impl Tool for Health {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "health".into(),
            title: Some("Bot health".into()),
            description: "The bot's vital signs: uptime, resident memory, WebSocket clients, LLM provider and model, \
                          active agents and what the supervisor is doing, live MCP sessions, log buffer fill, database size, and turn tracing \
                          (spans recorded, dropped because the writer fell behind, dropped by the OpenTelemetry exporter)."
                .into(),
            input_schema: object_schema(json!({}), &[]),
            output_schema: Some(output_schema(
                json!({
                    "uptime_secs": {"type": "integer"},
                    "memory_rss_bytes": {"type": ["integer", "null"]},
                    "websocket_clients": {"type": "integer"},
                    "llm": {"type": "object"},
                    "agents": {"type": "object"},
                    "mcp": {"type": "object"},
                    "log_buffer": {"type": "object"},
                    "database": {"type": "object"}
                }),
                &["uptime_secs", "websocket_clients", "llm", "agents", "mcp", "log_buffer", "database"],
            )),
            annotations: Annotations::READ_ONLY,
        }
    }

    async fn call(
        &self,
        _args: Value,
        _ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let bot = &self.0.bot;
        let state = bot.supervisor.state();
        let agents = bot.agents.list();
        let logs = &self.0.logs;
        let server = self.0.server.get();
        Ok(done(json!({
            "uptime_secs": bot.started.elapsed().as_secs(),
            "memory_rss_bytes": crate::bot::resident_memory_bytes(),
            "websocket_clients": bot.web.connected_clients(),
            "llm": {"provider": bot.llm.provider(), "model": bot.llm.model()},
            "agents": {
                "active": agents.len(),
                "supervisor_status": state.status,
                "conversations_in_progress": state.processing.len(),
                "workers": state.active_workers.len(),
                "messages_handled": state.messages_handled,
            },
            "mcp": {
                "live_sessions": server.map(|s| s.live_sessions()).unwrap_or(0),
                "tools": server.map(|s| s.tool_count()).unwrap_or(0),
            },
            "log_buffer": {
                "lines": logs.len(),
                "capacity": logs.capacity(),
                "fill_percent": (logs.len() as f64 * 100.0 / logs.capacity() as f64).round(),
            },
            "replica": bot.replica(),
            "database": {
                "backend": bot.store.backend_name(),
                "path": bot.store.path(),
                "size_bytes": bot.store.file_size(),
            },
            "bot_tools": bot.tools.len(),
            "traces": {
                "enabled": bot.config.trace.enabled,
                "exporting": bot.tracer.is_exporting(),
                "counters": bot.tracer.counters(),
            },
        })))
    }
}
