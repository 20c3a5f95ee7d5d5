//! Native tools, compiled into the bot: time, a calculator, long-term memory, files in
//! the workspace folder, delegation to a worker agent, and the two tools the bot
//! reports on itself with (`get_bot_status`, `list_available_tools`). Those two are
//! ordinary tools the model is offered, so a user can ask "what is your status?" or
//! "what can you do?"; the second lists only what the caller's roles allow, and the
//! status never carries a secret.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{FnTool, ToolCall, ToolDef, ToolHandler, ToolRunner, ToolSource};
use crate::bot::agents::Workers;
use crate::bot::store::Store;

/// What the status tool reports about the bot besides its tools.
pub struct StatusSources {
    pub started: Instant,
    pub llm_provider: String,
    pub llm_model: String,
    pub workers: Arc<Workers>,
    pub mcp_servers: Arc<dyn Fn() -> Value + Send + Sync>,
    /// Limits and switches from the configuration, secrets left out (see
    /// `Bot::operational_settings`).
    pub settings: Value,
}

/// Registers every native tool.
pub fn register_all(
    runner: &ToolRunner,
    store: Store,
    workspace: PathBuf,
    status: StatusSources,
) -> Result<(), String> {
    let native = |name: &str, description: &str, schema: Value| ToolDef {
        name: name.into(),
        source: ToolSource::Native,
        description: description.into(),
        input_schema: schema,
        required_roles: vec![],
        internal: false,
    };

    runner.register(
        native(
            "current_time",
            "The current date and time in UTC (RFC 3339) and as a Unix timestamp.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        Arc::new(FnTool(|_args: Value| async move {
            let now = chrono::Utc::now();
            Ok(json!({"utc": now.to_rfc3339(), "unix": now.timestamp()}))
        })),
    )?;

    runner.register(
        native(
            "calculator",
            "Evaluates an arithmetic expression with + - * / % ^ and parentheses, e.g. \"(2+3)*4^2\".",
            json!({
                "type": "object",
                "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": 1000,
                    "description": "The expression to evaluate"}},
                "required": ["expression"],
                "additionalProperties": false
            }),
        ),
        Arc::new(FnTool(|args: Value| async move {
            let expression = args["expression"].as_str().unwrap_or_default();
            let value = calculate(expression)?;
            Ok(json!({"expression": expression, "result": value}))
        })),
    )?;

    let memory = store.clone();
    runner.register(
        native(
            "remember",
            "Stores a fact under a key in long-term memory (overwrites the key).",
            json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string", "minLength": 1, "maxLength": 200},
                    "value": {"type": "string", "maxLength": 10000}
                },
                "required": ["key", "value"],
                "additionalProperties": false
            }),
        ),
        Arc::new(FnTool(move |args: Value| {
            let store = memory.clone();
            async move {
                let key = args["key"].as_str().unwrap_or_default();
                let value = args["value"].as_str().unwrap_or_default();
                store
                    .remember(key, value)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({"stored": key}))
            }
        })),
    )?;

    let memory = store;
    runner.register(
        native(
            "recall",
            "Finds facts in long-term memory whose key or value contains the query (all facts when empty).",
            json!({
                "type": "object",
                "properties": {"query": {"type": "string", "maxLength": 200}},
                "additionalProperties": false
            }),
        ),
        Arc::new(FnTool(move |args: Value| {
            let store = memory.clone();
            async move {
                let query = args["query"].as_str().unwrap_or_default();
                let found = store.recall(query).await.map_err(|e| e.to_string())?;
                let memories: Vec<Value> = found
                    .into_iter()
                    .map(|(key, value)| json!({"key": key, "value": value}))
                    .collect();
                Ok(json!({"memories": memories}))
            }
        })),
    )?;

    let root = workspace.clone();
    runner.register(
        native(
            "list_files",
            "Lists files and folders inside the workspace folder. Paths are relative to the workspace.",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Folder relative to the workspace; default the workspace itself"}},
                "additionalProperties": false
            }),
        ),
        Arc::new(FnTool(move |args: Value| {
            let root = root.clone();
            async move {
                let relative = args["path"].as_str().unwrap_or(".").to_string();
                tokio::task::spawn_blocking(move || list_files(&root, &relative))
                    .await
                    .map_err(|e| e.to_string())?
            }
        })),
    )?;

    let root = workspace;
    runner.register(
        native(
            "read_file",
            "Reads a UTF-8 text file inside the workspace folder (first 100 KB).",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string", "minLength": 1}},
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        Arc::new(FnTool(move |args: Value| {
            let root = root.clone();
            async move {
                let relative = args["path"].as_str().unwrap_or_default().to_string();
                tokio::task::spawn_blocking(move || read_file(&root, &relative))
                    .await
                    .map_err(|e| e.to_string())?
            }
        })),
    )?;

    runner.register(
        native(
            "delegate",
            "Hands a self-contained sub-task to a worker agent and returns its answer.",
            json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "minLength": 1, "description": "What the worker should do"},
                    "worker_name": {"type": "string", "description": "Optional display name for the worker"}
                },
                "required": ["task"],
                "additionalProperties": false
            }),
        ),
        Arc::new(DelegateTool {
            workers: status.workers.clone(),
        }),
    )?;

    let list_available = native(
        "list_available_tools",
        "Lists the tools you may use, given your roles: name, source, description, required roles. \
         Call it when the user asks what you can do.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    );
    runner.register(list_available, Arc::new(ListAvailableTool))?;

    let bot_status = native(
        "get_bot_status",
        "Reports the bot's own status: uptime, the LLM provider and model, memory use and limits, agents, \
         connected MCP servers with invocations, errors and latency per server and per tool, and tool usage. \
         Call it when the user asks how you are doing or what state you are in.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    );
    runner.register(bot_status, Arc::new(BotStatusTool(status)))?;
    Ok(())
}

struct DelegateTool {
    workers: Arc<Workers>,
}

#[async_trait]
impl ToolHandler for DelegateTool {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let task = call.args["task"].as_str().unwrap_or_default();
        let name = call.args["worker_name"].as_str().unwrap_or("worker");
        let answer = self
            .workers
            .run(name, task, call.runner, call.ctx)
            .await
            .map_err(|e| e.to_string())?;
        Ok(json!({"worker": name, "answer": answer}))
    }
}

