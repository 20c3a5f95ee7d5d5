//! What a replay is expected to do, checked on every replay: the same tool calls as the
//! original, a tool called (or not), arguments valid against the tool's schema, text
//! that contains, leaves out or matches a pattern. Each check is reported passed or
//! failed with what was seen, so a set of replays run before and after a prompt edit
//! reads as a test run.

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::ReplayError;
use crate::bot::tools::ToolRunner;
use crate::text::elide_middle;

/// The longest pattern `text_matches` takes.
const MAX_PATTERN_CHARS: usize = 1000;
/// How much of the text a failed text check shows.
const SEEN_CHARS: usize = 200;

/// The checks to run on each replay; those left out are not run.
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The replay calls the same tools with the same arguments as the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_tool_calls: Option<bool>,
    /// The replay calls this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_tool: Option<String>,
    /// The replay does not call this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_calls_tool: Option<String>,
    /// Every tool call's arguments are valid against the tool's input schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_arguments: Option<bool>,
    /// The (final) text contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_contains: Option<String>,
    /// The (final) text does not contain this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_not_contains: Option<String>,
    /// The (final) text matches this regular expression (Rust `regex` syntax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_matches: Option<String>,
}

/// One check's outcome.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Check {
    /// Which check: `same_tool_calls`, `calls_tool`, `not_calls_tool`, `valid_arguments`,
    /// `text_contains`, `text_not_contains` or `text_matches`.
    pub check: &'static str,
    /// What was expected, as given.
    pub expected: Value,
    pub passed: bool,
    /// What was seen, when the check failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
}

/// How many checks passed and failed, over every replay of an answer.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, schemars::JsonSchema)]
pub struct CheckCount {
    pub passed: usize,
    pub failed: usize,
}

impl CheckCount {
    /// The counts of `checks`.
    pub fn of<'a>(checks: impl IntoIterator<Item = &'a Check>) -> CheckCount {
        checks
            .into_iter()
            .fold(CheckCount::default(), |mut count, check| {
                if check.passed {
                    count.passed += 1;
                } else {
                    count.failed += 1;
                }
                count
            })
    }
}

/// What a replay did, as the checks read it.
pub struct Seen<'a> {
    /// The text checked: the answer's, or a turn's final answer.
    pub text: Option<&'a str>,
    /// Every tool call made, `{"name", "arguments"}`.
    pub tool_calls: Vec<&'a Value>,
    /// Whether the tool calls were the original's.
    pub same_tool_calls: bool,
}

impl Expect {
    /// Whether any check is asked for.
    pub fn is_empty(&self) -> bool {
        self.same_tool_calls.is_none()
            && self.calls_tool.is_none()
            && self.not_calls_tool.is_none()
            && self.valid_arguments.is_none()
            && self.text_contains.is_none()
            && self.text_not_contains.is_none()
            && self.text_matches.is_none()
    }

    /// Refuses a pattern that does not compile, before anything is replayed.
    pub fn check_pattern(&self) -> Result<(), ReplayError> {
        match &self.text_matches {
            Some(pattern) if pattern.chars().count() > MAX_PATTERN_CHARS => {
                Err(ReplayError::Invalid(format!(
                    "expect.text_matches is longer than {MAX_PATTERN_CHARS} characters"
                )))
            }
            Some(pattern) => Regex::new(pattern).map(|_| ()).map_err(|e| {
                ReplayError::Invalid(format!("expect.text_matches is not a valid pattern: {e}"))
            }),
            None => Ok(()),
        }
    }

