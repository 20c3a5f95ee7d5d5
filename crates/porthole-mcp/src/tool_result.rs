//! What a tool returns ([`CallToolResult`]), how it is redacted before it leaves, and
//! how it is written as JSON text: once, into one buffer sized for the whole reply.
//!
//! Structured content is either a `Value` or JSON text the tool serialised itself from
//! typed data ([`CallToolResult::typed`]), which builds no tree. Text is redacted like a
//! value unless [`Redactor::is_clean_json`] proves from the text that no net would
//! replace anything in it; then it is written out as it is.

use std::cell::RefCell;

use serde::Serialize;
use serde_json::{Value, json};

use porthole_core::redact::Redactor;

/// Room a rendered result leaves for the JSON-RPC envelope around it (`jsonrpc`, an
/// id of up to about 40 bytes, `result`), so the reply needs no second buffer.
pub(crate) const REPLY_ENVELOPE_ROOM: usize = 96;

/// The largest scratch buffer [`CallToolResult::render`] keeps between calls.
const SCRATCH_KEPT: usize = 64 * 1024;

/// A tool's structured content.
#[derive(Debug, Clone, PartialEq)]
pub enum Structured {
    /// A JSON value, as the tool built it.
    Value(Value),
    /// Compact JSON text of an object, as serde_json writes it.
    Text(String),
}

impl Structured {
    /// The content as a value; text that does not parse gives `null`.
    pub fn into_value(self) -> Value {
        match self {
            Structured::Value(value) => value,
            Structured::Text(text) => serde_json::from_str(&text).unwrap_or_default(),
        }
    }
}

/// The result of `tools/call` (MCP `CallToolResult`).
#[derive(Debug, Clone, PartialEq)]
pub struct CallToolResult {
    /// Content blocks (`{"type": "text", "text": …}` and others). When there are none
    /// and the result is structured, its JSON text is sent as the one text block.
    pub content: Vec<Value>,
    /// The `structuredContent`; `None` for a result that has none.
    pub structured: Option<Structured>,
    /// A tool-level failure (`isError`): the call ran, and the content says what failed.
    pub is_error: bool,
}

impl CallToolResult {
    /// A successful result of one text block.
    pub fn text(text: impl Into<String>) -> Self {
        CallToolResult {
            content: vec![json!({"type": "text", "text": text.into()})],
            structured: None,
            is_error: false,
        }
    }

    /// Structured output; its JSON text (for clients that ignore `structuredContent`)
    /// is rendered when the result is sent, after redaction, from the same value.
    pub fn structured(value: Value) -> Self {
        CallToolResult {
            content: Vec::new(),
            structured: Some(Structured::Value(value)),
            is_error: false,
        }
    }

    /// Structured output serialised straight from typed data, without a `Value` tree.
    /// `value` must serialise as an object whose members come in the order a `Value`
    /// would write them (by name), so the reply's bytes do not depend on the path.
    pub fn typed(value: &impl Serialize) -> Self {
        let mut text = Vec::with_capacity(512);
        let structured = match serde_json::to_writer(&mut text, value) {
            // serde_json writes UTF-8.
            Ok(()) => Structured::Text(String::from_utf8(text).unwrap_or_default()),
            Err(e) => Structured::Value(json!({"error": e.to_string()})),
        };
        CallToolResult {
            content: Vec::new(),
            structured: Some(structured),
            is_error: false,
        }
    }

    /// A tool-level failure: the model sees the message and can act on it.
    pub fn error(message: impl Into<String>) -> Self {
        CallToolResult {
            content: vec![json!({"type": "text", "text": message.into()})],
            structured: None,
            is_error: true,
        }
    }

    /// Replaces every secret the redactor finds. Structured text that is not proven
    /// clean from the text itself is parsed and redacted as a value.
    pub(crate) fn redact(&mut self, redactor: &Redactor) {
        for block in &mut self.content {
            redactor.redact(block);
        }
        match &mut self.structured {
            Some(Structured::Value(value)) => redactor.redact(value),
            Some(Structured::Text(text)) if !redactor.is_clean_json(text) => {
                let mut value = serde_json::from_str(text).unwrap_or_default();
                redactor.redact(&mut value);
                self.structured = Some(Structured::Value(value));
            }
            Some(Structured::Text(_)) | None => {}
        }
    }

