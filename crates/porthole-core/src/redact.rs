//! Secret redaction for everything that leaves the process: `/mcp` results, and the
//! web surface's `/api` responses and `/ws` frames.
//!
//! Three nets, applied to every tool result, resource read and web response:
//! 1. **by key** — a JSON member whose name says it holds a secret (`password`,
//!    `api_key`, `client_secret`, `authorization`, `…_token`) has its value replaced;
//! 2. **by known value** — the actual values of configured secrets (bearer token, API
//!    keys, MCP server headers) are replaced wherever they appear in any string;
//! 3. **by shape** — strings that look like bearer tokens, provider keys, private keys,
//!    or `password=…` pairs are replaced even when nobody told us about them.

mod error_body;
mod scan;
mod stream;

pub use error_body::{redact_error, redact_error_body};
pub use stream::RedactedStream;

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use regex::Regex;

use scan::SecretScan;
use serde_json::Value;

/// What a secret is replaced with (kept inside shapes: `Bearer [REDACTED]`).
pub const REDACTED: &str = "[REDACTED]";

/// Values shorter than this are not redacted by value (too many false hits).
const MIN_SECRET_LEN: usize = 8;

/// The shortest text any net can match: `://u:p@` (a URL's credentials, 7 bytes) is
/// the shortest shape, and known values are at least [`MIN_SECRET_LEN`] long.
const SHORTEST_MATCH: usize = 7;

/// The secret shapes and what replaces each. Word boundaries are ASCII ones: a Unicode
/// `\b` makes the regex engine fall back to a slow path on any non-ASCII text (an emoji
/// in a tool result is enough), and every secret shape here is ASCII anyway.
const SHAPE_PATTERNS: [(&str, &str); 12] = [
    (
        r"(?i)(?-u:\b)bearer\s+[A-Za-z0-9._~+/=-]{8,}",
        "Bearer [REDACTED]",
    ),
    (r"(?-u:\b)sk-[A-Za-z0-9_-]{16,}", REDACTED),
    (r"(?-u:\b)gh[pousr]_[A-Za-z0-9]{20,}", REDACTED),
    (r"(?-u:\b)xox[abpr]-[A-Za-z0-9-]{10,}", REDACTED),
    (r"(?-u:\b)AKIA[0-9A-Z]{16}(?-u:\b)", REDACTED),
    (r"(?-u:\b)AIza[0-9A-Za-z_-]{35}(?-u:\b)", REDACTED),
    (
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        REDACTED,
    ),
    (r"://[^/\s:@]+:[^/\s@]+@", "://[REDACTED]@"),
    // `Authorization: Basic …` (or Digest, or a bare credential) in quoted headers.
    (
        r#"(?i)(?-u:\b)((?:proxy-)?authorization["']?\s*[=:]\s*["']?)(?:[A-Za-z]+\s+)?[^\s"',;&]+"#,
        "${1}[REDACTED]",
    ),
    // `NAME = value` where the name ends in a secret word: `aws_secret_access_key = …`,
    // `DB_PASSWORD: …`, `"client_secret": "…"`.
    (
        r#"(?i)(?-u:\b)([A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|api[_-]?key|access[_-]?key|private[_-]?key|secret[_-]?key|auth[_-]?key|access[_-]?token|refresh[_-]?token|auth[_-]?token|client[_-]?secret|credentials?|cookie))(["']?\s*[=:]\s*["']?)[^\s"',;&]+"#,
        "${1}${2}[REDACTED]",
    ),
    // `token = …`, `"github_token": "…"`: a name that is, or ends in, `token` (the
    // by-key net's rule; `max_tokens: 5` is not one).
    (
        r#"(?i)(?-u:\b)((?:[A-Za-z0-9.-]*[_.-])?token)(["']?\s*[=:]\s*["']?)[^\s"',;&]+"#,
        "${1}${2}[REDACTED]",
    ),
    // `key`, a name the design documents list, alone as a member of JSON text
    // (`"key": "…"`); prose ("the key: …") and SQL (`WHERE key = 'old'`, the memories
    // table's column) are left alone.
    (
        r#"(?i)(["']key["']\s*:\s*["']?)[^\s"',;&]+"#,
        "${1}[REDACTED]",
    ),
];

