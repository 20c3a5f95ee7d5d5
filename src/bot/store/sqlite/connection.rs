//! A SQLite file's one writer connection, and how long callers wait for it.
//!
//! SQLite allows one writer per file at a time, so the store keeps one writer connection
//! per file behind a mutex: turns, tools and retention take turns on the bot's, the trace
//! writer and the trace reads on the traces' (see `files`). When the store is the
//! bottleneck, callers queue here; [`WriterConnection::waits`] says how
//! often and for how long (`health` shows it, and the trace benchmark uses it to split
//! what recording a turn costs). Taking a free connection is not counted and costs a
//! `try_lock`; only a caller that has to wait reads the clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde::Serialize;

pub(super) struct WriterConnection {
    connection: Mutex<Connection>,
    waits: AtomicU64,
    waited_ns: AtomicU64,
}

/// Callers that found the writer connection taken, since start-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct WriterWaits {
    pub count: u64,
    #[serde(rename = "total_ms", serialize_with = "as_millis")]
    pub total: Duration,
}

fn as_millis<S: serde::Serializer>(total: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((total.as_secs_f64() * 1e6).round() / 1e3)
}

impl WriterConnection {
    pub(super) fn new(connection: Connection) -> WriterConnection {
        WriterConnection {
            connection: Mutex::new(connection),
            waits: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
        }
    }

    /// Waits for the connection. A panic while it was held poisons the mutex, but the
    /// connection itself is still usable, so it is recovered rather than failing every
    /// later call.
    pub(super) fn lock(&self) -> MutexGuard<'_, Connection> {
        match self.connection.try_lock() {
            Ok(guard) => return guard,
            Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {}
        }
        let started = Instant::now();
        let guard = self.connection.lock().unwrap_or_else(|p| p.into_inner());
        let waited = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.waited_ns.fetch_add(waited, Ordering::Relaxed);
        guard
    }

    pub(super) fn waits(&self) -> WriterWaits {
        WriterWaits {
            count: self.waits.load(Ordering::Relaxed),
            total: Duration::from_nanos(self.waited_ns.load(Ordering::Relaxed)),
        }
    }
}
