//! Include/exclude filters over tool names, with `*` and `?` wildcards, shared by the
//! tools the LLM is offered (`LLM_TOOLS_INCLUDE`/`LLM_TOOLS_EXCLUDE`) and the tools
//! `/mcp` serves (`MCP_TOOLS_INCLUDE`/`MCP_TOOLS_EXCLUDE`).
//!
//! A name passes when the include list is empty or one of its patterns matches, and no
//! exclude pattern matches: exclude wins. Patterns match the whole name, case-sensitively
//! (tool names are), so `mcp.files__*` matches every tool of the `files` MCP server.

/// Characters a pattern may use: those of tool names plus the two wildcards.
fn valid_pattern_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '*' | '?')
}

/// An include/exclude pair of glob lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    include: Vec<String>,
    exclude: Vec<String>,
}

impl ToolFilter {
    /// Builds a filter from pattern lists; the error names the first bad pattern and
    /// says what is allowed.
    pub fn new(include: Vec<String>, exclude: Vec<String>) -> Result<Self, String> {
        Self::check_patterns(&include)?;
        Self::check_patterns(&exclude)?;
        Ok(Self::from_checked(include, exclude))
    }

    /// A filter from lists that passed [`ToolFilter::check_patterns`].
    pub fn from_checked(include: Vec<String>, exclude: Vec<String>) -> Self {
        ToolFilter { include, exclude }
    }

    /// Checks that every pattern uses only tool-name characters and wildcards.
    pub fn check_patterns(patterns: &[String]) -> Result<(), String> {
        for pattern in patterns {
            if let Some(bad) = pattern.chars().find(|c| !valid_pattern_char(*c)) {
                return Err(format!(
                    "pattern `{pattern}` has `{bad}`: use tool-name characters (letters, digits, _ . -) and the \
                     wildcards * and ?, comma-separated, e.g. calculator,mcp.files__*"
                ));
            }
        }
        Ok(())
    }

    /// Whether the filter lets every name through.
    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }

    /// Whether `name` passes: included (or no include list) and not excluded.
    pub fn allows(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| glob_match(p, name)))
            && !self.exclude.iter().any(|p| glob_match(p, name))
    }

    /// Include patterns that match none of `names` (most likely typos).
    pub fn unmatched_includes<'a>(&'a self, names: &[&str]) -> Vec<&'a str> {
        self.include
            .iter()
            .filter(|p| !names.iter().any(|n| glob_match(p, n)))
            .map(String::as_str)
            .collect()
    }

    /// The filter as configuration text, for status reports.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({"include": self.include, "exclude": self.exclude})
    }
}

/// Whether `pattern` (with `*` = any run of characters, `?` = one character) matches
/// all of `name`. Iterative with one backtrack point, so it is linear-ish on any input.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == name[n]) {
            p += 1;
            n += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, n));
            p += 1;
        } else if let Some((star_p, star_n)) = star {
            p = star_p + 1;
            n = star_n + 1;
            star = Some((star_p, star_n + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob_match("calculator", "calculator"));
        assert!(!glob_match("calc", "calculator"));
        assert!(glob_match("calc*", "calculator"));
        assert!(glob_match("mcp.files__*", "mcp.files__read"));
        assert!(!glob_match("mcp.files__*", "mcp.git__log"));
        assert!(glob_match("*_log", "server_log"));
        assert!(glob_match("?eb_log", "web_log"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(glob_match("**", "anything"));
    }

    #[test]
    fn exclude_wins_and_empty_include_means_all() {
        let all = ToolFilter::default();
        assert!(all.is_empty() && all.allows("x"));
        let f =
            ToolFilter::new(vec!["*_log".into(), "health".into()], vec!["web_*".into()]).unwrap();
        assert!(f.allows("server_log"));
        assert!(f.allows("health"));
        assert!(!f.allows("web_log"), "exclude wins");
        assert!(!f.allows("db_query"), "not included");
        assert_eq!(f.unmatched_includes(&["server_log"]), vec!["health"]);
    }

    #[test]
    fn bad_patterns_say_what_is_allowed() {
        let error = ToolFilter::new(vec!["calc ulator".into()], vec![]).unwrap_err();
        assert!(error.contains("wildcards * and ?"), "{error}");
        assert!(ToolFilter::new(vec![], vec!["[abc]".into()]).is_err());
    }
}
