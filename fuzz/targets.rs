//! The fuzz targets, shared by the libFuzzer binaries in `fuzz_targets/` (nightly) and
//! `examples/fuzz_stable.rs` (a seeded mutation loop on the stable toolchain).
//!
//! Each [`Target`] runs one input, checks its invariants (a violation panics, which both
//! drivers record as a finding) and returns an *outcome class*: a short label such as
//! `200`, `err:-32600` or `skipped:header`, which the drivers use to keep a compact
//! corpus (an input is kept when it reaches a class not seen before).
//!
//! | target | what runs | invariants beyond "no panic" |
//! |---|---|---|
//! | `mcp_request` | one HTTP request through the `/mcp` router (`harness.rs`) | see `harness.rs` |
//! | `headers` | fuzzed `Host`, `Origin`, `Authorization`, `Accept`, `Content-Type`, `Mcp-*` and `Last-Event-ID` values through the router | as `mcp_request`, plus: no 2xx without the token, a loopback `Host` and a loopback or absent `Origin` |
//! | `jsonrpc` | bytes → `mcp::jsonrpc::read_body`, and bytes → JSON → `parse_message` (each member of a batch) | `read_body` reads a body as `parse_message` reads its JSON (its fast lane included), a batch as its items, and refuses only what is not JSON; an accepted message renders back to JSON that parses to the same message; a rejection is -32600/-32602 with a message, and any id it echoes is a string or an integer |
//! | `session_id` | ids minted by `mcp::session::Sessions`, edited by the input | an id is found only if byte-identical to a live minted one, ended only if byte-identical to an ended one; unknown ids change nothing; `end` ends only minted ids |
//! | `sse` | `sse_decoder::SseDecoder` | the same bytes in any chunking give the same events and leftover; the events re-encoded decode to the same events |
//! | `mcp_json` | `bot::mcp_client` config parser | every server entry is accepted or skipped with a reason, none lost; accepted entries render back to `mcp.json` that parses to the same; errors are one clear line |
//! | `user_manifest` | `bot::tools::user` manifest loader | a refusal registers nothing (and leaves an existing tool alone); an accepted manifest registers exactly its tool and loads back the same from its canonical form; errors are one clear line |
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use porthole::bot::tools::ToolRunner;
use porthole::mcp::session::{Lookup, Sessions, short};
use porthole::mcp::{Access, Notifier, SessionConfig};
use porthole::sse_decoder::{SseDecoder, SseEvent};
use serde_json::{Map, Value, json};

use crate::harness;

/// One fuzz target: its runner, its built-in seeds and dictionary tokens for the
/// mutator.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]) -> String,
    pub seeds: fn() -> Vec<Vec<u8>>,
    pub tokens: &'static [&'static str],
}

pub const TARGETS: &[Target] = &[
    Target {
        name: "mcp_request",
        run: |data| harness::Harness::get().run_class(data),
        seeds: harness::seeds,
        tokens: JSON_TOKENS,
    },
    Target {
        name: "headers",
        run: |data| harness::Harness::get().run_headers(data),
        seeds: harness::header_seeds,
        tokens: HEADER_TOKENS,
    },
    Target {
        name: "jsonrpc",
        run: jsonrpc,
        seeds: jsonrpc_seeds,
        tokens: JSON_TOKENS,
    },
    Target {
        name: "session_id",
        run: session_id,
        seeds: session_seeds,
        tokens: &[".", "-", "_", "A", "=", "é", "\0"],
    },
    Target {
        name: "sse",
        run: sse,
        seeds: sse_seeds,
        tokens: &[
            "\n",
            "\r\n",
            "\r",
            "\n\n",
            "data:",
            "data: ",
            "event:",
            "event: ",
            "id: ",
            ":",
            "retry: ",
            ": keep-alive",
            "\u{feff}",
            "\u{fffd}",
            "\u{ff}",
        ],
    },
    Target {
        name: "mcp_json",
        run: mcp_json,
        seeds: mcp_json_seeds,
        tokens: CONFIG_TOKENS,
    },
    Target {
        name: "user_manifest",
        run: user_manifest,
        seeds: manifest_seeds,
        tokens: CONFIG_TOKENS,
    },
];

pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1.5",
    "1e999",
    "18446744073709551616",
    "-9223372036854775809",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"jsonrpc\":\"2.0\"",
    "\"jsonrpc\":",
    "\"id\":",
    "\"method\":",
    "\"params\":",
    "\"result\":",
    "\"error\":",
    "\"_meta\":",
    "\"name\":",
    "\"arguments\":",
    "\"cursor\":",
    "\"tools/call\"",
    "\"tools/list\"",
    "\"initialize\"",
    "\"ping\"",
    "\"resources/read\"",
    "\"prompts/get\"",
    "\"subscriptions/listen\"",
    "\"server/discover\"",
    "\"logging/setLevel\"",
    "\"notifications/cancelled\"",
    "\"completion/complete\"",
    "\"echo\"",
    "\"confirm\"",
    "\"io.modelcontextprotocol/protocolVersion\"",
    "\"io.modelcontextprotocol/clientCapabilities\"",
    "\"io.modelcontextprotocol/logLevel\"",
    "\"2026-07-28\"",
    "\"2025-11-25\"",
    "\"2025-03-26\"",
    "\"inputResponses\":",
    "\"requestState\":",
    "\"progressToken\":",
    "=?base64?",
    "?=",
    "\r\n",
    "\u{feff}",
    "\"offset-99999999999\"",
];

const HEADER_TOKENS: &[&str] = &[
    "\0",
    "Bearer ",
    "bearer ",
    "BEARER  ",
    harness::TOKEN,
    "127.0.0.1",
    "localhost",
    "[::1]",
    ":3000",
    ":0",
    "http://",
    "https://",
    "null",
    "evil.example",
    ", ",
    "application/json",
    "text/event-stream",
    "*/*",
    ";q=0",
    "; charset=utf-8",
    "2026-07-28",
    "2025-11-25",
    "2025-03-26",
    "tools/call",
    "tools/list",
    "echo",
    "=?base64?",
    "?=",
    "$SESSION",
    "\t",
    " ",
    "é",
    "\u{7f}",
];

const CONFIG_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e999",
    "3600001",
    "18446744073709551615",
    "\"\\u0000\"",
    "\"\\n\"",
    "\"mcpServers\":",
    "\"command\":",
    "\"args\":",
    "\"env\":",
    "\"cwd\":",
    "\"url\":",
    "\"headers\":",
    "\"type\":",
    "\"enabled\":",
    "\"disabled\":",
    "\"timeoutMs\":",
    "\"allowedTools\":",
    "\"excludedTools\":",
    "\"stdio\"",
    "\"http\"",
    "\"sse\"",
    "\"streamable-http\"",
    "\"http://127.0.0.1:1/mcp\"",
    "\"file:///x\"",
    "\"name\":",
    "\"description\":",
    "\"input_schema\":",
    "\"timeout_secs\":",
    "\"required_roles\":",
    "\"type\":\"object\"",
    "\"pattern\":",
    "\"$ref\":",
    "\"#\"",
    "\"properties\":",
    "\"minimum\":",
    "__",
    "_",
];

/// An error message's shape, for outcome classes: the message up to its first quoted
/// part (where echoed input begins), digits left out; after its first `": "` only
/// prose (three words or more, words of letters and hyphens), since a short tail is
/// usually an echoed value. At most 60 characters.
pub fn shape(message: &str) -> String {
    let unquoted: String = message
        .chars()
        .take_while(|c| !matches!(c, '`' | '"' | '\''))
        .filter(|c| !c.is_ascii_digit())
        .collect();
    let (head, tail) = unquoted.split_once(": ").unwrap_or((&unquoted, ""));
    let words: Vec<&str> = tail
        .split_whitespace()
        .filter(|w| w.chars().all(|c| c.is_ascii_alphabetic() || c == '-'))
        .collect();
    let shape = if tail.split_whitespace().count() >= 3 {
        format!("{head}: {}", words.join(" "))
    } else {
        head.to_string()
    };
    shape.chars().take(60).collect()
}

/// Panics unless `message` is one clear line: not empty, no control characters.
fn clear_message(message: &str) {
    assert!(!message.trim().is_empty(), "an error without a message");
    assert!(
        !message.chars().any(char::is_control),
        "an error message with control characters: {message:?}"
    );
}

// ---------------------------------------------------------------------------------
// jsonrpc

