//! Pruning conversations on SQLite (the twin of `postgres/conversations.rs`): by count
//! and by age in one transaction, the held ones passed as a JSON array. SQLite has one
//! writer at a time, so no other process prunes at once.

use async_trait::async_trait;
use rusqlite::params;

use super::Sqlite;
use crate::bot::store::StoreError;
use crate::bot::store::backend::{ConversationPrune, Conversations};

/// Keeps the newest `?1` conversations by last activity, except those held (`?2`, a
/// JSON array of ids). SQLite spells "no limit" `LIMIT -1`.
const PRUNE_BY_COUNT: &str = "DELETE FROM conversations WHERE id IN \
    (SELECT id FROM conversations ORDER BY updated_at DESC, id DESC LIMIT -1 OFFSET ?1) \
    AND id NOT IN (SELECT value FROM json_each(?2))";

/// Deletes the conversations last active before the cutoff `?1` (RFC 3339 text, which
/// sorts as time does in the one format the store writes), except those held (`?2`).
const PRUNE_BY_AGE: &str = "DELETE FROM conversations WHERE updated_at < ?1 \
    AND id NOT IN (SELECT value FROM json_each(?2))";

#[async_trait]
impl Conversations for Sqlite {
    async fn prune_conversations(&self, prune: ConversationPrune) -> Result<usize, StoreError> {
        let ConversationPrune { keep, cutoff, held } = prune;
        let held = serde_json::to_string(&held).unwrap_or_else(|_| "[]".into());
        self.call(move |c| {
            let tx = c.transaction()?;
            let mut deleted = 0;
            if let Some(keep) = keep {
                deleted += tx.execute(PRUNE_BY_COUNT, params![keep, held])?;
            }
            if let Some(cutoff) = cutoff {
                deleted += tx.execute(PRUNE_BY_AGE, params![cutoff, held])?;
            }
            tx.commit()?;
            Ok(deleted)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both prunes read the activity index, not the whole table (SQLite's plan; the
    /// PostgreSQL migration creates the same index).
    #[tokio::test]
    async fn prunes_read_the_activity_index() {
        let store = crate::bot::store::Store::open(":memory:").unwrap();
        for sql in [PRUNE_BY_COUNT, PRUNE_BY_AGE] {
            let plan: Vec<String> = store
                .call(move |c| {
                    let mut statement = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                    let rows = statement
                        .query_map(params![1, "[]"], |r| r.get::<_, String>(3))?
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(rows)
                })
                .await
                .unwrap();
            let plan = plan.join("; ");
            assert!(plan.contains("conversations_by_activity"), "{sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql}: {plan}");
        }
    }
}
