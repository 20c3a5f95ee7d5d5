//! What a connection reports to the task that supervises it, and how a server's
//! notifications (on any transport) become those reports or log lines.

use serde_json::Value;
use tokio::sync::mpsc;

/// What a connection tells the task that supervises it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ConnEvent {
    /// The server sent `notifications/tools/list_changed`.
    ToolsChanged,
    /// The connection is gone (the process exited, the server is unreachable).
    Closed(String),
}

/// Acts on a notification from a server (any transport).
pub(crate) fn handle_notification(
    server: &str,
    method: &str,
    params: &Value,
    events: &mpsc::UnboundedSender<ConnEvent>,
) {
    match method {
        "notifications/tools/list_changed" => {
            let _ = events.send(ConnEvent::ToolsChanged);
        }
        "notifications/message" => {
            let level = params["level"].as_str().unwrap_or("info");
            let data = shorten(&params["data"].to_string());
            match level {
                "warning" | "error" | "critical" | "alert" | "emergency" => {
                    tracing::warn!(server, level, "MCP server log: {data}")
                }
                _ => tracing::info!(server, level, "MCP server log: {data}"),
            }
        }
        _ => tracing::debug!(server, method, "notification from an MCP server ignored"),
    }
}

/// At most 500 characters of `text`, for messages and log lines.
pub(crate) fn shorten(text: &str) -> String {
    const MAX: usize = 500;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}
