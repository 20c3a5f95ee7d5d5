//! Long-term memory for the `remember`/`recall` tools.

use super::backend::Sql;
use super::log_events::contains_pattern;
use super::{Store, StoreError, now_rfc3339};

impl Store {
    /// Stored redacted, as conversations are: a model that remembers what a tool showed
    /// it must not keep a secret where `db_query` (or `recall`, a character at a time)
    /// would hand it back.
    pub async fn remember(&self, key: &str, value: &str) -> Result<(), StoreError> {
        let sql = Sql::fixed(
            "INSERT INTO memories (key, value, updated_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        );
        let (key, value) = (self.for_storage(key), self.for_storage(value));
        let values = vec![
            key.as_ref().into(),
            value.as_ref().into(),
            now_rfc3339().into(),
        ];
        self.db.execute(sql, values).await?;
        Ok(())
    }

    /// Memories whose key or value contains `query`, ignoring ASCII case (all of them for
    /// an empty query).
    pub async fn recall(&self, query: &str) -> Result<Vec<(String, String)>, StoreError> {
        let like = self.db.dialect().like;
        let sql = Sql::fixed(format!(
            "SELECT key, value FROM memories
             WHERE key {like} ?1 ESCAPE '\\' OR value {like} ?1 ESCAPE '\\'
             ORDER BY updated_at DESC LIMIT 50"
        ));
        self.db
            .query(sql, vec![contains_pattern(query).into()])
            .await
    }
}
