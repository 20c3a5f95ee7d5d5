//! An incremental Server-Sent Events decoder, shared by everything that reads an SSE
//! response: the bot's LLM providers and MCP client (whose HTTP+SSE transport needs
//! event names), and the `porthole-stdio` relay, which is why it sits outside `bot`.

/// Incremental Server-Sent Events decoder: feed it bytes, get back the `data` of each
/// complete event (multi-line data joined by `\n`), or with [`SseDecoder::push_events`]
/// the event's name too. Comments and other fields are skipped.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: Option<String>,
    event: Option<String>,
    /// Names of the events completed by the current `push`, in order.
    names: Vec<String>,
    /// The last byte ended a line with CR: an LF right after it (even in the next chunk)
    /// belongs to the same line end.
    after_cr: bool,
}

/// One complete event: its `event:` name (`message` when it has none) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

impl SseDecoder {
    /// Like [`SseDecoder::push`], keeping each event's name.
    pub fn push_events(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let data = self.push(bytes);
        let names = std::mem::take(&mut self.names);
        names
            .into_iter()
            .zip(data)
            .map(|(event, data)| SseEvent { event, data })
            .collect()
    }

    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.names.clear();
        let mut events = Vec::new();
        // A line ends at CRLF, LF or CR, as the SSE format says.
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.take_line(&line, &mut events);
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(byte);
                }
            }
        }
        events
    }

    /// Whatever complete-looking event is left when the stream ends.
    pub fn finish(&mut self) -> Option<String> {
        let line = std::mem::take(&mut self.line);
        let mut events = Vec::new();
        if !line.is_empty() {
            self.take_line(&line, &mut events);
        }
        self.data.take().or_else(|| events.pop())
    }

    /// How much undelivered text the decoder holds, to bound memory.
    pub fn pending_len(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, String::len)
    }

    fn take_line(&mut self, line: &[u8], events: &mut Vec<String>) {
        if line.is_empty() {
            let name = self.event.take();
            if let Some(data) = self.data.take() {
                events.push(data);
                self.names
                    .push(name.unwrap_or_else(|| "message".to_string()));
            }
            return;
        }
        let line = String::from_utf8_lossy(line);
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        if field == "event" {
            self.event = Some(value.to_string());
        } else if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_decoder_handles_split_chunks_comments_and_multiline_data() {
        let mut decoder = SseDecoder::default();
        let mut events = decoder.push(b": keep-alive\r\n\r\nevent: message\r\nda");
        assert!(events.is_empty());
        events.extend(decoder.push(b"ta: {\"a\":1}\r\n\r\ndata:x\ndata: y\n\nid: 3\n"));
        assert_eq!(events, vec!["{\"a\":1}".to_string(), "x\ny".to_string()]);
        assert!(decoder.push(b"data: last").is_empty());
        assert_eq!(decoder.finish().as_deref(), Some("last"));
    }

    #[test]
    fn a_lone_cr_ends_a_line_and_a_crlf_split_across_chunks_ends_one() {
        let mut whole = SseDecoder::default();
        let events = whole.push(b"data: a\rdata: b\r\rdata: c\r\n\r\n");
        assert_eq!(events, vec!["a\nb".to_string(), "c".to_string()]);
        let mut split = SseDecoder::default();
        let mut events = split.push(b"data: x\r");
        events.extend(split.push(b"\ndata: y\r"));
        events.extend(split.push(b"\n\r\n"));
        assert_eq!(events, vec!["x\ny".to_string()]);
    }

    #[test]
    fn events_keep_their_names() {
        let mut decoder = SseDecoder::default();
        let events = decoder.push_events(
            b"event: endpoint\ndata: /message?sessionId=1\n\ndata: {\"id\":1}\n\nevent: message\ndata: x\n\n",
        );
        let named: Vec<(&str, &str)> = events
            .iter()
            .map(|e| (e.event.as_str(), e.data.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("endpoint", "/message?sessionId=1"),
                ("message", "{\"id\":1}"),
                ("message", "x")
            ]
        );
    }
}