    /// Runs every check asked for on `seen`; `tools` gives the schemas arguments are
    /// checked against.
    pub fn run(&self, seen: &Seen<'_>, tools: &ToolRunner) -> Vec<Check> {
        let mut checks = Vec::new();
        let names: Vec<&str> = seen
            .tool_calls
            .iter()
            .map(|c| c["name"].as_str().unwrap_or_default())
            .collect();
        let called = || format!("called: [{}]", names.join(", "));
        let mut push = |check, expected: Value, passed: bool, seen: &dyn Fn() -> String| {
            checks.push(Check {
                check,
                expected,
                passed,
                seen: (!passed).then(seen),
            });
        };
        if let Some(want) = self.same_tool_calls {
            push(
                "same_tool_calls",
                json!(want),
                seen.same_tool_calls == want,
                &called,
            );
        }
        if let Some(tool) = &self.calls_tool {
            push(
                "calls_tool",
                json!(tool),
                names.contains(&tool.as_str()),
                &called,
            );
        }
        if let Some(tool) = &self.not_calls_tool {
            push(
                "not_calls_tool",
                json!(tool),
                !names.contains(&tool.as_str()),
                &called,
            );
        }
        if let Some(want) = self.valid_arguments {
            let invalid = invalid_arguments(&seen.tool_calls, tools);
            push(
                "valid_arguments",
                json!(want),
                invalid.is_empty() == want,
                &|| match invalid.is_empty() {
                    true => "every call's arguments are valid".to_string(),
                    false => invalid.join("; "),
                },
            );
        }
        let text = seen.text.unwrap_or_default();
        let shown = || match seen.text {
            Some(text) => format!("text: {}", elide_middle(text, SEEN_CHARS)),
            None => "no text: the replay did not reach an answer".to_string(),
        };
        if let Some(part) = &self.text_contains {
            let passed = seen.text.is_some() && text.contains(part.as_str());
            push("text_contains", json!(part), passed, &shown);
        }
        if let Some(part) = &self.text_not_contains {
            let passed = seen.text.is_some() && !text.contains(part.as_str());
            push("text_not_contains", json!(part), passed, &shown);
        }
        if let Some(pattern) = &self.text_matches {
            // Checked before the replay ran (`check_pattern`).
            let matches = Regex::new(pattern).is_ok_and(|re| re.is_match(text));
            push(
                "text_matches",
                json!(pattern),
                seen.text.is_some() && matches,
                &shown,
            );
        }
        checks
    }
}

/// The calls whose arguments their tool's input schema refuses, each with why.
fn invalid_arguments(calls: &[&Value], tools: &ToolRunner) -> Vec<String> {
    calls
        .iter()
        .filter_map(|call| {
            let name = call["name"].as_str().unwrap_or_default();
            let Some(tool) = tools.get(name) else {
                return Some(format!("`{name}`: the bot has no such tool"));
            };
            let validator = jsonschema::validator_for(&tool.def.input_schema).ok()?;
            let errors: Vec<String> = validator
                .iter_errors(&call["arguments"])
                .map(|e| e.to_string())
                .collect();
            (!errors.is_empty()).then(|| format!("`{name}`: {}", errors.join(", ")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen<'a>(text: Option<&'a str>, calls: &'a [Value]) -> Seen<'a> {
        Seen {
            text,
            tool_calls: calls.iter().collect(),
            same_tool_calls: false,
        }
    }

    #[test]
    fn each_check_passes_or_fails_on_what_it_reads() {
        let expect = Expect {
            calls_tool: Some("calculator".into()),
            not_calls_tool: Some("remember".into()),
            text_contains: Some("42".into()),
            text_not_contains: Some("sorry".into()),
            text_matches: Some(r"^It is \d+\.$".into()),
            same_tool_calls: Some(true),
            ..Expect::default()
        };
        let calls = [json!({"name": "calculator", "arguments": {"expression": "6*7"}})];
        let tools = ToolRunner::new(std::time::Duration::from_secs(1));
        let checks = expect.run(&seen(Some("It is 42."), &calls), &tools);
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.check)
            .collect();
        assert_eq!(failed, ["same_tool_calls"]);
        assert_eq!(
            CheckCount::of(&checks),
            CheckCount {
                passed: 5,
                failed: 1
            }
        );

        let checks = expect.run(&seen(None, &[]), &tools);
        assert!(
            checks
                .iter()
                .filter(|c| c.check.starts_with("text"))
                .all(|c| !c.passed)
        );
        let calls_tool = checks.iter().find(|c| c.check == "calls_tool").unwrap();
        assert_eq!(calls_tool.seen.as_deref(), Some("called: []"));
    }

    #[test]
    fn a_bad_pattern_is_refused_before_anything_runs() {
        let expect = Expect {
            text_matches: Some("(unclosed".into()),
            ..Expect::default()
        };
        assert!(
            expect
                .check_pattern()
                .unwrap_err()
                .to_string()
                .contains("text_matches")
        );
    }
}