    /// The `CallToolResult` object as JSON text, with `tail` (more members, already
    /// JSON, each led by a comma) at its end. A structured result is serialised once:
    /// those bytes are both `structuredContent` and, quoted, the text block (compact:
    /// indentation would cost the model tokens and say nothing), so the reply is
    /// written around them instead of walking the value again.
    ///
    /// The text is written into one buffer sized for the whole reply (quoting at most
    /// doubles a text, and `REPLY_ENVELOPE_ROOM` is left for the JSON-RPC envelope
    /// the transport puts around it in place), so it is allocated once.
    pub fn render(&self, tail: &str) -> String {
        thread_local! {
            /// A structured value's JSON text before it is quoted: reused, so a reply
            /// costs no second buffer.
            static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        match (&self.structured, self.content.is_empty()) {
            (Some(Structured::Text(text)), true) => self.quoted_and_raw(text.as_bytes(), tail),
            (Some(Structured::Value(value)), true) => SCRATCH.with_borrow_mut(|raw| {
                raw.clear();
                let _ = serde_json::to_writer(&mut *raw, value);
                let json = self.quoted_and_raw(raw, tail);
                // A very large result does not keep its buffer for the thread's lifetime.
                if raw.capacity() > SCRATCH_KEPT {
                    *raw = Vec::new();
                }
                json
            }),
            (structured, _) => {
                let mut json = Vec::with_capacity(1024);
                json.extend_from_slice(b"{\"content\":");
                let _ = serde_json::to_writer(&mut json, &self.content);
                match structured {
                    Some(Structured::Value(value)) => {
                        json.extend_from_slice(b",\"structuredContent\":");
                        let _ = serde_json::to_writer(&mut json, value);
                    }
                    Some(Structured::Text(text)) => {
                        json.extend_from_slice(b",\"structuredContent\":");
                        json.extend_from_slice(text.as_bytes());
                    }
                    None => {}
                }
                self.close(json, tail)
            }
        }
    }

    /// The result whose structured content's JSON text is `raw`: that text quoted as
    /// the one text block, then as it is.
    fn quoted_and_raw(&self, raw: &[u8], tail: &str) -> String {
        const HEAD: &[u8] = b"{\"content\":[{\"type\":\"text\",\"text\":";
        const MIDDLE: &[u8] = b"}],\"structuredContent\":";
        // `,"isError":true` and the closing brace.
        const END: usize = 17;
        let mut json = Vec::with_capacity(
            HEAD.len() + 3 * raw.len() + 2 + MIDDLE.len() + END + tail.len() + REPLY_ENVELOPE_ROOM,
        );
        json.extend_from_slice(HEAD);
        // serde_json writes its own output: valid UTF-8.
        let text = std::str::from_utf8(raw).unwrap_or_default();
        let _ = serde_json::to_writer(&mut json, text);
        json.extend_from_slice(MIDDLE);
        json.extend_from_slice(raw);
        self.close(json, tail)
    }

    /// Ends a rendered result: `isError` when set, `tail`, the closing brace.
    fn close(&self, mut json: Vec<u8>, tail: &str) -> String {
        if self.is_error {
            json.extend_from_slice(b",\"isError\":true");
        }
        json.extend_from_slice(tail.as_bytes());
        json.push(b'}');
        // Every piece is UTF-8: serde_json's output, ASCII, or `tail`, a `&str`.
        String::from_utf8(json).unwrap_or_default()
    }

    /// The `CallToolResult` object as a value (task results, which are stored).
    pub fn to_json(&self) -> Value {
        serde_json::from_str(&self.render("")).unwrap_or_default()
    }
}

#[cfg(test)]
mod render_tests {
    use super::*;

    fn rendered(result: &CallToolResult, tail: &str) -> Value {
        serde_json::from_str(&result.render(tail)).expect("rendered results are JSON")
    }

    #[test]
    fn a_structured_result_is_its_own_text_block() {
        let structured = json!({"quote": "say \"hi\"\n", "n": [1, 2], "emoji": "🦀"});
        let result = rendered(&CallToolResult::structured(structured.clone()), "");
        assert_eq!(result["structuredContent"], structured);
        let text = result["content"][0]["text"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), structured);
        assert!(!text.contains('\n'), "compact text: {text}");
        assert_eq!(result["content"][0]["type"], "text");
        assert!(result.get("isError").is_none());
    }

    #[test]
    fn errors_text_and_the_tail_are_written_as_given() {
        let tail = r#","resultType":"complete","_meta":{"k":"v"}"#;
        let result = rendered(&CallToolResult::error("no such table: x"), tail);
        assert_eq!(
            result,
            json!({
                "content": [{"type": "text", "text": "no such table: x"}],
                "isError": true,
                "resultType": "complete",
                "_meta": {"k": "v"},
            })
        );
        let both = CallToolResult {
            content: vec![json!({"type": "text", "text": "custom"})],
            structured: Some(Structured::Value(json!({"a": 1}))),
            is_error: false,
        };
        assert_eq!(
            rendered(&both, ""),
            json!({"content": [{"type": "text", "text": "custom"}], "structuredContent": {"a": 1}})
        );
        assert_eq!(both.to_json(), rendered(&both, ""));
    }

    #[test]
    fn typed_and_value_results_render_the_same_bytes() {
        #[derive(Serialize)]
        struct Typed<'a> {
            a: u32,
            b: &'a str,
        }
        let typed = CallToolResult::typed(&Typed {
            a: 1,
            b: "say \"hi\"",
        });
        let value = CallToolResult::structured(json!({"b": "say \"hi\"", "a": 1}));
        assert_eq!(typed.render(",\"x\":1"), value.render(",\"x\":1"));
    }

    #[test]
    fn typed_text_is_redacted_unless_proven_clean() {
        let redactor = Redactor::new(["known-secret-value".to_string()]);
        let mut clean = CallToolResult::typed(&json!({"name": "supervisor"}));
        clean.redact(&redactor);
        assert!(matches!(clean.structured, Some(Structured::Text(_))));
        for (given, expected) in [
            (
                json!({"task": "use known-secret-value"}),
                json!({"task": "use [REDACTED]"}),
            ),
            (json!({"api_key": "abc"}), json!({"api_key": "[REDACTED]"})),
            (
                json!({"task": "line\nBearer abcdefghijklmnop"}),
                json!({"task": "line\nBearer [REDACTED]"}),
            ),
        ] {
            let mut result = CallToolResult::typed(&given);
            result.redact(&redactor);
            assert_eq!(result.structured, Some(Structured::Value(expected)));
        }
    }
}
