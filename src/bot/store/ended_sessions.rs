//! Ended `/mcp` session ids (the endpoint's session ledger), bounded by age and count:
//! pruned when the ledger is read at start-up and, amortised, as sessions end.

use super::*;

/// Forgets the ended ids minted before `?1` (both backends speak these two).
pub(super) const PRUNE_ENDED_SESSIONS_BY_AGE: &str =
    "DELETE FROM mcp_ended_sessions WHERE minted_ms < ?1";
/// Keeps the newest `?1` ended ids.
pub(super) const PRUNE_ENDED_SESSIONS_BY_COUNT: &str = "DELETE FROM mcp_ended_sessions \
    WHERE id NOT IN (SELECT id FROM mcp_ended_sessions ORDER BY minted_ms DESC LIMIT ?1)";

/// Ended `/mcp` session ids (the endpoint's session ledger).
impl Store {
    /// Most ended ids kept; the oldest go first.
    const ENDED_SESSIONS_KEPT: i64 = 100_000;

    /// Ids of sessions that ended, minted at `minted_after_ms` or later. Older rows are
    /// past the sessions' maximum age and are deleted on the way.
    pub async fn ended_sessions(&self, minted_after_ms: u64) -> Result<Vec<String>, StoreError> {
        self.prune_ended_sessions(minted_after_ms).await?;
        if let Some(pg) = self.postgres() {
            return pg.ended_session_ids().await;
        }
        self.call(move |c| {
            let mut stmt = c.prepare("SELECT id FROM mcp_ended_sessions")?;
            let ids = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            Ok(ids)
        })
        .await
    }

    /// Deletes the ended ids minted before `minted_after_ms` (past the sessions' maximum
    /// age) and all but the newest [`Self::ENDED_SESSIONS_KEPT`], in one transaction.
    pub async fn prune_ended_sessions(&self, minted_after_ms: u64) -> Result<(), StoreError> {
        let minted_after_ms = i64::try_from(minted_after_ms).unwrap_or(i64::MAX);
        if let Some(pg) = self.postgres() {
            return pg
                .prune_ended_sessions(minted_after_ms, Self::ENDED_SESSIONS_KEPT)
                .await;
        }
        self.call(move |c| {
            let tx = c.transaction()?;
            tx.execute(PRUNE_ENDED_SESSIONS_BY_AGE, [minted_after_ms])?;
            tx.execute(PRUNE_ENDED_SESSIONS_BY_COUNT, [Self::ENDED_SESSIONS_KEPT])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    pub async fn record_ended_session(&self, id: &str, minted_ms: u64) -> Result<(), StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.record_ended_session(id, minted_ms).await;
        }
        let id = id.to_string();
        self.call(move |c| {
            c.execute(
                "INSERT OR IGNORE INTO mcp_ended_sessions (id, minted_ms) VALUES (?1, ?2)",
                params![id, minted_ms as i64],
            )?;
            Ok(())
        })
        .await
    }
}
