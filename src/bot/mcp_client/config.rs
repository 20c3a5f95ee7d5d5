//! The MCP servers configuration file: parsing and checking each entry.
//!
//! The file has the shape used by desktop MCP hosts:
//! `{"mcpServers": {"<name>": {"command": …, "args": […], "env": {…}} | {"url": …, "headers": {…}}}}`,
//! plus the optional keys `type`, `enabled`, `timeoutMs`, `allowedTools`, `excludedTools`,
//! `requiredRoles` and `cwd`. A `url` entry speaks Streamable HTTP, or the older HTTP+SSE transport with
//! `"type": "sse"`.
//! A bad entry is reported with its name and reason and left out; the others still load.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

/// How to reach one server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TransportConfig {
    Stdio(StdioCommand),
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// The older HTTP+SSE transport: `url` is the event stream.
    Sse {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// The process a stdio server runs as.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StdioCommand {
    pub command: String,
    pub args: Vec<String>,
    /// Added to the clean environment every child starts from.
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
}

impl TransportConfig {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            TransportConfig::Stdio(_) => "stdio",
            TransportConfig::Http { .. } => "http",
            TransportConfig::Sse { .. } => "sse",
        }
    }
}

/// One valid server entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerConfig {
    pub name: String,
    pub transport: TransportConfig,
    pub enabled: bool,
    /// Per-request timeout, also used for the handshake.
    pub timeout: Duration,
    /// When set, only these tools (by the server's own names) are registered.
    pub allowed_tools: Option<Vec<String>>,
    pub excluded_tools: Vec<String>,
    /// `requiredRoles`: who may call the server's tools (any one of these roles; an
    /// admin always may). Empty: everyone the bot serves, chat users included.
    pub required_roles: Vec<String>,
}

impl ServerConfig {
    /// Whether a tool the server lists passes `allowedTools` / `excludedTools`.
    pub(crate) fn tool_wanted(&self, tool: &str) -> bool {
        let allowed = self
            .allowed_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool));
        allowed && !self.excluded_tools.iter().any(|t| t == tool)
    }
}

/// The outcome of reading the file: the valid entries and the skipped ones with reasons.
#[derive(Debug, Default)]
pub(crate) struct ParsedConfig {
    pub servers: Vec<ServerConfig>,
    pub skipped: Vec<(String, String)>,
}

/// Reads the file. A missing file means no servers; an unreadable or malformed file is
/// logged and also means no servers, so a typo never stops the bot from starting.
pub(crate) fn load(path: &Path, default_timeout: Duration) -> ParsedConfig {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::debug!(path = %path.display(), "no MCP servers config file; no MCP servers");
            return ParsedConfig::default();
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the MCP servers config file; no MCP servers are connected");
            return ParsedConfig::default();
        }
    };
    let parsed = parse(&text, default_timeout);
    match &parsed {
        Ok(parsed) => {
            for (name, reason) in &parsed.skipped {
                tracing::warn!(server = %name, path = %path.display(), "skipping MCP server entry: {reason}");
            }
        }
        Err(reason) => {
            tracing::warn!(path = %path.display(), "the MCP servers config file is invalid ({reason}); no MCP servers are connected");
        }
    }
    parsed.unwrap_or_default()
}

/// Parses the file's text. `Err` only when the file as a whole is unusable.
pub(crate) fn parse(text: &str, default_timeout: Duration) -> Result<ParsedConfig, String> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| crate::text::one_line(&format!("not valid JSON: {e}")))?;
    let Some(root) = root.as_object() else {
        return Err("the top level must be a JSON object".into());
    };
    let servers = match root.get("mcpServers") {
        None => return Ok(ParsedConfig::default()),
        Some(Value::Object(servers)) => servers,
        Some(_) => return Err("`mcpServers` must be an object of server entries".into()),
    };
    let mut parsed = ParsedConfig::default();
    for (name, entry) in servers {
        match parse_entry(name, entry, default_timeout) {
            Ok(server) => parsed.servers.push(server),
            // Reasons echo names from the file: kept to one line.
            Err(reason) => parsed
                .skipped
                .push((name.clone(), crate::text::one_line(&reason))),
        }
    }
    parsed.servers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(parsed)
}

