//! `docs/curl.md` cannot drift: every curl example in it runs as written, with bash and
//! curl, against a live bot, and the response the page shows under it is compared with
//! what the bot answered.
//!
//! The comparison reads the shown response the way a person would: every key it shows
//! must be in the answer, every plain value it shows (number, boolean, null, string)
//! must be the value the bot sent, and a string cut short with `…` must start the same
//! way. "… N tools …" must be the number of tools listed. Status lines, headers and SSE
//! lines (`event:`, `retry:`) must appear too. Values that differ from run to run are
//! not compared: times, sizes, uptime, session ids and UUIDs. Streaming examples
//! (`curl -N`) get `--max-time 2`, and while they run the bot's tool list changes once,
//! which is what the page says happened when the output was captured.

use crate::common;
use crate::doc_examples;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use doc_examples::{Block, fenced_blocks, run_shell};
use regex::Regex;
use serde_json::Value;

const DOC: &str = include_str!("../../docs/curl.md");

/// Keys whose values change from run to run.
const VOLATILE_KEYS: &[&str] = &[
    "uptime_secs",
    "memory_rss_bytes",
    "size_bytes",
    "fill_percent",
    "lines",
    "utc",
    "unix",
    "time_us",
    "memory_heap_bytes",
    "hostname",
    "writer_cpu_us",
    "timestamp",
    "created_at",
    "updated_at",
    "started_at",
    "duration_ms",
    "seq",
    "cursor",
];

/// Header values that change from run to run.
const VOLATILE_HEADERS: &[&str] = &["mcp-session-id", "content-length", "date"];

/// `curl …` commands quoted inline in the prose (set-up steps such as creating a task).
fn inline_commands(doc: &str) -> Vec<String> {
    let mut in_block = false;
    let inline = Regex::new(r"`(curl [^`]+)`").unwrap();
    let mut commands = Vec::new();
    for line in doc.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
        } else if !in_block {
            commands.extend(inline.captures_iter(line).map(|c| c[1].to_string()));
        }
    }
    commands
}

/// Every JSON value in a curl output: the whole body, or each line (SSE `data:` lines
/// and the body after `-i` headers).
fn answered_values(output: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(output.trim()) {
        return vec![v];
    }
    output
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .map(|l| l.strip_prefix("data:").map(str::trim_start).unwrap_or(l))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Every key in `value`, at any depth, with the values it has.
fn collect_keys<'a>(value: &'a Value, into: &mut HashMap<String, Vec<&'a Value>>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                into.entry(k.clone()).or_default().push(v);
                collect_keys(v, into);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_keys(v, into)),
        _ => {}
    }
}

fn is_volatile_string(text: &str) -> bool {
    let uuid = Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap();
    let date = Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:").unwrap();
    uuid.is_match(text) || date.is_match(text)
}

/// Whether a shown value matches one the bot answered.
fn same_value(shown: &Value, answered: &Value) -> bool {
    match (shown, answered) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::String(b)) => match a.split_once('…') {
            Some((prefix, _)) => b.starts_with(prefix),
            None => a == b,
        },
        _ => shown == answered,
    }
}

