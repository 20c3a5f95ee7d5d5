//! W3C Trace Context ids, shared by both layers: the `mcp` layer reads a `traceparent`
//! from a request's `_meta` (or, without one there, its `traceparent` header), the bot's
//! tracer starts its traces as that parent's child. Beside it, [`CallerTag`]: what the
//! caller says about itself (client name and version, its own ids for the call), which
//! the span of the work a request starts records, so `list_traces` finds that work by
//! the caller's ids.
//!
//! A `traceparent` is `00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`
//! (<https://www.w3.org/TR/trace-context/#traceparent-header>). Ids of all zeros are
//! invalid; so is any other shape. Parsing never panics and never guesses.

/// A parsed, valid `traceparent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits: the caller's span, which becomes our root's parent.
    pub parent_span_id: String,
    /// The flags' sampled bit (`01`): the caller records this trace.
    pub sampled: bool,
}

impl TraceParent {
    /// Parses a `traceparent` value; `None` for anything that is not a valid one.
    pub fn parse(text: &str) -> Option<TraceParent> {
        let mut parts = text.trim().split('-');
        let (version, trace_id, span_id, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        // Version 00 has exactly four fields; later versions may append more.
        if version.len() != 2 || !is_hex(version) || version == "ff" {
            return None;
        }
        if version == "00" && parts.next().is_some() {
            return None;
        }
        if !is_id(trace_id, 32) || !is_id(span_id, 16) || flags.len() != 2 || !is_hex(flags) {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(TraceParent {
            trace_id: trace_id.to_ascii_lowercase(),
            parent_span_id: span_id.to_ascii_lowercase(),
            sampled: flags & 1 == 1,
        })
    }

    /// The header value for a span of this trace (version 00, sampled).
    pub fn header(trace_id: &str, span_id: &str) -> String {
        format!("00-{trace_id}-{span_id}-01")
    }
}

/// The `_meta` members in which clients name a call by their own ids: Claude Code's
/// tool use, VS Code's conversation and request. Each is recorded under its own key.
pub const CALLER_ID_KEYS: [&str; 3] = [
    "claudecode/toolUseId",
    "vscode.conversationId",
    "vscode.requestId",
];

/// The span attributes of the client's name and version (from its `clientInfo`).
pub const CLIENT_NAME: &str = "mcp.client.name";
/// The span attribute of the client's version (its `clientInfo.version`).
pub const CLIENT_VERSION: &str = "mcp.client.version";

/// The longest value of a [`CallerTag`] kept, in characters: a caller's text of any
/// length is cut before it is held (the writer redacts it, as every attribute).
const CALLER_TEXT_CHARS: usize = 200;

/// What a caller says about itself on one request: its client's name and version and
/// its own ids for the call, as span attributes (`key`, value).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallerTag {
    attributes: Vec<(&'static str, String)>,
}

impl CallerTag {
    /// The tag of a request whose client is `name`/`version` and whose `_meta` gives
    /// `ids` (by their [`CALLER_ID_KEYS`] key); `None` when it says nothing.
    pub fn new<'a>(
        name: Option<&'a str>,
        version: Option<&'a str>,
        ids: impl IntoIterator<Item = (&'static str, &'a str)>,
    ) -> Option<CallerTag> {
        let cut = |text: &str| match text.char_indices().nth(CALLER_TEXT_CHARS) {
            Some((end, _)) => text[..end].to_string(),
            None => text.to_string(),
        };
        let attributes: Vec<(&'static str, String)> =
            [(CLIENT_NAME, name), (CLIENT_VERSION, version)]
                .into_iter()
                .filter_map(|(key, value)| Some((key, value?)))
                .chain(ids)
                .filter(|(_, value)| !value.is_empty())
                .map(|(key, value)| (key, cut(value)))
                .collect();
        (!attributes.is_empty()).then_some(CallerTag { attributes })
    }

    /// Its span attributes, in a fixed order (name, version, then the ids).
    pub fn attributes(&self) -> &[(&'static str, String)] {
        &self.attributes
    }

    /// The value of one of its attributes.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, value)| value.as_str())
    }
}

fn is_hex(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_id(text: &str, len: usize) -> bool {
    text.len() == len && is_hex(text) && text.bytes().any(|b| b != b'0')
}

/// A new trace id (32 hex digits, never all zeros) that sorts by when it was made: the
/// first 12 digits are the time in milliseconds and the rest are random (74 bits, a
/// version 7 uuid; the last 7 bytes random, as W3C trace context asks of a random trace
/// id). Stored traces are indexed by their id, so ids that grow with time add to the end
/// of that index instead of writing all over it (docs/performance.md §6).
pub fn new_trace_id() -> String {
    let mut text = [0; uuid::fmt::Simple::LENGTH];
    uuid::Uuid::now_v7()
        .simple()
        .encode_lower(&mut text)
        .to_owned()
}

/// A new random span id: 16 lowercase hex digits of 64 random bits, never all zeros
/// (zero is drawn again).
pub fn new_span_id() -> String {
    crate::text::hex(&new_span_bits().to_be_bytes())
}

/// The 64 random bits of a new span id ([`new_span_id`]), never zero.
pub fn new_span_bits() -> u64 {
    loop {
        let bits: u64 = rand::random();
        if bits != 0 {
            return bits;
        }
    }
}

/// Whether `text` has the shape of a trace id (for tool arguments).
pub fn is_trace_id(text: &str) -> bool {
    is_id(text, 32)
}

/// Whether `text` has the shape of a span id (for tool arguments).
pub fn is_span_id(text: &str) -> bool {
    is_id(text, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_tag_keeps_what_the_caller_said_cut_to_size() {
        assert_eq!(CallerTag::new(None, None, []), None);
        assert_eq!(
            CallerTag::new(Some(""), None, [("vscode.requestId", "")]),
            None
        );
        let long = "x".repeat(5000);
        let tag = CallerTag::new(
            Some("claude-code"),
            Some("2.1.337"),
            [
                ("claudecode/toolUseId", "toolu_01"),
                ("vscode.requestId", long.as_str()),
            ],
        )
        .unwrap();
        let attributes = tag.attributes();
        assert_eq!(attributes[0], (CLIENT_NAME, "claude-code".to_string()));
        assert_eq!(attributes[1], (CLIENT_VERSION, "2.1.337".to_string()));
        assert_eq!(
            attributes[2],
            ("claudecode/toolUseId", "toolu_01".to_string())
        );
        assert_eq!(attributes[3].1.chars().count(), CALLER_TEXT_CHARS);
    }

    #[test]
    fn parses_the_spec_example() {
        let parsed =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(parsed.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.parent_span_id, "00f067aa0ba902b7");
        assert!(parsed.sampled);
    }

    #[test]
    fn refuses_malformed_and_zero_ids() {
        for bad in [
            "",
            "00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-é€f92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn new_ids_have_the_right_shape() {
        assert!(is_trace_id(&new_trace_id()));
        assert!(is_span_id(&new_span_id()));
    }

    #[test]
    fn trace_ids_sort_by_when_they_were_made_and_never_repeat() {
        let earlier = new_trace_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = new_trace_id();
        assert!(earlier < later, "{earlier} then {later}");
        let same_moment: std::collections::HashSet<String> =
            (0..1_000).map(|_| new_trace_id()).collect();
        assert_eq!(same_moment.len(), 1_000, "the random part tells them apart");
    }
}