/// What [`fuzz_parse`] returns: (name, canonical entry) of each accepted server, and
/// (name, reason) of each skipped one.
#[doc(hidden)]
pub type FuzzParsed = (Vec<(String, Value)>, Vec<(String, String)>);

/// Fuzzing entry point (`fuzz/targets.rs`, target `mcp_json`): [`parse`] with a 30 s
/// default timeout, each accepted entry rendered back as its canonical `mcp.json` entry
/// (name → entry), so the fuzzer can check that rendering and parsing round-trip.
#[doc(hidden)]
pub fn fuzz_parse(text: &str) -> Result<FuzzParsed, String> {
    let parsed = parse(text, Duration::from_secs(30))?;
    let servers = parsed
        .servers
        .iter()
        .map(|s| (s.name.clone(), s.to_entry()))
        .collect();
    Ok((servers, parsed.skipped))
}

impl ServerConfig {
    /// The canonical `mcp.json` entry that parses back to this configuration.
    fn to_entry(&self) -> Value {
        let mut entry = Map::new();
        match &self.transport {
            TransportConfig::Stdio(stdio) => {
                entry.insert("command".into(), stdio.command.as_str().into());
                entry.insert("args".into(), stdio.args.clone().into());
                let env = serde_json::to_value(&stdio.env).unwrap_or_default();
                entry.insert("env".into(), env);
                if let Some(cwd) = &stdio.cwd {
                    entry.insert("cwd".into(), cwd.to_string_lossy().as_ref().into());
                }
            }
            TransportConfig::Http { url, headers } | TransportConfig::Sse { url, headers } => {
                entry.insert("url".into(), url.as_str().into());
                entry.insert(
                    "headers".into(),
                    serde_json::to_value(headers).unwrap_or_default(),
                );
            }
        }
        entry.insert("type".into(), self.transport.kind().into());
        entry.insert("enabled".into(), self.enabled.into());
        entry.insert("timeoutMs".into(), (self.timeout.as_millis() as u64).into());
        if let Some(allowed) = &self.allowed_tools {
            entry.insert("allowedTools".into(), allowed.clone().into());
        }
        entry.insert("excludedTools".into(), self.excluded_tools.clone().into());
        entry.insert("requiredRoles".into(), self.required_roles.clone().into());
        Value::Object(entry)
    }
}

/// Server names become part of tool names (`mcp.<server>__<tool>`), so they are kept
/// to a safe alphabet. `__` inside a name or a trailing `_` would let one server's
/// tool-name prefix cover another server's tools, so those are refused too.
pub(crate) fn check_server_name(name: &str) -> Result<(), String> {
    let alphabet = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !alphabet {
        return Err(
            "the server name must be 1-64 characters from A-Z, a-z, 0-9, `_` and `-`".into(),
        );
    }
    if name.contains("__") || name.ends_with('_') {
        return Err(
            "the server name must not contain `__` or end with `_` (`__` separates server and tool in tool names)"
                .into(),
        );
    }
    Ok(())
}

fn parse_entry(
    name: &str,
    entry: &Value,
    default_timeout: Duration,
) -> Result<ServerConfig, String> {
    check_server_name(name)?;
    let Some(entry) = entry.as_object() else {
        return Err("the entry must be a JSON object".into());
    };
    let transport = parse_transport(entry)?;
    check_type(entry, &transport)?;
    Ok(ServerConfig {
        name: name.to_string(),
        transport,
        enabled: parse_enabled(entry)?,
        timeout: parse_timeout(entry, default_timeout)?,
        allowed_tools: string_list(entry, "allowedTools")?,
        excluded_tools: string_list(entry, "excludedTools")?.unwrap_or_default(),
        required_roles: parse_required_roles(entry)?,
    })
}

