//! The bot's warnings, errors and `/mcp` audit records (`server_log`'s database reader).

use super::backend::Sql;
use super::rows::Bound;
use super::{Store, StoreError};

impl Store {
    /// Appends log events — `(time in µs, level name, the record as JSON text)` —
    /// written by `replica`, and deletes the oldest beyond `keep`, in one transaction.
    pub async fn append_log_events(
        &self,
        events: Vec<(i64, String, String)>,
        replica: &str,
        keep: usize,
    ) -> Result<(), StoreError> {
        let insert =
            "INSERT INTO log_events (time_us, level, record, replica) VALUES (?1, ?2, ?3, ?4)";
        let mut statements: Vec<(Sql, Vec<Bound>)> = events
            .into_iter()
            .map(|(time_us, level, record)| {
                let values = vec![time_us.into(), level.into(), record.into(), replica.into()];
                (Sql::fixed(insert), values)
            })
            .collect();
        statements.push((
            Sql::fixed("DELETE FROM log_events WHERE id <= (SELECT max(id) FROM log_events) - ?1"),
            vec![(keep as i64).into()],
        ));
        self.db.execute_all(statements).await?;
        Ok(())
    }

    /// The newest log events (as the JSON text they were saved with, and the replica
    /// that wrote each), newest first: at most `limit`, only these levels (all when
    /// empty), only after `after_us`, only those whose text contains `contains`
    /// (ignoring ASCII case at least, so callers filter exactly afterwards).
    pub async fn log_events(
        &self,
        levels: Vec<String>,
        after_us: Option<i64>,
        contains: Option<String>,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let mut sql = String::from("SELECT record, replica FROM log_events WHERE time_us > ?1");
        if !levels.is_empty() {
            let placeholders: Vec<String> =
                (0..levels.len()).map(|i| format!("?{}", i + 4)).collect();
            sql.push_str(&format!(" AND level IN ({})", placeholders.join(",")));
        }
        let like = self.db.dialect().like;
        sql.push_str(&format!(
            " AND (CAST(?2 AS TEXT) IS NULL OR record {like} ?2 ESCAPE '\\') ORDER BY id DESC LIMIT ?3"
        ));
        let pattern = contains.as_deref().map(contains_pattern);
        let mut values: Vec<Bound> = vec![
            after_us.unwrap_or(i64::MIN).into(),
            pattern.into(),
            (limit as i64).into(),
        ];
        values.extend(levels.into_iter().map(Bound::from));
        self.db.query(Sql::varying(sql), values).await
    }
}

/// A `LIKE … ESCAPE '\\'` pattern matching text that contains `text` literally.
pub(super) fn contains_pattern(text: &str) -> String {
    format!(
        "%{}%",
        text.replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    )
}