/// Every shape at once, for a redactor that knows no secret values.
static ANY_SHAPE: LazyLock<Arc<SecretScan>> =
    LazyLock::new(|| Arc::new(SecretScan::new(&[]).expect("static patterns")));

/// The first [`MIN_SECRET_LEN`] bytes of a secret (up to a character boundary).
fn head(secret: &str) -> &str {
    let mut end = MIN_SECRET_LEN.min(secret.len());
    while !secret.is_char_boundary(end) {
        end += 1;
    }
    &secret[..end]
}

/// The last [`MIN_SECRET_LEN`] bytes of a secret (from a character boundary).
fn tail(secret: &str) -> &str {
    let mut start = secret.len().saturating_sub(MIN_SECRET_LEN);
    while !secret.is_char_boundary(start) {
        start -= 1;
    }
    &secret[start..]
}

/// Where a cut leaves its mark: the end (or start) of a string, a quote that closes it
/// inside JSON text, or an ellipsis.
const CUT_MARKS: [&str; 4] = ["\"", "\\", "…", "..."];

fn cut_after(rest: &str) -> bool {
    rest.is_empty() || CUT_MARKS.iter().any(|mark| rest.starts_with(mark))
}

fn cut_before(before: &str) -> bool {
    before.is_empty() || CUT_MARKS.iter().any(|mark| before.ends_with(mark))
}

/// `text` with the pieces of `secret` replaced that a cut could have left: a run of at
/// least [`MIN_SECRET_LEN`] bytes that begins like the secret (as far as it agrees
/// with it) and stops where a cut would ([`cut_after`]), or that ends like it and
/// starts where a cut would. Texts are cut before they are redacted (a title is a
/// message's first 60 characters, an error keeps the end of stderr, a long value loses
/// its middle), so a secret cut in two must not come back out in halves. Whole
/// occurrences are replaced before this runs.
fn without_pieces<'a>(text: Cow<'a, str>, secret: &str) -> Cow<'a, str> {
    let (head, tail) = (head(secret), tail(secret));
    if !text.contains(head) && !text.contains(tail) {
        return text;
    }
    // Pieces that begin like the secret, left to right.
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while let Some(at) = rest.find(head) {
        let agree = agreeing(rest[at..].bytes(), secret.bytes(), |end| {
            rest.is_char_boundary(at + end)
        });
        let cut = cut_after(&rest[at + agree..]);
        out.push_str(&rest[..at]);
        out.push_str(if cut { REDACTED } else { &rest[at..at + agree] });
        rest = &rest[at + agree..];
    }
    out.push_str(rest);
    // Pieces that end like it, right to left.
    let mut after = Vec::new();
    let mut rest: &str = &out;
    while let Some(at) = rest.rfind(tail) {
        let end = at + tail.len();
        let agree = agreeing(rest[..end].bytes().rev(), secret.bytes().rev(), |len| {
            rest.is_char_boundary(end - len)
        });
        let cut = cut_before(&rest[..end - agree]);
        after.push((
            if cut {
                REDACTED
            } else {
                &rest[end - agree..end]
            },
            &rest[end..],
        ));
        rest = &rest[..end - agree];
    }
    let mut clean = rest.to_string();
    for (piece, following) in after.iter().rev() {
        clean.push_str(piece);
        clean.push_str(following);
    }
    Cow::Owned(clean)
}

/// How many leading items of `a` and `b` agree, shortened until `boundary` holds.
fn agreeing(
    a: impl Iterator<Item = u8>,
    b: impl Iterator<Item = u8>,
    boundary: impl Fn(usize) -> bool,
) -> usize {
    let mut len = a.zip(b).take_while(|(x, y)| x == y).count();
    while !boundary(len) {
        len -= 1;
    }
    len
}

static SHAPES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    SHAPE_PATTERNS
        .into_iter()
        .map(|(pattern, replacement)| (Regex::new(pattern).expect("static pattern"), replacement))
        .collect()
});

