//! Turn traces on PostgreSQL. The statements and filters are the ones `store::traces`
//! builds for SQLite (placeholders renumbered); only the per-trace counts, which SQLite
//! packs into one JSON value, are a lateral subquery here.

use super::super::StoreError;
use super::super::rows::{Bound, numbered_for_postgres};
use super::super::traces::{
    Filter, IN_TURN, INSERT_SPAN, PRUNE_OLD, PRUNE_TURNS_POSTGRES, Prune, TraceSummary, prefixed,
    span_from_row, span_values,
};
use super::{Postgres, parameters};
use crate::bot::trace::SpanRecord;

impl Postgres {
    pub(in super::super) async fn append_spans(
        &self,
        spans: Vec<SpanRecord>,
        prune: Prune,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let insert = tx
            .prepare_cached(&numbered_for_postgres(INSERT_SPAN))
            .await?;
        for span in &spans {
            let values = span_values(span);
            tx.execute(&insert, &parameters(&values)).await?;
        }
        if let Some(keep) = prune.keep_turns {
            tx.execute(PRUNE_TURNS_POSTGRES, &[&(keep as i64)]).await?;
        }
        if let Some(before_us) = prune.before_us {
            tx.execute(&numbered_for_postgres(PRUNE_OLD), &[&before_us])
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Roots matching `filter`, newest first, with what happened under each.
    pub(in super::super) async fn list_traces(
        &self,
        filter: &Filter,
        fetch: usize,
    ) -> Result<Vec<TraceSummary>, StoreError> {
        // The page of roots first, then the counts of those roots only: counting under
        // every root before the LIMIT would read the whole table.
        let sql = format!(
            "SELECT r.*, n.spans, n.llm, n.tool, n.failed, n.input_tokens, n.output_tokens \
             FROM (SELECT {} FROM trace_spans r WHERE {} \
                   ORDER BY r.start_us DESC, r.span_id DESC LIMIT {fetch}) r \
             CROSS JOIN LATERAL (SELECT count(*) AS spans, \
               count(*) FILTER (WHERE s.kind = 'llm') AS llm, \
               count(*) FILTER (WHERE s.kind = 'tool') AS tool, \
               count(*) FILTER (WHERE s.error IS NOT NULL) AS failed, \
               COALESCE(sum(s.input_tokens), 0)::bigint AS input_tokens, \
               COALESCE(sum(s.output_tokens), 0)::bigint AS output_tokens \
               FROM trace_spans s WHERE {IN_TURN}) n \
             ORDER BY r.start_us DESC, r.span_id DESC",
            prefixed("r"),
            filter.clauses.join(" AND "),
        );
        let client = self.client().await?;
        let rows = client
            .query(&numbered_for_postgres(&sql), &parameters(&filter.values))
            .await?;
        let summaries = rows
            .iter()
            .map(|r| {
                Ok(TraceSummary {
                    root: span_from_row(r)?,
                    spans: r.try_get(17)?,
                    llm_calls: r.try_get(18)?,
                    tool_calls: r.try_get(19)?,
                    failed_spans: r.try_get(20)?,
                    input_tokens: r.try_get(21)?,
                    output_tokens: r.try_get(22)?,
                })
            })
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
        Ok(summaries)
    }

    /// Runs one of the span queries `store::traces` builds.
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
