//! What was switched on or off at runtime and is kept across restarts (and, with
//! replicas, shared by all of them): tools (`toggle_tool`) and MCP servers
//! (`toggle_mcp_server`). Both are a name and an enabled flag, in a table each.

use super::backend::Sql;
use super::{Store, StoreError, now_rfc3339};

/// The two kinds of switch, each with its own table.
#[derive(Clone, Copy)]
enum Switch {
    Tool,
    McpServer,
}

impl Switch {
    fn save_sql(self) -> &'static str {
        match self {
            Switch::Tool => {
                "INSERT INTO tool_settings (name, enabled, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at"
            }
            Switch::McpServer => {
                "INSERT INTO mcp_server_settings (name, enabled, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at"
            }
        }
    }

    fn read_sql(self) -> &'static str {
        match self {
            Switch::Tool => "SELECT name, enabled FROM tool_settings ORDER BY name",
            Switch::McpServer => "SELECT name, enabled FROM mcp_server_settings ORDER BY name",
        }
    }
}

impl Store {
    /// Records that a tool was enabled or disabled at runtime.
    pub async fn save_tool_enabled(&self, name: &str, enabled: bool) -> Result<(), StoreError> {
        self.save_switch(Switch::Tool, name, enabled).await
    }

    /// Every saved enabled state, by tool name.
    pub async fn tool_settings(&self) -> Result<Vec<(String, bool)>, StoreError> {
        self.switches(Switch::Tool).await
    }

    /// Records that an MCP server was enabled or disabled at runtime.
    pub async fn save_mcp_server_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<(), StoreError> {
        self.save_switch(Switch::McpServer, name, enabled).await
    }

    /// Every saved enabled state, by MCP server name.
    pub async fn mcp_server_settings(&self) -> Result<Vec<(String, bool)>, StoreError> {
        self.switches(Switch::McpServer).await
    }

    async fn save_switch(
        &self,
        switch: Switch,
        name: &str,
        enabled: bool,
    ) -> Result<(), StoreError> {
        let values = vec![name.into(), i64::from(enabled).into(), now_rfc3339().into()];
        self.db
            .execute(Sql::fixed(switch.save_sql()), values)
            .await?;
        Ok(())
    }

    async fn switches(&self, switch: Switch) -> Result<Vec<(String, bool)>, StoreError> {
        self.db
            .query(Sql::fixed(switch.read_sql()), Vec::new())
            .await
    }
}
