//! The readers `server_log` adds to the ring buffer, and how their lines are merged:
//! the log file (`LOG_FILE`), read for lines older than the buffer holds, and the
//! database, which keeps the bot's warnings, errors and audit records across restarts.
//! Every line is labelled with the reader it came from, and each reader reports whether
//! it was available and what it added.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::Diagnostics;
use crate::logs::buffer::{LogPage, LogQuery, LogRecord, parse_level, select};

/// What cut the lines of an answer short: its `limit` or its `max_bytes` budget.
pub(super) struct Cut {
    pub by_limit: bool,
    pub by_budget: bool,
}

/// `records` as answer lines, each saying which `reader` it came from.
pub(super) fn label(records: &[LogRecord], reader: &str) -> Vec<Value> {
    records
        .iter()
        .map(|r| {
            let mut line = r.to_json();
            line["reader"] = json!(reader);
            line
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
    lines: &mut Vec<Value>,
    cut: &mut Cut,
) -> Value {
    let Some(file) = &d.log_file else {
        return json!({"reader": "log_file", "available": false,
                      "reason": "LOG_FILE is not set; only the ring buffer is searched"});
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
            let mut merged = label(&records, "log_file");
            merged.append(lines);
            *lines = merged;
            cut.by_limit = by_limit;
            cut.by_budget |= by_budget;
        }
    }
    json!({"reader": "log_file", "available": true, "path": file.path().display().to_string(),
           "lines_returned": from_file})
}

/// The database reader: merges the stored lines matching `query` into `lines` (once
/// each, see [`merge_lines`]) and returns the reader's status.
pub(super) async fn add_from_database(
    d: &Diagnostics,
    query: &LogQuery,
    lines: &mut Vec<Value>,
    cut: &mut Cut,
) -> Value {
    let used: usize = lines.iter().map(|l| l.to_string().len()).sum();
    let (mut status, stored) = database_lines(d, query, used).await;
    let added = merge_lines(lines, stored, query.limit);
    cut.by_limit |= added.cut_by_limit;
    if status["available"] == true {
        status["lines_returned"] = json!(added.added);
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
) -> (Value, Vec<Value>) {
    let store = &d.bot.store;
    let mut status = json!({
        "reader": "database",
        "available": true,
        "keeps": "the bot's warnings, errors and MCP audit records",
        "persistent": store.path() != ":memory:",
        "max_events": d.bot.config.log_db_max_events,
        "dropped_when_busy": d.journal.dropped(),
    });
    if query.after_seq.is_some() {
        status["note"] =
            json!("not read for a cursor: it only holds what the ring buffer had when it was new");
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
    let mut lines = label(&picked, "database");
    for (line, record) in lines.iter_mut().zip(&picked) {
        if let Some(replica) = replicas.get(&(record.time_us, record.seq)) {
            line["replica"] = json!(replica);
        }
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
    let mut unmatched: HashMap<_, Vec<i64>> = HashMap::new();
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
