//! What turn tracing costs (docs/performance.md, "Turn traces").
//!
//! Groups:
//! - `trace/span`: one span on the hot path — start, two small attributes, end (the
//!   hand-off to the writer's channel). The writer runs meanwhile on the same runtime;
//!   every 1,000 spans the bench waits (untimed) until it has stored them, so the
//!   channel never fills and the measured path is the ordinary one, not the drop.
//! - `trace/llm_call`: the offline provider answering a 12-message request, bare and
//!   through `traced_chat` (which copies the request and response into the span):
//!   the per-LLM-call recording cost.
//! - `trace/store`: a writer batch of 50 turns (a root and one LLM span with a
//!   12-message request each; `TRACE_STORE_MESSAGES` to change it) stored in a database file already holding its 1,000
//!   turns, so each batch also cuts back the oldest: the store's share of the writer's
//!   work per turn. Then `trace/read`: what the trace tools read from that store (a
//!   page of traces, a page of LLM calls, one trace, one span by id).
//! - `trace/export`: 512 spans (a full writer batch, with request payloads) handed to
//!   the OTLP exporter and delivered to a collector on 127.0.0.1 that accepts them:
//!   conversion to OpenTelemetry `SpanData`, protobuf, one HTTP request.
//!
//! Then, outside criterion's timing (recorded and unrecorded rounds must take turns,
//! which criterion's groups cannot do):
//! - `trace/turn_overhead`: whole turns (`Supervisor::send`, new conversation, one
//!   streamed answer) against the fake OpenAI-compatible server of the tests (real HTTP
//!   on 127.0.0.1), on one bot with tracing on, in interleaved rounds of recorded and
//!   unrecorded turns; the median ratio, and the mean with its 95 % interval, is the
//!   recording cost of a turn, the writer's work included (`TRACE_TURN_ROUNDS`,
//!   `TRACE_TURN_TURNS` to change the sample: 30 rounds of 1,000 turns unless set). It
//!   also prints the process CPU per turn of each kind, the trace writer's own CPU per
//!   turn (`health`'s `writer_cpu_us`), the closing flush's share and the queueing for
//!   the bot's SQLite writer connection (traces have their own).
//!   `TRACE_TURN_BURN_US=N` (and `TRACE_TURN_BURN_IDLE=1`) runs the control instead:
//!   unrecorded turns beside a thread burning N µs of CPU every 50 ms, so the cost of
//!   recording can be set against the cost of any background CPU on the same machine;
//!   `TRACE_TURN_BURN_US=0` is an A/A test, the benchmark's own noise.
//!   `TRACE_TURN_PACE_US=N` pauses N µs after every turn, as a bot that is not flat out
//!   does between messages: the writer then works in the pauses, and a round's time is
//!   its turns' own (the closing flush left out), so the ratio is what recording adds
//!   to a turn's latency rather than to a saturated loop's throughput.
//! - `trace/store_growth`: the database files (checkpointed) after 200 turns with tracing
//!   on, minus the same with tracing off, divided by 200.
//!
//! Run: `cargo bench --bench trace_recording` (optimised), or on a shared machine
//! `cargo bench --profile dev --bench trace_recording` (unoptimised; ratios only).

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use porthole::bot::llm::{ChatMessage, ChatRequest, LlmProvider, OfflineProvider};
use porthole::bot::store::Store;
use porthole::bot::tools::ExecContext;
use porthole::bot::trace::{
    OtlpExporter, OtlpSettings, SpanExporter, TraceSettings, Tracer, traced_chat,
};
use porthole::bot::{Bot, TracingWebLogSink};
use porthole::config::Config;
use porthole::model::Role;
use porthole::model::{SpanKind, SpanRecord};
use porthole::redact::Redactor;
use tokio::runtime::Runtime;

/// The bot's own allocator (src/main.rs): tracing is measured as the bot runs it (the
/// writer's CPU per turn is not the same under glibc's: docs/performance.md, section 6).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/it/fake_llm/mod.rs"]
mod fake_llm;

