//! Generates `docs/tools.md` from the live tool registry: starts a throwaway bot
//! (in-memory database, offline provider), lists its MCP tools over real HTTP, and runs
//! each with an example so the reference shows real calls and real results.
//!
//! ```text
//! cargo run --example tools_doc > docs/tools.md
//! ```
//!
//! `tests/it/tools_doc.rs` fails when a tool, its description or a parameter is missing
//! from the committed file, so the reference cannot drift from the code.

use std::collections::HashMap;
use std::fmt::Write as _;

use porthole::app::{Logging, start};
use porthole::config::Config;
use serde_json::{Value, json};

const TOKEN: &str = "docs-example-token-0123456789abcdef";

/// Example arguments per tool; `None` means "shown, not run" (it needs something the
/// throwaway bot does not have).
fn example(name: &str, conversation: &str, task: i64) -> (Value, bool) {
    match name {
        "server_log" => (
            json!({"level": "log", "grep": "listening", "limit": 2}),
            true,
        ),
        "web_log" => (json!({"level": "warn", "limit": 20}), true),
        "health" | "list_agents" | "get_agent_state" | "list_mcp_servers" | "list_tasks"
        | "list_skills" | "get_config" => (json!({}), true),
        "set_log_level" => (
            json!({"filter": "info,porthole::bot=debug", "duration_secs": 300}),
            false,
        ),
        "db_query" => (
            json!({"query": "SELECT id, role, content FROM messages ORDER BY id LIMIT ?1", "params": [2]}),
            true,
        ),
        "list_conversations" => (json!({"limit": 5}), true),
        "list_messages" => (json!({"conversation_id": conversation, "limit": 2}), true),
        "list_tools" => (json!({"source": "native"}), true),
        "get_tool_schema" => (json!({"name": "calculator"}), true),
        "run_tool" => (
            json!({"tool_name": "calculator", "parameters": {"expression": "(2+3)*4"}}),
            true,
        ),
        "toggle_mcp_server" => (json!({"name": "files", "enabled": false}), false),
        "toggle_tool" => (json!({"name": "calculator", "enabled": false}), false),
        "run_task" => (json!({"id": task}), true),
        "send_message" => (json!({"content": "/run current_time {}"}), true),
        // The throwaway bot is offline: nothing to replay.
        "replay_llm_call" => (
            json!({"span_id": "5f0c2b6a9d1e4f37", "system": "Answer in one sentence.", "temperature": 0.2, "runs": 2}),
            false,
        ),
        "replay_llm_calls" => (
            json!({"conversation_id": conversation, "system": "Call a tool before you answer.", "limit": 5}),
            false,
        ),
        "replay_turn" => (
            json!({"span_id": "5f0c2b6a9d1e4f37", "system": "Check the time before you answer.", "tools": "read_only"}),
            false,
        ),
        _ => (json!({}), false),
    }
}

fn type_of(schema: &Value) -> String {
    match &schema["type"] {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" \\| "),
        _ => match schema["oneOf"].as_array() {
            Some(alternatives) => alternatives
                .iter()
                .map(type_of)
                .collect::<Vec<_>>()
                .join(" \\| "),
            None => "any".into(),
        },
    }
}

fn bounds(schema: &Value) -> String {
    let mut parts = Vec::new();
    for (key, label) in [
        ("minimum", "min"),
        ("maximum", "max"),
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("default", "default"),
    ] {
        if let Some(v) = schema.get(key) {
            parts.push(format!("{label} {v}"));
        }
    }
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", v.as_str().unwrap_or_default()))
            .collect();
        parts.push(format!("one of {}", values.join(", ")));
    }
    parts.join("; ")
}

/// Shortens long results for the reference: long strings and long arrays are cut.
fn shorten(value: &Value, depth: usize) -> Value {
    match value {
        Value::String(s) if s.chars().count() > 160 => {
            Value::String(format!("{}…", s.chars().take(160).collect::<String>()))
        }
        Value::Array(items) if items.len() > 3 || depth > 3 => {
            let mut kept: Vec<Value> = items
                .iter()
                .take(if depth > 3 { 1 } else { 3 })
                .map(|v| shorten(v, depth + 1))
                .collect();
            if items.len() > kept.len() {
                kept.push(Value::String(format!(
                    "… {} more",
                    items.len() - kept.len()
                )));
            }
            Value::Array(kept)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| shorten(v, depth + 1)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), shorten(v, depth + 1)))
                .collect(),
        ),
        other => other.clone(),
    }
}

