//! The bridges from the bot's events to `/mcp`: browser console lines into the MCP log
//! buffer, the log journal into the store (what `server_log`'s database reader shows),
//! changes of the bot's tools into `list_changed` notifications, on this replica and,
//! with replicas sharing PostgreSQL, on the others (`replicas.rs`), and new messages into
//! `notifications/resources/updated` for a conversation's resource.

use std::sync::Arc;

use crate::bot::{Bot, TracingWebLogSink, WebLogLine, WebLogSink};
use crate::logs::buffer::{LogBuffer, level_name};
use crate::logs::journal::{JOURNAL_TARGET, LogJournal};
use crate::mcp::Notifier;

/// Browser console lines go to the MCP log buffer (source `web`) and to the terminal.
pub struct BufferedWebLogSink {
    buffer: Arc<LogBuffer>,
}

impl BufferedWebLogSink {
    pub fn new(buffer: Arc<LogBuffer>) -> Self {
        BufferedWebLogSink { buffer }
    }
}

impl WebLogSink for BufferedWebLogSink {
    fn record(&self, line: WebLogLine) {
        self.buffer
            .push_web(&line.level, &line.message, line.timestamp.as_deref());
        TracingWebLogSink.record(line);
    }
}

/// Writes what the journal collects to the store, in batches as they come, off every
/// request's path, keeping the newest `LOG_DB_MAX_EVENTS` rows. A store that fails is
/// reported now and then (1st, 2nd, 4th, 8th… failure), under a target the journal
/// itself skips, so failures cannot feed themselves.
pub fn spawn_journal_writer(bot: &Arc<Bot>, journal: &LogJournal) {
    const BATCH: usize = 256;
    let Some(mut records) = journal.take_receiver() else {
        return;
    };
    let store = bot.store.clone();
    let keep = bot.config.log_db_max_events;
    let replica = bot.config.replica_id.clone();
    tokio::spawn(async move {
        let mut failures: u64 = 0;
        while let Some(first) = records.recv().await {
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match records.try_recv() {
                    Ok(record) => batch.push(record),
                    Err(_) => break,
                }
            }
            let rows = batch
                .iter()
                .map(|r| {
                    (
                        r.time_us,
                        level_name(r.level).to_string(),
                        r.to_json().to_string(),
                    )
                })
                .collect();
            if let Err(e) = store.append_log_events(rows, &replica, keep).await {
                failures += 1;
                if failures.is_power_of_two() {
                    tracing::warn!(target: JOURNAL_TARGET, error = %e, failures, "cannot keep warnings and errors in the database");
                }
            }
        }
    });
}

/// A change to the bot's tools (an MCP server toggled, a tool disabled) is news to MCP
/// clients: they may want to list again. With replicas sharing PostgreSQL the notifier
/// relays it to the other replicas too (see [`replicas`]).
pub fn forward_tool_changes(bot: &Arc<Bot>, notifier: Notifier) {
    let mut changes = bot.tools.subscribe_changes();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::{RecvError, TryRecvError};
        // Lagged means changes were missed: still a change worth announcing.
        while !matches!(changes.recv().await, Err(RecvError::Closed)) {
            // One notification per burst: a connecting MCP server registers its tools
            // one by one.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            while !matches!(
                changes.try_recv(),
                Err(TryRecvError::Empty | TryRecvError::Closed)
            ) {}
            notifier.tools_changed();
        }
    });
}

/// A message added to a conversation updates its resource
/// (`porthole://conversations/{id}`): sessions subscribed to it hear so.
pub fn forward_conversation_changes(bot: &Arc<Bot>, notifier: Notifier) {
    let mut changes = bot.store.subscribe_conversation_changes();
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            match changes.recv().await {
                Ok(id) => notifier.resource_updated(&super::resources::conversation_uri(&id)),
                // Missed changes cannot be named; the next message names its conversation.
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            }
        }
    });
}
