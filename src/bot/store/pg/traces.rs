//! Turn traces on PostgreSQL. The statements and filters are the ones `store::traces`
//! builds for SQLite (placeholders renumbered); only storing a turn differs, because
//! the spans are `jsonb` here and two arrays join with `||`.

use super::super::StoreError;
use super::super::rows::{Bound, numbered_for_postgres};
use super::super::traces::{
    PRUNE_OLD, PRUNE_TURNS, Prune, TurnRow, TurnRows, UPSERT_TURN_POSTGRES, span_from_row,
};
use super::{Postgres, parameters};
use crate::model::SpanRecord;

impl Postgres {
    /// Stores the rows `store::traces::TurnRows` holds, then prunes, in one transaction.
    pub(in super::super) async fn append_turns(
        &self,
        turns: TurnRows,
        prune: Prune,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let upsert = tx
            .prepare_cached(&numbered_for_postgres(UPSERT_TURN_POSTGRES))
            .await?;
        for values in &turns.0 {
            tx.execute(&upsert, &parameters(values)).await?;
        }
        if let Some(keep) = prune.keep_turns {
            tx.execute(&numbered_for_postgres(PRUNE_TURNS), &[&(keep as i64)])
                .await?;
        }
        if let Some(before_us) = prune.before_us {
            tx.execute(&numbered_for_postgres(PRUNE_OLD), &[&before_us])
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Runs a query for turn rows (`store::traces::TURN_COLUMNS`).
    pub(in super::super) async fn read_turn_rows(
        &self,
        sql: &str,
        values: &[Bound],
    ) -> Result<Vec<TurnRow>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(&numbered_for_postgres(sql), &parameters(values))
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                Ok((
                    r.try_get(0)?,
                    r.try_get(1)?,
                    r.try_get(2)?,
                    r.try_get(3)?,
                    r.try_get(4)?,
                ))
            })
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?)
    }

    /// Runs one of the span queries `store::traces` builds over the `trace_spans` view.
    pub(in super::super) async fn read_spans(
        &self,
        sql: &str,
        values: &[Bound],
    ) -> Result<Vec<SpanRecord>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(&numbered_for_postgres(sql), &parameters(values))
            .await?;
        Ok(rows
            .iter()
            .map(span_from_row)
            .collect::<Result<Vec<_>, _>>()?)
    }
}
