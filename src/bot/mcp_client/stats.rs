//! Usage statistics of MCP servers and their tools: invocations, errors, mean and p95
//! latency, and the last error, as seen from this client.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// Usage figures of a server or of one of its tools.
pub type ServerStats = crate::bot::stats::CallStats;

#[derive(Debug, Clone, Serialize, PartialEq)]
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

    #[test]
    fn mean_p95_and_errors() {
        let mut book = StatsBook::default();
        for ms in 1..=100 {
            let error = (ms % 10 == 0).then_some("boom");
            book.record("t", Duration::from_millis(ms), error);
        }
        let server = book.server.snapshot();
        assert_eq!(server.invocations, 100);
        assert_eq!(server.errors, 10);
        assert_eq!(server.p95_ms.round(), 95.0);
        assert!((server.mean_ms - 50.5).abs() < 0.5);
        assert_eq!(server.last_error.as_deref(), Some("boom"));
        let other = "never".to_string();
        let entries = book.tool_entries([&other].into_iter());
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].name, "never");
        assert_eq!(entries[0].stats, ServerStats::default());
        assert_eq!(entries[1].stats.invocations, 100);
    }
}