fn jsonrpc(data: &[u8]) -> String {
    use porthole::mcp::jsonrpc::{Body, Unreadable, parse_message, read_body};
    let read = read_body(data);
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        assert!(
            matches!(read, Err(Unreadable::NotJson(_))),
            "read_body accepted a body that is not JSON"
        );
        return "not-json".into();
    };
    match (&read, &value) {
        (Ok(Body::Batch(items)), Value::Array(all)) => assert_eq!(items, all),
        (Ok(Body::One(message)), _) => assert_eq!(
            parse_message(value.clone()).as_ref(),
            Ok(message),
            "read_body's fast lane and parse_message read the body differently"
        ),
        (Err(Unreadable::Rejected(rejected)), _) => {
            assert_eq!(parse_message(value.clone()).as_ref(), Err(rejected))
        }
        (other, _) => panic!("read_body read JSON as {other:?}"),
    }
    match value {
        Value::Array(items) => {
            let mut classes: BTreeSet<String> = BTreeSet::new();
            for item in items {
                classes.insert(jsonrpc_message(item));
            }
            format!(
                "batch:{}",
                classes.into_iter().collect::<Vec<_>>().join("+")
            )
        }
        other => jsonrpc_message(other),
    }
}

fn jsonrpc_message(value: Value) -> String {
    use porthole::mcp::jsonrpc::{Incoming, parse_message};
    match parse_message(value) {
        Ok(incoming) => {
            let rendered = render_incoming(&incoming);
            let again = parse_message(rendered.clone());
            assert_eq!(
                again.as_ref(),
                Ok(&incoming),
                "a parsed message does not round-trip: {rendered}"
            );
            match incoming {
                Incoming::Request { has_params, .. } => format!("request:{has_params}"),
                Incoming::Notification { .. } => "notification".into(),
                Incoming::Response { outcome, .. } => format!("response:{}", outcome.is_ok()),
            }
        }
        Err(rejected) => {
            let code = rejected.error.code;
            assert!(
                code == -32600 || code == -32602,
                "rejected with code {code}"
            );
            clear_message(&rejected.error.message);
            if let Some(id) = &rejected.id {
                assert!(
                    id.is_string() || id.is_i64() || id.is_u64(),
                    "a rejection echoes an invalid id {id}"
                );
            }
            format!("err:{code}:{}", rejected.error.message)
        }
    }
}

fn render_incoming(incoming: &porthole::mcp::jsonrpc::Incoming) -> Value {
    use porthole::mcp::jsonrpc::Incoming;
    let mut object = Map::new();
    object.insert("jsonrpc".into(), "2.0".into());
    match incoming {
        Incoming::Request {
            id,
            method,
            params,
            has_params,
        } => {
            object.insert("id".into(), id.clone());
            object.insert("method".into(), method.as_str().into());
            if *has_params {
                object.insert("params".into(), Value::Object(params.clone()));
            }
        }
        Incoming::Notification { method, params } => {
            object.insert("method".into(), method.as_str().into());
            object.insert("params".into(), Value::Object(params.clone()));
        }
        Incoming::Response { id, outcome } => {
            object.insert("id".into(), id.clone());
            match outcome {
                Ok(result) => object.insert("result".into(), result.clone()),
                Err(error) => object.insert("error".into(), error.clone()),
            };
        }
    }
    Value::Object(object)
}

fn jsonrpc_seeds() -> Vec<Vec<u8>> {
    [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"x":[1,2]}}"#,
        r#"{"jsonrpc":"2.0","id":8,"error":{"code":-1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"ping","params":null}"#,
        r#"{"jsonrpc":"1.0","id":1.5,"method":3,"params":[]}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},7]"#,
        r#"{"jsonrpc":"2.0","id":-9223372036854775808,"result":null,"error":null}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

// ---------------------------------------------------------------------------------
// session_id

/// Sessions under a fixed secret, the ids it minted (live and ended) and one id minted
/// under another secret.
struct SessionState {
    sessions: Sessions,
    live: Vec<String>,
    ended: BTreeSet<String>,
    /// The last ended ids, the ones the input may start from.
    recent_ended: Vec<String>,
    foreign: String,
}

