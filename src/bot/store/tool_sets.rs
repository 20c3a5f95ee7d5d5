//! The tool definitions LLM calls offered (`trace_tool_sets`): each distinct set once,
//! by the SHA-256 of its JSON text, which the LLM span keeps as `tools_hash`. A turn
//! offers the same tools step after step, so the spans name the set instead of
//! repeating it; a replay reads it back to send the definitions in full. On SQLite the
//! table is in the traces file.

use super::backend::Sql;
use super::{Store, StoreError};

/// A set already stored stays as it is.
const PUT_TOOL_SET: &str = "INSERT INTO trace_tool_sets (hash, definitions, created_us) \
    VALUES (?1, ?2, ?3) ON CONFLICT (hash) DO NOTHING";

impl Store {
    /// Stores `(hash, definitions)` pairs whose hash is not stored yet.
    pub async fn put_tool_sets(&self, sets: Vec<(String, String)>) -> Result<(), StoreError> {
        let now_us = chrono::Utc::now().timestamp_micros();
        let statements = sets
            .into_iter()
            .map(|(hash, definitions)| {
                let values = vec![hash.into(), definitions.into(), now_us.into()];
                (Sql::fixed(PUT_TOOL_SET).on_traces(), values)
            })
            .collect();
        self.db.execute_all(statements).await?;
        Ok(())
    }

    /// The definitions (JSON text) stored under `hash`.
    pub async fn tool_set(&self, hash: &str) -> Result<Option<String>, StoreError> {
        let sql = Sql::fixed("SELECT definitions FROM trace_tool_sets WHERE hash = ?1").on_traces();
        self.db.query_one(sql, vec![hash.into()]).await
    }
}
