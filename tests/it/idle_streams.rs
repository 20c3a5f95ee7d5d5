//! 10,000 concurrent idle SSE streams against the real `porthole` binary, run as a
//! subprocess so its memory and open files can be read from `/proc`: the bot keeps
//! serving other clients, each stream costs a bounded amount of memory, and the files
//! come back when the clients leave.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const STREAMS: usize = 10_000;
/// Connections being opened at any moment: far more overflows the listen backlog,
/// and a dropped SYN costs a one-second retransmit.
const CONNECTING_AT_ONCE: usize = 64;
/// An idle stream holds a connection, a task, a channel and a keep-alive timer.
const MAX_KIB_PER_STREAM: f64 = 64.0;

/// Lets this process (and the bot it starts) open one file per stream and then some.
fn raise_open_file_limit(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain calls with a pointer to a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(wanted.max(limit.rlim_cur));
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    limit.rlim_cur
}

/// A `/proc/PID/status` value in kB.
fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Opens one `subscriptions/listen` stream and waits for its acknowledgment.
async fn open_stream(port: u16, n: usize) -> TcpStream {
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientInfo"]["name"] = json!("idle-streams");
    let body = json!({"jsonrpc": "2.0", "id": n, "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": {"toolsListChanged": true}}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: {MODERN}\r\nMcp-Method: subscriptions/listen\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 2048];
    while !String::from_utf8_lossy(&seen).contains("subscriptions/acknowledged") {
        let read = stream.read(&mut buffer).await.unwrap();
        assert!(
            read > 0,
            "stream {n} closed early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buffer[..read]);
    }
    assert!(
        seen.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    stream
}

async fn open_streams(port: u16, count: usize) -> Vec<TcpStream> {
    use futures::StreamExt;
    futures::stream::iter((0..count).map(|n| open_stream(port, n)))
        .buffer_unordered(CONNECTING_AT_ONCE)
        .collect()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_streams_stay_bounded_and_the_bot_keeps_serving() {
    let needed = STREAMS as u64 + 1_000;
    let limit = raise_open_file_limit(needed);
    assert!(
        limit >= needed,
        "this test holds {STREAMS} connections and needs {needed} open files, but the hard \
         limit is {limit}; raise it (`ulimit -Hn`, or LimitNOFILE for a service)"
    );

    let dir = tempfile::tempdir().unwrap();
    let folder = |name: &str| dir.path().join(name).display().to_string();
    let (workspace, tools, skills, mcp_json) = (
        folder("workspace"),
        folder("tools"),
        folder("skills"),
        folder("mcp.json"),
    );
    let (mut bot, lines) = spawn_porthole(
        dir.path(),
        &[
            ("MCP_SERVER_SECRET", TOKEN),
            ("WORKSPACE_DIR", &workspace),
            ("USER_TOOLS_DIR", &tools),
            ("SKILLS_DIR", &skills),
            ("MCP_SERVERS_CONFIG", &mcp_json),
        ],
    );
    let pid = bot.id().unwrap();
    let port = listening_port(lines).await;
    let url = format!("http://127.0.0.1:{port}");

    // Warm up, so one-time allocations are not charged to the streams.
    drop(open_streams(port, 100).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before = status_kb(pid, "VmRSS:");
    let files_before = open_files(pid);

    let streams = open_streams(port, STREAMS).await;
    let files_open = open_files(pid);
    assert!(
        files_open >= files_before + STREAMS,
        "the bot holds every stream open at once ({files_open} files)"
    );
    let health = tokio::time::timeout(Duration::from_secs(5), call_tool(&url, "health", json!({})))
        .await
        .expect("another client is served while 10,000 streams are open");
    assert!(
        health["structuredContent"]["uptime_secs"].is_u64(),
        "{health}"
    );
    let rss_streams = status_kb(pid, "VmRSS:");
    let per_stream = rss_streams.saturating_sub(rss_before) as f64 / STREAMS as f64;
    println!(
        "{STREAMS} idle streams: VmRSS {rss_before} -> {rss_streams} kB, {per_stream:.1} KiB per stream; \
         {files_open} open files"
    );
    assert!(
        per_stream <= MAX_KIB_PER_STREAM,
        "{per_stream:.1} KiB per idle stream (bound {MAX_KIB_PER_STREAM})"
    );

    // The clients leave: the bot closes its side of every stream.
    drop(streams);
    let mut files_after = open_files(pid);
    for _ in 0..100 {
        if files_after <= files_before + 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        files_after = open_files(pid);
    }
    assert!(
        files_after <= files_before + 10,
        "open files went {files_before} -> {files_open} -> {files_after} after the clients left"
    );
    let health = call_tool(&url, "health", json!({})).await;
    assert!(health["structuredContent"]["uptime_secs"].is_u64());
    bot.kill().await.unwrap();
}
