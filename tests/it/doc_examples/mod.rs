//! Running a page's curl examples against a live bot: its fenced blocks, a shell that
//! runs one example as written (bash and curl, with the page's set-up), and the
//! whole-answer comparison of a shown answer with what the bot sent.
//!
//! A shown answer is compared whole: every key the bot sent must be shown, and every
//! value shown must be the one sent. What the page elides it says so: `{…}` is any
//! object, `[…]` any array, `"…"` any value, `"text…"` a string that starts with
//! `text`, and `…` as the last member of an object stands for further members. Keys
//! whose values change from run to run (times, random ids) are checked for presence
//! and type only.

#![allow(dead_code)]

use std::time::Duration;

use serde_json::Value;

pub struct Block {
    pub lang: String,
    pub body: String,
}

pub fn fenced_blocks(doc: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    for line in doc.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(lang)) => {
                current = Some(Block {
                    lang: lang.trim().to_string(),
                    body: String::new(),
                })
            }
            (Some(_), Some(_)) => blocks.extend(current.take()),
            (Some(block), None) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// A folder holding a `cargo` that runs this build's `porthole` binary with the
/// arguments after `--`: the docs' `$(cargo run -q --release -- token --print)` then reads
/// `.env` with the bot's own reader, as it does for a user, without a release build.
pub fn cargo_stand_in(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join(".stand-ins");
    std::fs::create_dir_all(&bin).unwrap();
    let cargo = bin.join("cargo");
    let script = format!(
        "#!/bin/sh\nwhile [ \"$1\" != \"--\" ]; do shift; done\nshift\nexec '{}' \"$@\"\n",
        env!("CARGO_BIN_EXE_porthole")
    );
    std::fs::write(&cargo, script).unwrap();
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Runs one shell snippet in `dir`, with [`cargo_stand_in`] first on `PATH`; returns
/// its standard output. While it runs, `during` happens once after a moment (for
/// streaming examples).
pub async fn run_shell(
    dir: &std::path::Path,
    script: &str,
    during: impl std::future::Future,
) -> String {
    let path = format!(
        "{}:{}",
        cargo_stand_in(dir).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("MCP_SERVER_SECRET")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("bash runs");
    let output = child.wait_with_output();
    tokio::pin!(output);
    let trigger = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        during.await;
    };
    let output = tokio::select! {
        out = &mut output => out,
        _ = trigger => output.await,
    }
    .expect("the example finishes");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// One curl example of a page: the command block and the answer shown under it.
pub struct Example {
    pub command: String,
    pub shown: Option<String>,
}

impl Example {
    /// The method the command sends (its `Mcp-Method` header), to name the example in
    /// a failure.
    pub fn title(&self) -> &str {
        self.command
            .split("Mcp-Method: ")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap_or_else(|| self.command.lines().next().unwrap_or_default())
    }
}

/// The page's bash blocks in order: those without `curl` are set-up (variables), as
/// are the lines before a block's first `curl`; the rest are examples, each with the
/// `json` block right after it, if any.
pub fn examples(doc: &str) -> (String, Vec<Example>) {
    let blocks = fenced_blocks(doc);
    let mut setup = String::new();
    let mut examples = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        if block.lang != "bash" {
            continue;
        }
        let Some(first_curl) = block.body.find("curl ") else {
            setup.push_str(&block.body);
            continue;
        };
        // Variables set before the first command hold for the page's later examples.
        setup.push_str(&block.body[..first_curl]);
        let shown = blocks
            .get(i + 1)
            .filter(|b| b.lang == "json")
            .map(|b| b.body.clone());
        examples.push(Example {
            command: block.body.clone(),
            shown,
        });
    }
    (setup, examples)
}

/// A folder to run a page's examples in, with the `.env` and the set-up of
/// docs/curl.md (`URL`, `AUTH`, `ACCEPT`, `JSON`) pointed at the live bot at `base`.
pub struct Shell {
    dir: tempfile::TempDir,
    base: String,
    pub prelude: String,
}

impl Shell {
    pub fn new(base: &str, token: &str) -> Shell {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".env"),
            format!("MCP_SERVER_SECRET={token}\n"),
        )
        .unwrap();
        let curl_md = include_str!("../../../docs/curl.md");
        let setup = fenced_blocks(curl_md)
            .into_iter()
            .find(|b| b.body.contains("URL=http://127.0.0.1:3000/mcp"))
            .expect("docs/curl.md has its set-up block");
        let mut shell = Shell {
            dir,
            base: base.to_string(),
            prelude: String::new(),
        };
        shell.prelude = shell.live(&setup.body);
        shell
    }

    fn live(&self, text: &str) -> String {
        text.replace("http://127.0.0.1:3000", &self.base)
    }

    /// Runs `command` after the prelude; streaming (`-N`) commands stop after 2 s.
    pub async fn run(&self, command: &str) -> String {
        let command = self.live(command).replace(" -sN ", " -sN --max-time 2 ");
        run_shell(
            self.dir.path(),
            &format!("{}\n{command}", self.prelude),
            async {},
        )
        .await
    }
}

