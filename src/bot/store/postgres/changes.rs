//! Changes announced between replicas through PostgreSQL's `LISTEN/NOTIFY`, so that,
//! say, a tool toggled on one replica makes every replica tell its MCP clients that the
//! tool list changed. No other service is involved: the notification travels on the
//! database connection the replicas already have.
//!
//! One listener task per process holds a dedicated connection (`LISTEN` needs a session
//! of its own, which a pooled connection is not) and reconnects when it drops; what it
//! hears is fanned out on a broadcast channel.
//!
//! Notifications are the whole database's, so the channel is named after the schema:
//! replicas of one bot (one schema) hear each other, while a bot on another schema of the
//! same database hears nothing of them.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{broadcast, watch};
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::super::StoreError;
use super::Postgres;

/// The channel of the connection's schema, as an SQL expression: a fixed prefix and the
/// schema's digest, which always makes a valid identifier within PostgreSQL's 63 bytes.
const SCHEMA_CHANNEL: &str = "'porthole_changes_' || md5(coalesce(current_schema(), ''))";

/// How long the listener waits before reconnecting after its connection dropped.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

pub use crate::replica_changes::Change;

#[derive(Clone)]
pub(super) struct Changes {
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    sender: broadcast::Sender<Change>,
    listening: Arc<OnceLock<()>>,
    /// True while the listener's `LISTEN` is in force.
    heard: Arc<watch::Sender<bool>>,
}

impl Changes {
    pub(super) fn new(config: tokio_postgres::Config, tls: MakeRustlsConnect) -> Changes {
        Changes {
            config,
            tls,
            sender: broadcast::channel(256).0,
            listening: Arc::new(OnceLock::new()),
            heard: Arc::new(watch::channel(false).0),
        }
    }
}

impl Postgres {
    /// Announces a change to every replica.
    pub(super) async fn publish(&self, change: &Change) -> Result<(), StoreError> {
        let payload = change
            .to_payload()
            .map_err(|error| StoreError::Postgres(error.to_string()))?;
        let client = self.client().await?;
        client
            .execute(
                &format!("SELECT pg_notify({SCHEMA_CHANNEL}, $1)"),
                &[&payload],
            )
            .await?;
        Ok(())
    }

    /// The changes announced from now on; the first call starts the listener task.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Change> {
        let receiver = self.changes.sender.subscribe();
        self.changes.listening.get_or_init(|| {
            tokio::spawn(listen(self.changes.clone()));
        });
        receiver
    }

    /// Waits (at most `limit`) until the listener listens, so that what is announced
    /// from then on is heard; false when it did not within `limit`.
    pub(super) async fn until_listening(&self, limit: Duration) -> bool {
        let mut heard = self.changes.heard.subscribe();
        tokio::time::timeout(limit, heard.wait_for(|listening| *listening))
            .await
            .is_ok_and(|waited| waited.is_ok())
    }
}

/// Listens on the schema's channel ([`SCHEMA_CHANNEL`]) for as long as the process runs,
/// reconnecting as needed.
async fn listen(changes: Changes) {
    let Changes {
        config,
        tls,
        sender,
        heard,
        ..
    } = changes;
    let mut failures: u32 = 0;
    loop {
        let outcome = listen_once(&config, &tls, &sender, &heard).await;
        heard.send_replace(false);
        match outcome {
            Ok(()) => failures = 0,
            Err(e) => {
                failures += 1;
                if failures.is_power_of_two() {
                    tracing::warn!(error = %e, failures, "cannot listen for changes made by other replicas; retrying");
                }
            }
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// One listening connection, until it drops.
async fn listen_once(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
    sender: &broadcast::Sender<Change>,
    heard: &watch::Sender<bool>,
) -> Result<(), StoreError> {
    let (client, mut connection) = config.connect(tls.clone()).await?;
    let (messages_tx, mut messages) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut stream = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = stream.next().await {
            match message {
                Ok(message) => {
                    if messages_tx.send(message).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    let channel: String = client
        .query_one(&format!("SELECT {SCHEMA_CHANNEL}"), &[])
        .await?
        .try_get(0)?;
    client
        .batch_execute(&format!("LISTEN \"{channel}\""))
        .await?;
    heard.send_replace(true);
    tracing::debug!("listening for changes made by other replicas");
    while let Some(message) = messages.recv().await {
        if let AsyncMessage::Notification(notification) = message
            && let Ok(change) = serde_json::from_str::<Change>(notification.payload())
        {
            // No receiver is fine: nobody needs to hear it right now.
            let _ = sender.send(change);
        }
    }
    driver.abort();
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::bot::store::{Store, postgres};
    use crate::replica_changes::{Change, Changed};
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(10);

    fn change(replica: &str) -> Change {
        Change {
            replica: replica.into(),
            what: Changed::Tools,
        }
    }

    /// Two replicas of one schema hear each other; a bot on another schema of the same
    /// database does not hear them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn changes_are_heard_within_the_schema_only() {
        let Some(url) = crate::test_support::test_database_url() else {
            return;
        };
        let shared_url = postgres::fresh_schema_url(&url);
        let (first, second, elsewhere) = (
            Store::open(&shared_url).unwrap(),
            Store::open(&shared_url).unwrap(),
            Store::open(&postgres::fresh_schema_url(&url)).unwrap(),
        );
        let mut second_hears = second.subscribe_changes().unwrap();
        let mut elsewhere_hears = elsewhere.subscribe_changes().unwrap();
        assert!(second.until_listening(WAIT).await);
        assert!(elsewhere.until_listening(WAIT).await);

        first.publish_change(change("first")).await.unwrap();
        let heard = tokio::time::timeout(WAIT, second_hears.recv()).await;
        assert_eq!(heard.unwrap().unwrap(), change("first"));
        // Notifications reach each listener in commit order: had the other schema heard
        // the first change, it would come before its own.
        elsewhere.publish_change(change("elsewhere")).await.unwrap();
        let heard = tokio::time::timeout(WAIT, elsewhere_hears.recv()).await;
        assert_eq!(heard.unwrap().unwrap(), change("elsewhere"));
    }
}
