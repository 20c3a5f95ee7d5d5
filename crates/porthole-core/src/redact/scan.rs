//! One question asked of every string that leaves the process: could anything in it
//! need redacting? Most strings cannot, and the answer has to be cheap.
//!
//! [`SecretScan`] answers it in two steps. First a search for words every secret shape
//! and every known value must contain (`token`, `pass`, `key`, `bearer`, `sk-`, a
//! value's first and last bytes…), in the text lowercased, with a SIMD multi-literal
//! searcher: several times faster than a regex's automaton, which reads one byte per
//! step. Only a text holding one of those words goes on to the second step, every
//! shape and value as one [`RegexSet`], whose answer is the final one. So the first
//! step may say "maybe" too often (`high` holds `gh`), never "no" wrongly: each of its
//! words is a part every match of some pattern contains (the test below holds that
//! for every shape, and the words are made from the same values as the set).

use aho_corasick::packed;
use regex::RegexSet;

use super::{SHAPE_PATTERNS, head, tail};

/// A word every match of some shape holds, lowercase. `pass` stands for `password`,
/// `passwd` and `passphrase`; `key` for every `…key` name and the JSON member `"key"`;
/// `token` for every `…token` name; `secret` for `client_secret` too. The last two are
/// the letters a case-insensitive regex also takes for `s` and `k` (the long s, the
/// Kelvin sign), which lowercasing ASCII does not turn into them: a text holding either
/// goes on to the regexes.
const SHAPE_WORDS: [&str; 17] = [
    "bearer",
    "sk-",
    "gh",
    "xox",
    "akia",
    "aiza",
    "-----begin",
    "://",
    "authorization",
    "pass",
    "secret",
    "key",
    "token",
    "credential",
    "cookie",
    "\u{17F}",
    "\u{212A}",
];

/// Bytes lowercased at a time, on the stack.
const CHUNK: usize = 4096;

/// Every secret shape and known value, for "could this text hold one?".
pub(super) struct SecretScan {
    /// The words, lowercase, with the longest word's length (chunks overlap by one
    /// less, so no word is missed across two). `None` where the searcher is not
    /// available (a CPU without the SIMD it needs, too many values) or a word is over
    /// half a chunk long: then every text goes to `set`.
    words: Option<(packed::Searcher, usize)>,
    set: RegexSet,
}

impl SecretScan {
    /// The scan for the shapes and `values` (already in every form to be found). `None`
    /// if the values are too many for one set.
    pub(super) fn new(values: &[String]) -> Option<SecretScan> {
        let shapes = SHAPE_PATTERNS
            .iter()
            .map(|(pattern, _)| pattern.to_string());
        // A value's first and last bytes: every piece `without_pieces` replaces (the
        // whole value too) holds one of them.
        let ends: Vec<&str> = values.iter().flat_map(|v| [head(v), tail(v)]).collect();
        let set = RegexSet::new(shapes.chain(ends.iter().map(|end| regex::escape(end)))).ok()?;
        let words: Vec<String> = SHAPE_WORDS
            .iter()
            .map(|word| word.to_string())
            .chain(ends.iter().map(|end| end.to_ascii_lowercase()))
            .collect();
        let longest = words.iter().map(String::len).max().unwrap_or(1);
        let words = (longest <= CHUNK / 2)
            .then(|| packed::Searcher::new(words.iter()))
            .flatten()
            .map(|searcher| (searcher, longest));
        Some(SecretScan { words, set })
    }

    /// Whether `text` may hold a secret shape or a known value: `false` is certain.
    pub(super) fn may_match(&self, text: &str) -> bool {
        match &self.words {
            Some((words, longest)) => {
                holds_a_word(words, *longest, text.as_bytes()) && self.set.is_match(text)
            }
            None => self.set.is_match(text),
        }
    }
}

/// Whether `text`, lowercased, holds one of `words` (each at most `longest` bytes).
fn holds_a_word(words: &packed::Searcher, longest: usize, text: &[u8]) -> bool {
    let mut lower = [0u8; CHUNK];
    let overlap = longest.saturating_sub(1);
    let mut start = 0;
    loop {
        let end = text.len().min(start + CHUNK);
        let chunk = &mut lower[..end - start];
        chunk.copy_from_slice(&text[start..end]);
        chunk.make_ascii_lowercase();
        if words.find(&*chunk).is_some() {
            return true;
        }
        if end == text.len() {
            return false;
        }
        start = end - overlap;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words let through every text the shapes match: texts made of pieces of the
    /// shapes (and of harmless words, and the two letters a case-insensitive regex reads
    /// as `s` and `k`), in any order and case, two hundred thousand of them.
    #[test]
    fn the_words_never_turn_away_a_text_the_shapes_match() {
        const PIECES: [&str; 42] = [
            "bearer ",
            "Bearer\t",
            "sk-",
            "gh",
            "p_",
            "xox",
            "b-",
            "AKIA",
            "AIza",
            "Sy",
            "-----BEGIN ",
            "PRIVATE KEY-----",
            "-----END ",
            "\n",
            "://",
            "u",
            ":",
            "@",
            "authorization",
            "Proxy-",
            "pass",
            "word",
            "PASS",
            "secret",
            "api_",
            "key",
            "KEY",
            "token",
            "Token",
            "credential",
            "cookie",
            "\"",
            "'",
            "=",
            " ",
            "A",
            "0123456789abcdefghij",
            "_",
            "-",
            "KLMNOPQRSTUVWXYZ",
            "\u{17F}",
            "\u{212A}",
        ];
        let scan = SecretScan::new(&[]).expect("the shapes compile");
        assert!(scan.words.is_some(), "this CPU has the searcher");
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut matched = 0;
        for _ in 0..200_000 {
            let pieces = 1 + next() % 10;
            let text: String = (0..pieces)
                .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                .collect();
            if scan.set.is_match(&text) {
                matched += 1;
                assert!(scan.may_match(&text), "turned away {text:?}");
            }
        }
        assert!(
            matched > 10_000,
            "the texts exercise the shapes ({matched} matched)"
        );
    }

    /// A case-insensitive regex reads the long s as `s` and the Kelvin sign as `k`;
    /// lowercasing ASCII does not, so the words hold those letters themselves.
    #[test]
    fn the_letters_a_regex_folds_into_s_and_k_go_on_to_the_regexes() {
        let scan = SecretScan::new(&[]).expect("the shapes compile");
        for text in [
            "pa\u{17F}\u{17F}word=hunter22",
            "db_\u{17F}ecret: abc",
            "api_\u{212A}ey=abc",
            "to\u{212A}en=abc",
            "coo\u{212A}ie: abc",
            "{\"\u{212A}ey\": \"abc\"}",
        ] {
            assert!(scan.set.is_match(text), "the shapes match {text:?}");
            assert!(scan.may_match(text), "turned away {text:?}");
        }
    }

    #[test]
    fn a_value_is_found_across_chunks_and_in_any_case_of_the_text() {
        let value = "Sup3r-Secret-Value-0042".to_string();
        let scan = SecretScan::new(std::slice::from_ref(&value)).unwrap();
        for at in [0, CHUNK - 12, CHUNK - 1, CHUNK, 3 * CHUNK - 5] {
            let mut text = "~".repeat(at);
            text.push_str(&value);
            text.push_str(&"~".repeat(50));
            assert!(scan.may_match(&text), "value at {at}");
        }
        assert!(!scan.may_match(&"plain words, nothing else ".repeat(400)));
        assert!(!scan.may_match(""));
    }
}
