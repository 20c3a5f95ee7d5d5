//! Usage statistics of MCP servers and their tools: invocations, errors, mean and p95
//! latency, and the last error, as seen from this client.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// Usage figures of a server or of one of its tools.
pub type ServerStats = crate::bot::stats::CallStats;

/// One of a server's tools and its usage figures.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct ToolStatsEntry {
    pub name: String,
    #[serde(flatten)]
    pub stats: ServerStats,
}

/// Latencies kept for the p95; older ones are overwritten.
pub(crate) use crate::bot::stats::Recorder;

#[derive(Debug, Default)]
pub(crate) struct StatsBook {
    pub server: Recorder,
    pub tools: BTreeMap<String, Recorder>,
}

impl StatsBook {
    pub(crate) fn record(&mut self, tool: &str, elapsed: Duration, error: Option<&str>) {
        self.server.record(elapsed, error);
        self.tools
            .entry(tool.to_string())
            .or_default()
            .record(elapsed, error);
    }

    /// Entries for the given tools (zero figures when never called) plus any other tool
    /// that was called, in name order.
    pub(crate) fn tool_entries<'a>(
        &self,
        registered: impl Iterator<Item = &'a String>,
    ) -> Vec<ToolStatsEntry> {
        let mut names: std::collections::BTreeSet<String> = self.tools.keys().cloned().collect();
        names.extend(registered.cloned());
        names
            .into_iter()
            .map(|name| ToolStatsEntry {
                stats: self
                    .tools
                    .get(&name)
                    .map(Recorder::snapshot)
                    .unwrap_or_default(),
                name,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The figures themselves (mean, p95) are `Recorder`'s, tested in `bot::stats`;
    // this checks how the book spreads calls over the server and its tools.
    #[test]
    fn counts_per_server_and_per_tool() {
        let mut book = StatsBook::default();
        book.record("a", Duration::from_millis(10), None);
        book.record("a", Duration::from_millis(20), Some("boom"));
        book.record("b", Duration::from_millis(30), None);
        let server = book.server.snapshot();
        assert_eq!((server.invocations, server.errors), (3, 1));
        assert_eq!(server.last_error.as_deref(), Some("boom"));
        let never = "never".to_string();
        let entries = book.tool_entries([&never].into_iter());
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "never"]);
        assert_eq!(
            (entries[0].stats.invocations, entries[0].stats.errors),
            (2, 1)
        );
        assert_eq!(entries[2].stats, ServerStats::default());
    }
}
