//! Pruning conversations on PostgreSQL (the twin of `sqlite/conversations.rs`): by count
//! and by age in one transaction, the held ones passed as an array, one replica at a
//! time.

use async_trait::async_trait;

use super::Postgres;
use crate::bot::store::StoreError;
use crate::bot::store::backend::{ConversationPrune, Conversations};

/// A fixed key for `pg_try_advisory_xact_lock`: one replica prunes conversations at a
/// time.
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
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&RETENTION_LOCK])
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
