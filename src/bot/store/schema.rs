//! The schema as callers see it: its version, and its description behind
//! `porthole://db/schema`. The migrations themselves are each backend's
//! (`sqlite/schema.rs`, `postgres/schema.rs`), one PostgreSQL form per SQLite migration.

use serde_json::Value;

use super::{Store, StoreError, sqlite};

/// The number of migrations this build knows; the schema version of a migrated database.
pub fn schema_version() -> usize {
    sqlite::MIGRATIONS.len()
}

impl Store {
    /// Tables and views with their columns, indexes and row counts.
    pub async fn describe_schema(&self) -> Result<Value, StoreError> {
        self.db.describe_schema().await
    }
}
