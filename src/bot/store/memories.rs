//! Long-term memory for the `remember`/`recall` tools. Each memory belongs to the
//! rights of the turn that stored it ([`MemoryScope`]): a chat user's turn reads and
//! writes only the users' memories; an admin's turn stores the admins' and reads the
//! chat users' only when it asks (`recall`'s `scope`), marked as theirs.

use super::backend::Sql;
use super::log_events::contains_pattern;
use super::{Store, StoreError, now_rfc3339};

/// Whose memories a turn reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryScope {
    /// A chat user's turn (the web page, a task that runs as a user).
    User,
    /// A turn with admin rights (`/mcp`, a task that runs as admin).
    Admin,
}

impl MemoryScope {
    fn as_str(self) -> &'static str {
        match self {
            MemoryScope::User => "user",
            MemoryScope::Admin => "admin",
        }
    }
}

/// One memory as [`Store::recall`] finds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    pub key: String,
    pub value: String,
    /// `user` or `admin`: whose it is.
    pub scope: String,
}

impl super::rows::FromRow for Memory {
    fn from_row<R: super::rows::RowRead>(r: &R) -> Result<Memory, R::Error> {
        Ok(Memory {
            key: r.text(0)?,
            value: r.text(1)?,
            scope: r.text(2)?,
        })
    }
}

impl Store {
    /// Stores `value` under `key` in `scope`'s memories. Stored redacted, as
    /// conversations are: a model that remembers what a tool showed it must not keep a
    /// secret where `db_query` (or `recall`, a character at a time) would hand it back.
    pub async fn remember(
        &self,
        scope: MemoryScope,
        key: &str,
        value: &str,
    ) -> Result<(), StoreError> {
        let sql = Sql::fixed(
            "INSERT INTO memories (scope, key, value, updated_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        );
        let (key, value) = (self.for_storage(key), self.for_storage(value));
        let values = vec![
            scope.as_str().into(),
            key.as_ref().into(),
            value.as_ref().into(),
            now_rfc3339().into(),
        ];
        self.db.execute(sql, values).await?;
        Ok(())
    }

    /// The memories of `scopes` whose key or value contains `query`, ignoring ASCII
    /// case (all of them for an empty query), newest first. Which scopes a turn may
    /// read is the caller's to decide (`recall`).
    pub async fn recall(
        &self,
        scopes: &[MemoryScope],
        query: &str,
    ) -> Result<Vec<Memory>, StoreError> {
        let like = self.db.dialect().like;
        let sql = Sql::fixed(format!(
            "SELECT key, value, scope FROM memories
             WHERE (scope = ?2 OR scope = ?3)
               AND (key {like} ?1 ESCAPE '\\' OR value {like} ?1 ESCAPE '\\')
             ORDER BY updated_at DESC LIMIT 50"
        ));
        // A scope not asked for names no row.
        let scope = |s: MemoryScope| if scopes.contains(&s) { s.as_str() } else { "" };
        let values = vec![
            contains_pattern(query).into(),
            scope(MemoryScope::User).into(),
            scope(MemoryScope::Admin).into(),
        ];
        self.db.query(sql, values).await
    }
}