/// Whether a JSON member name says its value is a secret. Names are compared with
/// case and punctuation ignored (`API-Key` is `apikey`).
pub fn is_secret_key(key: &str) -> bool {
    // Most keys are short: normalise on the stack, since this runs for every member
    // of every result.
    let mut buffer = [0u8; 64];
    let mut len = 0;
    for byte in key.bytes().filter(u8::is_ascii_alphanumeric) {
        if len == buffer.len() {
            // No secret-naming suffix needs more than the last 64 characters, and no
            // exact name is that long.
            buffer.copy_within(1.., 0);
            len -= 1;
        }
        buffer[len] = byte.to_ascii_lowercase();
        len += 1;
    }
    // Compared as bytes: every byte kept is ASCII, and no text check is needed.
    let normalized = &buffer[..len];
    // `key` alone is one of the names the design documents list; as a suffix it would
    // catch harmless names (`primary_key`, `sort_key`), so only whole names ending in a
    // key kind that is always secret count.
    const EXACT: [&[u8]; 5] = [
        b"authorization",
        b"cookie",
        b"setcookie",
        b"proxyauthorization",
        b"key",
    ];
    const SUFFIXES: [&[u8]; 18] = [
        b"password",
        b"passwd",
        b"passphrase",
        b"secret",
        b"apikey",
        b"authkey",
        b"accesskey",
        b"privatekey",
        b"secretkey",
        b"signingkey",
        b"encryptionkey",
        b"sessionkey",
        b"masterkey",
        b"hmackey",
        b"sshkey",
        b"token",
        b"credentials",
        b"credential",
    ];
    // Token *counts* and protocol tokens are not secrets.
    let harmless = || {
        normalized.ends_with(b"tokens")
            || matches!(normalized, b"maxtoken" | b"progresstoken" | b"nexttoken")
    };
    // The last bytes compared first: most names end unlike every suffix, and a byte
    // compare is cheaper than a slice compare (this runs for every member of a result).
    let ends_with =
        |suffix: &&[u8]| normalized.last() == suffix.last() && normalized.ends_with(suffix);
    EXACT.contains(&normalized) || (SUFFIXES.iter().any(ends_with) && !harmless())
}

/// Applies the three nets (by key, by known value, by shape) to JSON values and text.
/// The default one knows no values, so only the key and shape nets catch anything.
#[derive(Clone)]
pub struct Redactor {
    secret_values: Vec<String>,
    /// Every shape and every one of `secret_values` at once: one scan tells whether a
    /// string needs any replacing (most strings do not), instead of one scan per shape
    /// and one search per value. `None` if the values are too many for one set (then
    /// every string takes the slow path, which is correct, only slower).
    any_secret: Option<Arc<SecretScan>>,
}

/// Says how many values it knows, never which: a redactor printed in a log or an error
/// must not be where the secrets leak.
impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secret_values", &self.secret_values.len())
            .finish_non_exhaustive()
    }
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor {
            secret_values: Vec::new(),
            any_secret: Some(ANY_SHAPE.clone()),
        }
    }
}

impl Redactor {
    /// A redactor that also replaces these exact values (short ones are ignored).
    pub fn new(secret_values: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = secret_values
            .into_iter()
            .filter(|v| v.len() >= MIN_SECRET_LEN)
            // Also as it appears inside JSON text (a quote or backslash escaped), since
            // a result's text is often its structured content written out.
            .flat_map(|v| {
                let escaped = serde_json::to_string(&v).unwrap_or_default();
                let escaped = escaped[1..escaped.len() - 1].to_string();
                let mut forms = vec![v];
                if escaped != forms[0] {
                    forms.push(escaped);
                }
                forms
            })
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Redactor {
            any_secret: SecretScan::new(&values).map(Arc::new),
            secret_values: values,
        }
    }

