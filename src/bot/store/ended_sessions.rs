//! Ended `/mcp` session ids (the endpoint's session ledger), bounded by age and count:
//! pruned when the ledger is read at start-up and, amortised, as sessions end.

use super::backend::Sql;
use super::{Store, StoreError};

/// Forgets the ended ids minted before `?1`.
const PRUNE_BY_AGE: &str = "DELETE FROM mcp_ended_sessions WHERE minted_ms < ?1";
/// Keeps the newest `?1` ended ids.
const PRUNE_BY_COUNT: &str = "DELETE FROM mcp_ended_sessions \
    WHERE id NOT IN (SELECT id FROM mcp_ended_sessions ORDER BY minted_ms DESC LIMIT ?1)";

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
}
