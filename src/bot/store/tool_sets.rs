//! The tool definitions LLM calls offered (`trace_tool_sets`): each distinct set once,
//! by the SHA-256 of its JSON text, which the LLM span keeps as `tools_hash`. A turn
//! offers the same tools step after step, so the spans name the set instead of
//! repeating it; a replay reads it back to send the definitions in full.

use rusqlite::OptionalExtension;

use super::{Store, StoreError};

/// Both backends' statement: a set already stored stays as it is.
const PUT_TOOL_SET: &str = "INSERT INTO trace_tool_sets (hash, definitions, created_us) \
    VALUES (?1, ?2, ?3) ON CONFLICT (hash) DO NOTHING";

impl Store {
    /// Stores `(hash, definitions)` pairs whose hash is not stored yet.
    pub async fn put_tool_sets(&self, sets: Vec<(String, String)>) -> Result<(), StoreError> {
        let now_us = chrono::Utc::now().timestamp_micros();
        if let Some(pg) = self.postgres() {
            for (hash, definitions) in sets {
                pg.execute_shared(
                    PUT_TOOL_SET,
                    &[hash.into(), definitions.into(), now_us.into()],
                )
                .await?;
            }
            return Ok(());
        }
        self.call_traces(move |c| {
            let tx = c.transaction()?;
            {
                let mut put = tx.prepare_cached(PUT_TOOL_SET)?;
                for (hash, definitions) in &sets {
                    put.execute(rusqlite::params![hash, definitions, now_us])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// The definitions (JSON text) stored under `hash`.
    pub async fn tool_set(&self, hash: &str) -> Result<Option<String>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.tool_set(hash).await;
        }
        let hash = hash.to_string();
        self.call_traces(move |c| {
            Ok(c.query_row(
                "SELECT definitions FROM trace_tool_sets WHERE hash = ?1",
                [hash],
                |r| r.get(0),
            )
            .optional()?)
        })
        .await
    }
}
