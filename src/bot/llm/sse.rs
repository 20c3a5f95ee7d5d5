//! Reads the `data:` payloads of a server-sent-events HTTP response, as both OpenAI and
//! Anthropic stream their answers that way.

use futures::StreamExt;

use super::LlmError;

/// Collects SSE events from a streaming response, calling `on_event` with each event's
/// name (if any) and joined `data:` lines. Stops early when `on_event` returns false.
pub async fn for_each_event(
    response: reqwest::Response,
    timeout_secs: u64,
    mut on_event: impl FnMut(Option<&str>, &str) -> Result<bool, LlmError>,
) -> Result<(), LlmError> {
    let mut body = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    let mut event: Option<String> = None;
    let mut data = String::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| {
            if e.is_timeout() {
                LlmError::Timeout(timeout_secs)
            } else {
                LlmError::Malformed(format!("the stream broke off: {e}"))
            }
        })?;
        buffer.extend_from_slice(&chunk);
        while let Some(newline) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=newline).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !data.is_empty() && !on_event(event.as_deref(), &data)? {
                    return Ok(());
                }
                data.clear();
                event = None;
            } else if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            } else if let Some(rest) = line.strip_prefix("event:") {
                event = Some(rest.trim().to_string());
            }
        }
    }
    if !data.is_empty() {
        on_event(event.as_deref(), &data)?;
    }
    Ok(())
}