/// The one JSON value of a curl answer: the body, or the `data:` of an SSE stream.
pub fn answer_value(answered: &str) -> Value {
    if let Ok(v) = serde_json::from_str(answered.trim()) {
        return v;
    }
    answered
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find_map(|l| serde_json::from_str(l.trim()).ok())
        .unwrap_or_else(|| panic!("no JSON in the answer: {answered}"))
}

const ANY_OBJECT: &str = "⟪any object⟫";
const ANY_ARRAY: &str = "⟪any array⟫";
const MORE: &str = "⟪more members⟫";

/// The shown answer as JSON, its elisions turned into markers.
fn shown_value(shown: &str) -> Value {
    let text = shown
        .trim()
        .replace("{…}", &format!("\"{ANY_OBJECT}\""))
        .replace("[…]", &format!("\"{ANY_ARRAY}\""))
        .replace(", …}", &format!(",\"{MORE}\":0}}"))
        .replace(",…}", &format!(",\"{MORE}\":0}}"));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the shown answer is not JSON ({e}): {shown}"))
}

/// What in `answered` the shown answer does not match, whole: a key sent but not
/// shown is a difference too. `volatile` keys are compared by type only.
pub fn whole_answer_differences(shown: &str, answered: &Value, volatile: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    compare(&shown_value(shown), answered, "", volatile, &mut problems);
    problems
}

fn compare(
    shown: &Value,
    answered: &Value,
    path: &str,
    volatile: &[&str],
    problems: &mut Vec<String>,
) {
    let mut differ = |what: String| problems.push(format!("{path}: {what}"));
    match (shown, answered) {
        (Value::String(s), _) if s == "…" => {}
        (Value::String(s), Value::Object(_)) if s == ANY_OBJECT => {}
        (Value::String(s), Value::Array(_)) if s == ANY_ARRAY => {}
        (Value::String(s), Value::String(a)) if s.ends_with('…') => {
            if !a.starts_with(s.trim_end_matches('…')) {
                differ(format!("shown `{s}`, the bot sent `{a}`"));
            }
        }
        (Value::Object(s), Value::Object(a)) => {
            for (key, value) in s.iter().filter(|(k, _)| *k != MORE) {
                let inner = format!("{path}.{key}");
                match a.get(key) {
                    None => problems.push(format!("{inner}: shown, but the bot did not send it")),
                    Some(sent) if volatile.contains(&key.as_str()) => {
                        if std::mem::discriminant(sent) != std::mem::discriminant(value) {
                            problems
                                .push(format!("{inner}: shown `{value}`, the bot sent `{sent}`"));
                        }
                    }
                    Some(sent) => compare(value, sent, &inner, volatile, problems),
                }
            }
            if !s.contains_key(MORE) {
                for (key, sent) in a.iter().filter(|(k, _)| !s.contains_key(*k)) {
                    problems.push(format!(
                        "{path}.{key}: the bot sent `{}`, the page does not show it",
                        elide(&sent.to_string())
                    ));
                }
            }
        }
        (Value::Array(s), Value::Array(a)) if s.len() == a.len() => {
            for (i, (value, sent)) in s.iter().zip(a).enumerate() {
                compare(value, sent, &format!("{path}[{i}]"), volatile, problems);
            }
        }
        (Value::Number(s), Value::Number(a)) if s.as_f64() == a.as_f64() => {}
        _ if shown == answered => {}
        _ => differ(format!(
            "shown `{}`, the bot sent `{}`",
            elide(&shown.to_string()),
            elide(&answered.to_string())
        )),
    }
}

fn elide(text: &str) -> String {
    if text.chars().count() > 160 {
        format!("{}…", text.chars().take(160).collect::<String>())
    } else {
        text.to_string()
    }
}