async fn rpc(client: &reqwest::Client, url: &str, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut request = client
        .post(url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        request = request.header("mcp-name", name);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    request
        .body(body.to_string())
        .send()
        .await
        .expect("bot answers")
        .json()
        .await
        .expect("JSON")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let vars: HashMap<String, String> = [
        ("PORT", "0".to_string()),
        ("DATABASE_PATH", ":memory:".to_string()),
        ("MCP_SERVER_ENABLED", "true".to_string()),
        ("MCP_SERVER_SECRET", TOKEN.to_string()),
        ("SCHEDULER_ENABLED", "false".to_string()),
        (
            "WORKSPACE_DIR",
            dir.path().join("workspace").display().to_string(),
        ),
        (
            "USER_TOOLS_DIR",
            dir.path().join("user-tools").display().to_string(),
        ),
        (
            "SKILLS_DIR",
            dir.path().join("skills").display().to_string(),
        ),
        (
            "MCP_SERVERS_CONFIG",
            dir.path().join("mcp.json").display().to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let app = start(Config::from_map(&vars)?, Logging::default()).await?;
    let url = format!("{}/mcp", app.url());
    let client = reqwest::Client::new();

    // Some data for the examples to show.
    let reply = app
        .bot
        .supervisor
        .send(
            None,
            "/run calculator {\"expression\": \"6*7\"}",
            &porthole::bot::tools::ExecContext::new(&["user"]),
            None,
        )
        .await?;
    let task = app
        .bot
        .schedule
        .create(
            "heartbeat",
            "Checks the clock every hour",
            "0 * * * *",
            json!({"tool": "current_time"}),
            porthole::bot::schedule::RunAs::User,
        )
        .await?;

    let listing = rpc(&client, &url, "tools/list", json!({})).await;
    let tools = listing["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();

    let mut out = String::new();
    writeln!(out, "# MCP tool reference\n")?;
    writeln!(
        out,
        "Generated by `cargo run --example tools_doc > docs/tools.md` from the live registry: every example"
    )?;
    writeln!(
        out,
        "below is a real call against a fresh bot (offline provider, in-memory database). Long results are"
    )?;
    writeln!(
        out,
        "shortened. Every result also comes back as JSON text in `content` for clients that ignore"
    )?;
    writeln!(
        out,
        "`structuredContent`, and passes through secret redaction first.\n"
    )?;
    writeln!(out, "| tool | what it does | annotations |\n|---|---|---|")?;
    for tool in &tools {
        let a = &tool["annotations"];
        let hint = if a["destructiveHint"] == true {
            "destructive"
        } else if a["readOnlyHint"] == true {
            "read-only"
        } else {
            "changes state"
        };
        let first = tool["description"]
            .as_str()
            .unwrap_or_default()
            .split(". ")
            .next()
            .unwrap_or_default();
        writeln!(
            out,
            "| [`{0}`](#{0}) | {1} | {2} |",
            tool["name"].as_str().unwrap_or_default(),
            first.trim_end_matches('.'),
            hint
        )?;
    }
    for tool in &tools {
        let name = tool["name"].as_str().unwrap_or_default();
        writeln!(out, "\n## {name}\n")?;
        if let Some(title) = tool["title"].as_str() {
            writeln!(
                out,
                "**{title}.** {}\n",
                tool["description"].as_str().unwrap_or_default()
            )?;
        } else {
            writeln!(
                out,
                "{}\n",
                tool["description"].as_str().unwrap_or_default()
            )?;
        }
        let a = &tool["annotations"];
        writeln!(
            out,
            "Annotations: readOnlyHint={}, destructiveHint={}, idempotentHint={}, openWorldHint={}\n",
            a["readOnlyHint"], a["destructiveHint"], a["idempotentHint"], a["openWorldHint"]
        )?;
        if let Some(chars) = tool["_meta"]["anthropic/maxResultSizeChars"].as_u64() {
            writeln!(
                out,
                "Result size: up to {chars} characters, declared as `_meta[\"anthropic/maxResultSizeChars\"]` \
                 so a client that cuts long results keeps this one whole.\n"
            )?;
        }
        if let Some(support) = tool["execution"]["taskSupport"].as_str() {
            writeln!(
                out,
                "Task support: {support}. A client that declares the Tasks extension gets a task handle to poll \
                 (see [tasks.md](tasks.md)); other clients get the blocking call.\n"
            )?;
        }
        let required: Vec<&str> = tool["inputSchema"]["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match tool["inputSchema"]["properties"]
            .as_object()
            .filter(|p| !p.is_empty())
        {
            None => writeln!(out, "Parameters: none.\n")?,
            Some(props) => {
                writeln!(
                    out,
                    "| parameter | type | required | description |\n|---|---|---|---|"
                )?;
                for (param, schema) in props {
                    let mut description = schema["description"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let mut extra = bounds(schema);
                    if let Some(aliases) = schema["x-aliases"].as_array() {
                        let aliases: Vec<String> = aliases
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|a| format!("`{a}`"))
                            .collect();
                        let also = format!("also accepted as {}", aliases.join(", "));
                        extra = if extra.is_empty() {
                            also
                        } else {
                            format!("{extra}; {also}")
                        };
                    }
                    if !extra.is_empty() {
                        description = if description.is_empty() {
                            extra
                        } else {
                            format!("{description} ({extra})")
                        };
                    }
                    writeln!(
                        out,
                        "| `{param}` | {} | {} | {description} |",
                        type_of(schema),
                        if required.contains(&param.as_str()) {
                            "yes"
                        } else {
                            "no"
                        }
                    )?;
                }
                writeln!(out)?;
            }
        }
        if let Some(fields) = tool["outputSchema"]["properties"].as_object() {
            let names: Vec<String> = fields.keys().map(|k| format!("`{k}`")).collect();
            writeln!(out, "Structured result fields: {}.\n", names.join(", "))?;
        }
        let (args, run) = example(name, &reply.conversation_id, task.id);
        writeln!(
            out,
            "Example call:\n\n```json\n{}\n```\n",
            serde_json::to_string_pretty(&json!({"name": name, "arguments": args}))?
        )?;
        if run {
            let result = rpc(
                &client,
                &url,
                "tools/call",
                json!({"name": name, "arguments": args}),
            )
            .await;
            let shown = if result["result"]["isError"] == true {
                result["result"]["content"][0]["text"].clone()
            } else {
                shorten(&result["result"]["structuredContent"], 0)
            };
            writeln!(
                out,
                "Result (`structuredContent`):\n\n```json\n{}\n```",
                serde_json::to_string_pretty(&shown)?
            )?;
        } else {
            writeln!(
                out,
                "(Not run here: the reference's bot is offline, with no MCP server of its own and its log filter fixed.)"
            )?;
        }
    }
    print!("{out}");
    app.shutdown().await;
    Ok(())
}
