//! The tool definitions LLM calls offered, on PostgreSQL (see `store::tool_sets`).

use super::super::StoreError;
use super::Postgres;

impl Postgres {
    pub(in super::super) async fn tool_set(
        &self,
        hash: &str,
    ) -> Result<Option<String>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT definitions FROM trace_tool_sets WHERE hash = $1",
                &[&hash],
            )
            .await?;
        Ok(row.map(|r| r.get(0)))
    }
}
