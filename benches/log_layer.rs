//! What the MCP log capture adds to every `tracing` event.
//!
//! Each group times one `info!` event with two fields under two subscribers that differ
//! only in the layer being measured; the difference of the two is the layer's cost.
//!
//! - `with_fmt`: the subscriber `main` builds (reloadable `EnvFilter` at `info` + `fmt`
//!   writing to a sink),
//!   without vs with the ring-buffer layer (`LogBuffer::layer`), buffer at capacity so
//!   every push also drops the oldest line, as in a long-running bot;
//! - `bare`: a bare `Registry` without vs with the buffer layer (the layer alone);
//! - `mcp_disabled`: the `main` subscriber without any buffer layer vs with the
//!   `Option::<BufferLayer>::None` that `main` installs when MCP is off;
//! - `filtered_out`: a `debug!` event below the `info` filter, without vs with the layer
//!   (events the filter rejects must not reach the layer at all).
//!
//! Run: `cargo bench --bench log_layer`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use porthole::logs::buffer::{BufferLayer, LogBuffer};
use tracing::Dispatch;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;

const CAPACITY: usize = 10_000;
const SKIP_TARGET: &str = "web_console";

fn full_buffer() -> std::sync::Arc<LogBuffer> {
    let buffer = LogBuffer::new(CAPACITY);
    let subscriber = tracing_subscriber::registry().with(buffer.layer().skipping(SKIP_TARGET));
    tracing::subscriber::with_default(subscriber, || {
        for n in 0..CAPACITY {
            tracing::info!(target: "porthole::bot::agents", conversation = n, step = 3, "reply sent to the user");
        }
    });
    assert_eq!(buffer.len(), CAPACITY);
    buffer
}

/// The terminal layer of main.rs, writing to a sink instead of stdout.
fn fmt_sink<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer().with_writer(std::io::sink)
}

fn event(n: u64) {
    tracing::info!(target: "porthole::bot::agents", conversation = n, step = 3, "reply sent to the user");
}

fn quiet_event(n: u64) {
    tracing::debug!(target: "porthole::bot::agents", conversation = n, "scheduler tick");
}

/// Times `f` under `dispatch`.
fn under(c: &mut Criterion, group: &str, name: &str, dispatch: &Dispatch, f: fn(u64)) {
    let mut g = c.benchmark_group(group);
    tracing::dispatcher::with_default(dispatch, || {
        let mut n = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                f(black_box(n))
            })
        });
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    let buffer = full_buffer();
    // As in main.rs: the filter sits behind a reload handle (for `set_log_level`).
    let filter = || tracing_subscriber::reload::Layer::new(EnvFilter::new("info")).0;

    // The subscriber of main.rs, MCP on (layer) and MCP on but measured without it.
    let without = Dispatch::new(
        tracing_subscriber::registry()
            .with(filter())
            .with(fmt_sink()),
    );
    let with = Dispatch::new(
        tracing_subscriber::registry()
            .with(filter())
            .with(fmt_sink())
            .with(buffer.layer().skipping(SKIP_TARGET)),
    );
    under(c, "log_layer/with_fmt", "without_buffer", &without, event);
    under(c, "log_layer/with_fmt", "with_buffer", &with, event);

    let bare_without = Dispatch::new(tracing_subscriber::registry());
    let bare_with =
        Dispatch::new(tracing_subscriber::registry().with(buffer.layer().skipping(SKIP_TARGET)));
    under(c, "log_layer/bare", "without_buffer", &bare_without, event);
    under(c, "log_layer/bare", "with_buffer", &bare_with, event);

    // MCP off: main.rs adds `None::<BufferLayer>`.
    let none: Option<BufferLayer> = None;
    let disabled = Dispatch::new(
        tracing_subscriber::registry()
            .with(filter())
            .with(fmt_sink())
            .with(none),
    );
    under(c, "log_layer/mcp_disabled", "no_layer", &without, event);
    under(c, "log_layer/mcp_disabled", "none_layer", &disabled, event);

    under(
        c,
        "log_layer/filtered_out",
        "without_buffer",
        &without,
        quiet_event,
    );
    under(
        c,
        "log_layer/filtered_out",
        "with_buffer",
        &with,
        quiet_event,
    );

    assert_eq!(buffer.len(), CAPACITY, "the buffer stayed at capacity");
}

criterion_group!(log_layer, benches);
criterion_main!(log_layer);
