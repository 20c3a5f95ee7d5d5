//! The CPU time a thread has used: what the trace writer and the store's trace writes
//! count as their cost to the machine (docs/performance.md §6).

use std::time::Duration;

/// The CPU time the calling thread has used so far (user and system); zero where the
/// platform has no such clock.
#[cfg(unix)]
pub fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; this clock always exists on
    // Linux, and on failure the zeroed value stands.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

#[cfg(not(unix))]
pub fn thread_cpu_time() -> Duration {
    Duration::ZERO
}
