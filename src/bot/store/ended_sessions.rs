//! Ended `/mcp` session ids (the endpoint's session ledger), bounded by age and count:
//! pruned when the ledger is read at start-up and, amortised, as sessions end. And, for
//! replicas, when each session was last served anywhere (pruned with the ended ids).

use super::backend::Sql;
use super::{Store, StoreError};

/// Forgets the ended ids minted before `?1`.
const PRUNE_BY_AGE: &str = "DELETE FROM mcp_ended_sessions WHERE minted_ms < ?1";
/// Keeps the newest `?1` ended ids.
const PRUNE_BY_COUNT: &str = "DELETE FROM mcp_ended_sessions \
    WHERE id NOT IN (SELECT id FROM mcp_ended_sessions ORDER BY minted_ms DESC LIMIT ?1)";

/// Forgets when sessions not served since `?1` were served.
const PRUNE_SEEN: &str = "DELETE FROM mcp_session_seen WHERE seen_ms < ?1";

/// Ended `/mcp` session ids (the endpoint's session ledger).
impl Store {
    /// Most ended ids kept; the oldest go first.
    const ENDED_SESSIONS_KEPT: i64 = 100_000;

    /// Ids of sessions that ended, minted at `minted_after_ms` or later. Older rows are
    /// past the sessions' maximum age and are deleted on the way.
    pub async fn ended_sessions(&self, minted_after_ms: u64) -> Result<Vec<String>, StoreError> {
        self.prune_ended_sessions(minted_after_ms).await?;
        let sql = Sql::fixed("SELECT id FROM mcp_ended_sessions");
        self.db.query(sql, Vec::new()).await
    }

    /// Deletes the ended ids minted before `minted_after_ms` (past the sessions' maximum
    /// age) and all but the newest [`Self::ENDED_SESSIONS_KEPT`], in one transaction.
    pub async fn prune_ended_sessions(&self, minted_after_ms: u64) -> Result<(), StoreError> {
        let minted_after_ms = i64::try_from(minted_after_ms).unwrap_or(i64::MAX);
        let statements = vec![
            (Sql::fixed(PRUNE_BY_AGE), vec![minted_after_ms.into()]),
            (
                Sql::fixed(PRUNE_BY_COUNT),
                vec![Self::ENDED_SESSIONS_KEPT.into()],
            ),
            // A session not served since its oldest id could be minted is past use.
            (Sql::fixed(PRUNE_SEEN), vec![minted_after_ms.into()]),
        ];
        self.db.execute_all(statements).await?;
        Ok(())
    }

    /// Records sessions that ended (id, mint time in Unix ms), in one transaction; an id
    /// recorded before is left as it is.
    pub async fn record_ended_sessions(&self, ended: &[(String, u64)]) -> Result<(), StoreError> {
        let insert = "INSERT INTO mcp_ended_sessions (id, minted_ms) VALUES (?1, ?2) \
                      ON CONFLICT (id) DO NOTHING";
        let statements = ended
            .iter()
            .map(|(id, minted_ms)| {
                let minted_ms = i64::try_from(*minted_ms).unwrap_or(i64::MAX);
                (
                    Sql::fixed(insert),
                    vec![id.as_str().into(), minted_ms.into()],
                )
            })
            .collect();
        self.db.execute_all(statements).await?;
        Ok(())
    }

    /// Records that this replica served sessions (id, Unix ms), in one transaction; a
    /// later time replaces an earlier one, never the reverse.
    pub async fn record_sessions_seen(&self, seen: &[(String, u64)]) -> Result<(), StoreError> {
        let upsert = "INSERT INTO mcp_session_seen (id, seen_ms) VALUES (?1, ?2) \
                      ON CONFLICT (id) DO UPDATE SET seen_ms = excluded.seen_ms \
                      WHERE excluded.seen_ms > mcp_session_seen.seen_ms";
        let statements = seen
            .iter()
            .map(|(id, at_ms)| {
                let at_ms = i64::try_from(*at_ms).unwrap_or(i64::MAX);
                (Sql::fixed(upsert), vec![id.as_str().into(), at_ms.into()])
            })
            .collect();
        self.db.execute_all(statements).await?;
        Ok(())
    }

    /// Of `ids`, those some replica served at or after `since_ms` (Unix ms).
    pub async fn sessions_seen_since(
        &self,
        ids: &[String],
        since_ms: u64,
    ) -> Result<Vec<String>, StoreError> {
        let since_ms = i64::try_from(since_ms).unwrap_or(i64::MAX);
        let mut busy = Vec::new();
        // One statement per id keeps the SQL fixed (no list of placeholders built per
        // call); a sweep finds few sessions idle at once.
        for id in ids {
            let sql = Sql::fixed("SELECT id FROM mcp_session_seen WHERE id = ?1 AND seen_ms >= ?2");
            let found: Vec<String> = self
                .db
                .query(sql, vec![id.as_str().into(), since_ms.into()])
                .await?;
            busy.extend(found);
        }
        Ok(busy)
    }
}
