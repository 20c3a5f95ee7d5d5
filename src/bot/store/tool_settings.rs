//! Tools enabled or disabled at runtime (`toggle_tool`), kept across restarts.

use super::*;

impl Store {
    /// Records that a tool was enabled or disabled at runtime.
    pub async fn save_tool_enabled(&self, name: &str, enabled: bool) -> Result<(), StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.save_tool_enabled(name, enabled).await;
        }
        let name = name.to_string();
        self.call(move |c| {
            c.execute(
                "INSERT INTO tool_settings (name, enabled, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at",
                params![name, enabled, now_rfc3339()],
            )?;
            Ok(())
        })
        .await
    }

    /// Every saved enabled state, by tool name.
    pub async fn tool_settings(&self) -> Result<Vec<(String, bool)>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.tool_settings().await;
        }
        self.call(|c| {
            let mut statement =
                c.prepare("SELECT name, enabled FROM tool_settings ORDER BY name")?;
            let rows = statement
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }
}