fn session_state() -> &'static Mutex<SessionState> {
    static STATE: OnceLock<Mutex<SessionState>> = OnceLock::new();
    STATE.get_or_init(|| {
        let config = SessionConfig {
            max_sessions: 1_000,
            idle_timeout: Duration::from_secs(24 * 3600),
            ..SessionConfig::default()
        };
        let sessions = Sessions::new(Some(harness::TOKEN), config.clone(), Notifier::default());
        let live: Vec<String> = (0..4)
            .map(|n| {
                let caps = json!({"sampling": if n % 2 == 0 { json!({}) } else { Value::Null }});
                sessions
                    .create(harness::LEGACY, caps, Access::Full)
                    .expect("a full session always has room")
                    .id
                    .clone()
            })
            .collect();
        let gone = sessions
            .create(harness::LEGACY, json!({}), Access::Full)
            .expect("a full session always has room")
            .id
            .clone();
        assert!(sessions.end(&gone));
        let foreign = Sessions::new(Some("another secret"), config, Notifier::default())
            .create(harness::LEGACY, json!({}), Access::Full)
            .expect("a full session always has room")
            .id
            .clone();
        Mutex::new(SessionState {
            sessions,
            live,
            ended: BTreeSet::from([gone.clone()]),
            recent_ended: vec![gone],
            foreign,
        })
    })
}

/// Input: `[select, ops…]`. With bit 7 of `select` the rest is the id itself;
/// otherwise the id starts as a minted one (live, ended or foreign, by `select`) and
/// each op pair `[kind, arg]` edits it (replace, insert, delete, truncate, flip a bit,
/// swap case). With bit 6 the id is ended (`DELETE`) rather than looked up.
fn session_id(data: &[u8]) -> String {
    let mut state = session_state().lock().unwrap_or_else(|p| p.into_inner());
    let (select, ops) = data.split_first().map_or((0, data), |(s, r)| (*s, r));
    let candidate: String = if select & 0x80 != 0 {
        String::from_utf8_lossy(ops).into_owned()
    } else {
        let mut starts: Vec<&String> = state.live.iter().collect();
        starts.extend(state.recent_ended.iter());
        starts.push(&state.foreign);
        let mut id = starts[(select & 0x3f) as usize % starts.len()]
            .clone()
            .into_bytes();
        for op in ops.chunks(2) {
            let (kind, arg) = (op[0], *op.get(1).unwrap_or(&0));
            let at = if id.is_empty() {
                0
            } else {
                arg as usize % id.len()
            };
            match kind % 6 {
                0 if !id.is_empty() => id[at] = arg,
                1 => id.insert(at, kind / 6 + b'-'),
                2 if !id.is_empty() => {
                    id.remove(at);
                }
                3 => id.truncate(at),
                4 if !id.is_empty() => id[at] ^= 1 << (arg % 7),
                5 if !id.is_empty() => id[at] = id[at].to_ascii_uppercase() ^ 0x20,
                _ => {}
            }
        }
        String::from_utf8_lossy(&id).into_owned()
    };
    let _ = short(&candidate);
    let is_live = state.live.contains(&candidate);
    let is_ended = state.ended.contains(&candidate);
    let before = state.sessions.live_count();
    if select & 0x40 != 0 {
        let ended = state.sessions.end(&candidate);
        assert_eq!(
            ended,
            is_live || is_ended,
            "end({candidate:?}) = {ended}, but it is {}",
            if is_live || is_ended {
                "a minted id"
            } else {
                "not a minted id"
            }
        );
        if is_live {
            // Keep four live sessions: the ended one moves to the ended set.
            state.live.retain(|id| *id != candidate);
            state.ended.insert(candidate.clone());
            state.recent_ended.push(candidate.clone());
            if state.recent_ended.len() > 4 {
                state.recent_ended.remove(0);
            }
            let fresh = state
                .sessions
                .create(harness::LEGACY, json!({}), Access::Full)
                .expect("a full session always has room")
                .id
                .clone();
            state.live.push(fresh);
            return "end:live".into();
        }
        assert_eq!(
            state.sessions.live_count(),
            before,
            "end() changed the table"
        );
        return format!("end:{}", if is_ended { "ended" } else { "unknown" });
    }
    let class = match state.sessions.get(&candidate) {
        Lookup::Found(session) => {
            assert!(is_live, "{candidate:?} was found but never minted live");
            assert_eq!(session.id, candidate);
            "found"
        }
        Lookup::Ended => {
            assert!(is_ended, "{candidate:?} counts as ended but never was");
            "ended"
        }
        Lookup::Unknown => {
            assert!(!is_live && !is_ended, "minted id {candidate:?} is unknown");
            "unknown"
        }
    };
    assert_eq!(
        state.sessions.live_count(),
        before,
        "a lookup changed the table"
    );
    let shape = if candidate.is_ascii() {
        candidate.matches('.').count().min(2)
    } else {
        9
    };
    format!("get:{class}:dots{shape}:len{}", candidate.len().min(64) / 8)
}