struct ListAvailableTool;

#[async_trait]
impl ToolHandler for ListAvailableTool {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let tools: Vec<Value> = call
            .runner
            .available_to(call.ctx)
            .into_iter()
            .map(|t| {
                json!({
                    "name": t.def.name,
                    "source": t.def.source,
                    "description": t.def.description,
                    "required_roles": t.def.required_roles,
                })
            })
            .collect();
        Ok(json!({"roles": call.ctx.roles, "tools": tools}))
    }
}

struct BotStatusTool(StatusSources);

#[async_trait]
impl ToolHandler for BotStatusTool {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let tools = call.runner.all();
        let usage: Vec<Value> = tools
            .iter()
            .filter(|t| t.stats.invocations > 0)
            .map(|t| {
                json!({
                    "name": t.def.name,
                    "invocations": t.stats.invocations,
                    "errors": t.stats.errors,
                    "mean_ms": t.stats.mean_ms,
                    "p95_ms": t.stats.p95_ms,
                })
            })
            .collect();
        let count = |source: ToolSource| tools.iter().filter(|t| t.def.source == source).count();
        Ok(json!({
            "uptime_secs": self.0.started.elapsed().as_secs(),
            "llm": {"provider": self.0.llm_provider, "model": self.0.llm_model},
            "memory": {"resident_bytes": crate::bot::resident_memory_bytes()},
            "settings": self.0.settings,
            "agents": self.0.workers.registry().list(),
            "mcp_servers": (self.0.mcp_servers)(),
            "tools": {
                "total": tools.len(),
                "native": count(ToolSource::Native),
                "user": count(ToolSource::User),
                "mcp": count(ToolSource::Mcp),
                "usage": usage,
            },
        }))
    }
}

/// Resolves a caller-supplied relative path inside `root`, refusing anything that
/// could escape it: absolute paths, `..`, and symlinks pointing outside.
pub fn resolve_in_workspace(root: &Path, relative: &str) -> Result<PathBuf, String> {
    let candidate = Path::new(relative);
    if candidate.is_absolute()
        || candidate
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return Err(format!(
            "path `{relative}` is outside the workspace; give a path relative to the workspace without `..`"
        ));
    }
    let root = root.canonicalize().map_err(|e| {
        format!(
            "the workspace folder {} is not available: {e}",
            root.display()
        )
    })?;
    let full = root
        .join(candidate)
        .canonicalize()
        .map_err(|_| format!("`{relative}` does not exist in the workspace"))?;
    if !full.starts_with(&root) {
        return Err(format!(
            "path `{relative}` leads outside the workspace (through a link)"
        ));
    }
    Ok(full)
}

fn list_files(root: &Path, relative: &str) -> Result<Value, String> {
    let dir = resolve_in_workspace(root, relative)?;
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| format!("cannot list `{relative}`: {e}"))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let meta = entry.metadata().map_err(|e| e.to_string())?;
        entries.push(json!({
            "name": entry.file_name().to_string_lossy(),
            "kind": if meta.is_dir() { "dir" } else { "file" },
            "size": meta.len(),
        }));
    }
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(json!({"path": relative, "entries": entries}))
}

