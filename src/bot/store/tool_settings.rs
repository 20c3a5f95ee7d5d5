//! Tools enabled or disabled at runtime (`toggle_tool`), kept across restarts.

use super::backend::Sql;
use super::{Store, StoreError, now_rfc3339};

impl Store {
    /// Records that a tool was enabled or disabled at runtime.
    pub async fn save_tool_enabled(&self, name: &str, enabled: bool) -> Result<(), StoreError> {
        let sql = Sql::fixed(
            "INSERT INTO tool_settings (name, enabled, updated_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at",
        );
        let values = vec![name.into(), i64::from(enabled).into(), now_rfc3339().into()];
        self.db.execute(sql, values).await?;
        Ok(())
    }

    /// Every saved enabled state, by tool name.
    pub async fn tool_settings(&self) -> Result<Vec<(String, bool)>, StoreError> {
        let sql = Sql::fixed("SELECT name, enabled FROM tool_settings ORDER BY name");
        self.db.query(sql, Vec::new()).await
    }
}
