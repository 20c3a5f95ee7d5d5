//! When the `/mcp` tool calls waiting in the ring of the newest calls ([`NewestCalls`])
//! are written: behind the requests, not beside them.
//!
//! A client calling tools one after another keeps the bot's CPU busy in short pieces;
//! every write of the ring is a burst of transactions the next requests wait behind. So
//! the calls stay in the ring, in memory, and are written when
//! - a reader asks: every trace tool, the chat page and `db_query` over traces flush
//!   first, and a flush writes them at once, so nothing a reader asks for is missing;
//! - calls have stopped coming for [`QUIET`]: the write lands where nobody waits;
//! - the oldest has waited [`LONGEST`]: under a flood that never pauses, one write of at
//!   most `TRACE_MAX_MCP_CALLS` rows that often, instead of one every 250 ms;
//! - the bot stops (the tracer's channel closes).
//!
//! A call pushed out of the full ring meanwhile is one whose row the count prune would
//! have deleted anyway (it keeps the newest `TRACE_MAX_MCP_CALLS`), counted in
//! `mcp_calls_superseded`: the table ends as writing every call would leave it. What a
//! crash of the process loses is at most the calls of the last [`LONGEST`].
//!
//! [`NewestCalls`]: super::gather::NewestCalls

use std::time::Duration;

use tokio::time::Instant;

/// How long without a new call before the waiting ones are written.
pub(super) const QUIET: Duration = Duration::from_millis(500);
/// The longest a call waits in the ring while calls keep coming.
pub(super) const LONGEST: Duration = Duration::from_secs(30);

/// The writer's view of the calls waiting in the ring.
#[derive(Default)]
pub(super) struct CallsBehind {
    /// Since when calls have been waiting (the first since the last write); `None` when
    /// the ring is empty as far as the writer knows.
    waiting_since: Option<Instant>,
    /// The ring's count of calls pushed at the last look, and when that was.
    seen: Option<(u64, Instant)>,
}

impl CallsBehind {
    /// The ring woke the writer: it holds its first call since the last write.
    pub(super) fn arrived(&mut self, now: Instant) {
        self.waiting_since.get_or_insert(now);
    }

    /// When the writer must look at the ring next, while calls wait.
    pub(super) fn next_look(&self) -> Option<Instant> {
        let since = self.waiting_since?;
        let quiet = self.seen.map_or(since, |(_, at)| at) + QUIET;
        Some(quiet.min(since + LONGEST))
    }

    /// Whether the calls are written now: `forced` by a flush or a closing channel, or
    /// the ring quiet (its count of pushes, `pushes`, unchanged for [`QUIET`]), or the
    /// oldest call waiting for [`LONGEST`]. A look that finds new calls is noted: the
    /// quiet is counted from it.
    pub(super) fn due(&mut self, forced: bool, pushes: u64, now: Instant) -> bool {
        let Some(since) = self.waiting_since else {
            return forced;
        };
        let quiet = match self.seen {
            Some((seen, at)) if seen == pushes => now >= at + QUIET,
            _ => {
                self.seen = Some((pushes, now));
                false
            }
        };
        forced || quiet || now >= since + LONGEST
    }

    /// The ring was taken whole.
    pub(super) fn written(&mut self) {
        *self = CallsBehind::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_wait_until_the_ring_is_quiet_or_the_oldest_is_due() {
        let start = Instant::now();
        let mut behind = CallsBehind::default();
        assert!(!behind.due(false, 0, start), "nothing waits");
        assert!(behind.due(true, 0, start), "a flush takes the ring anyway");
        behind.arrived(start);
        assert_eq!(behind.next_look(), Some(start + QUIET));
        // New calls at every look: not due until the oldest has waited LONGEST.
        let mut now = start;
        let mut pushes = 1;
        while now < start + LONGEST {
            assert!(!behind.due(false, pushes, now), "written early at {now:?}");
            now = behind.next_look().unwrap();
            pushes += 1;
        }
        assert_eq!(now, start + LONGEST);
        assert!(behind.due(false, pushes, now));
        behind.written();
        assert_eq!(behind.next_look(), None);
        // One call, then nothing: written QUIET after the writer first saw it.
        behind.arrived(now);
        assert!(!behind.due(false, pushes + 1, now));
        let look = behind.next_look().unwrap();
        assert_eq!(look, now + QUIET);
        assert!(behind.due(false, pushes + 1, look));
        // A flush does not wait.
        behind.written();
        behind.arrived(look);
        assert!(behind.due(true, pushes + 2, look));
    }
}
