//! The per-minute budget of provider calls replays may make (`REPLAY_MAX_PER_MINUTE`),
//! shared by every way in (`/mcp`, the page's `/api`): a replay spends tokens.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);

/// A sliding window: at most `per_minute` calls in any 60 seconds.
pub struct RateLimit {
    per_minute: u32,
    calls: Mutex<VecDeque<Instant>>,
}

/// Why calls were refused: the limit, and how long until they would fit (`None` when
/// they never will: more calls at once than the limit allows).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Refused {
    pub per_minute: u32,
    pub retry_after: Option<Duration>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.retry_after_secs() {
            Some(wait) => write!(
                f,
                "replays may make at most {} provider calls a minute (REPLAY_MAX_PER_MINUTE); retry in {wait} s",
                self.per_minute,
            ),
            None => write!(
                f,
                "replays may make at most {} provider calls a minute (REPLAY_MAX_PER_MINUTE); ask for fewer runs",
                self.per_minute
            ),
        }
    }
}

impl Refused {
    /// Whole seconds to wait (rounded up, so a retry then fits), as the message says.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after.map(|wait| wait.as_secs() + 1)
    }
}

impl RateLimit {
    pub fn new(per_minute: u32) -> Self {
        RateLimit {
            per_minute,
            calls: Mutex::new(VecDeque::new()),
        }
    }

    /// Takes `n` calls from the budget, all or none.
    pub fn take(&self, n: u32) -> Result<(), Refused> {
        self.take_at(n, Instant::now())
    }

    fn take_at(&self, n: u32, now: Instant) -> Result<(), Refused> {
        let mut calls = crate::bot::lock(&self.calls);
        while calls
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            calls.pop_front();
        }
        let limit = self.per_minute as usize;
        let wanted = n as usize;
        if calls.len() + wanted <= limit {
            calls.extend(std::iter::repeat_n(now, wanted));
            return Ok(());
        }
        // The calls must wait until enough of the oldest have left the window.
        let retry_after = (wanted <= limit).then(|| {
            let freeing = calls[calls.len() + wanted - limit - 1];
            (freeing + WINDOW).saturating_duration_since(now)
        });
        Err(Refused {
            per_minute: self.per_minute,
            retry_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_past_the_limit_wait_for_the_oldest_to_leave_the_window() {
        let limit = RateLimit::new(3);
        let start = Instant::now();
        limit.take_at(2, start).unwrap();
        limit.take_at(1, start + Duration::from_secs(10)).unwrap();
        let refused = limit
            .take_at(1, start + Duration::from_secs(20))
            .unwrap_err();
        assert_eq!(refused.retry_after, Some(Duration::from_secs(40)));
        assert!(refused.to_string().contains("retry in 41 s"), "{refused}");
        let three = limit
            .take_at(3, start + Duration::from_secs(20))
            .unwrap_err();
        assert_eq!(
            three.retry_after,
            Some(Duration::from_secs(50)),
            "three calls wait for the third oldest"
        );
        limit.take_at(2, start + Duration::from_secs(60)).unwrap();
        assert!(limit.take_at(1, start + Duration::from_secs(61)).is_err());
        let never = limit.take_at(4, start).unwrap_err();
        assert_eq!(never.retry_after, None);
        assert!(never.to_string().contains("fewer runs"));
    }
}
