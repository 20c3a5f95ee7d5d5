//! Long-term memory for the `remember`/`recall` tools.

use super::*;

impl Store {
    pub async fn remember(&self, key: &str, value: &str) -> Result<(), StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.remember(key, value).await;
        }
        let (key, value) = (key.to_string(), value.to_string());
        self.call(move |c| {
            c.execute(
                "INSERT INTO memories (key, value, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                params![key, value, now_rfc3339()],
            )?;
            Ok(())
        })
        .await
    }

    /// Memories whose key or value contains `query` (all of them for an empty query).
    pub async fn recall(&self, query: &str) -> Result<Vec<(String, String)>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.recall(query).await;
        }
        let pattern = contains_pattern(query);
        self.call(move |c| {
            let mut stmt = c.prepare(
                "SELECT key, value FROM memories
                 WHERE key LIKE ?1 ESCAPE '\\' OR value LIKE ?1 ESCAPE '\\'
                 ORDER BY updated_at DESC LIMIT 50",
            )?;
            let rows = stmt.query_map([pattern], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }
}