/// What in the shown response the answer does not bear out.
fn differences(shown: &str, answered: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let values = answered_values(answered);
    let mut keys: HashMap<String, Vec<&Value>> = HashMap::new();
    values.iter().for_each(|v| collect_keys(v, &mut keys));
    let answered_lines: Vec<&str> = answered.lines().map(|l| l.trim_end_matches('\r')).collect();

    let pair = Regex::new(
        r#""([A-Za-z0-9_./-]+)":("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)"#,
    )
    .unwrap();
    let key = Regex::new(r#""([A-Za-z0-9_./-]+)":"#).unwrap();
    let header = Regex::new(r"^([A-Za-z-]+): (.*)$").unwrap();
    let mut json_text = String::new();
    for line in shown.lines() {
        let line = line.trim_end();
        if let Some(data) = line.strip_prefix("data:") {
            json_text.push_str(data);
            json_text.push('\n');
            if data.trim().is_empty() && !answered_lines.iter().any(|l| l.trim() == "data:") {
                problems.push("an empty `data:` priming line is shown but not sent".into());
            }
        } else if line.starts_with('{') || line.starts_with('[') {
            json_text.push_str(line);
            json_text.push('\n');
        } else if line.starts_with("HTTP/") {
            if !answered_lines.contains(&line) {
                problems.push(format!(
                    "status line `{line}` is shown, the bot answered otherwise"
                ));
            }
        } else if let Some(id) = line.strip_prefix("id: ") {
            if !answered_lines.iter().any(|l| l.starts_with("id: ")) {
                problems.push(format!(
                    "an SSE `id: {id}` line is shown but no event ids were sent"
                ));
            }
        } else if line.starts_with("event: ") || line.starts_with("retry: ") {
            if !answered_lines.contains(&line) {
                problems.push(format!("`{line}` is shown but not sent"));
            }
        } else if let Some(h) = header.captures(line) {
            let (name, value) = (h[1].to_ascii_lowercase(), &h[2]);
            let sent = answered_lines.iter().find_map(|l| {
                let (n, v) = l.split_once(": ")?;
                (n.eq_ignore_ascii_case(&name)).then_some(v)
            });
            match sent {
                None => problems.push(format!("header `{name}` is shown but not sent")),
                Some(v) if !VOLATILE_HEADERS.contains(&name.as_str()) && v != value => problems
                    .push(format!(
                        "header `{name}: {value}` is shown, the bot sent `{v}`"
                    )),
                Some(_) => {}
            }
        }
    }
    for k in key.captures_iter(&json_text) {
        if !keys.contains_key(&k[1]) {
            problems.push(format!("key `{}` is shown but not in the answer", &k[1]));
        }
    }
    for p in pair.captures_iter(&json_text) {
        let name = &p[1];
        let Ok(shown_value) = serde_json::from_str::<Value>(&p[2]) else {
            continue;
        };
        if VOLATILE_KEYS.contains(&name) || shown_value.as_str().is_some_and(is_volatile_string) {
            continue;
        }
        let answered_values = keys.get(name).map(Vec::as_slice).unwrap_or_default();
        if !answered_values.iter().any(|a| same_value(&shown_value, a)) {
            let sent: Vec<String> = answered_values.iter().take(3).map(|v| shorten(v)).collect();
            problems.push(format!(
                "`\"{name}\":{}` is shown, the bot sent {}",
                &p[2],
                if sent.is_empty() {
                    "no such key".to_string()
                } else {
                    sent.join(" / ")
                }
            ));
        }
    }
    problems.extend(capabilities_missing(&json_text, &keys));
    let tools_claim = Regex::new(r"… (\d+) tools").unwrap();
    if let Some(c) = tools_claim.captures(shown) {
        let claimed: usize = c[1].parse().unwrap();
        let listed = keys
            .get("tools")
            .and_then(|t| t.iter().find_map(|v| v.as_array().map(Vec::len)));
        if listed != Some(claimed) {
            problems.push(format!(
                "{claimed} tools are claimed, the bot listed {listed:?}"
            ));
        }
    }
    problems
}

/// Examples may show part of an answer, but a `capabilities` object is shown whole: a
/// capability the bot announces and the page leaves out (as `tasks` once was) is drift.
fn capabilities_missing(json_text: &str, keys: &HashMap<String, Vec<&Value>>) -> Vec<String> {
    let shown: Vec<Value> = json_text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let mut shown_keys = HashMap::new();
    shown.iter().for_each(|v| collect_keys(v, &mut shown_keys));
    let (Some(shown), Some(answered)) = (shown_keys.get("capabilities"), keys.get("capabilities"))
    else {
        return Vec::new();
    };
    let names = |v: &Value| -> Vec<String> {
        v.as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    let shown: Vec<String> = shown.iter().flat_map(|v| names(v)).collect();
    answered
        .iter()
        .flat_map(|v| names(v))
        .filter(|name| !shown.contains(name))
        .map(|name| format!("the bot announces the capability `{name}`, the page does not show it"))
        .collect()
}

fn shorten(value: &Value) -> String {
    elide(&value.to_string(), 120)
}

fn elide(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max).collect::<String>())
    } else {
        text.to_string()
    }
}

