//! `.env`: the one reader of the file, shared by the bot and `porthole token`, so both see
//! the same values with the same precedence (a non-empty variable in the real environment
//! wins over the file; within the file, a name is set once, or twice to the same value).
//!
//! The reader is strict on purpose: a line it cannot read stops start-up with its line
//! number and what is wrong, instead of dropping that line and every line after it.
//! What it accepts:
//!
//! - blank lines and lines starting with `#`;
//! - `NAME=value`, optionally after `export `; `NAME` is letters, digits, `_` and `.`, not
//!   starting with a digit;
//! - an unquoted value runs to the end of the line or to a ` #` comment, trimmed, and may
//!   hold spaces (`LLM_MODEL=foo bar # note` is `foo bar`);
//! - a value in single quotes is taken as written; in double quotes, `\n`, `\t`, `\"`, `\\`
//!   and `\$` are escapes. Either may span lines; after the closing quote only a comment
//!   may follow.
//!
//! No `$VAR` expansion: a secret with a `$` in it stays as written.

use std::collections::HashMap;
use std::path::Path;

/// A line of `.env` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file} line {line}: {reason}")]
pub struct EnvFileError {
    pub file: String,
    pub line: usize,
    pub reason: String,
}

/// The values of one `.env` file (possibly none), looked up behind the real environment.
#[derive(Debug, Clone, Default)]
pub struct EnvFile {
    values: HashMap<String, String>,
}

impl EnvFile {
    /// Reads `path`; a missing file is an empty one. A file that exists but cannot be
    /// read, or a line that cannot be parsed, is an error naming the file and the line.
    pub fn load(path: &Path) -> Result<Self, EnvFileError> {
        let file = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(EnvFileError {
                    file,
                    line: 0,
                    reason: format!("cannot be read ({e})"),
                });
            }
        };
        Self::parse(&text).map_err(|(line, reason)| EnvFileError { file, line, reason })
    }

    /// Parses `.env` text. A name set twice to the same value is set once; set twice to
    /// different values, it is an error at the second line: readers differ on which one
    /// counts (the bot took the first, Node's dotenv takes the last), and a block pasted
    /// with both `MCP_SERVER_ENABLED=false` and `=true` in it means neither for sure.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut values: HashMap<String, (String, usize)> = HashMap::new();
        for Assignment { name, value, lines } in assignments(text)? {
            let line = lines.start + 1;
            match values.get(&name) {
                Some((first, _)) if *first == value => {}
                Some((_, first_line)) => {
                    return Err((
                        line,
                        format!(
                            "`{name}` is set again here to another value (line {first_line} set it \
                             first); keep the one you mean and delete the other"
                        ),
                    ));
                }
                None => {
                    values.insert(name, (value, line));
                }
            }
        }
        let values = values
            .into_iter()
            .map(|(name, (value, _))| (name, value))
            .collect();
        Ok(Self { values })
    }

    /// The file's own value of `name` (the environment not consulted).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The file's values of names that say they are secret (`MY_SERVICE_PASSWORD`,
    /// `GITHUB_TOKEN`): known secrets like the environment's own, though the file's
    /// values never enter the process's environment.
    pub fn secret_values(&self) -> Vec<String> {
        self.values
            .iter()
            .filter(|(name, _)| crate::redact::is_secret_key(name))
            .map(|(_, value)| value.clone())
            .collect()
    }

    /// What the configuration sees: the environment's value when set and not empty,
    /// otherwise the file's.
    pub fn lookup(&self, name: &str) -> Option<String> {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .or_else(|| self.get(name).map(str::to_string))
    }
}

/// One `NAME=value` of a `.env` text, and the lines it takes (a quoted value may run
/// over several).
pub struct Assignment {
    pub name: String,
    pub value: String,
    /// Indexes of its lines in `text.lines()`.
    pub lines: std::ops::Range<usize>,
}

/// Every `NAME=value` of `text`, in order, or the first line that cannot be read (its
/// number, from 1, and what is wrong): how the bot reads `.env`, for a tool that edits it.
pub fn assignments(text: &str) -> Result<Vec<Assignment>, (usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let number = index + 1;
        let line = lines[index].trim();
        index += 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").map_or(line, str::trim_start);
        let Some((name, rest)) = line.split_once('=') else {
            // The line is not echoed: it may be a pasted secret.
            return Err((
                number,
                "this line is not NAME=value (comment it out with `#`, or delete it)".to_string(),
            ));
        };
        let name = name.trim_end();
        check_name(name).map_err(|reason| (number, reason))?;
        let rest = rest.trim_start();
        let value = match rest.chars().next() {
            Some(quote @ ('"' | '\'')) => {
                let (value, used) = quoted(&lines, index - 1, rest, quote)
                    .map_err(|reason| (number, format!("{name}: {reason}")))?;
                index += used;
                value
            }
            _ => unquoted(rest),
        };
        found.push(Assignment {
            name: name.to_string(),
            value,
            lines: number - 1..index,
        });
    }
    Ok(found)
}

fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if valid {
        Ok(())
    } else {
        // The text is not echoed: a pasted secret with `=` in it (Base64 padding) reads
        // as a name followed by a value.
        Err(
            "the text before `=` is not a variable name (letters, digits, `_` and `.`, \
             not starting with a digit)"
                .to_string(),
        )
    }
}

/// An unquoted value: up to a comment that follows white space, trimmed.
fn unquoted(rest: &str) -> String {
    let end = rest
        .char_indices()
        .find(|&(i, c)| c == '#' && i > 0 && rest[..i].ends_with(char::is_whitespace))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].trim().to_string()
}

/// A quoted value starting at `rest` (on line `at` of `lines`), possibly running over
/// the following lines. Returns the value and how many more lines it used.
fn quoted(lines: &[&str], at: usize, rest: &str, quote: char) -> Result<(String, usize), String> {
    let mut value = String::new();
    let mut text = &rest[1..];
    let mut used = 0;
    loop {
        let mut chars = text.char_indices();
        while let Some((i, c)) = chars.next() {
            if c == quote {
                let after = text[i + 1..].trim();
                if !(after.is_empty() || after.starts_with('#')) {
                    return Err(
                        "text follows the closing quote (only a `#` comment may)".to_string()
                    );
                }
                return Ok((value, used));
            }
            if c == '\\' && quote == '"' {
                match chars.next().map(|(_, e)| e) {
                    Some('n') => value.push('\n'),
                    Some('t') => value.push('\t'),
                    Some(e @ ('"' | '\\' | '$')) => value.push(e),
                    Some(e) => {
                        value.push('\\');
                        value.push(e);
                    }
                    None => value.push('\\'),
                }
                continue;
            }
            value.push(c);
        }
        used += 1;
        match lines.get(at + used) {
            Some(next) => {
                value.push('\n');
                text = next;
            }
            None => {
                return Err(format!(
                    "the value opens a {quote} quote that is never closed (close it, or remove the quote)"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> EnvFile {
        EnvFile::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e:?}"))
    }

    #[test]
    fn reads_plain_quoted_exported_and_commented_lines() {
        let file = values(
            "# a comment\n\nPORT=40455\nexport HOST = 127.0.0.1\nA='x # y $Z'\nB=\"one\\ntwo \\\"q\\\"\" # note\nLLM_MODEL=foo bar # comment\nEMPTY=\n",
        );
        assert_eq!(file.get("PORT"), Some("40455"));
        assert_eq!(file.get("HOST"), Some("127.0.0.1"));
        assert_eq!(file.get("A"), Some("x # y $Z"));
        assert_eq!(file.get("B"), Some("one\ntwo \"q\""));
        assert_eq!(file.get("LLM_MODEL"), Some("foo bar"));
        assert_eq!(file.get("EMPTY"), Some(""));
    }

    #[test]
    fn a_hash_inside_a_value_is_kept_and_a_repeated_line_is_one() {
        let file = values("TOKEN=abc#def\nTOKEN=abc#def\nMULTI=\"a\nb\"\nAFTER=1\n");
        assert_eq!(file.get("TOKEN"), Some("abc#def"));
        assert_eq!(file.get("MULTI"), Some("a\nb"));
        assert_eq!(file.get("AFTER"), Some("1"));
    }

    #[test]
    fn a_line_that_cannot_be_read_is_named_by_number() {
        let cases = [
            ("hello world\nPORT=40455\n", 1, "not NAME=value"),
            ("PORT=1\n\n1PORT=2\n", 3, "is not a variable name"),
            ("AbC+dEf/GhIjKlMnOp==\n", 1, "is not a variable name"),
            ("A=1\nSECRET=\"abc\nB=2\n", 2, "never closed"),
            ("A='x' y\n", 1, "follows the closing quote"),
            (
                "# MCP\nMCP_SERVER_ENABLED=false\nMCP_SERVER_ENABLED=true\n",
                3,
                "(line 2 set it first)",
            ),
        ];
        for (text, line, words) in cases {
            let (number, reason) = EnvFile::parse(text).expect_err(text);
            assert_eq!(number, line, "{text:?}: {reason}");
            assert!(reason.contains(words), "{text:?}: {reason}");
            assert!(!reason.contains("GhIj"), "the line is not echoed: {reason}");
        }
    }

    #[test]
    fn a_missing_file_is_empty_and_a_bad_one_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = EnvFile::load(&dir.path().join(".env")).unwrap();
        assert_eq!(missing.get("PORT"), None);
        let path = dir.path().join(".env");
        std::fs::write(&path, "PORT=1\nnot a line\n").unwrap();
        let error = EnvFile::load(&path).unwrap_err().to_string();
        assert!(
            error.contains("line 2") && error.contains(".env"),
            "{error}"
        );
    }
}