fn session_seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = (0..6u8).map(|s| vec![s]).collect();
    seeds.extend([
        vec![0, 0, b'A', 4, 3],
        vec![1, 2, 10, 1, 30],
        vec![0x40 | 5],
        vec![0x40, 3, 20],
        [&[0x80u8][..], b"not-an-id.at-all"].concat(),
        [&[0x80u8][..], "ééééééééé".as_bytes()].concat(),
    ]);
    seeds
}

// ---------------------------------------------------------------------------------
// sse

/// Decodes `data` in one piece, byte by byte, and in chunks sized by the data itself;
/// all must agree. Then the events, re-encoded, must decode to themselves.
fn sse(data: &[u8]) -> String {
    let whole = decode(std::iter::once(data));
    let bytewise = decode(data.chunks(1));
    assert_eq!(whole, bytewise, "byte-by-byte decoding differs");
    let mut cuts = Vec::new();
    let mut at = 0;
    let mut step = data.first().map_or(3, |b| *b as usize % 13 + 1);
    while at < data.len() {
        let end = (at + step).min(data.len());
        cuts.push(&data[at..end]);
        at = end;
        step = data[end - 1] as usize % 17 + 1;
    }
    assert_eq!(whole, decode(cuts.into_iter()), "chunked decoding differs");
    let (events, _) = &whole;
    // Data with a carriage return cannot be written as SSE lines; the rest re-encodes.
    if events
        .iter()
        .all(|e| !e.data.contains('\r') && !e.event.contains('\r'))
    {
        let mut encoded = String::new();
        for event in events {
            encoded.push_str(&format!("event: {}\n", event.event));
            for line in event.data.split('\n') {
                encoded.push_str(&format!("data: {line}\n"));
            }
            encoded.push('\n');
        }
        let (again, rest) = decode(std::iter::once(encoded.as_bytes()));
        assert_eq!(&again, events, "re-encoded events decode differently");
        assert_eq!(rest, None);
    }
    let named = events.iter().filter(|e| e.event != "message").count();
    format!(
        "events{}:named{}:rest{}",
        events.len().min(4),
        named.min(2),
        whole.1.is_some()
    )
}

fn decode<'a>(chunks: impl Iterator<Item = &'a [u8]>) -> (Vec<SseEvent>, Option<String>) {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(decoder.push_events(chunk));
    }
    let rest = decoder.finish();
    assert_eq!(decoder.pending_len(), 0, "finish() left bytes behind");
    (events, rest)
}