const CHUNK: u64 = 1_000;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn settings() -> TraceSettings {
    TraceSettings {
        max_turns: 1_000,
        max_mcp_calls: 1_000,
        max_age: Duration::from_secs(3600),
        max_payload_bytes: 32 * 1024,
    }
}

fn span_hot_path(c: &mut Criterion) {
    let rt = runtime();
    let tracer = rt.block_on(async {
        let store = Store::open(":memory:").expect("store");
        Tracer::start(store, Arc::new(Redactor::new(Vec::new())), settings(), None)
    });
    let scope = tracer.root("bench", None);
    c.bench_function("trace/span", |b| {
        b.iter_custom(|iters| {
            let mut measured = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = CHUNK.min(iters - done);
                let started = Instant::now();
                for _ in 0..n {
                    let mut span = scope.start(SpanKind::Tool, "tool calculator");
                    span.set_tool("calculator");
                    span.set_attribute("source", "native");
                    span.end();
                }
                measured += started.elapsed();
                rt.block_on(tracer.flush());
                done += n;
            }
            measured
        })
    });
    assert_eq!(
        tracer.counters().spans_dropped,
        0,
        "the bench measured drops"
    );
}

fn llm_call(c: &mut Criterion) {
    let rt = runtime();
    let tracer = rt.block_on(async {
        let store = Store::open(":memory:").expect("store");
        Tracer::start(store, Arc::new(Redactor::new(Vec::new())), settings(), None)
    });
    let messages: Vec<ChatMessage> = (0..12)
        .map(|n| {
            let role = if n % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            ChatMessage::text(
                role,
                format!("message {n}: {}", "a few words of context ".repeat(8)),
            )
        })
        .collect();
    let request = ChatRequest {
        system: "You are Porthole, a helpful assistant.",
        messages: &messages,
        tools: &[],
        parameters: None,
    };
    let provider = OfflineProvider;
    let sink = |_: &str| {};
    let mut group = c.benchmark_group("trace/llm_call");
    group.bench_function("bare", |b| {
        b.iter(|| {
            rt.block_on(async {
                black_box(
                    provider
                        .chat(&request, &sink)
                        .await
                        .expect("offline answers"),
                )
            })
        })
    });
    let scope = tracer.root("bench", None);
    group.bench_function("traced", |b| {
        b.iter_custom(|iters| {
            let mut measured = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = CHUNK.min(iters - done);
                let started = Instant::now();
                for _ in 0..n {
                    rt.block_on(async {
                        black_box(
                            traced_chat(&provider, &request, &sink, &scope)
                                .await
                                .expect("offline answers"),
                        )
                    });
                }
                measured += started.elapsed();
                rt.block_on(tracer.flush());
                done += n;
            }
            measured
        })
    });
    group.finish();
}

