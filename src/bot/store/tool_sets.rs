//! The tool definitions LLM calls offered (`trace_tool_sets`): each distinct set once,
//! by the SHA-256 of its JSON text, which the LLM span keeps as `tools_hash`. A turn
//! offers the same tools step after step, so the spans name the set instead of
//! repeating it; a replay reads it back to send the definitions in full, and a span read
//! back gets the names of the tools it offered from it ([`TOOLS_OFFERED`]). On SQLite
//! the table is in the traces file.

use std::collections::HashMap;

use serde_json::Value;

use super::backend::Sql;
use super::{Store, StoreError};
use crate::model::SpanRecord;

/// The attribute that names an LLM span's stored tool definitions ([`Store::tool_set`]).
pub const TOOLS_HASH: &str = "tools_hash";
/// The attribute that lists the names of the tools an LLM call offered, in order. It is
/// not stored: a span read back gets it from the set its [`TOOLS_HASH`] names, so no
/// turn stores (or redacts) the same names again at every step.
pub const TOOLS_OFFERED: &str = "tools_offered";

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

    /// Gives every span that names a stored set, and lists no tools yet, the names of
    /// that set's tools as [`TOOLS_OFFERED`]. Each distinct set is read once.
    pub(super) async fn name_offered_tools(
        &self,
        spans: &mut [SpanRecord],
    ) -> Result<(), StoreError> {
        let mut names_by_set: HashMap<String, Option<Value>> = HashMap::new();
        for span in spans {
            if span.attributes.contains_key(TOOLS_OFFERED) {
                continue;
            }
            let Some(hash) = span.attributes.get(TOOLS_HASH).and_then(Value::as_str) else {
                continue;
            };
            if !names_by_set.contains_key(hash) {
                let names = self.tool_set(hash).await?.as_deref().and_then(tool_names);
                names_by_set.insert(hash.to_string(), names);
            }
            if let Some(Some(names)) = names_by_set.get(hash) {
                let names = names.clone();
                span.attributes.insert(TOOLS_OFFERED.to_string(), names);
            }
        }
        Ok(())
    }

    /// The definitions (JSON text) stored under `hash`.
    pub async fn tool_set(&self, hash: &str) -> Result<Option<String>, StoreError> {
        let sql = Sql::fixed("SELECT definitions FROM trace_tool_sets WHERE hash = ?1").on_traces();
        self.db.query_one(sql, vec![hash.into()]).await
    }
}

/// The tool names of a stored set's definitions, in order.
fn tool_names(definitions: &str) -> Option<Value> {
    let definitions: Vec<Value> = serde_json::from_str(definitions).ok()?;
    let names = definitions
        .iter()
        .map(|d| d.get("name").cloned().unwrap_or(Value::Null));
    Some(Value::Array(names.collect()))
}