    /// Redacts a JSON value in place.
    pub fn redact(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Cow::Owned(clean) = self.redact_text(s) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact(v)),
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    if is_secret_key(key) && !v.is_null() && !matches!(v, Value::Bool(_)) {
                        *v = Value::String(REDACTED.into());
                    } else {
                        self.redact(v);
                    }
                }
            }
            _ => {}
        }
    }

    /// Whether JSON text, compact as serde_json writes it, certainly holds nothing
    /// [`redact`](Self::redact) would replace, judged on the text without parsing it:
    /// no escape sequence (so every string stands in the text exactly as it reads, with
    /// a quote on either side), no member named like a secret, and no known value or
    /// secret shape anywhere in the whole text. A match that spans two strings only
    /// makes this say `false`, which means "not proven": the caller then redacts the
    /// parsed value as usual.
    pub fn is_clean_json(&self, json: &str) -> bool {
        let Some(any_secret) = &self.any_secret else {
            return false;
        };
        if json.contains('\\') || any_secret.may_match(json) {
            return false;
        }
        // A member name is a string followed by `:`; without escapes a string ends at
        // the next quote. Quotes are found byte by byte (a quote byte is never part of a
        // longer UTF-8 character), which is quicker than a search for a `char`.
        let quote = |from: usize| json.as_bytes()[from..].iter().position(|b| *b == b'"');
        let mut at = 0;
        while let Some(open) = quote(at) {
            let start = at + open + 1;
            let Some(length) = quote(start) else {
                return false;
            };
            let end = start + length;
            let after = json[end + 1..].trim_start();
            if after.starts_with(':') && is_secret_key(&json[start..end]) {
                return false;
            }
            at = end + 1;
        }
        true
    }

    /// Redacts secrets inside free text.
    pub fn redact_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        // Most strings in a result are short words (a status, an emoji); none of them
        // can hold a secret, and skipping the scan saves a regex search each.
        let clean = |scan: &Arc<SecretScan>| !scan.may_match(text);
        if text.len() < SHORTEST_MATCH || self.any_secret.as_ref().is_some_and(clean) {
            return Cow::Borrowed(text);
        }
        let mut out = Cow::Borrowed(text);
        for secret in &self.secret_values {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        for secret in &self.secret_values {
            out = without_pieces(out, secret);
        }
        for (pattern, replacement) in SHAPES.iter() {
            if pattern.is_match(&out) {
                out = Cow::Owned(pattern.replace_all(&out, *replacement).into_owned());
            }
        }
        out
    }
}

/// The URL with the password (in the user part or a `password=` parameter) replaced.
pub fn redact_url(url: &str) -> String {
    let Some(password) = url_password(url) else {
        return url.to_string();
    };
    url.replacen(&format!(":{password}@"), ":[REDACTED]@", 1)
        .replace(&format!("password={password}"), "password=[REDACTED]")
}

/// The password a PostgreSQL URL carries, if any (as written, percent-encoding kept).
pub fn url_password(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    // The user part ends at the last `@`: a password written without percent-encoding
    // may hold `/`, `?` or `#`, which would otherwise be taken for the path's start
    // (and the password shown). An `@` further on only widens what is hidden.
    if let Some((user_info, _)) = rest.rsplit_once('@')
        && let Some((_, password)) = user_info.split_once(':')
        && !password.is_empty()
    {
        return Some(password.to_string());
    }
    let query = rest.split_once('?')?.1;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("password="))
        .filter(|p| !p.is_empty())
        .map(str::to_string)
}