/// A collector on 127.0.0.1:0 that accepts every OTLP request; returns its base URL.
/// It reads each body whole: a server that answers before reading a large body closes
/// the connection under the client, and every export would count as failed.
async fn accepting_collector() -> String {
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(|body: bytes::Bytes| async move {
            black_box(body.len());
            ""
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// A writer batch of LLM spans, each with a 12-message request.
fn llm_spans(count: usize) -> Vec<SpanRecord> {
    llm_spans_of(count, 12)
}

/// LLM spans, each with a request of `messages` messages (about 110 bytes each).
fn llm_spans_of(count: usize, messages: usize) -> Vec<SpanRecord> {
    let request: Vec<serde_json::Value> = (0..messages)
        .map(|n| serde_json::json!({"role": "user", "content": format!("message {n}: {}", "context ".repeat(12))}))
        .collect();
    (0..count)
        .map(|n| {
            let mut attributes = serde_json::Map::new();
            attributes.insert("request".into(), request.clone().into());
            attributes.insert("provider".into(), "openai".into());
            SpanRecord {
                trace_id: porthole::trace_context::new_trace_id(),
                span_id: porthole::trace_context::new_span_id(),
                parent_span_id: None,
                is_root: false,
                root_span_id: String::new(),
                kind: SpanKind::Llm,
                name: format!("chat fake-model {n}").into(),
                source: None,
                conversation_id: None,
                start_us: 1_763_900_000_000_000 + n as i64,
                duration_us: 1_000,
                error: None,
                model: Some("fake-model".into()),
                tool: None,
                input_tokens: Some(12),
                output_tokens: Some(5),
                attributes,
                mcp_request: None,
            }
        })
        .collect()
}

/// `turns` turns as the writer hands them to the store: each a root and one LLM span
/// with a request of `TRACE_STORE_MESSAGES` messages (12 unless set), started after
/// `first_us`.
fn turn_spans(turns: usize, first_us: i64) -> Vec<SpanRecord> {
    let messages = std::env::var("TRACE_STORE_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(12);
    llm_spans_of(turns, messages)
        .into_iter()
        .enumerate()
        .flat_map(|(n, mut llm)| {
            let start_us = first_us + n as i64 * 1_000;
            let mut root = llm.clone();
            root.span_id = porthole::trace_context::new_span_id();
            root.is_root = true;
            root.kind = SpanKind::Turn;
            root.name = "turn".into();
            root.source = Some("web".into());
            root.model = None;
            root.attributes = serde_json::Map::from_iter([("user_message".into(), "hi".into())]);
            root.start_us = start_us;
            llm.root_span_id = root.span_id.clone();
            llm.parent_span_id = Some(root.span_id.clone());
            llm.start_us = start_us + 100;
            root.root_span_id = root.span_id.clone();
            [root, llm]
        })
        .collect()
}

fn store_batch(c: &mut Criterion) {
    const TURNS: usize = 50;
    let rt = runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&dir.path().join("batch.db").display().to_string()).expect("store");
    let prune = porthole::bot::store::Prune {
        keep_turns: Some(settings().max_turns),
        keep_mcp_calls: None,
        before_us: Some(0),
    };
    let mut next_us = 1_763_900_000_000_000;
    let mut batch = || {
        next_us += 1_000_000;
        turn_spans(TURNS, next_us)
    };
    // Fill the store to its count limit first, so every batch also prunes.
    for _ in 0..settings().max_turns / TURNS {
        rt.block_on(store.append_spans(batch(), prune))
            .expect("fill");
    }
    let mut group = c.benchmark_group("trace/store");
    group.throughput(criterion::Throughput::Elements(TURNS as u64));
    group.bench_function("batch_of_50_turns", |b| {
        b.iter_batched(
            &mut batch,
            |spans| {
                rt.block_on(store.append_spans(spans, prune))
                    .expect("append")
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();

    // What the trace tools read from that store of 1,000 turns: a page of traces, a page
    // of LLM calls (across every turn), one trace, one span by id.
    let page = || porthole::bot::store::SpanQuery {
        limit: 20,
        ..Default::default()
    };
    let call = rt
        .block_on(store.list_spans(SpanKind::Llm, page()))
        .expect("calls")
        .items
        .pop()
        .expect("a call");
    let mut group = c.benchmark_group("trace/read");
    group.bench_function("list_traces_20", |b| {
        b.iter(|| rt.block_on(store.list_traces(page())).expect("list"))
    });
    group.bench_function("llm_calls_20", |b| {
        b.iter(|| {
            rt.block_on(store.list_spans(SpanKind::Llm, page()))
                .expect("calls")
        })
    });
    group.bench_function("trace", |b| {
        b.iter(|| {
            rt.block_on(store.trace_spans(&call.trace_id))
                .expect("trace")
        })
    });
    group.bench_function("span_by_id", |b| {
        b.iter(|| rt.block_on(store.span(&call.span_id)).expect("span"))
    });
    group.finish();
}

fn export(c: &mut Criterion) {
    const BATCH: usize = 512;
    let rt = runtime();
    let exporter = rt.block_on(async {
        let endpoint = accepting_collector().await;
        OtlpExporter::start(&OtlpSettings {
            endpoint,
            headers: Vec::new(),
            service_name: "bench".into(),
        })
        .expect("exporter")
    });
    let spans = llm_spans(BATCH);
    let mut group = c.benchmark_group("trace/export");
    group.throughput(criterion::Throughput::Elements(BATCH as u64));
    group.bench_function("batch_512", |b| {
        b.iter(|| {
            rt.block_on(async {
                exporter.export(&spans);
                exporter.flush(Duration::from_secs(10)).await;
            })
        })
    });
    group.finish();
    assert_eq!(
        exporter.dropped(),
        0,
        "the collector refused or the queue overflowed"
    );
}

/// A bot on the fake OpenAI-compatible server, with tracing on or off.
async fn bot(llm_url: &str, traced: bool, database: &str) -> Arc<Bot> {
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let mut vars: HashMap<String, String> = HashMap::new();
    for (k, v) in [
        ("LLM_PROVIDER", "openai"),
        ("LLM_API_KEY", "sk-bench-0123456789abcdef"),
        ("LLM_MODEL", "fake-model"),
        ("SCHEDULER_ENABLED", "false"),
        ("TRACE_ENABLED", if traced { "true" } else { "false" }),
    ] {
        vars.insert(k.into(), v.into());
    }
    vars.insert("LLM_BASE_URL".into(), format!("{llm_url}/v1"));
    vars.insert("DATABASE_PATH".into(), database.into());
    for folder in ["WORKSPACE_DIR", "USER_TOOLS_DIR", "SKILLS_DIR"] {
        vars.insert(
            folder.into(),
            dir.join(folder.to_lowercase()).display().to_string(),
        );
    }
    vars.insert(
        "MCP_SERVERS_CONFIG".into(),
        dir.join("mcp.json").display().to_string(),
    );
    let config = Config::from_map(&vars).expect("bench config");
    Bot::build(config, Arc::new(TracingWebLogSink)).expect("bot")
}

/// One turn on `bot`, recorded when `traced` (its root scope comes from the bot's
/// tracer) and not otherwise (a disabled scope: nothing in the turn records).
async fn one_turn(bot: &Bot, traced: bool) {
    let mut ctx = ExecContext::new(&["user"]);
    if traced {
        ctx.trace = bot.tracer.root("web", None);
    }
    let reply = bot
        .supervisor
        .send(None, "hello there", &ctx, None)
        .await
        .expect("turn");
    black_box(reply);
}

/// The recording cost on a whole turn, as a ratio: rounds of turns recorded and not
/// recorded, interleaved (the order alternates, so drift hits both sides alike), each
/// traced round ending with a timed flush so the writer's work is counted too. Both
/// kinds of round run on the same bot, with its tracer on, its one database file and
/// its connections: only whether a turn is recorded differs. (Two bots, one traced and
/// one not, differed by about 2 % with tracing off in both.) Besides the wall time,
/// each round's CPU time (the whole process, so the writer's thread too) is taken, so
/// the line also says how much CPU recording adds per turn.
///
/// With `TRACE_TURN_BURN_US=N` it runs a control instead: no round is recorded, and
/// during the second kind a thread burns N µs of CPU every 50 ms, at normal priority
/// or, with `TRACE_TURN_BURN_IDLE=1`, at `SCHED_IDLE`. That says what background CPU,
/// any background CPU, costs a turn on this machine; with N = 0 it is an A/A test,
/// the benchmark's own noise.
fn turn_overhead(_: &mut Criterion) {
    // Rounds of 1,000 turns (about a second each): a round much shorter than the
    // writer's gathering time (250 ms) leaves the whole round's writing to the closing
    // flush, which then times the writer run after the turns instead of beside them.
    let rounds: usize = env_number("TRACE_TURN_ROUNDS", 30);
    let turns: usize = env_number("TRACE_TURN_TURNS", 1_000);
    let control = std::env::var("TRACE_TURN_BURN_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(|micros| Control {
            burn: Duration::from_micros(micros),
            idle: std::env::var_os("TRACE_TURN_BURN_IDLE").is_some(),
        });
    let pace = Duration::from_micros(env_number("TRACE_TURN_PACE_US", 0) as u64);
    let rt = runtime();
    let llm = rt.block_on(fake_llm::start(Vec::new()));
    let dir = tempfile::tempdir().expect("temp dir");
    let database = dir.path().join("turns.db").display().to_string();
    let bot = rt.block_on(bot(&llm.url(), true, &database));
    let burner = control.as_ref().map(Burner::start);
    // One round of `turns` turns, of the second kind (recorded, or beside the burner)
    // or not, and for a recorded one the closing flush.
    let timed = |second_kind: bool| {
        let traced = second_kind && control.is_none();
        if let Some(burner) = &burner {
            burner.set(second_kind);
        }
        rt.block_on(async {
            let (started, cpu) = (Instant::now(), process_cpu());
            let waited = || bot.store.writer_waits().unwrap_or_default().total;
            let writer_cpu = || Duration::from_micros(bot.tracer.counters().writer_cpu_us);
            let (waited_before, writer_before) = (waited(), writer_cpu());
            let mut turning = Duration::ZERO;
            for _ in 0..turns {
                let turn = Instant::now();
                one_turn(&bot, traced).await;
                turning += turn.elapsed();
                if !pace.is_zero() {
                    tokio::time::sleep(pace).await;
                }
            }
            let flushing = Instant::now();
            if traced {
                bot.tracer.flush().await;
            }
            let flush = flushing.elapsed();
            Round {
                // Paced, the writer works in the pauses: what a turn pays is its own time.
                wall: if pace.is_zero() {
                    started.elapsed()
                } else {
                    turning
                },
                cpu: process_cpu() - cpu,
                writer_cpu: writer_cpu() - writer_before,
                waited: waited() - waited_before,
                flush,
            }
        })
    };
    // Warm-up: connections, the page cache, the allocator.
    timed(false);
    timed(true);
    let mut ratios = Vec::with_capacity(rounds);
    let (mut off, mut on) = (Round::default(), Round::default());
    for round in 0..rounds {
        let (off_round, on_round) = if round % 2 == 0 {
            let off_round = timed(false);
            (off_round, timed(true))
        } else {
            let on_round = timed(true);
            (timed(false), on_round)
        };
        ratios.push(on_round.wall.as_secs_f64() / off_round.wall.as_secs_f64());
        off.add(&off_round);
        on.add(&on_round);
    }
    let (mean, margin) = mean_with_margin(&ratios);
    ratios.sort_by(f64::total_cmp);
    let per_turn = |total: Duration| total.as_secs_f64() * 1e6 / (rounds * turns) as f64;
    let percent = |ratio: f64| (ratio - 1.0) * 100.0;
    let what = match &control {
        None => "unrecorded / recorded turns".to_string(),
        Some(control) => format!(
            "control, unrecorded turns / the same beside a thread burning {} µs per 50 ms{}",
            control.burn.as_micros(),
            if control.idle { " at SCHED_IDLE" } else { "" }
        ),
    };
    let paced = if pace.is_zero() {
        "back to back (a round's time includes its closing flush)".to_string()
    } else {
        format!(
            "each followed by a {} µs pause (a round's time is its turns' own)",
            pace.as_micros()
        )
    };
    println!(
        "trace/turn_overhead ({what}): {rounds} rounds of {turns} turns {paced}, interleaved: median {:+.1} % \
         (quartiles {:+.1} % … {:+.1} %), mean {:+.1} % (95 % interval {:+.1} … {:+.1} %); mean turn {:.0} / {:.0} µs; process CPU per turn \
         {:.0} / {:.0} µs, the trace writer's {:.1} µs of it; the closing flush {:.1} µs per \
         turn; queued for the bot's writer connection {:.1} / {:.1} µs per turn",
        percent(ratios[rounds / 2]),
        percent(ratios[rounds / 4]),
        percent(ratios[rounds * 3 / 4]),
        percent(mean),
        percent(mean - margin),
        percent(mean + margin),
        per_turn(off.wall),
        per_turn(on.wall),
        per_turn(off.cpu),
        per_turn(on.cpu),
        per_turn(on.writer_cpu),
        per_turn(on.flush),
        per_turn(off.waited),
        per_turn(on.waited),
    );
}

/// The mean of `values` and the half-width of its 95 % confidence interval (Student's
/// t, approximated as 1.96 + 2.4 / degrees of freedom: within 2 % of the table from 5
/// degrees up). Rounds on this machine differ by several percent even between two
/// untraced bots (run the control with `TRACE_TURN_BURN_US=0`), so a ratio means
/// something only with its interval.
fn mean_with_margin(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 {
        return (mean, f64::NAN);
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let t = 1.96 + 2.4 / (n - 1.0);
    (mean, t * (variance / n).sqrt())
}

/// One round of turns, or the sum of its kind's rounds: the wall time, the process's
/// CPU time meanwhile, the trace writer's own CPU, the time callers queued for the
/// store's one writer connection (the turns, and the trace writer: waiting, not work),
/// and the closing flush's own wall time.
#[derive(Default)]
struct Round {
    wall: Duration,
    cpu: Duration,
    writer_cpu: Duration,
    waited: Duration,
    flush: Duration,
}

impl Round {
    fn add(&mut self, round: &Round) {
        self.wall += round.wall;
        self.cpu += round.cpu;
        self.writer_cpu += round.writer_cpu;
        self.waited += round.waited;
        self.flush += round.flush;
    }
}

/// The control's settings: the CPU burnt every 50 ms, and whether at `SCHED_IDLE`.
#[derive(Clone, Copy)]
struct Control {
    burn: Duration,
    idle: bool,
}

/// The CPU time (user and system) of the whole process so far.
fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given; a zeroed rusage is a valid value.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// The control's background thread: while switched on, it spins for its burn every
/// 50 ms (the trace writer's rhythm when the control was made; it now gathers 250 ms).
struct Burner {
    on: Arc<std::sync::atomic::AtomicBool>,
}

impl Burner {
    fn start(control: &Control) -> Burner {
        let on = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let Control { burn, idle } = *control;
        let switch = on.clone();
        std::thread::spawn(move || {
            if idle {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: pid 0 is this thread; the parameter is valid for SCHED_IDLE.
                let done = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
                assert_eq!(done, 0, "cannot set SCHED_IDLE");
            }
            loop {
                if switch.load(std::sync::atomic::Ordering::Relaxed) {
                    let started = Instant::now();
                    while started.elapsed() < burn {
                        std::hint::spin_loop();
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Burner { on }
    }

    fn set(&self, on: bool) {
        self.on.store(on, std::sync::atomic::Ordering::Relaxed);
    }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The database files (the bot's and the traces') after `turns` turns, checkpointed, in
/// bytes.
fn database_bytes(rt: &Runtime, llm_url: &str, traced: bool, turns: usize) -> u64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("growth.db").display().to_string();
    rt.block_on(async {
        let bot = bot(llm_url, traced, &path).await;
        for _ in 0..turns {
            one_turn(&bot, traced).await;
        }
        bot.tracer.flush().await;
        bot.store
            .call(|c| {
                // Both files: the traces file is attached to this connection.
                c.execute_batch(
                    "PRAGMA main.wal_checkpoint(TRUNCATE); PRAGMA traces.wal_checkpoint(TRUNCATE);",
                )?;
                Ok(())
            })
            .await
            .expect("checkpoint");
        let traces = bot.store.traces_file().and_then(|f| f.size_bytes);
        bot.store.file_size().unwrap_or(0) + traces.unwrap_or(0)
    })
}

fn store_growth(_: &mut Criterion) {
    const TURNS: usize = 200;
    let rt = runtime();
    let llm = rt.block_on(fake_llm::start(Vec::new()));
    let off = database_bytes(&rt, &llm.url(), false, TURNS);
    let on = database_bytes(&rt, &llm.url(), true, TURNS);
    println!(
        "trace/store_growth: {TURNS} turns, database {off} B untraced, {on} B traced: {:.0} B per traced turn (turn + one LLM span)",
        on.saturating_sub(off) as f64 / TURNS as f64
    );
}

criterion_group!(
    benches,
    span_hot_path,
    llm_call,
    store_batch,
    export,
    turn_overhead,
    store_growth
);
criterion_main!(benches);
