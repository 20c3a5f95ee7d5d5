//! The readers `server_log` adds to the ring buffer, and how their lines are merged:
//! the log file (`LOG_FILE`), read for lines older than the buffer holds, and the
//! database, which keeps the bot's warnings, errors and audit records across restarts.
//! Every line is labelled with the reader it came from, and each reader reports whether
//! it was available and what it added.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::Diagnostics;
use crate::logs::buffer::{LogPage, LogQuery, LogRecord, parse_level, select};
use crate::mcp::logs::LogLine;

/// Where a line was read from.
// Its variants carry no doc comments: with them the derived schema would be a `oneOf`
// of constants, not an `enum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum Reader {
    RingBuffer,
    LogFile,
    Database,
    Audit,
}

/// A line as `server_log` and `web_log` return it: the line, and the reader that held it.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct ReadLine {
    #[serde(flatten)]
    line: LogLine,
    reader: Reader,
    /// Database lines: the replica that wrote it
    #[serde(skip_serializing_if = "Option::is_none")]
    replica: Option<String>,
}

/// One of the places lines are read from, and what it gave.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct ReaderStatus {
    reader: Reader,
    available: bool,
    /// Why it is not available
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lines_returned: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keeps: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    persistent: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_events: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dropped_when_busy: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    included: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    how: Option<String>,
}

impl ReaderStatus {
    /// `reader`, read (or not), saying nothing more yet.
    pub(super) fn of(reader: Reader, available: bool) -> ReaderStatus {
        ReaderStatus {
            reader,
            available,
            reason: None,
            path: None,
            lines_returned: None,
            keeps: None,
            persistent: None,
            max_events: None,
            dropped_when_busy: None,
            note: None,
            included: None,
            how: None,
        }
    }

    /// `reader`, not available for `reason`.
    pub(super) fn unavailable(reader: Reader, reason: impl Into<String>) -> ReaderStatus {
        ReaderStatus {
            reason: Some(reason.into()),
            ..ReaderStatus::of(reader, false)
        }
    }

    /// The audit lines of `/mcp` calls, and whether this answer includes them.
    pub(super) fn audit(included: bool) -> ReaderStatus {
        ReaderStatus {
            included: Some(included),
            how: Some(
                "tools/call audit lines (target porthole::mcp::audit); set include_mcp to see them"
                    .into(),
            ),
            ..ReaderStatus::of(Reader::Audit, true)
        }
    }
}

/// What cut the lines of an answer short: its `limit` or its `max_bytes` budget.
pub(super) struct Cut {
    pub by_limit: bool,
    pub by_budget: bool,
}

/// `records` as answer lines, each saying which `reader` it came from.
pub(super) fn label(records: &[LogRecord], reader: Reader) -> Vec<ReadLine> {
    records
        .iter()
        .map(|record| ReadLine {
            line: LogLine::from(record),
            reader,
            replica: None,
        })
        .collect()
}

/// The log file reader: when the ring buffer's `page` left room, puts the lines older
/// than the buffer holds before `lines`. A cursor (`since` a sequence) only asks for new
/// lines, which the buffer has. Returns the reader's status.
pub(super) async fn add_older_from_file(
    d: &Diagnostics,
    query: &LogQuery,
    page: &LogPage,
    lines: &mut Vec<ReadLine>,
    cut: &mut Cut,
) -> ReaderStatus {
    let Some(file) = &d.log_file else {
        return ReaderStatus::unavailable(
            Reader::LogFile,
            "LOG_FILE is not set; only the ring buffer is searched",
        );
    };
    let mut from_file = 0;
    if !cut.by_limit
        && !cut.by_budget
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
        let before = d.logs.oldest_time_us();
        let reader = file.clone();
        let picked =
            tokio::task::spawn_blocking(move || select(reader.newest_first(before), &older)).await;
        if let Ok((records, by_limit, by_budget)) = picked {
            from_file = records.len();
            let mut merged = label(&records, Reader::LogFile);
            merged.append(lines);
            *lines = merged;
            cut.by_limit = by_limit;
            cut.by_budget |= by_budget;
        }
    }
    ReaderStatus {
        path: Some(file.path().display().to_string()),
        lines_returned: Some(from_file),
        ..ReaderStatus::of(Reader::LogFile, true)
    }
}

/// The database reader: merges the stored lines matching `query` into `lines` (once
/// each, see [`merge_lines`]) and returns the reader's status.
pub(super) async fn add_from_database(
    d: &Diagnostics,
    query: &LogQuery,
    lines: &mut Vec<ReadLine>,
    cut: &mut Cut,
) -> ReaderStatus {
    let used: usize = lines
        .iter()
        .map(|l| serde_json::to_string(l).map_or(0, |text| text.len()))
        .sum();
    let (mut status, stored) = database_lines(d, query, used).await;
    let added = merge_lines(lines, stored, query.limit);
    cut.by_limit |= added.cut_by_limit;
    if status.available {
        status.lines_returned = Some(added.added);
    }
    status
}

/// The database reader: warnings, errors and audit records this and earlier runs
/// stored, filtered like the other readers. Only asked for lines by time (a cursor
/// from `since` is a sequence of this run's ring buffer). Returns the reader's
/// status and its lines labelled `database`, oldest first.
async fn database_lines(
    d: &Diagnostics,
    query: &LogQuery,
    bytes_used: usize,
) -> (ReaderStatus, Vec<ReadLine>) {
    let store = &d.bot.store;
    let mut status = ReaderStatus {
        keeps: Some("the bot's warnings, errors and MCP audit records".into()),
        persistent: Some(store.path() != ":memory:"),
        max_events: Some(d.bot.config.log_db_max_events),
        dropped_when_busy: Some(d.journal.dropped()),
        ..ReaderStatus::of(Reader::Database, true)
    };
    if query.after_seq.is_some() {
        status.note = Some(
            "not read for a cursor: it only holds what the ring buffer had when it was new".into(),
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
                ReaderStatus::unavailable(
                    Reader::Database,
                    format!("cannot read the log events: {e}"),
                ),
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
    let mut lines = label(&picked, Reader::Database);
    for (line, record) in lines.iter_mut().zip(&picked) {
        line.replica = replicas.get(&(record.time_us, record.seq)).cloned();
    }
    (status, lines)
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
fn merge_lines(lines: &mut Vec<ReadLine>, more: Vec<ReadLine>, limit: usize) -> Merged {
    type Key = (String, String, String, BTreeMap<String, String>);
    let key = |read: &ReadLine| -> Key {
        let line = &read.line;
        let (level, target) = (line.level.clone(), line.target.clone());
        (level, target, line.message.clone(), line.fields.clone())
    };
    let time = |read: &ReadLine| read.line.time_us;
    let mut unmatched: HashMap<Key, Vec<i64>> = HashMap::new();
    for line in lines.iter() {
        unmatched.entry(key(line)).or_default().push(time(line));
    }
    let fresh: Vec<ReadLine> = more
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
    lines.sort_by_key(time);
    let mut cut_by_limit = false;
    if lines.len() > limit {
        let cut = lines.len() - limit;
        added -= lines[..cut]
            .iter()
            .filter(|l| l.reader == Reader::Database)
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