/// `requiredRoles`: role names, each a non-empty word without spaces (`["admin"]`).
fn parse_required_roles(entry: &Map<String, Value>) -> Result<Vec<String>, String> {
    let roles = string_list(entry, "requiredRoles")?.unwrap_or_default();
    let word = |role: &String| {
        !role.is_empty()
            && role.len() <= 64
            && role
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    match roles.iter().find(|role| !word(role)) {
        None => Ok(roles),
        Some(_) => Err(
            "`requiredRoles` must list role names of 1-64 characters from A-Z, a-z, 0-9, `_` and `-` (e.g. [\"admin\"])"
                .into(),
        ),
    }
}

/// `command` makes a stdio entry, `url` an HTTP one (`"type": "sse"` picks HTTP+SSE).
fn parse_transport(entry: &Map<String, Value>) -> Result<TransportConfig, String> {
    match (entry.get("command"), entry.get("url")) {
        (Some(_), Some(_)) => Err("give either `command` (stdio) or `url` (HTTP), not both".into()),
        (None, None) => Err("give `command` (stdio) or `url` (HTTP)".into()),
        (Some(command), None) => stdio_transport(entry, command),
        (None, Some(url)) => http_transport(entry, url),
    }
}

fn stdio_transport(entry: &Map<String, Value>, command: &Value) -> Result<TransportConfig, String> {
    let command = command
        .as_str()
        .filter(|c| !c.trim().is_empty())
        .ok_or("`command` must be a non-empty string")?;
    Ok(TransportConfig::Stdio(StdioCommand {
        command: command.to_string(),
        args: string_list(entry, "args")?.unwrap_or_default(),
        env: string_map(entry, "env")?,
        cwd: match entry.get("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(dir)) => Some(PathBuf::from(dir)),
            Some(_) => return Err("`cwd` must be a string".into()),
        },
    }))
}

fn http_transport(entry: &Map<String, Value>, url: &Value) -> Result<TransportConfig, String> {
    let url = url.as_str().ok_or("`url` must be a string")?;
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`url` is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "`url` must start with http:// or https://, not {}://",
            parsed.scheme()
        ));
    }
    let headers = string_map(entry, "headers")?;
    for (header, value) in &headers {
        if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err()
            || reqwest::header::HeaderValue::from_str(value).is_err()
        {
            return Err(format!("header `{header}` is not a valid HTTP header"));
        }
    }
    let url = url.to_string();
    Ok(
        if entry.get("type").and_then(Value::as_str) == Some("sse") {
            TransportConfig::Sse { url, headers }
        } else {
            TransportConfig::Http { url, headers }
        },
    )
}

/// An explicit `type` must agree with the transport `command` or `url` chose.
fn check_type(entry: &Map<String, Value>, transport: &TransportConfig) -> Result<(), String> {
    let Some(kind) = entry.get("type") else {
        return Ok(());
    };
    let kind = kind.as_str().unwrap_or_default();
    let fits = match transport {
        TransportConfig::Stdio(_) => kind == "stdio",
        TransportConfig::Http { .. } => {
            matches!(kind, "http" | "streamable-http" | "streamableHttp")
        }
        TransportConfig::Sse { .. } => true,
    };
    if fits {
        return Ok(());
    }
    Err(format!(
        "`type` {kind:?} is not supported with {} (use \"stdio\" with `command`, \"http\" or \"sse\" with `url`)",
        if matches!(transport, TransportConfig::Stdio(_)) {
            "`command`"
        } else {
            "`url`"
        }
    ))
}

/// `enabled`, or the `disabled` some hosts write instead; on by default.
fn parse_enabled(entry: &Map<String, Value>) -> Result<bool, String> {
    match (entry.get("enabled"), entry.get("disabled")) {
        (Some(Value::Bool(enabled)), _) => Ok(*enabled),
        (Some(_), _) => Err("`enabled` must be true or false".into()),
        (None, Some(Value::Bool(disabled))) => Ok(!*disabled),
        (None, Some(_)) => Err("`disabled` must be true or false".into()),
        (None, None) => Ok(true),
    }
}

fn parse_timeout(
    entry: &Map<String, Value>,
    default_timeout: Duration,
) -> Result<Duration, String> {
    match entry.get("timeoutMs") {
        None | Some(Value::Null) => Ok(default_timeout),
        Some(ms) => match ms.as_u64() {
            Some(ms) if (1..=3_600_000).contains(&ms) => Ok(Duration::from_millis(ms)),
            _ => Err("`timeoutMs` must be a whole number of milliseconds from 1 to 3600000".into()),
        },
    }
}

fn string_list(entry: &Map<String, Value>, key: &str) -> Result<Option<Vec<String>>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| format!("`{key}` must be an array of strings")),
        Some(_) => Err(format!("`{key}` must be an array of strings")),
    }
}

