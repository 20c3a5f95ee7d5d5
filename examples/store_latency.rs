//! The store's per-operation latency on SQLite and on PostgreSQL (docs/performance.md).
//!
//! ```text
//! cargo run --release --example store_latency                       # SQLite only
//! PORTHOLE_TEST_DATABASE_URL=postgres://… cargo run --release --example store_latency
//! ```
//!
//! Each operation runs `STORE_LATENCY_OPS` times (default 2000) one after another from
//! one task, on a SQLite file in a temp folder and, when the URL is set, in a fresh
//! schema of that PostgreSQL database (`scripts/bench-replicas.sh` starts one). Prints
//! a Markdown table: p50, p95 and mean in microseconds per operation. Before the reads of
//! traces, PostgreSQL is given its statistics (`ANALYZE`), as autovacuum does within a
//! minute of the writes; SQLite gathers none by itself, and gets none here.

use std::time::{Duration, Instant};

use porthole::bot::store::{MessageQuery, Prune, SpanQuery, Store};
use porthole::model::{NewMessage, Role};
use porthole::model::{SpanKind, SpanRecord};
use serde_json::{Map, json};

/// Latencies of one operation, in microseconds.
struct Timings(Vec<u64>);

impl Timings {
    fn percentile(&mut self, p: f64) -> u64 {
        self.0.sort_unstable();
        let index = ((self.0.len() as f64 - 1.0) * p).round() as usize;
        self.0[index]
    }

    fn mean(&self) -> u64 {
        self.0.iter().sum::<u64>() / self.0.len().max(1) as u64
    }
}

/// Runs `op` `count` times and records how long each took.
async fn measure<F, Fut>(count: usize, mut op: F) -> Timings
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut timings = Vec::with_capacity(count);
    for i in 0..count {
        let start = Instant::now();
        op(i).await;
        timings.push(start.elapsed().as_micros() as u64);
    }
    Timings(timings)
}

fn span(i: usize, j: usize) -> SpanRecord {
    let root = format!("root-{i}");
    SpanRecord {
        trace_id: format!("trace-{i}"),
        span_id: if j == 0 {
            root.clone()
        } else {
            format!("span-{i}-{j}")
        },
        parent_span_id: (j > 0).then(|| root.clone()),
        is_root: j == 0,
        root_span_id: root,
        kind: if j == 0 {
            SpanKind::Turn
        } else {
            SpanKind::Llm
        },
        name: "bench".into(),
        source: (j == 0).then_some("bench".into()),
        conversation_id: None,
        start_us: (i * 10 + j) as i64,
        duration_us: 10,
        error: None,
        model: Some("m".into()),
        tool: None,
        input_tokens: Some(10),
        output_tokens: Some(5),
        attributes: Map::from_iter([("request".to_string(), json!({"messages": ["hi"]}))]),
        mcp_request: None,
    }
}

/// Every operation on one store: (name, timings).
async fn run(
    store: &Store,
    count: usize,
    gathers_statistics: bool,
) -> Vec<(&'static str, Timings)> {
    let conversation = store
        .create_conversation("bench")
        .await
        .expect("conversation");
    let id = conversation.id.clone();
    let task = store
        .create_task(
            "bench",
            "",
            "0 0 1 1 *",
            json!({"prompt": "x"}),
            None,
            "user",
            porthole::bot::store::TaskLimits {
                all: usize::MAX,
                run_as_user: usize::MAX,
            },
        )
        .await
        .expect("task")
        .expect("no limit reached");
    let mut results = Vec::new();
    results.push((
        "create_conversation",
        measure(count, |_| async {
            store.create_conversation("c").await.expect("create");
        })
        .await,
    ));
    results.push((
        "append_message",
        measure(count, |i| {
            let id = id.clone();
            async move {
                store
                    .append_message(&id, NewMessage::text(Role::User, format!("message {i}")))
                    .await
                    .expect("append");
            }
        })
        .await,
    ));
    results.push((
        "list_messages (50 newest)",
        measure(count, |_| {
            let id = id.clone();
            async move {
                let query = MessageQuery {
                    limit: 50,
                    ..Default::default()
                };
                store.list_messages(&id, query).await.expect("list");
            }
        })
        .await,
    ));
    results.push((
        "get_task",
        measure(count, |_| async {
            store.get_task(task.id).await.expect("task");
        })
        .await,
    ));
    let now = porthole::bot::store::now_rfc3339();
    results.push((
        "claim_due_tasks (none due)",
        measure(count, |_| {
            let now = now.clone();
            async move {
                store
                    .claim_due_tasks("bench", &now, 0)
                    .await
                    .expect("claim");
            }
        })
        .await,
    ));
    results.push((
        "append_spans (a turn of 4 spans)",
        measure(count, |i| async move {
            let spans = (0..4).map(|j| span(i, j)).collect();
            store
                .append_spans(spans, Prune::default())
                .await
                .expect("spans");
        })
        .await,
    ));
    if gathers_statistics {
        // PostgreSQL's autovacuum gathers a table's statistics within about a minute of a
        // burst of writes, and a store in use has them; read right after the writes into
        // a fresh schema, the planner would expect a few dozen turns and sort them all
        // (docs/performance.md, section 7).
        store
            .run_sql("ANALYZE", Vec::new(), 0, false, Duration::from_secs(60))
            .await
            .expect("analyze");
    }
    results.push((
        "list_traces (20 newest, with counts)",
        measure(count, |_| async {
            let query = SpanQuery {
                limit: 20,
                ..Default::default()
            };
            store.list_traces(query).await.expect("traces");
        })
        .await,
    ));
    results
}

#[tokio::main]
async fn main() {
    let count: usize = std::env::var("STORE_LATENCY_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite_path = dir.path().join("bench.db");
    let mut stores = vec![(
        "SQLite (file, WAL)",
        Store::open(sqlite_path.to_str().expect("path")).expect("sqlite"),
        false,
    )];
    match std::env::var("PORTHOLE_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => {
            let url = porthole::bot::store::fresh_schema_url(&url);
            stores.push((
                "PostgreSQL (loopback)",
                Store::open(&url).expect("postgres"),
                true,
            ));
        }
        _ => eprintln!("PORTHOLE_TEST_DATABASE_URL is unset: SQLite only"),
    }
    let mut table: Vec<(String, Vec<String>)> = Vec::new();
    for (name, store, gathers_statistics) in &stores {
        let started = Instant::now();
        let results = run(store, count, *gathers_statistics).await;
        eprintln!("{name}: {count} of each in {:.1?}", started.elapsed());
        for (row, (operation, mut timings)) in results.into_iter().enumerate() {
            let cell = format!(
                "{} / {} / {}",
                timings.percentile(0.5),
                timings.percentile(0.95),
                timings.mean()
            );
            if table.len() <= row {
                table.push((operation.to_string(), Vec::new()));
            }
            table[row].1.push(cell);
        }
    }
    let names: Vec<&str> = stores.iter().map(|(n, _, _)| *n).collect();
    println!(
        "| operation ({count} each, µs p50 / p95 / mean) | {} |",
        names.join(" | ")
    );
    println!("|---|{}", "---|".repeat(names.len()));
    for (operation, cells) in table {
        println!("| {operation} | {} |", cells.join(" | "));
    }
}
