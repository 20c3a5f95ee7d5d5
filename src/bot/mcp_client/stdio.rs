//! The stdio transport: a child process speaking newline-delimited JSON-RPC on its
//! stdin and stdout. Owns the process from spawn to reaping: the reader task that
//! matches responses to waiting requests, the task that forwards stderr to the log,
//! and the polite-then-firm shutdown (close stdin, SIGTERM, SIGKILL) that leaves no
//! orphan behind. Requests and the `initialize` handshake go through the shared
//! `StreamRequests`, with stdin as the way to send.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::config::StdioCommand;
use super::events::{ConnEvent, shorten};
use super::jsonrpc::{self, CallError};
use super::pending::Pending;
use super::stream_requests::{SendMessage, StreamRequests};

/// How long a child gets to exit after stdin is closed, and again after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// The child's stdin, `None` once closed.
pub(crate) type Writer = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

pub(crate) struct StdioConn {
    requests: StreamRequests<Writer>,
    child: Arc<tokio::sync::Mutex<Option<Child>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl SendMessage for Writer {
    fn send(&self, message: &Value) -> impl Future<Output = Result<(), CallError>> + Send {
        write_line(self, message)
    }
}

impl StdioConn {
    /// Starts the process; `Conn::connect` then completes the handshake, each request
    /// within `timeout`.
    pub(crate) async fn start(
        server: &str,
        stdio: &StdioCommand,
        timeout: Duration,
        events: mpsc::UnboundedSender<ConnEvent>,
    ) -> Result<StdioConn, String> {
        let mut child = spawn_child(stdio)?;
        let server = server.to_string();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("the child has no stdout")?;
        let stderr = child.stderr.take().ok_or("the child has no stderr")?;

        let pending: Arc<Pending> = Arc::default();
        let writer: Writer = Arc::new(tokio::sync::Mutex::new(stdin));
        let child = Arc::new(tokio::sync::Mutex::new(Some(child)));
        let reader = tokio::spawn(read_stdout(
            server.clone(),
            stdout,
            pending.clone(),
            writer.clone(),
            child.clone(),
            events,
        ));
        let logger = tokio::spawn(log_stderr(server.clone(), stderr));
        let conn = StdioConn {
            requests: StreamRequests::new(&server, writer, pending, timeout),
            child,
            tasks: vec![reader, logger],
        };
        Ok(conn)
    }

    pub(crate) fn requests(&self) -> &StreamRequests<Writer> {
        &self.requests
    }

    /// Ends the connection: closes stdin, then SIGTERM, then SIGKILL, and reaps the
    /// process. Waiting requests fail at once.
    pub(crate) async fn close(&self) {
        self.requests
            .pending()
            .fail_all("the connection was closed by porthole".into());
        self.requests.sender().lock().await.take();
        let child = self.child.lock().await.take();
        if let Some(mut child) = child {
            stop_child(self.requests.server(), &mut child).await;
        }
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Drop for StdioConn {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts the server process with piped stdio and a clean environment.
fn spawn_child(stdio: &StdioCommand) -> Result<Child, String> {
    let mut command = crate::bot::child_env::clean_command(&stdio.command, &stdio.env);
    command
        .args(&stdio.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = &stdio.cwd {
        command.current_dir(dir);
    }
    command
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", stdio.command))
}

async fn write_line(writer: &Writer, message: &Value) -> Result<(), CallError> {
    let mut line = serde_json::to_vec(message)
        .map_err(|e| CallError::Protocol(format!("cannot encode the message: {e}")))?;
    line.push(b'\n');
    let mut writer = writer.lock().await;
    let Some(stdin) = writer.as_mut() else {
        return Err(CallError::Lost("the server's stdin is closed".into()));
    };
    let written = async {
        stdin.write_all(&line).await?;
        stdin.flush().await
    }
    .await;
    written.map_err(|e| CallError::Lost(format!("cannot write to the server: {e}")))
}

/// Stops the server: it has [`EXIT_GRACE`] to exit on its own (stdin is closed), then
/// its whole process group is asked to stop and, [`EXIT_GRACE`] later, killed. The
/// group, not the child alone: a server started through a launcher (`npx`, `uv run`,
/// `sh -c`) runs as the launcher's child, and a launcher that does not pass the signal
/// on would leave it running.
async fn stop_child(server: &str, child: &mut Child) {
    if let Ok(Ok(_)) = tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        return;
    }
    #[cfg(unix)]
    if let Some(group) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
        // SAFETY: `killpg` only sends a signal. `clean_command` made the child lead
        // its own group, and the child is not reaped until `kill` below (an exited
        // child stays a zombie till then), so the id names that group and nothing else.
        unsafe {
            libc::killpg(group, libc::SIGTERM);
        }
        // Not `wait`: that would reap the child, and a member that ignores SIGTERM
        // could then no longer be reached safely by the group's id.
        tokio::time::sleep(EXIT_GRACE).await;
        // SAFETY: as above; the child is still not reaped.
        unsafe {
            libc::killpg(group, libc::SIGKILL);
        }
    }
    tracing::debug!(server, "the MCP server did not exit on its own; stopped it");
    let _ = child.kill().await;
}

/// Reads stdout line by line until it closes, then fails what is waiting and reports
/// the loss.
async fn read_stdout(
    server: String,
    stdout: tokio::process::ChildStdout,
    pending: Arc<Pending>,
    writer: Writer,
    child: Arc<tokio::sync::Mutex<Option<Child>>>,
    events: mpsc::UnboundedSender<ConnEvent>,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let ending = loop {
        line.clear();
        let read = (&mut reader)
            .take(jsonrpc::MAX_MESSAGE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) => break None,
            Err(e) => break Some(format!("cannot read from the server: {e}")),
            Ok(_) if line.len() > jsonrpc::MAX_MESSAGE_BYTES => {
                break Some(format!(
                    "the server sent a message over {} bytes",
                    jsonrpc::MAX_MESSAGE_BYTES
                ));
            }
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if let Some(answer) = pending.route(&server, text, &events) {
            let writer = writer.clone();
            // Written from a task so a busy stdin never stalls reading.
            tokio::spawn(async move {
                let _ = write_line(&writer, &answer).await;
            });
        }
    };

    let reason = match ending {
        Some(reason) => reason,
        None => {
            let mut child = child.lock().await;
            match child.as_mut() {
                Some(child) => match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
                    Ok(Ok(status)) => format!("the server process exited ({status})"),
                    _ => "the server closed its stdout".to_string(),
                },
                None => "the connection was closed by porthole".to_string(),
            }
        }
    };
    if pending.fail_all(reason.clone()) {
        let _ = events.send(ConnEvent::Closed(reason));
    }
}

/// The longest piece of a stderr line logged as one line: a server that writes without
/// newlines is logged piece by piece instead of held in memory whole.
const STDERR_LINE_BYTES: u64 = 64 * 1024;

async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let mut reader = BufReader::new(stderr);
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        match (&mut reader)
            .take(STDERR_LINE_BYTES)
            .read_until(b'\n', &mut bytes)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&bytes);
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        let lower = line.to_ascii_lowercase();
        if ["error", "traceback", "panic", "fatal", "exception"]
            .iter()
            .any(|w| lower.contains(w))
        {
            tracing::warn!(server = %server, "MCP server stderr: {}", shorten(line));
        } else {
            tracing::info!(server = %server, "MCP server stderr: {}", shorten(line));
        }
    }
}
