//! Small text helpers shared by both layers: "did you mean" suggestions, keeping
//! messages short, spelling out an error's causes, bytes as hex, and times as people
//! write them.

/// Levenshtein distance between two strings, by characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(row[j + 1])
            };
            previous = current;
        }
    }
    row[b.len()]
}

/// The longest `wanted` [`closest`] compares: names are far shorter, and an edit
/// distance costs the product of the two lengths.
const LONGEST_NAME: usize = 256;

/// Up to `max` of `candidates` close to `wanted` (containing it, contained in it, or a
/// few edits away), closest first; none for a `wanted` longer than any name.
pub fn closest<'a>(
    candidates: impl IntoIterator<Item = &'a str>,
    wanted: &str,
    max: usize,
) -> Vec<String> {
    if wanted.len() > LONGEST_NAME {
        return Vec::new();
    }
    let wanted = wanted.to_ascii_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|candidate| {
            let lower = candidate.to_ascii_lowercase();
            let distance = if lower.contains(&wanted) || wanted.contains(&lower) {
                0
            } else {
                edit_distance(&wanted, &lower)
            };
            (distance, candidate)
        })
        .filter(|(d, _)| *d <= 3.max(wanted.len() / 3))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(max)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// `text` cut to about `max` characters by dropping its middle: both ends of an error
/// message say the most (what was wrong, and the rule it broke), and a message that
/// echoes a 100 KB argument helps nobody.
pub fn elide_middle(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    let keep = max / 2;
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(count - keep).collect();
    format!("{head}…[{} characters]…{tail}", count - 2 * keep)
}

/// `text`'s first `max_bytes` at most, cut at a character's boundary: a borrowed
/// prefix, for a log field that must stay short without costing an allocation.
pub fn head(text: &str, max_bytes: usize) -> &str {
    let mut end = max_bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` with its control characters (newlines, NUL, escape sequences…) written as
/// escapes, so a message that echoes input stays one log line and cannot forge others.
pub fn one_line(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// An error followed by its causes, `outer: inner: innermost`: an HTTP client's own
/// message is often just "error decoding response body", and the cause says why.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `bytes` as lowercase hex, two digits a byte, written from a table into a string of
/// its exact size (ids made on every request use it).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    text
}

/// A time written in ISO 8601 as people and programs write it: RFC 3339
/// (`2026-01-31T12:00:00Z`, `…+01:00`), an offset without its colon (`…+0100`), a date
/// and time without an offset (`2026-01-31T12:00:00`, Python's `isoformat()`; a space
/// for the `T` too), read as UTC, or a date alone (midnight UTC).
pub fn parse_iso8601(text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
    let text = text.trim();
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Some(time.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f%z"] {
        if let Ok(time) = DateTime::parse_from_str(text, format) {
            return Some(time.with_timezone(&Utc));
        }
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(time) = NaiveDateTime::parse_from_str(text, format) {
            return Some(time.and_utc());
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|date| date.and_hms_opt(0, 0, 0))
        .map(|time| time.and_utc())
}

#[cfg(test)]
mod tests {
    #[test]
    fn iso8601_times_as_people_write_them() {
        let utc = |text: &str| super::parse_iso8601(text).map(|t| t.to_rfc3339());
        let noon = Some("2026-01-31T12:00:00+00:00".to_string());
        for text in [
            "2026-01-31T12:00:00Z",
            "2026-01-31T13:00:00+01:00",
            "2026-01-31T13:00:00+0100",
            "2026-01-31T12:00:00",
            "2026-01-31 12:00:00",
            "2026-01-31T12:00",
            " 2026-01-31T12:00:00.000 ",
        ] {
            assert_eq!(utc(text), noon, "{text}");
        }
        assert_eq!(
            utc("2026-01-31"),
            Some("2026-01-31T00:00:00+00:00".to_string())
        );
        for bad in ["yesterday", "2026-13-01", "12:00", ""] {
            assert_eq!(utc(bad), None, "{bad}");
        }
    }

    use super::*;

    #[test]
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn suggests_near_misses_first() {
        assert_eq!(edit_distance("helth", "health"), 1);
        let names = ["health", "server_log", "web_log", "db_query"];
        assert_eq!(closest(names, "helth", 3), vec!["health"]);
        assert_eq!(closest(names, "log", 3), vec!["server_log", "web_log"]);
        assert!(closest(names, "zzzzzzzzzz", 3).is_empty());
        let huge = format!("server_log{}", "x".repeat(4_000_000));
        assert!(closest(names, &huge, 3).is_empty(), "no name is that long");
        assert_eq!(head("ééé", 3), "é", "cut at a character's boundary");
        assert_eq!(head("abc", 10), "abc");
    }

    #[test]
    fn one_line_escapes_control_characters() {
        assert_eq!(one_line("plain `x`"), "plain `x`");
        assert_eq!(
            one_line("unknown field `a\nb\0`"),
            "unknown field `a\\nb\\u{0}`"
        );
        assert!(
            !one_line("\r\t\u{1b}[31m\u{85}")
                .chars()
                .any(char::is_control)
        );
    }

    #[test]
    fn elide_middle_keeps_both_ends() {
        assert_eq!(elide_middle("short", 10), "short");
        let long = format!("\"{}\" is longer than 100000 characters", "é".repeat(5000));
        let short = elide_middle(&long, 80);
        assert!(short.starts_with("\"éé"), "{short}");
        assert!(
            short.ends_with("is longer than 100000 characters"),
            "{short}"
        );
        let dropped = format!("[{} characters]", long.chars().count() - 80);
        assert!(short.contains(&dropped), "{short}");
    }
}