fn sse_seeds() -> Vec<Vec<u8>> {
    [
        "data: {\"a\":1}\n\n",
        ": keep-alive\r\n\r\nevent: message\r\ndata: x\r\n\r\n",
        "event: endpoint\ndata: /message?sessionId=1\n\ndata: a\ndata: b\n\nid: 3\nretry: 10\n\n",
        "data:no-space\n\ndata\n\nevent: e\n\ndata: last",
        "data: caf\u{e9}\n\n\u{feff}data: bom\n\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

// ---------------------------------------------------------------------------------
// mcp_json

fn mcp_json(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let (servers, skipped) = match porthole::bot::mcp_client::fuzz_parse_config(&text) {
        Ok(parsed) => parsed,
        Err(reason) => {
            clear_message(&reason);
            return format!("invalid:{}", shape(&reason));
        }
    };
    let entries = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("mcpServers").and_then(Value::as_object).map(Map::len))
        .unwrap_or(0);
    assert_eq!(
        servers.len() + skipped.len(),
        entries,
        "entries were neither loaded nor skipped"
    );
    for (_, reason) in &skipped {
        clear_message(reason);
    }
    let canonical: Map<String, Value> = servers.iter().cloned().collect();
    let rendered = json!({"mcpServers": canonical}).to_string();
    let (again, again_skipped) = porthole::bot::mcp_client::fuzz_parse_config(&rendered)
        .unwrap_or_else(|e| panic!("the canonical form is refused ({e}): {rendered}"));
    assert!(
        again_skipped.is_empty(),
        "the canonical form skips {again_skipped:?}: {rendered}"
    );
    assert_eq!(again, servers, "the canonical form parses differently");
    let mut kinds: BTreeSet<String> = servers
        .iter()
        .map(|(_, entry)| entry["type"].as_str().unwrap_or_default().to_string())
        .collect();
    kinds.extend(
        skipped
            .iter()
            .map(|(_, reason)| format!("skip:{}", shape(reason))),
    );
    format!("ok:{}", kinds.into_iter().collect::<Vec<_>>().join("+"))
}

fn mcp_json_seeds() -> Vec<Vec<u8>> {
    [
        r#"{"mcpServers": {"files": {"command": "npx", "args": ["-y", "server"], "env": {"A": "1", "B": 2, "C": true}, "timeoutMs": 5000, "cwd": "/tmp"}}}"#,
        r#"{"mcpServers": {"remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}, "enabled": false, "allowedTools": ["a"], "excludedTools": ["b"]}}}"#,
        r#"{"mcpServers": {"old": {"url": "http://127.0.0.1:9/sse", "type": "sse", "disabled": true}, "h": {"url": "http://[::1]/", "type": "streamable-http"}}}"#,
        r#"{"mcpServers": {"bad name!": {"command": "x"}, "nothing": {"args": []}, "both": {"command": "x", "url": "http://a"}, "t": {"command": "x", "timeoutMs": 0}}}"#,
        r#"{"mcpServers": {"s": {"command": "x", "type": "http"}, "u": {"url": "ftp://x"}, "h": {"url": "http://a", "headers": {"bad header": "v"}}}}"#,
        r#"{"mcpServers": []}"#,
        r#"{"other": 1}"#,
        r#"[1]"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

// ---------------------------------------------------------------------------------
// user_manifest

/// A runner holding one tool, `existing`, that every manifest is loaded next to.
fn manifest_runner() -> ToolRunner {
    let runner = ToolRunner::new(Duration::from_secs(30));
    porthole::bot::tools::user::fuzz_load_manifest(
        &runner,
        r#"{"name": "existing", "description": "d", "command": ["true"]}"#,
    )
    .expect("the base manifest loads");
    runner
}

fn user_manifest(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let runner = manifest_runner();
    let before = runner.get("existing").map(|t| t.def.description);
    match porthole::bot::tools::user::fuzz_load_manifest(&runner, &text) {
        Err(reason) => {
            clear_message(&reason);
            assert_eq!(runner.len(), 1, "a refused manifest registered a tool");
            assert_eq!(
                runner.get("existing").map(|t| t.def.description),
                before,
                "a refused manifest changed an existing tool"
            );
            format!("err:{}", shape(&reason))
        }
        Ok(canonical) => {
            assert_eq!(runner.len(), 2, "an accepted manifest did not add one tool");
            let name = canonical["name"].as_str().unwrap_or_default();
            let tool = runner
                .get(name)
                .unwrap_or_else(|| panic!("tool {name:?} is not registered"));
            assert_eq!(*tool.def.input_schema, canonical["input_schema"]);
            let fresh = ToolRunner::new(Duration::from_secs(30));
            let again =
                porthole::bot::tools::user::fuzz_load_manifest(&fresh, &canonical.to_string())
                    .unwrap_or_else(|e| panic!("the canonical form is refused ({e}): {canonical}"));
            assert_eq!(again, canonical, "the canonical form loads differently");
            let fields = ["timeout_secs", "required_roles", "env"]
                .iter()
                .filter(|f| {
                    !matches!(&canonical[**f], Value::Null)
                        && canonical[**f] != json!([])
                        && canonical[**f] != json!({})
                })
                .count();
            format!("ok:fields{fields}")
        }
    }
}

fn manifest_seeds() -> Vec<Vec<u8>> {
    [
        r#"{"name": "weather", "description": "Weather.", "input_schema": {"type": "object", "properties": {"city": {"type": "string", "pattern": "^[A-Z]"}}}, "command": ["python3", "weather.py"], "timeout_secs": 10}"#,
        r#"{"name": "w-2_x", "description": "", "command": ["x"], "required_roles": ["admin"], "env": {"KEY": "v"}}"#,
        r#"{"name": "existing", "description": "dup", "command": ["x"]}"#,
        r#"{"name": "bad name", "description": "d", "command": ["x"]}"#,
        r#"{"name": "n", "description": "d", "command": []}"#,
        r#"{"name": "n", "description": "d", "command": ["x"], "input_schema": {"type": 5}}"#,
        r#"{"name": "n", "description": "d", "command": ["x"], "extra": 1}"#,
        r##"{"name": "n", "description": "d", "command": ["x"], "input_schema": {"$ref": "#/definitions/a", "definitions": {"a": {"$ref": "#/definitions/a"}}}}"##,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}