fn string_map(entry: &Map<String, Value>, key: &str) -> Result<BTreeMap<String, String>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Some((k.clone(), s.clone())),
                Value::Number(n) => Some((k.clone(), n.to_string())),
                Value::Bool(b) => Some((k.clone(), b.to_string())),
                _ => None,
            })
            .collect::<Option<BTreeMap<_, _>>>()
            .ok_or_else(|| format!("`{key}` must map names to string values")),
        Some(_) => Err(format!("`{key}` must be an object of string values")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: Duration = Duration::from_secs(30);

    /// Reasons that echo the file are one line (the fuzz target `mcp_json` checks it).
    #[test]
    fn a_skip_reason_stays_one_line() {
        let text = r#"{"mcpServers": {"h": {"url": "http://a", "headers": {"x\ny": "v"}}}}"#;
        let parsed = parse(text, DEFAULT).unwrap();
        let (_, reason) = &parsed.skipped[0];
        assert!(!reason.chars().any(char::is_control), "{reason:?}");
        assert!(reason.contains("x\\ny"), "{reason}");
    }

    #[test]
    fn valid_entries_load_and_bad_ones_are_skipped_with_a_reason() {
        let text = r#"{"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server"], "env": {"A": "1"}, "timeoutMs": 5000},
            "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}, "enabled": false},
            "bad name!": {"command": "x"},
            "nothing": {"args": []},
            "both": {"command": "x", "url": "http://a"},
            "ftp": {"url": "ftp://a"},
            "old_sse": {"url": "http://a/sse", "type": "sse"},
            "sse_cmd": {"command": "x", "type": "sse"},
            "slow": {"command": "x", "timeoutMs": -1},
            "lists": {"command": "x", "allowedTools": ["a"], "excludedTools": ["b"], "requiredRoles": ["admin", "ops-team"]},
            "roles_text": {"command": "x", "requiredRoles": "admin"},
            "roles_blank": {"command": "x", "requiredRoles": ["admin", ""]},
            "a__b": {"command": "x"},
            "a_": {"command": "x"}
        }}"#;
        let parsed = parse(text, DEFAULT).unwrap();
        let names: Vec<_> = parsed.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["files", "lists", "old_sse", "remote"]);
        let skipped: BTreeMap<_, _> = parsed.skipped.into_iter().collect();
        assert_eq!(skipped.len(), 10, "{skipped:?}");
        assert!(skipped["roles_text"].contains("`requiredRoles` must be an array"));
        assert!(skipped["roles_blank"].contains("`requiredRoles` must list role names"));
        assert!(skipped["a__b"].contains("`__`"));
        assert!(skipped["a_"].contains("`__`"));
        assert!(skipped["bad name!"].contains("server name"));
        assert!(skipped["nothing"].contains("`command`"));
        assert!(skipped["both"].contains("not both"));
        assert!(skipped["ftp"].contains("http://"));
        assert!(skipped["sse_cmd"].contains("\"sse\" with `url`"));
        assert!(skipped["slow"].contains("timeoutMs"));

        let files = &parsed.servers[0];
        assert_eq!(files.timeout, Duration::from_millis(5000));
        assert!(files.enabled);
        assert_eq!(files.transport.kind(), "stdio");
        assert_eq!(parsed.servers[2].transport.kind(), "sse");
        let remote = &parsed.servers[3];
        assert!(!remote.enabled);
        assert_eq!(remote.timeout, DEFAULT);
        assert_eq!(remote.transport.kind(), "http");
        let lists = &parsed.servers[1];
        assert!(lists.tool_wanted("a"));
        assert!(!lists.tool_wanted("b"));
        assert!(!lists.tool_wanted("c"));
        assert_eq!(lists.required_roles, vec!["admin", "ops-team"]);
        assert!(files.required_roles.is_empty());
    }

    #[test]
    fn whole_file_problems_are_errors_and_missing_key_means_no_servers() {
        assert!(parse("not json", DEFAULT).is_err());
        assert!(parse("[]", DEFAULT).is_err());
        assert!(parse(r#"{"mcpServers": []}"#, DEFAULT).is_err());
        assert!(parse("{}", DEFAULT).unwrap().servers.is_empty());
        let missing = load(Path::new("/nonexistent/porthole/mcp.json"), DEFAULT);
        assert!(missing.servers.is_empty() && missing.skipped.is_empty());
    }
}
