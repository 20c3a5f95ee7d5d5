//! The write side of the log inspector's third reader, the database: a `tracing` layer
//! that hands warnings, errors and audit records to whoever keeps them, off the hot
//! path.
//!
//! The layer only formats the event and `try_send`s it into a bounded channel; it never
//! waits. When the channel is full the record is dropped and counted, so a flood of
//! warnings can slow nothing down. The receiving end is taken once by the owner of a
//! store (the app wires it to the bot's SQLite store), which writes in batches. This
//! module knows no database: it could feed a file or a network sink the same way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

use super::buffer::{LogRecord, record_from_event};
use super::redaction::redact_record;

/// Target of the MCP endpoint's audit records (`tools/call` and other changes), which
/// are kept whatever their level.
pub const AUDIT_TARGET: &str = "porthole::mcp::audit";

/// Target for the journal's own complaints: never journaled, so a failing store cannot
/// feed itself.
pub const JOURNAL_TARGET: &str = "porthole::log_journal";

/// Records waiting to be written; more are dropped (and counted) until the writer
/// catches up.
const QUEUE: usize = 4096;

/// The channel between the layer and the writer, with the count of what it dropped.
pub struct LogJournal {
    tx: mpsc::Sender<LogRecord>,
    rx: Mutex<Option<mpsc::Receiver<LogRecord>>>,
    dropped: AtomicU64,
}

impl LogJournal {
    pub fn new() -> Arc<Self> {
        let (tx, rx) = mpsc::channel(QUEUE);
        Arc::new(LogJournal {
            tx,
            rx: Mutex::new(Some(rx)),
            dropped: AtomicU64::new(0),
        })
    }

    /// Whether a record belongs in the journal: a warning or an error of the server
    /// (not a browser line), or an audit record.
    pub fn keeps(level: Level, target: &str, web_target: &str) -> bool {
        if target == web_target || target.starts_with(JOURNAL_TARGET) {
            return false;
        }
        matches!(level, Level::WARN | Level::ERROR) || target == AUDIT_TARGET
    }

    /// Hands a record to the writer without waiting; a full queue drops it.
    pub fn offer(&self, record: LogRecord) {
        if self.tx.try_send(record).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The receiving end, for the one writer; `None` once taken.
    pub fn take_receiver(&self) -> Option<mpsc::Receiver<LogRecord>> {
        self.rx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Records dropped because the writer fell behind (or was never started).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The `tracing` layer feeding this journal. `web_target` lines (browser console
    /// lines) are not the bot's own and are left out.
    pub fn layer(self: &Arc<Self>, web_target: &'static str) -> JournalLayer {
        JournalLayer {
            journal: self.clone(),
            web_target,
        }
    }
}

pub struct JournalLayer {
    journal: Arc<LogJournal>,
    web_target: &'static str,
}

impl<S: Subscriber> Layer<S> for JournalLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if LogJournal::keeps(*meta.level(), meta.target(), self.web_target) {
            let mut record = record_from_event(event, self.web_target);
            redact_record(&mut record);
            self.journal.offer(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn keeps_warnings_errors_and_audit_records_only() {
        let journal = LogJournal::new();
        let subscriber = tracing_subscriber::registry().with(journal.layer("web_console"));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "porthole::bot", "ordinary");
            tracing::warn!(target: "porthole::bot", "kept warning");
            tracing::error!(target: "porthole::bot::store", "kept error");
            tracing::info!(target: "porthole::mcp::audit", tool = "db_query", "kept audit");
            tracing::warn!(target: "web_console", "browser line");
            tracing::warn!(target: "porthole::log_journal", "own complaint");
        });
        let mut rx = journal.take_receiver().unwrap();
        let mut kept = Vec::new();
        while let Ok(record) = rx.try_recv() {
            kept.push(record.message);
        }
        assert_eq!(kept, ["kept warning", "kept error", "kept audit"]);
        assert!(journal.take_receiver().is_none(), "one writer only");
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        let journal = LogJournal::new();
        let subscriber = tracing_subscriber::registry().with(journal.layer("web_console"));
        tracing::subscriber::with_default(subscriber, || {
            for n in 0..QUEUE + 5 {
                tracing::warn!(target: "porthole::bot", "w{n}");
            }
        });
        assert_eq!(journal.dropped(), 5);
    }
}
