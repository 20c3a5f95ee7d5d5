//! Named sets of recorded LLM calls (`save_replay_set`): each call copied whole (its span,
//! request included, with its tool definitions) so that trace retention does not erase
//! what a set replays, and with each set the summary of its last run. A set is what a
//! user replays before and after editing a prompt.

use serde::Serialize;
use serde_json::Value;

use super::backend::Sql;
use super::rows::{FromRow, RowRead};
use super::{Store, StoreError, now_rfc3339};
use crate::model::SpanRecord;

/// A saved set as listed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ReplaySet {
    pub name: String,
    pub description: String,
    /// RFC 3339.
    pub created_at: String,
    /// How many LLM calls it holds.
    pub calls: i64,
    /// When it was last replayed (RFC 3339), if ever.
    pub last_run_at: Option<String>,
    /// The summary of its last replay: replayed, changed, unchanged, errors, checks.
    pub last_run: Option<Value>,
}

impl FromRow for ReplaySet {
    fn from_row<R: RowRead>(row: &R) -> Result<Self, R::Error> {
        Ok(ReplaySet {
            name: row.text(0)?,
            description: row.text(1)?,
            created_at: row.text(2)?,
            last_run_at: row.optional_text(3)?,
            last_run: row
                .optional_text(4)?
                .and_then(|text| serde_json::from_str(&text).ok()),
            calls: row.int(5)?,
        })
    }
}

const LIST: &str = "SELECT s.name, s.description, s.created_at, s.last_run_at, s.last_run, \
    (SELECT COUNT(*) FROM replay_set_calls c WHERE c.set_name = s.name) FROM replay_sets s";

impl Store {
    /// Every saved set, by name.
    pub async fn replay_sets(&self) -> Result<Vec<ReplaySet>, StoreError> {
        let sql = Sql::fixed(format!("{LIST} ORDER BY s.name"));
        self.db.query(sql, Vec::new()).await
    }

    /// The set `name`, if saved.
    pub async fn replay_set(&self, name: &str) -> Result<Option<ReplaySet>, StoreError> {
        let sql = Sql::fixed(format!("{LIST} WHERE s.name = ?1"));
        self.db.query_one(sql, vec![name.into()]).await
    }

    /// Saves `calls` (whole spans, each with its tool definitions) as the set `name`, in
    /// one transaction; a set of that name saved before is replaced.
    pub async fn save_replay_set(
        &self,
        name: &str,
        description: &str,
        calls: &[SpanRecord],
    ) -> Result<(), StoreError> {
        let mut statements = vec![
            (
                Sql::fixed("DELETE FROM replay_set_calls WHERE set_name = ?1"),
                vec![name.into()],
            ),
            (
                Sql::fixed("DELETE FROM replay_sets WHERE name = ?1"),
                vec![name.into()],
            ),
            (
                Sql::fixed(
                    "INSERT INTO replay_sets (name, description, created_at) VALUES (?1, ?2, ?3)",
                ),
                vec![name.into(), description.into(), now_rfc3339().into()],
            ),
        ];
        for (position, call) in calls.iter().enumerate() {
            let span = serde_json::to_string(call)
                .map_err(|e| StoreError::Unreadable(format!("a call cannot be saved: {e}")))?;
            statements.push((
                Sql::fixed(
                    "INSERT INTO replay_set_calls (set_name, position, span_id, span) \
                     VALUES (?1, ?2, ?3, ?4)",
                ),
                vec![
                    name.into(),
                    (position as i64).into(),
                    call.span_id.as_str().into(),
                    span.into(),
                ],
            ));
        }
        self.db.execute_all(statements).await?;
        Ok(())
    }

    /// The calls the set `name` holds, in the order they were saved.
    pub async fn replay_set_calls(&self, name: &str) -> Result<Vec<SpanRecord>, StoreError> {
        let sql =
            Sql::fixed("SELECT span FROM replay_set_calls WHERE set_name = ?1 ORDER BY position");
        let texts: Vec<String> = self.db.query(sql, vec![name.into()]).await?;
        texts
            .iter()
            .map(|text| {
                serde_json::from_str(text).map_err(|e| {
                    StoreError::Unreadable(format!(
                        "a saved call of set `{name}` is not a span: {e}"
                    ))
                })
            })
            .collect()
    }

    /// Keeps `summary` as the set's last run, now.
    pub async fn record_replay_set_run(
        &self,
        name: &str,
        summary: &Value,
    ) -> Result<(), StoreError> {
        let sql =
            Sql::fixed("UPDATE replay_sets SET last_run_at = ?1, last_run = ?2 WHERE name = ?3");
        let values = vec![
            now_rfc3339().into(),
            summary.to_string().into(),
            name.into(),
        ];
        self.db.execute(sql, values).await?;
        Ok(())
    }

    /// Deletes the set `name`; whether there was one.
    pub async fn delete_replay_set(&self, name: &str) -> Result<bool, StoreError> {
        let statements = vec![
            (
                Sql::fixed("DELETE FROM replay_set_calls WHERE set_name = ?1"),
                vec![name.into()],
            ),
            (
                Sql::fixed("DELETE FROM replay_sets WHERE name = ?1"),
                vec![name.into()],
            ),
        ];
        let existed = self.replay_set(name).await?.is_some();
        self.db.execute_all(statements).await?;
        Ok(existed)
    }
}