#[tokio::test]
async fn every_curl_example_answers_what_the_page_shows() {
    if !has_program("curl", "install curl (apt-get install curl)") {
        return;
    }
    // The replica's name the page shows (by default it is the machine's and the pid).
    let app = start_bot(&[("PORTHOLE_REPLICA_ID", "myhost-4242")]).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".env"),
        format!("MCP_SERVER_SECRET={TOKEN}\n"),
    )
    .unwrap();
    let live = |text: &str| text.replace("http://127.0.0.1:3000", &app.url());

    let blocks = fenced_blocks(DOC);
    let runs_something = |b: &Block| b.body.contains("curl ") || b.body.starts_with("cat ");
    // Set-up steps the prose quotes run first, with the page's variables defined.
    let assignments: String = blocks
        .iter()
        .filter(|b| b.lang == "bash" && !runs_something(b))
        .map(|b| live(&b.body))
        .collect();
    for command in inline_commands(DOC) {
        let script = format!("{assignments}\n{}", live(&command));
        run_shell(dir.path(), &script, async {}).await;
    }

    let mut prelude = String::new();
    let mut checked = 0;
    let mut problems = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        if block.lang != "bash" {
            continue;
        }
        if !runs_something(block) {
            prelude.push_str(&live(&block.body));
            continue;
        }
        let streaming = block.body.contains(" -N ");
        let command = live(&block.body).replace("curl -s -N ", "curl -s -N --max-time 2 ");
        let script = format!("{prelude}\n{command}");
        let bot = app.bot.clone();
        let change_tools = async move {
            if streaming {
                bot.tools.set_enabled("calculator", false);
                tokio::time::sleep(Duration::from_millis(300)).await;
                bot.tools.set_enabled("calculator", true);
            }
        };
        let answered = run_shell(dir.path(), &script, change_tools).await;
        let Some(shown) = blocks.get(i + 1).filter(|b| b.lang != "bash") else {
            continue;
        };
        let title = block.body.lines().next().unwrap_or_default().to_string();
        for problem in differences(&shown.body, &answered) {
            problems.push(format!(
                "example `{title}`…: {problem}\n    answered: {}",
                elide(answered.trim(), 300)
            ));
        }
        checked += 1;
    }
    assert!(
        checked >= 15,
        "only {checked} examples were found and checked"
    );
    assert!(
        problems.is_empty(),
        "docs/curl.md differs from the live bot:\n{}",
        problems.join("\n")
    );
    app.shutdown().await;
}

#[test]
fn the_comparison_catches_drift_and_ignores_what_must_differ() {
    let answered = r#"{"id":3,"jsonrpc":"2.0","result":{"uptime_secs":99,"tools":[1,2],"name":"porthole","text":"{\"a\":1}"}}"#;
    assert!(
        differences(
            r#"{"id":3,"result":{"uptime_secs":1,"name":"porthole"}}"#,
            answered
        )
        .is_empty()
    );
    assert!(differences(r#"{"result":{"text":"{\"a\"…"}}"#, answered).is_empty());
    assert_eq!(
        differences(r#"{"result":{"name":"other"}}"#, answered).len(),
        1
    );
    assert_eq!(
        differences(r#"{"result":{"missing":{…}}}"#, answered).len(),
        1
    );
    assert_eq!(
        differences(r#"{"result":{"text":"{\n  \"a\"…"}}"#, answered).len(),
        1
    );
    assert_eq!(
        differences(r#"{"result":{"tools":[… 3 tools …]}}"#, answered).len(),
        1
    );
    let sse = "id: 1-0\nretry: 1000\ndata: \n\nid: 1-1\nevent: message\ndata: {\"id\":5}\n";
    assert!(differences("id: 9-9\nevent: message\ndata: {\"id\":5}", sse).is_empty());
    assert_eq!(differences("retry: 2000", sse).len(), 1);
    let headers = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: abc\r\n";
    assert!(
        differences(
            "HTTP/1.1 200 OK\ncontent-type: application/json\nmcp-session-id: xyz",
            headers
        )
        .is_empty()
    );
    assert_eq!(differences("HTTP/1.1 202 Accepted", headers).len(), 1);
    let init = r#"{"result":{"capabilities":{"tools":{},"tasks":{"list":{}}}}}"#;
    assert_eq!(
        differences(r#"{"result":{"capabilities":{"tools":{}}}}"#, init).len(),
        1,
        "a capability left out of the page is caught"
    );
    assert!(
        differences(
            r#"{"result":{"capabilities":{"tools":{},"tasks":{"list":{}}}}}"#,
            init
        )
        .is_empty()
    );
}
