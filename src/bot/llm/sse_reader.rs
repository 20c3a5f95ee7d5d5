//! Reads the `data:` payloads of a server-sent-events HTTP response, as both OpenAI and
//! Anthropic stream their answers that way.

use futures::StreamExt;

use super::LlmError;
use crate::sse_decoder::SseDecoder;

/// Calls `on_event` with each non-empty event's data until the stream ends or
/// `on_event` returns false.
pub async fn for_each_event(
    response: reqwest::Response,
    timeout_secs: u64,
    mut on_event: impl FnMut(&str) -> Result<bool, LlmError>,
) -> Result<(), LlmError> {
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::default();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| {
            if e.is_timeout() {
                LlmError::Timeout(timeout_secs)
            } else {
                LlmError::BrokeOff(crate::text::with_causes(&e.without_url()))
            }
        })?;
        for data in decoder.push(&chunk) {
            if !data.is_empty() && !on_event(&data)? {
                return Ok(());
            }
        }
    }
    if let Some(data) = decoder.finish().filter(|d| !d.is_empty()) {
        on_event(&data)?;
    }
    Ok(())
}
