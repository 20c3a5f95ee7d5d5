//! Redaction of text that arrives in pieces: the model's answer streamed token by token
//! to the page (`/ws`) and to an `/mcp` client (progress notifications).
//!
//! Redacting each piece on its own lets a secret through when it arrives in pieces
//! shorter than any net can recognise (`sk-ab`, `cdef…`). So the stream holds text back
//! and lets it go only whole words at a time, and only where a cut cannot split
//! something a net would replace: the words let go, redacted on their own, must read as
//! they do in the redaction of everything held. The last [`HELD_WORDS`] words are always
//! held, so that a match whose start was let go cannot be completed by words still to
//! come, and a private key block is held from its first line until its last arrives.

use super::Redactor;

/// Words always held back. The longest shapes span four: `Authorization = Basic
/// dXNlcg==`, `DB_PASSWORD = hunter2`; the last word held may be incomplete.
const HELD_WORDS: usize = 5;

/// Where a private key block opens, and how its closing line starts and ends (the one
/// shape that spans lines; a block is held until its closing line is whole).
const KEY_BLOCK_OPENS: &str = "-----BEGIN ";
const KEY_BLOCK_CLOSES: &str = "-----END ";
const KEY_LINE_ENDS: &str = "KEY-----";

/// A stream of text, let out redacted.
pub struct RedactedStream<'r> {
    redactor: &'r Redactor,
    held: String,
}

impl<'r> RedactedStream<'r> {
    /// An empty stream that redacts with `redactor`.
    pub fn new(redactor: &'r Redactor) -> Self {
        RedactedStream {
            redactor,
            held: String::new(),
        }
    }

    /// Takes the next piece; returns the redacted text it lets go, if any.
    pub fn push(&mut self, piece: &str) -> Option<String> {
        self.held.push_str(piece);
        let cut = self.safe_cut()?;
        let rest = self.held.split_off(cut);
        let out = std::mem::replace(&mut self.held, rest);
        Some(self.redactor.redact_text(&out).into_owned())
    }

    /// Lets go of everything held, redacted: the text is over (the answer ended, or a
    /// tool call came between two parts of it).
    pub fn flush(&mut self) -> Option<String> {
        let held = std::mem::take(&mut self.held);
        (!held.is_empty()).then(|| self.redactor.redact_text(&held).into_owned())
    }

    /// The end of what may be let go: before the last [`HELD_WORDS`] words and any
    /// private key block not yet closed, at a point no replacement spans.
    fn safe_cut(&self) -> Option<usize> {
        let held = self.held.as_str();
        let mut cut = word_starts(held).rev().nth(HELD_WORDS - 1)?;
        if let Some(open) = held.rfind(KEY_BLOCK_OPENS) {
            let block = &held[open..];
            let closed = block
                .find(KEY_BLOCK_CLOSES)
                .is_some_and(|close| block[close..].contains(KEY_LINE_ENDS));
            if !closed {
                cut = cut.min(open);
            }
        }
        if cut == 0 {
            return None;
        }
        let (before, after) = held.split_at(cut);
        let whole = self.redactor.redact_text(held);
        let apart = self.redactor.redact_text(before) + self.redactor.redact_text(after);
        (whole == apart).then_some(cut)
    }
}

/// Where each word (a run of anything but whitespace) starts, in order.
fn word_starts(text: &str) -> impl DoubleEndedIterator<Item = usize> + '_ {
    text.char_indices()
        .scan(true, |after_space, (at, c)| {
            let starts = *after_space && !c.is_whitespace();
            *after_space = c.is_whitespace();
            Some(starts.then_some(at))
        })
        .flatten()
        .collect::<Vec<_>>()
        .into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::REDACTED;

    /// Streams `text` in pieces of `size` characters and returns what was let out.
    fn streamed(redactor: &Redactor, text: &str, size: usize) -> String {
        let chars: Vec<char> = text.chars().collect();
        let mut stream = RedactedStream::new(redactor);
        let mut out = String::new();
        for piece in chars.chunks(size) {
            out.extend(stream.push(&piece.iter().collect::<String>()));
        }
        out.extend(stream.flush());
        out
    }

    #[test]
    fn a_known_secret_in_pieces_of_any_size_never_comes_out() {
        let secret = "plainkeyLLMzz9876543210";
        let redactor = Redactor::new([secret.to_string()]);
        let text = format!("the key is {secret}, and again auth={secret} ok. done here");
        for size in 1..=12 {
            let out = streamed(&redactor, &text, size);
            assert!(!out.contains("9876543210"), "pieces of {size}: {out}");
            assert!(!out.contains("plainkey"), "pieces of {size}: {out}");
            assert_eq!(out, redactor.redact_text(&text), "pieces of {size}");
        }
    }

    #[test]
    fn shapes_that_span_words_are_caught_across_pieces() {
        let redactor = Redactor::default();
        for text in [
            "send Authorization = Basic dXNlcjpwYXNzd29yZA== to it, then stop the test",
            "use Bearer abcdefgh12345678ijkl for the call and nothing else at all",
            "set DB_PASSWORD = hunter2hunter2 and restart the whole thing please",
            "a key sk-proj1234567890abcdefghij then more words after it for sure",
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIabc\ndef\n-----END RSA PRIVATE KEY-----\nbye now and more",
        ] {
            for size in 1..=7 {
                let out = streamed(&redactor, text, size);
                assert_eq!(out, redactor.redact_text(text), "pieces of {size}");
                assert!(out.contains(REDACTED) || out.contains("Bearer [REDACTED]"));
            }
        }
    }

    #[test]
    fn clean_text_flows_out_a_few_words_behind() {
        let redactor = Redactor::default();
        let mut stream = RedactedStream::new(&redactor);
        let mut out = String::new();
        for word in "one two three four five six seven eight ".split_inclusive(' ') {
            out.extend(stream.push(word));
        }
        assert_eq!(out, "one two three ");
        assert_eq!(
            stream.flush().as_deref(),
            Some("four five six seven eight ")
        );
        assert_eq!(stream.flush(), None);
    }
}
