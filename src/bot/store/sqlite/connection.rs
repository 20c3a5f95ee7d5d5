//! A SQLite file's one writer connection, on a thread of its own, and how long callers
//! wait for it.
//!
//! SQLite allows one writer per file at a time, so the store keeps one writer connection
//! per file: turns, tools and retention take turns on the bot's, the trace writer and
//! the trace reads on the traces' (see `files`). The connection lives on a thread of its
//! own that runs the callers' work one piece at a time, in the order it arrived
//! ([`WriterConnection::run`]). A burst of callers is a queue of closures, not a blocked
//! thread each: with the connection behind a mutex on tokio's blocking pool, every
//! caller waiting for it held a pool thread, and a burst of thousands grew the pool to
//! its 512 threads, each with its stack and allocator heap.
//!
//! When the store is the bottleneck, callers queue here; [`WriterConnection::waits`] says
//! how often and for how long (`health` shows it, and the trace benchmark uses it to
//! split what recording a turn costs). Finding the connection free is not counted and
//! reads no clock.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde::Serialize;
use tokio::sync::oneshot;

use super::StoreError;

/// One caller's work, as the connection's thread runs it.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

pub(super) struct WriterConnection {
    /// `None` only while dropping: closing the queue ends the thread.
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    queue: Arc<Queue>,
}

/// What the callers and the connection's thread share.
#[derive(Default)]
struct Queue {
    /// Work sent and not yet finished, the running one included.
    pending: AtomicUsize,
    waits: AtomicU64,
    waited_ns: AtomicU64,
}

/// Callers that found the writer connection taken, since start-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct WriterWaits {
    pub count: u64,
    /// How long they waited in all, in milliseconds.
    #[serde(rename = "total_ms", serialize_with = "as_millis")]
    #[schemars(with = "f64")]
    pub total: Duration,
}

fn as_millis<S: serde::Serializer>(total: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((total.as_secs_f64() * 1e6).round() / 1e3)
}

impl WriterConnection {
    /// Moves `connection` to a thread of its own named `name`.
    pub(super) fn start(connection: Connection, name: &str) -> std::io::Result<WriterConnection> {
        let (jobs, received) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let mut connection = connection;
                for job in received {
                    job(&mut connection);
                }
            })?;
        Ok(WriterConnection {
            jobs: Some(jobs),
            thread: Some(thread),
            queue: Arc::default(),
        })
    }

    /// Runs `f` with the connection once the work sent before it is done, and returns
    /// what it returned. A panic in `f` fails this call only ([`StoreError::WorkerGone`]):
    /// an open transaction rolls back as the panic unwinds, and the connection goes on
    /// serving the next caller. A caller that stops waiting does not stop `f`.
    pub(super) async fn run<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let queue = Arc::clone(&self.queue);
        let queued_at = (queue.pending.fetch_add(1, Ordering::AcqRel) > 0).then(Instant::now);
        let job: Job = Box::new(move |connection: &mut Connection| {
            if let Some(queued_at) = queued_at {
                let waited = u64::try_from(queued_at.elapsed().as_nanos()).unwrap_or(u64::MAX);
                queue.waits.fetch_add(1, Ordering::Relaxed);
                queue.waited_ns.fetch_add(waited, Ordering::Relaxed);
            }
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| f(connection)));
            queue.pending.fetch_sub(1, Ordering::AcqRel);
            if let Ok(outcome) = outcome {
                let _ = reply.send(outcome);
            }
        });
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if !sent {
            self.queue.pending.fetch_sub(1, Ordering::AcqRel);
            return Err(StoreError::WorkerGone);
        }
        answer.await.map_err(|_| StoreError::WorkerGone)?
    }

    pub(super) fn waits(&self) -> WriterWaits {
        WriterWaits {
            count: self.queue.waits.load(Ordering::Relaxed),
            total: Duration::from_nanos(self.queue.waited_ns.load(Ordering::Relaxed)),
        }
    }
}

/// How long dropping the connection waits for its thread to finish what was sent.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

impl Drop for WriterConnection {
    /// Closes the queue and waits for the thread to finish what was sent and close the
    /// connection: a store dropped and opened again (or its files removed) never meets
    /// the old connection still open, checkpointing and deleting its WAL file by name.
    /// The wait is bounded ([`CLOSE_WAIT`]): work that does not end soon (a long
    /// statement) leaves the thread to finish on its own rather than hold up whoever
    /// drops the store (the process, exiting).
    fn drop(&mut self) {
        self.jobs = None;
        let Some(thread) = self.thread.take() else {
            return;
        };
        if thread.thread().id() == std::thread::current().id() {
            return;
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        while !thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if thread.is_finished() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> Arc<WriterConnection> {
        let connection = Connection::open_in_memory().unwrap();
        connection
            .execute_batch("CREATE TABLE calls (n INTEGER NOT NULL)")
            .unwrap();
        Arc::new(WriterConnection::start(connection, "test-writer").unwrap())
    }

    #[tokio::test]
    async fn a_panic_fails_its_own_call_and_the_connection_goes_on() {
        let writer = writer();
        let panicked = writer
            .run(|c| -> Result<(), StoreError> {
                let tx = c.transaction()?;
                tx.execute("INSERT INTO calls (n) VALUES (1)", [])?;
                panic!("a bug in the middle of a transaction");
            })
            .await;
        assert!(
            matches!(panicked, Err(StoreError::WorkerGone)),
            "{panicked:?}"
        );
        let stored: i64 = writer
            .run(|c| Ok(c.query_row("SELECT count(*) FROM calls", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(stored, 0, "the panicked transaction rolled back");
        assert_eq!(writer.waits().count, 0, "nobody queued");
    }

    #[test]
    fn dropping_it_finishes_the_work_sent_and_closes_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("closing.db");
        let connection = Connection::open(&path).unwrap();
        connection
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE calls (n INTEGER NOT NULL)")
            .unwrap();
        let writer = WriterConnection::start(connection, "test-writer").unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime
            .block_on(writer.run(|c| Ok(c.execute("INSERT INTO calls (n) VALUES (7)", [])?)))
            .unwrap();
        drop(writer);
        // The last connection to close checkpoints the WAL into the file and removes it.
        assert!(!dir.path().join("closing.db-wal").exists());
        let reopened = Connection::open(&path).unwrap();
        let n: i64 = reopened
            .query_row("SELECT n FROM calls", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 7);
    }
}
