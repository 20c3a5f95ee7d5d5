//! Replicas sharing PostgreSQL tell each other what changed on the store's channel
//! (`LISTEN/NOTIFY`, no other service): the `/mcp` server's changes (list changes,
//! resource updates, task status, ended sessions, answers and cancels for a task's
//! owner) go out through [`StoreReplicas`], and what the others announce is applied
//! here ([`ReplicaLink::apply_to`]): the `/mcp` server delivers it, the saved
//! tool settings are applied, an MCP server switched on or off elsewhere is switched
//! here too. On SQLite (one process) none of this exists.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};

use crate::bot::Bot;
use crate::mcp::{Changed, McpServer, Replicas};
use crate::replica_changes::Change;

/// The `/mcp` server's seam to the other replicas: a queue drained by one publisher,
/// so a request never waits for the database.
pub struct StoreReplicas {
    queue: mpsc::UnboundedSender<Changed>,
}

impl Replicas for StoreReplicas {
    fn announce(&self, what: Changed) {
        let _ = self.queue.send(what);
    }
}

/// How long start-up waits for the listener before serving anyway (it keeps trying).
const LISTEN_WAIT: Duration = Duration::from_secs(5);

/// The two ways to the other replicas: made before the `/mcp` server is built and its
/// ended sessions are read, so nothing announced meanwhile is missed.
pub struct ReplicaLink {
    bot: Arc<Bot>,
    seam: Arc<StoreReplicas>,
    changes: broadcast::Receiver<Change>,
}

/// Listens to the other replicas (waiting until the listener listens) and starts the
/// publisher of this one's changes; `None` on SQLite, whose file has one process.
pub async fn link_replicas(bot: &Arc<Bot>) -> Option<ReplicaLink> {
    let changes = bot.store.subscribe_changes()?;
    if !bot.store.until_listening(LISTEN_WAIT).await {
        tracing::warn!(
            "cannot hear the other replicas yet (LISTEN failed); serving anyway, and still trying"
        );
    }
    let (queue, mut announced) = mpsc::unbounded_channel();
    let (store, replica) = (bot.store.clone(), bot.config.replica_id.clone());
    tokio::spawn(async move {
        let mut failures: u64 = 0;
        while let Some(what) = announced.recv().await {
            let kind = Changed::kind(&what);
            let change = Change {
                replica: replica.clone(),
                what,
            };
            if let Err(e) = store.publish_change(change).await {
                failures += 1;
                if failures.is_power_of_two() {
                    tracing::warn!(error = %e, kind, failures, "cannot tell the other replicas about a change");
                }
            }
        }
    });
    Some(ReplicaLink {
        bot: bot.clone(),
        seam: Arc::new(StoreReplicas { queue }),
        changes,
    })
}

impl ReplicaLink {
    /// What the `/mcp` server announces through.
    pub fn seam(&self) -> Arc<dyn Replicas> {
        self.seam.clone()
    }

    /// Applies what the other replicas announce, for as long as the process runs; a
    /// replica's own echo is skipped (it acted already).
    pub fn apply_to(self, server: McpServer) {
        let ReplicaLink {
            bot, mut changes, ..
        } = self;
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                match changes.recv().await {
                    Ok(change) if change.replica == bot.config.replica_id => {}
                    Ok(change) => {
                        tracing::debug!(from = %change.replica, kind = change.what.kind(), "another replica announced a change");
                        apply(&bot, &server, change.what).await;
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(
                            missed,
                            "missed changes announced by other replicas; tools are re-read"
                        );
                        apply(&bot, &server, Changed::Tools).await;
                    }
                    Err(RecvError::Closed) => break,
                }
            }
        });
    }
}

async fn apply(bot: &Arc<Bot>, server: &McpServer, what: Changed) {
    match what {
        Changed::Tools => {
            // A tool toggled elsewhere is saved in the shared store; applying a setting
            // already in force announces nothing, so the echo stops after one round.
            bot.restore_tool_settings().await;
            server.apply_replica_change(Changed::Tools).await;
        }
        Changed::McpServer { name, enabled } => {
            // Connecting or stopping a server takes a while; the next change need not wait.
            let bot = bot.clone();
            tokio::spawn(async move {
                if let Err(e) = bot.mcp_host.set_enabled(&name, enabled).await {
                    tracing::warn!(server = %name, error = %e, "cannot apply an MCP server toggled on another replica");
                }
            });
        }
        other => server.apply_replica_change(other).await,
    }
}

/// Tells the other replicas that an MCP server was switched on or off here.
pub async fn announce_mcp_server_toggled(bot: &Bot, name: &str, enabled: bool) {
    let change = Change {
        replica: bot.config.replica_id.clone(),
        what: Changed::McpServer {
            name: name.to_string(),
            enabled,
        },
    };
    if let Err(e) = bot.store.publish_change(change).await {
        tracing::warn!(server = %name, error = %e, "cannot tell the other replicas that an MCP server was toggled; they keep their connection until restarted");
    }
}
