//! The bot's warnings, errors and `/mcp` audit records (`server_log`'s database reader).

use super::*;

impl Store {
    /// Appends log events — `(time in µs, level name, the record as JSON text)` —
    /// written by `replica`, and deletes the oldest beyond `keep`, in one transaction.
    pub async fn append_log_events(
        &self,
        events: Vec<(i64, String, String)>,
        replica: &str,
        keep: usize,
    ) -> Result<(), StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.append_log_events(events, replica, keep).await;
        }
        let replica = replica.to_string();
        self.call(move |c| {
            let tx = c.transaction()?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO log_events (time_us, level, record, replica) VALUES (?1, ?2, ?3, ?4)",
                )?;
                for (time_us, level, record) in &events {
                    insert.execute(params![time_us, level, record, replica])?;
                }
            }
            tx.execute(
                "DELETE FROM log_events WHERE id <= (SELECT max(id) FROM log_events) - ?1",
                params![keep as i64],
            )?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// The newest log events (as the JSON text they were saved with, and the replica
    /// that wrote each), newest first: at most `limit`, only these levels (all when
    /// empty), only after `after_us`, only those whose text contains `contains`
    /// (case-insensitively, at least for ASCII, so callers filter exactly afterwards).
    pub async fn log_events(
        &self,
        levels: Vec<String>,
        after_us: Option<i64>,
        contains: Option<String>,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        if let Some(pg) = self.postgres() {
            return pg.log_events(levels, after_us, contains, limit).await;
        }
        self.call(move |c| {
            let mut sql = String::from("SELECT record, replica FROM log_events WHERE time_us > ?1");
            if !levels.is_empty() {
                let placeholders: Vec<String> =
                    (0..levels.len()).map(|i| format!("?{}", i + 4)).collect();
                sql.push_str(&format!(" AND level IN ({})", placeholders.join(",")));
            }
            sql.push_str(
                " AND (?2 IS NULL OR record LIKE ?2 ESCAPE '\\') ORDER BY id DESC LIMIT ?3",
            );
            let pattern = contains.as_deref().map(contains_pattern);
            let mut values: Vec<rusqlite::types::Value> = vec![
                after_us.unwrap_or(i64::MIN).into(),
                pattern.map_or(rusqlite::types::Value::Null, Into::into),
                (limit as i64).into(),
            ];
            values.extend(levels.into_iter().map(Into::into));
            let mut statement = c.prepare(&sql)?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(values), |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
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