const READ_LIMIT: usize = 100 * 1024;

/// Reads at most [`READ_LIMIT`] bytes: a huge file costs no more memory than a small one.
fn read_file(root: &Path, relative: &str) -> Result<Value, String> {
    use std::io::Read;
    let path = resolve_in_workspace(root, relative)?;
    let cannot = |e: std::io::Error| format!("cannot read `{relative}`: {e}");
    let file = std::fs::File::open(&path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(format!(
            "`{relative}` is not a regular file; list_files shows what the workspace holds"
        ));
    }
    let mut bytes = Vec::with_capacity(READ_LIMIT.min(meta.len() as usize));
    file.take(READ_LIMIT as u64)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    let size = meta.len().max(bytes.len() as u64);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(
        json!({"path": relative, "content": text, "bytes": size, "truncated": size > bytes.len() as u64}),
    )
}

/// Evaluates an arithmetic expression: numbers, + - * / % ^, unary minus, parentheses.
pub fn calculate(expression: &str) -> Result<f64, String> {
    let mut parser = Calc {
        chars: expression.chars().filter(|c| !c.is_whitespace()).collect(),
        pos: 0,
        depth: 0,
    };
    let value = parser.sum()?;
    if parser.pos != parser.chars.len() {
        return Err(format!(
            "unexpected `{}` at position {} in `{expression}`",
            parser.chars[parser.pos],
            parser.pos + 1
        ));
    }
    if !value.is_finite() {
        return Err(format!(
            "`{expression}` has no finite result (division by zero?)"
        ));
    }
    Ok(value)
}

struct Calc {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
}

impl Calc {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut value = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.pos += 1;
            let rhs = self.product()?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut value = self.power()?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek() {
            self.pos += 1;
            let rhs = self.power()?;
            value = match op {
                '*' => value * rhs,
                '/' => value / rhs,
                _ => value % rhs,
            };
        }
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.unary()?;
        if self.peek() == Some('^') {
            self.pos += 1;
            // Right-associative: 2^3^2 = 2^(3^2).
            let exponent = self.power()?;
            return Ok(base.powf(exponent));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('-') => {
                self.pos += 1;
                Ok(-self.unary()?)
            }
            Some('+') => {
                self.pos += 1;
                self.unary()
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('(') => {
                self.depth += 1;
                if self.depth > 100 {
                    return Err("expression nests parentheses too deeply".into());
                }
                self.pos += 1;
                let value = self.sum()?;
                if self.peek() != Some(')') {
                    return Err("missing `)`".into());
                }
                self.pos += 1;
                self.depth -= 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.pos;
                while matches!(self.peek(), Some(c) if c.is_ascii_digit() || c == '.') {
                    self.pos += 1;
                }
                let text: String = self.chars[start..self.pos].iter().collect();
                text.parse()
                    .map_err(|_| format!("`{text}` is not a number"))
            }
            Some(c) => Err(format!("unexpected `{c}` at position {}", self.pos + 1)),
            None => Err("the expression ends too early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calculator_follows_precedence() {
        assert_eq!(calculate("(2+3)*4^2").unwrap(), 80.0);
        assert_eq!(calculate("2^3^2").unwrap(), 512.0);
        assert_eq!(calculate("-3 + 10 % 4").unwrap(), -1.0);
        assert_eq!(calculate("7/2").unwrap(), 3.5);
        assert!(calculate("1/0").unwrap_err().contains("division by zero"));
        assert!(calculate("2+").unwrap_err().contains("ends too early"));
        assert!(calculate("2 $ 3").unwrap_err().contains("`$`"));
        assert!(calculate(&"(".repeat(500)).is_err());
    }

    #[test]
    fn workspace_paths_cannot_escape() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("notes")).unwrap();
        std::fs::write(root.join("notes/a.txt"), "hello").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "nope").unwrap();

        assert!(resolve_in_workspace(&root, "notes/a.txt").is_ok());
        for bad in ["../secret.txt", "notes/../../secret.txt", "/etc/passwd"] {
            let err = resolve_in_workspace(&root, bad).unwrap_err();
            assert!(err.contains("outside the workspace"), "{bad}: {err}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link")).unwrap();
            let err = resolve_in_workspace(&root, "link").unwrap_err();
            assert!(err.contains("through a link"), "{err}");
        }
        let listed = list_files(&root, "notes").unwrap();
        assert_eq!(listed["entries"][0]["name"], "a.txt");
        assert_eq!(read_file(&root, "notes/a.txt").unwrap()["content"], "hello");
    }
}
