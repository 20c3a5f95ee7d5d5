//! Pruning conversations on PostgreSQL (the twin of `sqlite/conversations.rs`): by count
//! and by age in one transaction, the held ones passed as an array, one replica of a
//! schema at a time.

use async_trait::async_trait;

use super::Postgres;
use crate::bot::store::StoreError;
use crate::bot::store::backend::{ConversationPrune, Conversations};

/// Takes the retention lock of this connection's schema, or answers `false` at once if
/// another connection holds it. Advisory locks are the whole database's, so the key is
/// drawn from the schema: replicas of one bot (one schema) prune one at a time, while
/// bots, or tests, on other schemas of the same database never skip each other's prune.
const TAKE_RETENTION_LOCK: &str =
    "SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema(), $1))";

/// The seed of the retention lock's key.
const RETENTION_LOCK: i64 = 0x7265_7465_6e74_696f; // "retentio"

/// Keeps the newest `$1` conversations by last activity, except those held (`$2`).
/// PostgreSQL spells "no limit" by leaving `LIMIT` out.
const PRUNE_BY_COUNT: &str = "DELETE FROM conversations WHERE id IN \
    (SELECT id FROM conversations ORDER BY updated_at DESC, id DESC OFFSET $1) \
    AND id <> ALL($2)";

/// Deletes the conversations last active before the cutoff `$1`, except those held (`$2`).
const PRUNE_BY_AGE: &str = "DELETE FROM conversations WHERE updated_at < $1 AND id <> ALL($2)";

#[async_trait]
impl Conversations for Postgres {
    /// Both limits in one transaction, under an advisory lock so replicas prune one at a
    /// time (a replica that finds it taken skips this round: another is pruning the same
    /// rows).
    async fn prune_conversations(&self, prune: ConversationPrune) -> Result<usize, StoreError> {
        let ConversationPrune { keep, cutoff, held } = prune;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let locked: bool = tx
            .query_one(TAKE_RETENTION_LOCK, &[&RETENTION_LOCK])
            .await?
            .try_get(0)?;
        if !locked {
            return Ok(0);
        }
        let mut deleted = 0;
        if let Some(keep) = keep {
            deleted += tx
                .execute(&tx.prepare_cached(PRUNE_BY_COUNT).await?, &[&keep, &held])
                .await?;
        }
        if let Some(cutoff) = cutoff {
            deleted += tx
                .execute(&tx.prepare_cached(PRUNE_BY_AGE).await?, &[&cutoff, &held])
                .await?;
        }
        tx.commit().await?;
        Ok(deleted as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bot::store::{Store, postgres};
    use crate::model::ConversationLimits;

    /// A held lock makes its own schema's prune skip the round and leaves another schema's
    /// alone (the stores' shared tests prune at once on schemas of one database).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_retention_lock_is_the_schemas_own() {
        let Some(url) = crate::test_support::test_database_url() else {
            return;
        };
        let (locked_url, other_url) = (
            postgres::fresh_schema_url(&url),
            postgres::fresh_schema_url(&url),
        );
        let (locked, other) = (
            Store::open(&locked_url).unwrap(),
            Store::open(&other_url).unwrap(),
        );
        for store in [&locked, &other] {
            store.create_conversation("to prune").await.unwrap();
        }
        let mut holder = postgres::connect_outside_the_store(&locked_url).await;
        let holding = holder.transaction().await.unwrap();
        let taken: bool = holding
            .query_one(TAKE_RETENTION_LOCK, &[&RETENTION_LOCK])
            .await
            .unwrap()
            .get(0);
        assert!(taken);

        let none = ConversationLimits {
            max_count: Some(0),
            max_age: None,
        };
        assert_eq!(
            locked.prune_conversations(none).await.unwrap(),
            0,
            "its own schema's lock is held: this round is skipped"
        );
        assert_eq!(
            other.prune_conversations(none).await.unwrap(),
            1,
            "another schema's lock does not hold this one back"
        );
        holding.rollback().await.unwrap();
        assert_eq!(locked.prune_conversations(none).await.unwrap(), 1);
    }
}
