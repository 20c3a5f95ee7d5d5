//! Usage statistics of MCP servers and their tools: invocations, errors, mean and p95
//! latency, and the last error, as seen from this client.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// Usage figures of a server or of one of its tools.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ServerStats {
    pub invocations: u64,
    pub errors: u64,
    pub mean_ms: f64,
    pub p95_ms: f64,
    pub last_error: Option<String>,
}

/// The figures of one tool, by the server's own tool name.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolStatsEntry {
    pub name: String,
    #[serde(flatten)]
    pub stats: ServerStats,
}

/// Latencies kept for the p95; older ones are overwritten.
const WINDOW: usize = 256;

#[derive(Debug, Default)]
pub(crate) struct Recorder {
    invocations: u64,
    errors: u64,
    total_ms: f64,
    recent_ms: Vec<f64>,
    next_slot: usize,
    last_error: Option<String>,
}

impl Recorder {
    pub(crate) fn record(&mut self, elapsed: Duration, error: Option<&str>) {
        let ms = elapsed.as_secs_f64() * 1000.0;
        self.invocations += 1;
        self.total_ms += ms;
        if self.recent_ms.len() < WINDOW {
            self.recent_ms.push(ms);
        } else {
            self.recent_ms[self.next_slot] = ms;
        }
        self.next_slot = (self.next_slot + 1) % WINDOW;
        if let Some(error) = error {
            self.errors += 1;
            self.last_error = Some(error.to_string());
        }
    }

    pub(crate) fn snapshot(&self) -> ServerStats {
        let mut sorted = self.recent_ms.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let p95_ms = if sorted.is_empty() {
            0.0
        } else {
            let rank = (sorted.len() as f64 * 0.95).ceil() as usize;
            sorted[rank.clamp(1, sorted.len()) - 1]
        };
        ServerStats {
            invocations: self.invocations,
            errors: self.errors,
            mean_ms: if self.invocations == 0 {
                0.0
            } else {
                self.total_ms / self.invocations as f64
            },
            p95_ms,
            last_error: self.last_error.clone(),
        }
    }
}

/// A server's figures and those of each of its tools.
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
