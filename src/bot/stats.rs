//! Call statistics shared by the tool runner and the MCP client host: invocations,
//! errors, mean and p95 latency over a window of recent calls, and the last error.

use std::time::Duration;

use serde::Serialize;

/// Usage figures for one tool or server.
#[derive(Debug, Clone, Default, Serialize, PartialEq, schemars::JsonSchema)]
pub struct CallStats {
    pub invocations: u64,
    pub errors: u64,
    pub mean_ms: f64,
    pub p95_ms: f64,
    pub last_error: Option<String>,
}

/// Latencies kept for the p95; older ones are overwritten.
const LATENCY_WINDOW: usize = 256;

#[derive(Debug, Default)]
pub struct Recorder {
    invocations: u64,
    errors: u64,
    total_ms: f64,
    recent_ms: Vec<f64>,
    next_slot: usize,
    last_error: Option<String>,
}

impl Recorder {
    pub fn record(&mut self, elapsed: Duration, error: Option<&str>) {
        let ms = elapsed.as_secs_f64() * 1000.0;
        self.invocations += 1;
        self.total_ms += ms;
        if self.recent_ms.len() < LATENCY_WINDOW {
            self.recent_ms.push(ms);
        } else {
            self.recent_ms[self.next_slot] = ms;
        }
        self.next_slot = (self.next_slot + 1) % LATENCY_WINDOW;
        if let Some(e) = error {
            self.errors += 1;
            self.last_error = Some(e.to_string());
        }
    }

    pub fn snapshot(&self) -> CallStats {
        let mut sorted = self.recent_ms.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let p95 = if sorted.is_empty() {
            0.0
        } else {
            sorted[((sorted.len() as f64 * 0.95).ceil() as usize).clamp(1, sorted.len()) - 1]
        };
        CallStats {
            invocations: self.invocations,
            errors: self.errors,
            mean_ms: if self.invocations == 0 {
                0.0
            } else {
                self.total_ms / self.invocations as f64
            },
            p95_ms: p95,
            last_error: self.last_error.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p95_reflects_the_slow_tail() {
        let mut stats = Recorder::default();
        for ms in 1..=100 {
            stats.record(Duration::from_millis(ms), None);
        }
        stats.record(Duration::from_millis(50), Some("boom"));
        let snap = stats.snapshot();
        assert_eq!(snap.p95_ms.round(), 95.0);
        assert!((snap.mean_ms - 50.5).abs() < 0.5);
        assert_eq!((snap.invocations, snap.errors), (101, 1));
        assert_eq!(snap.last_error.as_deref(), Some("boom"));
    }
}
