//! Ended `/mcp` session ids (the endpoint's session ledger), bounded by age and count.

use super::*;

/// Ended `/mcp` session ids (the endpoint's session ledger).
impl Store {
    /// Most ended ids kept; the oldest go first.
    const ENDED_SESSIONS_KEPT: i64 = 100_000;

    /// Ids of sessions that ended, minted at `minted_after_ms` or later. Older rows are
    /// past the sessions' maximum age and are deleted on the way.
    pub async fn ended_sessions(&self, minted_after_ms: u64) -> Result<Vec<String>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg
                .ended_sessions(minted_after_ms, Self::ENDED_SESSIONS_KEPT)
                .await;
        }
        self.call(move |c| {
            c.execute(
                "DELETE FROM mcp_ended_sessions WHERE minted_ms < ?1",
                [minted_after_ms as i64],
            )?;
            c.execute(
                "DELETE FROM mcp_ended_sessions WHERE id NOT IN
                   (SELECT id FROM mcp_ended_sessions ORDER BY minted_ms DESC LIMIT ?1)",
                [Self::ENDED_SESSIONS_KEPT],
            )?;
            let mut stmt = c.prepare("SELECT id FROM mcp_ended_sessions")?;
            let ids = stmt
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            Ok(ids)
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
