//! Heap bytes, counted exactly by a wrapping global allocator (not criterion: these are
//! sizes, not times).
//!
//! 1. The log ring buffer at capacity: 10,000 lines captured through the real `tracing`
//!    layer (the mix of `benches/common`), then the same count of typical audit lines.
//! 2. Legacy sessions: the heap a live session keeps in `Sessions` (what one
//!    `initialize` retains), then what stays after eviction by the cap
//!    (`MCP_MAX_SESSIONS`) and by DELETE.
//!
//! Run: `cargo bench --bench memory`. `scripts/memory.sh` measures the same things
//! as RSS of the running bot.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use porthole::logs::buffer::LogBuffer;
use porthole::mcp::session::Sessions;
use porthole::mcp::{Notifier, SessionConfig};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

mod common;

/// Counts live heap bytes (requested sizes, not allocator overhead).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn kib(bytes: isize) -> f64 {
    bytes as f64 / 1024.0
}

fn ring_buffer() {
    println!("## ring buffer (MCP_LOG_BUFFER_SIZE lines)");
    let before = live();
    let buffer = common::full_buffer();
    let full = live() - before;
    println!(
        "mixed bot lines:  {} lines, {:.0} KiB heap, {:.0} B/line",
        buffer.len(),
        kib(full),
        full as f64 / buffer.len() as f64
    );
    drop(buffer);

    // Lines of the size the MCP audit line has (six fields).
    let before = live();
    let audit = LogBuffer::new(common::CAPACITY);
    let subscriber = tracing_subscriber::registry().with(audit.layer().skipping("web_console"));
    tracing::subscriber::with_default(subscriber, || {
        for n in 0..common::CAPACITY as u64 {
            tracing::info!(target: "porthole::mcp::audit", tool = "list_agents", era = "2026-07-28",
                session = "-", duration_ms = format!("0.{n}"), outcome = "ok", "tools/call");
        }
    });
    let full = live() - before;
    println!(
        "audit lines:      {} lines, {:.0} KiB heap, {:.0} B/line",
        audit.len(),
        kib(full),
        full as f64 / audit.len() as f64
    );
    drop(audit);
    println!(
        "record struct:    {} B inline per line (plus its strings and field vector)\n",
        std::mem::size_of::<porthole::logs::buffer::LogRecord>()
    );
}

fn sessions() {
    println!("## legacy sessions");
    const N: usize = 10_000;
    let config = |max| SessionConfig {
        max_sessions: max,
        idle_timeout: Duration::from_secs(3600),
        ..SessionConfig::default()
    };
    let secret = Some("bench-secret-0123456789abcdef0123456789abcdef");

    // High cap: every session stays live.
    let sessions = Sessions::new(secret, config(1_000_000), Notifier::default());
    // Counted before the id list, whose bytes (vector and strings) are subtracted below.
    let after_new = live();
    let mut ids = Vec::with_capacity(N);
    for _ in 0..N {
        ids.push(
            sessions
                .create("2025-11-25", json!({}), porthole::mcp::Access::Full)
                .expect("a full session always has room")
                .id
                .clone(),
        );
    }
    let ids_bytes: isize = (ids.capacity() * std::mem::size_of::<String>()
        + ids.iter().map(String::capacity).sum::<usize>()) as isize;
    let grown = live() - after_new - ids_bytes;
    println!(
        "{N} live sessions (cap 1,000,000): {:.0} KiB, {:.0} B/session",
        kib(grown),
        grown as f64 / N as f64
    );
    // DELETE every one: the ids answer 404 from then on, without being remembered.
    for id in &ids {
        sessions.end(id);
    }
    let after_delete = live() - after_new - ids_bytes;
    println!(
        "after DELETE of all {N}: live {}, {:.0} KiB kept ({:.0} B per ended id)",
        sessions.live_count(),
        kib(after_delete),
        after_delete as f64 / N as f64
    );
    drop(ids);
    drop(sessions);

    // Low cap: every insert past 100 evicts the longest-idle session.
    let leaked = {
        let base = live();
        let sessions = Sessions::new(secret, config(100), Notifier::default());
        let start = std::time::Instant::now();
        for _ in 0..N {
            let _ = sessions.create("2025-11-25", json!({}), porthole::mcp::Access::Full);
        }
        let took = start.elapsed();
        let kept = live() - base;
        println!(
            "{N} initializes with cap 100: live {}, {:.0} KiB kept ({:.0} B per created session), {:.1} µs per create",
            sessions.live_count(),
            kib(kept),
            kept as f64 / N as f64,
            took.as_secs_f64() * 1e6 / N as f64
        );
        drop(sessions);
        live() - base
    };
    println!("after dropping the session table: {leaked} B still counted");
    println!(
        "Session struct:   {} B inline (plus its id string, maps and Arc header)",
        std::mem::size_of::<porthole::mcp::session::Session>()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    ring_buffer();
    sessions();
}
