//! A replay's answer held to a byte budget, so a tool can declare the most it returns
//! (`_meta["anthropic/maxResultSizeChars"]`) and keep to it: a model that wrote 600 KB
//! five times over must not produce a 3 MB answer a client then cuts blindly.
//!
//! What goes first is what the caller already has: the echo of the changes it sent
//! (the system prompt and edited messages, cut to a preview). Then the answers' texts,
//! all alike (the longest are cut first, to one shared length), each marked
//! `text_truncated`. Last, and only if that is not enough, the tool calls' arguments.
//! The comparison was made on the full texts before anything was cut.

use serde_json::Value;

use super::{Answer, Batch, Changes, Replay, TurnReplay};
use crate::text::elide_middle;

/// The characters an echoed change keeps once the answer is over its budget.
const ECHO_CHARS: usize = 200;

/// An answer made of model answers that can be cut to fit: the changes it echoes and
/// the answers it shows.
trait Answers: serde::Serialize {
    fn parts(&mut self) -> (&mut Changes, Vec<&mut Answer>);

    /// Cuts the answer until its JSON is at most `budget` bytes (see the module doc).
    fn fit(&mut self, budget: usize) {
        if size(self) <= budget {
            return;
        }
        cut_echo(self.parts().0);
        // Texts are cut to a shared length, measured again after each cut because
        // escapes make the JSON longer than the text.
        for _ in 0..4 {
            let size = size(self);
            if size <= budget {
                return;
            }
            let mut answers = self.parts().1;
            let texts: usize = answers.iter().map(|a| a.text.len()).sum();
            let keep = texts.saturating_sub(size - budget + 64);
            let share = shared_length(answers.iter().map(|a| a.text.len()), keep);
            for answer in &mut answers {
                cut_text(answer, share);
            }
        }
        if size(self) > budget {
            for answer in self.parts().1 {
                for call in &mut answer.tool_calls {
                    call["arguments"] = Value::Null;
                }
                answer.tool_calls_truncated = !answer.tool_calls.is_empty();
            }
        }
    }
}

impl Answers for Replay {
    fn parts(&mut self) -> (&mut Changes, Vec<&mut Answer>) {
        let answers = std::iter::once(&mut self.original)
            .chain(self.replays.iter_mut())
            .collect();
        (&mut self.changes, answers)
    }
}

impl Answers for TurnReplay {
    fn parts(&mut self) -> (&mut Changes, Vec<&mut Answer>) {
        let answers = self
            .steps
            .iter_mut()
            .flat_map(|s| s.original.as_mut().into_iter().chain([&mut s.replay]))
            .collect();
        (&mut self.changes, answers)
    }
}

impl Replay {
    /// Cuts the answer until its JSON is at most `budget` bytes (see the module doc).
    pub fn fit(&mut self, budget: usize) {
        Answers::fit(self, budget);
    }
}

impl TurnReplay {
    /// As [`Replay::fit`], over every step's answers; then, if it is still over, the parts
    /// that repeat them (the final answers, the diverging calls' arguments, the stop's
    /// detail, which quotes a call) are cut too.
    pub fn fit(&mut self, budget: usize) {
        Answers::fit(self, budget);
        if size(self) <= budget {
            return;
        }
        self.stop_detail = elide_middle(&self.stop_detail, ECHO_CHARS);
        for text in [
            &mut self.final_answers.original,
            &mut self.final_answers.replay,
        ]
        .into_iter()
        .flatten()
        {
            *text = elide_middle(text, ECHO_CHARS);
        }
        if let Some(divergence) = &mut self.diverged_at {
            let calls = divergence.recorded.iter_mut().flatten();
            for call in calls.chain(divergence.replay.iter_mut()) {
                call["arguments"] = Value::Null;
            }
        }
    }
}

impl Batch {
    /// Cuts the echo of the changes when the batch is over `budget` bytes; its rows
    /// are short by construction (previews, names, errors cut at the middle).
    pub fn fit(&mut self, budget: usize) {
        if size(self) > budget {
            cut_echo(&mut self.changes);
        }
    }
}

fn size(value: &(impl serde::Serialize + ?Sized)) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |json| json.len())
}

/// The caller's own changes, cut to previews.
fn cut_echo(changes: &mut Changes) {
    if let Some(system) = &mut changes.system {
        *system = elide_middle(system, ECHO_CHARS);
    }
    for edit in &mut changes.edit_messages {
        edit.content = elide_middle(&edit.content, ECHO_CHARS);
    }
}

/// The longest length `L` such that the lengths, each cut to `L`, add up to at most
/// `keep`: short texts stay whole and the long ones share what is left.
fn shared_length(lengths: impl Iterator<Item = usize>, keep: usize) -> usize {
    let mut lengths: Vec<usize> = lengths.collect();
    lengths.sort_unstable();
    let mut left = keep;
    for (i, &length) in lengths.iter().enumerate() {
        let share = left / (lengths.len() - i);
        if length > share {
            return share;
        }
        left -= length;
    }
    usize::MAX
}

/// `answer.text` cut to at most `max` bytes, at a character boundary.
fn cut_text(answer: &mut Answer, max: usize) {
    if answer.text.len() <= max {
        return;
    }
    let mut end = max;
    while !answer.text.is_char_boundary(end) {
        end -= 1;
    }
    answer.text.truncate(end);
    answer.text_truncated = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_stay_whole_and_long_ones_share_the_rest() {
        assert_eq!(shared_length([10, 1000, 1000].into_iter(), 1010), 500);
        assert_eq!(shared_length([10, 20].into_iter(), 100), usize::MAX);
        assert_eq!(shared_length([50, 50].into_iter(), 0), 0);
    }

    #[test]
    fn a_cut_falls_on_a_character_boundary() {
        let mut answer = Answer {
            text: "ééé".into(),
            ..Answer::default()
        };
        cut_text(&mut answer, 3);
        assert_eq!(answer.text, "é");
        assert!(answer.text_truncated);
    }
}
