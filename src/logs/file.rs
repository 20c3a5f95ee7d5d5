//! The log file reader behind `server_log`: the process's log written as JSON lines to
//! `LOG_FILE` (rotated by size to `LOG_FILE.1`), and read back newest-first in chunks
//! from the end, so lines older than the ring buffer stay reachable without loading
//! the whole file.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

use super::buffer::{LogRecord, record_from_event};
use super::redaction::redact_record;
use crate::mcp::logs::LogLine;

/// Bytes read per step when scanning the file backwards.
const CHUNK: u64 = 64 * 1024;

/// The open file. Unbuffered: each line goes out in one write as it is logged, so a
/// `tail -f` sees it at once and nothing waits in memory when the process ends.
struct Writer {
    file: File,
    size: u64,
}

pub struct LogFile {
    path: PathBuf,
    max_bytes: u64,
    writer: Mutex<Option<Writer>>,
}

/// Where the log file at `path` is moved when it reaches its size: `path.1`.
pub fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

impl LogFile {
    /// Opens (appending) the log file, creating its folder.
    pub fn open(path: &Path, max_bytes: u64) -> std::io::Result<Arc<LogFile>> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        Ok(Arc::new(LogFile {
            path: path.to_path_buf(),
            max_bytes: max_bytes.max(CHUNK),
            writer: Mutex::new(Some(Writer { file, size })),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn rotated(&self) -> PathBuf {
        rotated(&self.path)
    }

    fn append(&self, record: &LogRecord) {
        let mut line = serde_json::to_string(&LogLine::from(record)).unwrap_or_default();
        line.push('\n');
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Some(writer) = guard.as_mut() else {
            return;
        };
        if writer.size + line.len() as u64 > self.max_bytes {
            // Keep one previous file; a failed rotation keeps writing to the current one.
            if std::fs::rename(&self.path, self.rotated()).is_ok()
                && let Ok(file) = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)
            {
                *writer = Writer { file, size: 0 };
            }
        }
        if writer.file.write_all(line.as_bytes()).is_ok() {
            writer.size += line.len() as u64;
        }
    }

    /// Records strictly older than `before_us`, newest first, across the current and the
    /// rotated file. Unreadable lines are skipped.
    pub fn newest_first(&self, before_us: Option<i64>) -> impl Iterator<Item = LogRecord> {
        [self.path.clone(), self.rotated()]
            .into_iter()
            .filter_map(|p| File::open(p).ok())
            .flat_map(ReverseLines::new)
            .filter_map(|line| serde_json::from_slice(&line).ok())
            .filter_map(|v: serde_json::Value| LogRecord::from_json(&v))
            .filter(move |r| before_us.is_none_or(|b| r.time_us < b))
    }

    /// The `tracing` layer writing to this file; `web_target` lines are browser lines.
    pub fn layer(self: &Arc<Self>, web_target: &'static str) -> FileLayer {
        FileLayer {
            file: self.clone(),
            web_target,
        }
    }
}

pub struct FileLayer {
    file: Arc<LogFile>,
    web_target: &'static str,
}

impl<S: Subscriber> Layer<S> for FileLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut record = record_from_event(event, self.web_target);
        redact_record(&mut record);
        self.file.append(&record);
    }
}

/// Lines of a file from the last to the first, read in chunks from the end.
struct ReverseLines {
    file: File,
    position: u64,
    /// Bytes read but not yet split: the start of the file's unread part.
    pending: Vec<u8>,
    lines: Vec<Vec<u8>>,
}

impl ReverseLines {
    fn new(mut file: File) -> Self {
        let position = file.seek(SeekFrom::End(0)).unwrap_or(0);
        ReverseLines {
            file,
            position,
            pending: Vec::new(),
            lines: Vec::new(),
        }
    }
}

impl Iterator for ReverseLines {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(line) = self.lines.pop() {
                return Some(line);
            }
            if self.position == 0 {
                return (!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending));
            }
            let step = CHUNK.min(self.position);
            self.position -= step;
            let mut chunk = vec![0u8; step as usize];
            if self.file.seek(SeekFrom::Start(self.position)).is_err()
                || self.file.read_exact(&mut chunk).is_err()
            {
                return None;
            }
            chunk.extend_from_slice(&self.pending);
            let mut parts: Vec<Vec<u8>> =
                chunk.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
            // The first part may continue in the previous chunk.
            self.pending = parts.remove(0);
            self.lines = parts.into_iter().filter(|l| !l.is_empty()).collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::buffer::{LogQuery, select};
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn writes_rotates_and_reads_back_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/bot.log");
        let file = LogFile::open(&path, CHUNK).unwrap();
        let subscriber = tracing_subscriber::registry().with(file.layer("web_console"));
        tracing::subscriber::with_default(subscriber, || {
            // Enough lines to pass the size limit once: part ends up in bot.log.1.
            for n in 0..1500 {
                tracing::info!(target: "porthole::bot", n, "line number {n} with some padding text");
            }
            tracing::warn!(target: "web_console", "from the page");
        });
        assert!(
            dir.path().join("logs/bot.log.1").exists(),
            "rotated by size"
        );
        let all: Vec<LogRecord> = file.newest_first(None).collect();
        assert_eq!(all[0].message, "from the page");
        assert_eq!(all[0].source, crate::logs::buffer::LogSource::Web);
        assert_eq!(all[1].message, "line number 1499 with some padding text");
        // Two files of about 64 KiB each stay: the current and one rotated.
        assert!(all.len() > 400, "lines from both files: {}", all.len());
        // Newest first across the rotation boundary.
        assert!(all.windows(2).all(|w| w[0].time_us >= w[1].time_us));

        let query = LogQuery {
            grep: Some("number 1498 ".into()),
            ..LogQuery::default()
        };
        let (picked, _, _) = select(all.iter(), &query);
        assert_eq!(picked.len(), 1);
        assert_eq!(picked[0].fields[0].1, "1498");
    }
}
