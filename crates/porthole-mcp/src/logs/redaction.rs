//! What the process's log passes through before it leaves the process: the log tools'
//! answers, the terminal, and whatever else an application writes it to (the bot: its
//! `LOG_FILE` and the journal in its database). A log line can quote anything: a child
//! process's stderr (an MCP server printing its own environment), a provider's error
//! body, a URL with credentials. The log's outputs are the process's own (one
//! `tracing` subscriber), so the redactor they use is too: start-up sets one that knows
//! the configuration's secrets ([`redact_logs_with`]), and the application replaces it
//! with its own once it knows every secret.
//!
//! The ring buffer keeps lines as they came (they are redacted when read, like every
//! tool result), so capturing a line costs no scan.

use std::borrow::Cow;
use std::io::Write;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use tracing_subscriber::fmt::MakeWriter;

use super::buffer::LogRecord;
use porthole_core::redact::{REDACTED, Redactor, is_secret_key};

static LOG_REDACTOR: LazyLock<RwLock<Arc<Redactor>>> =
    LazyLock::new(|| RwLock::new(Arc::new(Redactor::default())));

/// From now on, the log's outputs redact with `redactor`.
pub fn redact_logs_with(redactor: Arc<Redactor>) {
    *LOG_REDACTOR.write().unwrap_or_else(PoisonError::into_inner) = redactor;
}

fn current() -> Arc<Redactor> {
    LOG_REDACTOR
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// `record` with its message and fields redacted (a field named like a secret loses
/// its value whole).
pub fn redact_record(record: &mut LogRecord) {
    let redactor = current();
    if let Cow::Owned(clean) = redactor.redact_text(&record.message) {
        record.message = clean;
    }
    for (name, value) in &mut record.fields {
        if is_secret_key(name) {
            *value = REDACTED.to_string();
        } else if let Cow::Owned(clean) = redactor.redact_text(value) {
            *value = clean;
        }
    }
}

/// The terminal's writer for `tracing_subscriber::fmt`: each formatted line, redacted.
pub struct RedactedStdout;

impl<'a> MakeWriter<'a> for RedactedStdout {
    type Writer = RedactedLine;

    fn make_writer(&'a self) -> RedactedLine {
        RedactedLine
    }
}

/// One formatted event on its way to stdout (the formatter writes it in one piece).
#[derive(Debug)]
pub struct RedactedLine;

impl Write for RedactedLine {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(line);
        let redactor = current();
        let clean = redactor.redact_text(&text);
        std::io::stdout().lock().write_all(clean.as_bytes())?;
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::super::buffer::LogSource;
    use super::*;

    #[test]
    fn a_record_loses_known_values_shapes_and_secret_named_fields() {
        redact_logs_with(Arc::new(Redactor::new(["stdioenv-EE778899".to_string()])));
        let mut record = LogRecord {
            seq: 0,
            time_us: 0,
            level: tracing::Level::WARN,
            target: "porthole::bot".into(),
            message: "MCP server stderr: LOCAL_KEY=stdioenv-EE778899 sk-abcdefghijklmnop1234"
                .into(),
            fields: vec![
                ("server".into(), "local stdioenv-EE778899".into()),
                ("api_key".into(), "short".into()),
            ],
            source: LogSource::Server,
            from_mcp: false,
        };
        redact_record(&mut record);
        assert!(!record.message.contains("EE778899"), "{}", record.message);
        assert!(
            !record.message.contains("abcdefghijklmnop"),
            "{}",
            record.message
        );
        assert_eq!(record.fields[0].1, "local [REDACTED]");
        assert_eq!(record.fields[1].1, REDACTED);
    }
}
