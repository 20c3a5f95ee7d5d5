//! What a trace prune deletes, in the transaction that stores a batch of spans
//! ([`Store::append_turns`](super::Store::append_turns)): the turns beyond
//! `TRACE_MAX_TURNS`, the `/mcp` tool-call traces beyond `TRACE_MAX_MCP_CALLS`, and
//! everything older than `TRACE_MAX_AGE_SECS`.
//!
//! The two counts are kept apart: the traces of `/mcp` tool calls (root source
//! [`MCP_CALL_SOURCE`](crate::model::MCP_CALL_SOURCE)) count only against their own
//! cap, and the turns (every other source) only against theirs, so a client that calls
//! tools flat out prunes its own calls' traces, never the bot's turns. The statements
//! name the source as a literal, not a parameter: the partial index on the `mcp` rows
//! (`trace_turns_mcp_calls`, on both backends) serves only a statement that names it.

use super::backend::Sql;
use super::rows::Bound;

/// What [`Store::append_turns`](super::Store::append_turns) deletes in the transaction
/// that stores the turns.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prune {
    /// Keep this many turns (every source but `mcp`), the newest stored; the others go,
    /// spans and all.
    pub keep_turns: Option<usize>,
    /// Keep this many traces of `/mcp` tool calls, the newest stored.
    pub keep_mcp_calls: Option<usize>,
    /// Delete every turn that started before this (µs since the epoch).
    pub before_us: Option<i64>,
}

impl Prune {
    /// The statements that apply this prune, on the traces' connection.
    pub(super) fn statements(self) -> Vec<(Sql, Vec<Bound>)> {
        let mut statements = Vec::new();
        if let Some(keep) = self.keep_turns {
            statements.push((Sql::fixed(PRUNE_TURNS).on_traces(), vec![count(keep)]));
        }
        if let Some(keep) = self.keep_mcp_calls {
            statements.push((Sql::fixed(PRUNE_MCP_CALLS).on_traces(), vec![count(keep)]));
        }
        if let Some(before_us) = self.before_us {
            statements.push((Sql::fixed(PRUNE_OLD).on_traces(), vec![before_us.into()]));
        }
        statements
    }
}

fn count(keep: usize) -> Bound {
    i64::try_from(keep).unwrap_or(i64::MAX).into()
}

/// Whether a turn row is not an `/mcp` tool call's trace (a row whose root has not
/// arrived yet has no source: it is a turn's part).
pub(super) const NOT_AN_MCP_CALL: &str = "coalesce(r.source, '') <> 'mcp'";

/// Keeps the newest `?1` turns stored (by row id: the order they were first stored in),
/// the `/mcp` tool calls' traces aside.
const PRUNE_TURNS: &str = "DELETE FROM trace_turns WHERE coalesce(source, '') <> 'mcp' AND id <= \
    (SELECT id FROM trace_turns WHERE coalesce(source, '') <> 'mcp' ORDER BY id DESC LIMIT 1 OFFSET ?1)";

/// Keeps the newest `?1` traces of `/mcp` tool calls (through `trace_turns_mcp_calls`).
const PRUNE_MCP_CALLS: &str = "DELETE FROM trace_turns WHERE source = 'mcp' AND id <= \
    (SELECT id FROM trace_turns WHERE source = 'mcp' ORDER BY id DESC LIMIT 1 OFFSET ?1)";

/// Deletes every turn that started before the cutoff.
const PRUNE_OLD: &str = "DELETE FROM trace_turns WHERE start_us < ?1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statements_name_the_source_the_tracer_gives_mcp_calls() {
        let quoted = format!("'{}'", crate::model::MCP_CALL_SOURCE);
        for sql in [PRUNE_TURNS, PRUNE_MCP_CALLS, NOT_AN_MCP_CALL] {
            assert!(sql.contains(&quoted), "{sql}");
        }
    }
}