/// `text` with the URL's password (as written and percent-decoded) removed.
pub fn scrub_url_password(url: &str, text: &str) -> String {
    match url_password(url) {
        Some(password) => {
            let decoded = percent_decode(&password);
            text.replace(&password, "[REDACTED]")
                .replace(&decoded, "[REDACTED]")
        }
        None => text.to_string(),
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_keys_ignore_case_punctuation_and_length() {
        for key in [
            "API-Key",
            "client_secret",
            "Set-Cookie",
            "db.password",
            "GITHUB_TOKEN",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        let long = format!("{}_refresh_token", "x".repeat(200));
        assert!(is_secret_key(&long));
        for key in [
            "max_tokens",
            "progressToken",
            "name",
            "tokens",
            &"y".repeat(200),
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn clean_json_is_proven_only_when_no_net_would_replace_anything() {
        let redactor = Redactor::new(["sk-live-value-0123".to_string()]);
        let clean = r#"{"agents":[{"id":"supervisor","task":null}],"count":1}"#;
        assert!(redactor.is_clean_json(clean));
        for not_proven in [
            r#"{"task":"uses sk-live-value-0123"}"#,
            r#"{"task":"Bearer abcdefghijklmnop"}"#,
            r#"{"db_password":"x"}"#,
            r#"{"nested":{"Api-Key" : 1}}"#,
            r#"{"task":"a \"quoted\" word"}"#,
            r#"{"task":"unterminated}"#,
        ] {
            assert!(!redactor.is_clean_json(not_proven), "{not_proven}");
        }
        // Anything not proven clean is redacted as a value, with the same result.
        let mut value: Value = serde_json::from_str(clean).unwrap();
        redactor.redact(&mut value);
        assert_eq!(value, serde_json::from_str::<Value>(clean).unwrap());
    }

    #[test]
    fn printing_a_redactor_shows_no_secret() {
        let redactor = Redactor::new(["hunter2-but-longer".to_string()]);
        let printed = format!("{redactor:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("secret_values: 1"), "{printed}");
    }

    #[test]
    fn known_values_are_matched_as_literal_text() {
        let redactor = Redactor::new(["p@ss.w*rd+(1)|x".to_string()]);
        assert_eq!(
            redactor.redact_text("login with p@ss.w*rd+(1)|x now"),
            "login with [REDACTED] now"
        );
        // What the value would match as a regular expression (`.` any character, `|`
        // an alternative) is not the value.
        for near in ["p@ssXrd1", "just an x"] {
            assert_eq!(redactor.redact_text(near), near, "not the secret: {near}");
        }
    }

    #[test]
    fn pieces_a_cut_leaves_of_a_known_value_are_redacted() {
        let secret = "envpw-planted-dddddddddd";
        let redactor = Redactor::new([secret.to_string()]);
        let title: String = format!("my key is {secret}").chars().take(28).collect();
        assert_eq!(redactor.redact_text(&title), "my key is [REDACTED]");
        let tail = &secret[10..];
        assert_eq!(
            redactor.redact_text(&format!("…{tail} was refused")),
            "…[REDACTED] was refused"
        );
        // Inside JSON text, a cut string ends at its closing quote.
        assert_eq!(
            redactor.redact_text(&format!("{{\"title\":\"{title}\"}}")),
            "{\"title\":\"my key is [REDACTED]\"}"
        );
        // The same bytes that no cut left (an id that happens to share them) stay.
        let id = format!("call `{}` failed", &secret[..12]);
        assert_eq!(redactor.redact_text(&id), id);
        let halves = format!("{}…[9 characters]…{}", &secret[..9], &secret[15..]);
        assert_eq!(
            redactor.redact_text(&halves),
            "[REDACTED]…[9 characters]…[REDACTED]"
        );
        // Fewer than MIN_SECRET_LEN bytes of it say nothing, and stay.
        assert_eq!(
            redactor.redact_text("envpw-p and dddddd"),
            "envpw-p and dddddd"
        );
        // A non-ASCII value is cut on character boundaries.
        let redactor = Redactor::new(["clé-secrète-ÿÿÿ-über".to_string()]);
        assert_eq!(redactor.redact_text("x clé-secrè"), "x [REDACTED]");
        assert_eq!(redactor.redact_text("ète-ÿÿÿ-über y"), "[REDACTED] y");
    }

    /// The design's `key` and `token` are redacted in JSON held as text (a `db_query`
    /// row built with `json_object`, a stored memory) as in a JSON object.
    #[test]
    fn key_and_token_members_of_json_text_are_redacted() {
        let redactor = Redactor::default();
        for (text, leaked) in [
            (
                r#"{"token":"abcdef1234567890abcd"}"#,
                "abcdef1234567890abcd",
            ),
            (r#"{"key": "hunter2-value"}"#, "hunter2-value"),
            (r#"{"github_token":"abc123xyz"}"#, "abc123xyz"),
            ("token=abc123xyz&x=1", "abc123xyz"),
            (r#"{"session_token":"tok-9f8e7d"}"#, "tok-9f8e7d"),
            (r#"{"credentials":"cred-5a4b3c"}"#, "cred-5a4b3c"),
            ("Cookie: sessionid=abc123def", "abc123def"),
        ] {
            let redacted = redactor.redact_text(text);
            assert!(!redacted.contains(leaked), "{text} -> {redacted}");
        }
        for kept in [
            r#"{"max_tokens": 100, "input_tokens": 5}"#,
            "the key: press enter",
            r#"{"primary_key": "id", "monkey": "banana"}"#,
            "DELETE FROM memories WHERE key = 'old'",
        ] {
            assert_eq!(redactor.redact_text(kept), kept);
        }
    }

    #[test]
    fn known_values_are_found_json_escaped() {
        let secret = r#"pa"ss\word-123"#;
        let redactor = Redactor::new([secret.to_string()]);
        let mut result = json!({"text": json!({"password_hint": secret}).to_string()});
        redactor.redact(&mut result);
        assert!(!result.to_string().contains("word-123"), "{result}");
    }

    #[test]
    fn redacts_by_key_value_and_shape() {
        let redactor = Redactor::new(["my-very-secret-value".to_string(), "short".to_string()]);
        let mut v = json!({
            "password": "hunter2",
            "nested": {"client_secret": "abc", "API-Key": "k", "max_tokens": 100, "tokens": 5},
            "headers": {"Authorization": "Bearer abcdefghijkl"},
            "log": "connecting with my-very-secret-value to db",
            "url": "postgres://admin:pa55word@db:5432/x",
            "text": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload and sk-ant-api03-abcdefghijklmnopqrstu",
            "env": "OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234 password=letmein",
            "short": "short is fine",
        });
        redactor.redact(&mut v);
        let text = v.to_string();
        for leaked in [
            "hunter2",
            "pa55word",
            "eyJhbGci",
            "sk-ant",
            "sk-proj",
            "letmein",
            "my-very-secret-value",
            "abcdefghijkl",
        ] {
            assert!(!text.contains(leaked), "{leaked} leaked: {text}");
        }
        assert_eq!(v["nested"]["max_tokens"], 100);
        assert_eq!(v["nested"]["tokens"], 5);
        assert_eq!(v["short"], "short is fine");
        assert_eq!(v["nested"]["client_secret"], REDACTED);
    }

    #[test]
    fn every_key_the_design_lists_is_redacted_at_any_depth() {
        let redactor = Redactor::default();
        let keys = [
            "password",
            "secret",
            "key",
            "token",
            "api_key",
            "private_key",
            "auth_key",
            "access_token",
            "refresh_token",
            "client_secret",
            "aws_secret_access_key",
            "passphrase",
            "signing_key",
            "ENCRYPTION_KEY",
        ];
        for key in keys {
            let mut v = json!({"a": [{"b": {key: "value-that-must-go"}}]});
            redactor.redact(&mut v);
            assert_eq!(v["a"][0]["b"][key], REDACTED, "{key}");
        }
        for harmless in ["primary_key", "sort_key", "keys", "monkey"] {
            assert!(!is_secret_key(harmless), "{harmless}");
        }
    }

    #[test]
    fn basic_auth_and_secret_assignments_in_text_are_redacted() {
        let redactor = Redactor::default();
        for (text, leaked) in [
            ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
            ("authorization=Digest abcdef123456", "abcdef123456"),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG",
                "wJalrXUtnFEMI",
            ),
            ("export DB_PASSWORD=hunter22", "hunter22"),
            ("{\"passphrase\": \"correct horse\"}", "correct"),
        ] {
            let clean = redactor.redact_text(text);
            assert!(!clean.contains(leaked), "{text} -> {clean}");
        }
        assert_eq!(
            redactor.redact_text("basic understanding of keys"),
            "basic understanding of keys"
        );
    }

    #[test]
    fn the_shortest_secrets_are_still_caught() {
        let redactor = Redactor::new(["12345678".to_string()]);
        assert_eq!("://u:p@".len(), SHORTEST_MATCH);
        for text in ["://u:p@", "secret=x", "12345678"] {
            assert!(
                redactor.redact_text(text).contains(REDACTED),
                "{text} was not redacted"
            );
        }
    }

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            redact_url("postgres://bot:s3cret@db:5432/porthole"),
            "postgres://bot:[REDACTED]@db:5432/porthole"
        );
        assert_eq!(
            redact_url("postgresql://db/porthole?user=bot&password=s3cret"),
            "postgresql://db/porthole?user=bot&password=[REDACTED]"
        );
        assert_eq!(
            redact_url("postgres://bot@db/porthole"),
            "postgres://bot@db/porthole"
        );
        // Written without percent-encoding, a password may hold what starts a path.
        assert_eq!(
            redact_url("postgres://u:pa/ss?XYZ98765@h:5432/db"),
            "postgres://u:[REDACTED]@h:5432/db"
        );
    }
}
