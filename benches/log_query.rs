//! `LogBuffer::query` (what `server_log` runs) over a full 10,000-line buffer.
//!
//! The buffer is filled through the real `tracing` layer with a mix of bot lines
//! (agents, LLM calls, web, scheduler), MCP audit lines (hidden by default) and a few
//! warnings and errors; messages are 20–110 bytes with 0–3 fields.
//!
//! - `grep_rare`: a substring in 1 line of 500, default limit 50: scans the whole buffer;
//! - `grep_absent`: a substring in no line: the worst case, every line compared;
//! - `grep_absent_ci`: the same, case-insensitive: every line lower-cased first;
//! - `grep_common`: a substring in most lines: stops after `limit` hits;
//! - `level_warn_limit_500`: no grep, `min_level=warn`, `limit=500` (clones 500 lines);
//! - `tail_50`: no filter (the tool's default call).
//!
//! Run: `cargo bench --bench log_query`.

use std::hint::black_box;

use common::full_buffer;
use criterion::{Criterion, criterion_group, criterion_main};
use porthole::logs::buffer::LogQuery;
use tracing::Level;

mod common;

fn query(f: impl FnOnce(&mut LogQuery)) -> LogQuery {
    let mut q = LogQuery::default();
    f(&mut q);
    q
}

fn benches(c: &mut Criterion) {
    let buffer = full_buffer();
    let cases = [
        (
            "grep_rare",
            query(|q| q.grep = Some("connection reset".into())),
        ),
        (
            "grep_absent",
            query(|q| q.grep = Some("disk quota exceeded".into())),
        ),
        (
            "grep_absent_ci",
            query(|q| {
                q.grep = Some("Disk Quota Exceeded".into());
                q.case_insensitive = true;
            }),
        ),
        ("grep_common", query(|q| q.grep = Some("reply".into()))),
        (
            "level_warn_limit_500",
            query(|q| {
                q.min_level = Some(Level::WARN);
                q.limit = 500;
            }),
        ),
        ("tail_50", LogQuery::default()),
    ];
    let mut g = c.benchmark_group("log_query");
    for (name, q) in &cases {
        let hits = buffer.query(q).records.len();
        eprintln!("log_query/{name}: {hits} lines returned");
        g.bench_function(*name, |b| b.iter(|| black_box(buffer.query(black_box(q)))));
    }
    g.finish();
}

criterion_group!(log_query, benches);
criterion_main!(log_query);
