//! The task that keeps one server connected until it is stopped: connect, list and
//! register the tools, follow `tools/list_changed`, and whenever the connection fails
//! or is lost, wait (with exponential backoff) and try again. Tools stay registered
//! while it reconnects; their calls fail fast with a clear message meanwhile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::connection::Conn;
use super::events::ConnEvent;
use super::server::{Running, ServerEntry};

/// First wait before reconnecting; doubled after each failure up to [`MAX_BACKOFF`].
const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that lived this long resets the backoff.
const STABLE_CONNECTION: Duration = Duration::from_secs(30);

impl ServerEntry {
    /// Starts the task that keeps this server connected; its [`Running`] stops it.
    pub(super) fn spawn_supervisor(self: &Arc<Self>, runtime: &tokio::runtime::Handle) -> Running {
        let (stop, stop_rx) = watch::channel(false);
        self.status_mut().running = true;
        let task = runtime.spawn(supervise(self.clone(), stop_rx));
        Running { stop, task }
    }
}

/// How one connection attempt ended.
enum Ended {
    /// The supervisor was told to stop; the connection is closed.
    Stopped,
    /// The server could not be connected, or its tools not listed.
    Failed,
    /// The connection worked for `lasted`, then was lost.
    Lost { lasted: Duration },
}

/// Keeps one server connected until stopped: connect, list and register its tools,
/// follow list changes, and reconnect with backoff whenever the connection fails.
pub(super) async fn supervise(entry: Arc<ServerEntry>, mut stop: watch::Receiver<bool>) {
    let mut backoff = INITIAL_BACKOFF;
    loop {
        match connect_and_serve(&entry, &mut stop, backoff).await {
            Ended::Stopped => break,
            Ended::Failed => {}
            Ended::Lost { lasted } => {
                if lasted >= STABLE_CONNECTION {
                    backoff = INITIAL_BACKOFF;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped(&mut stop) => break,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    entry.status_mut().running = false;
}

/// One connection from the attempt to its end. `backoff` is only reported: it is the
/// wait before the next attempt if this one fails.
async fn connect_and_serve(
    entry: &Arc<ServerEntry>,
    stop: &mut watch::Receiver<bool>,
    backoff: Duration,
) -> Ended {
    let server = entry.name();
    entry.set_state("connecting", None);
    let (events_tx, events) = mpsc::unbounded_channel();
    let attempt = tokio::select! {
        attempt = Conn::connect(&entry.config, events_tx) => attempt,
        _ = stopped(stop) => return Ended::Stopped,
    };
    let conn = match attempt {
        Ok(conn) => Arc::new(conn),
        Err(error) => {
            tracing::warn!(server = %server, retry_in_ms = backoff.as_millis() as u64, "cannot connect to the MCP server: {error}");
            entry.set_state("failed", Some(error));
            return Ended::Failed;
        }
    };
    entry.set_conn(Some(conn.clone()));
    let listed = tokio::select! {
        listed = entry.refresh_tools(&conn) => listed,
        _ = stopped(stop) => {
            close_conn(entry, &conn).await;
            return Ended::Stopped;
        }
    };
    let count = match listed {
        Ok(count) => count,
        Err(error) => {
            close_conn(entry, &conn).await;
            tracing::warn!(server = %server, "the MCP server connected but its tools could not be listed: {error}");
            entry.set_state("failed", Some(error));
            return Ended::Failed;
        }
    };
    let version = conn.protocol_version();
    tracing::info!(server = %server, tools = count, protocol_version = %version, "MCP server connected");
    entry.set_connected(version);
    let since = Instant::now();
    let lost = follow_events(entry, &conn, events, stop).await;
    close_conn(entry, &conn).await;
    let Some(reason) = lost else {
        return Ended::Stopped;
    };
    tracing::warn!(server = %server, "MCP server disconnected: {reason}; reconnecting");
    entry.set_state("disconnected", Some(reason));
    Ended::Lost {
        lasted: since.elapsed(),
    }
}

/// Serves a connected server's events: re-lists its tools when they change. Returns
/// why the connection was lost, or `None` when told to stop.
async fn follow_events(
    entry: &Arc<ServerEntry>,
    conn: &Conn,
    mut events: mpsc::UnboundedReceiver<ConnEvent>,
    stop: &mut watch::Receiver<bool>,
) -> Option<String> {
    let server = entry.name();
    loop {
        tokio::select! {
            _ = stopped(stop) => return None,
            event = events.recv() => match event {
                Some(ConnEvent::ToolsChanged) => match entry.refresh_tools(conn).await {
                    Ok(count) => tracing::info!(server = %server, tools = count, "MCP server tool list changed"),
                    Err(e) => tracing::warn!(server = %server, "cannot refresh the MCP server's tools: {e}"),
                },
                Some(ConnEvent::Closed(reason)) => return Some(reason),
                None => return Some("the connection ended".to_string()),
            }
        }
    }
}

/// Forgets the server's connection and closes it.
async fn close_conn(entry: &ServerEntry, conn: &Conn) {
    entry.take_conn();
    conn.close().await;
}

/// Resolves once the supervisor is told to stop (or its switch is dropped).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}
