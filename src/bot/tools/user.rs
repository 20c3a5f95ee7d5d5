//! User tools: one JSON manifest per tool in `USER_TOOLS_DIR`, run as a subprocess.
//!
//! A manifest (`weather.json`):
//! ```json
//! { "name": "weather", "description": "…", "input_schema": {"type": "object"},
//!   "command": ["python3", "weather.py"], "timeout_secs": 10 }
//! ```
//! The command runs in the manifest's folder with the arguments as JSON on stdin, in a
//! clean environment: a few harmless variables (`PATH`, `HOME`, the locale…) plus the
//! manifest's own `"env": {"NAME": "value"}`, never the bot's secrets. Inside a
//! scheduled run it also gets `PORTHOLE_TASK_ID`, `PORTHOLE_TASK_DUE_AT` and
//! `PORTHOLE_TASK_ATTEMPT` ([`super::ScheduledRun`]); called any other way, none of them.
//! Its stdout is the result (parsed as JSON when it is JSON, text otherwise); only its
//! first MiB is kept, the rest read and dropped, so a tool that writes without end costs
//! no more memory than that (the result then says it was cut). A non-zero exit is a tool
//! error carrying the end of stderr, of which only the last few KiB are kept; a timeout
//! kills the tool's whole process group. A broken manifest is reported and skipped; it never stops the bot.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;

use super::{ToolCall, ToolHandler, ToolRunner};
use crate::bot::child_env::GroupGuard;
use crate::model::{ToolDef, ToolSource};

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    name: String,
    description: String,
    #[serde(default = "empty_object_schema")]
    input_schema: Value,
    command: Vec<String>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    required_roles: Vec<String>,
    /// Variables the tool needs besides the inherited harmless ones.
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

/// What loading the folder found.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub loaded: Vec<String>,
    /// (file, reason) for every manifest that was skipped.
    pub skipped: Vec<(PathBuf, String)>,
    /// The `env` values of every loaded manifest: they often hold credentials, so the
    /// bot counts them among the secrets it redacts wherever they appear.
    pub env_values: Vec<String>,
}

/// Loads every `*.json` manifest in `dir` into the runner. A missing folder means no tools.
pub fn load_user_tools(runner: &ToolRunner, dir: &Path, default_timeout: Duration) -> LoadReport {
    let mut report = LoadReport::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return report;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for file in files {
        match load_one(runner, &file, default_timeout) {
            Ok((name, env_values)) => {
                report.loaded.push(name);
                report.env_values.extend(env_values);
            }
            Err(reason) => {
                tracing::warn!(file = %file.display(), %reason, "skipping user tool");
                report.skipped.push((file, reason));
            }
        }
    }
    report
}

/// Loads one manifest: the registered tool's name and its `env` values.
fn load_one(
    runner: &ToolRunner,
    file: &Path,
    default_timeout: Duration,
) -> Result<(String, Vec<String>), String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read: {e}"))?;
    let manifest = parse_manifest(&text)?;
    let env_values = manifest.env.values().cloned().collect();
    let name = register(
        runner,
        manifest,
        file.parent().unwrap_or(Path::new(".")),
        default_timeout,
    )?;
    Ok((name, env_values))
}

/// Parses and checks a manifest's text; changes nothing. Errors are one line: what
/// they echo of the file has its control characters escaped.
fn parse_manifest(text: &str) -> Result<Manifest, String> {
    check_manifest(text).map_err(|e| crate::text::one_line(&e))
}

fn check_manifest(text: &str) -> Result<Manifest, String> {
    let manifest: Manifest =
        serde_json::from_str(text).map_err(|e| format!("invalid manifest: {e}"))?;
    if manifest.name.is_empty()
        || !manifest
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "name `{}` must be non-empty and use only letters, digits, `_` or `-`",
            manifest.name
        ));
    }
    if manifest.command.is_empty() {
        return Err("`command` must name a program, e.g. [\"python3\", \"tool.py\"]".into());
    }
    Ok(manifest)
}

/// Registers a checked manifest's tool, run in `dir`; on an error nothing is registered.
fn register(
    runner: &ToolRunner,
    manifest: Manifest,
    dir: &Path,
    default_timeout: Duration,
) -> Result<String, String> {
    if runner.get(&manifest.name).is_some() {
        return Err(format!("a tool named `{}` already exists", manifest.name));
    }
    let handler = SubprocessTool {
        command: manifest.command,
        working_dir: dir.to_path_buf(),
        env: manifest.env,
        timeout: manifest
            .timeout_secs
            .map(Duration::from_secs)
            .unwrap_or(default_timeout),
    };
    let name = manifest.name.clone();
    runner.register(
        ToolDef {
            name: manifest.name,
            source: ToolSource::User,
            description: manifest.description,
            input_schema: manifest.input_schema.into(),
            required_roles: manifest.required_roles,
            internal: false,
            read_only: false,
        },
        Arc::new(handler),
    )?;
    Ok(name)
}

/// Fuzzing entry point (`fuzz/targets.rs`, target `user_manifest`): loads one
/// manifest's text into `runner` as [`load_user_tools`] would, and returns the
/// manifest in its canonical form (every field written out) so the fuzzer can check
/// that it loads back the same.
#[doc(hidden)]
pub fn fuzz_load_manifest(runner: &ToolRunner, text: &str) -> Result<Value, String> {
    let manifest = parse_manifest(text)?;
    let canonical = serde_json::to_value(&manifest).map_err(|e| e.to_string())?;
    register(runner, manifest, Path::new("."), Duration::from_secs(30))?;
    Ok(canonical)
}

struct SubprocessTool {
    command: Vec<String>,
    env: std::collections::BTreeMap<String, String>,
    working_dir: PathBuf,
    timeout: Duration,
}

/// How much of a subprocess's stdout is kept; the rest is read and dropped, and the
/// result says so.
const OUTPUT_LIMIT: usize = 1024 * 1024;
/// How much of the end of its stderr is kept for the error of a failed run.
const STDERR_TAIL: usize = 4 * 1024;
/// The most characters of that tail the error quotes.
const STDERR_QUOTED: usize = 500;

#[async_trait]
impl ToolHandler for SubprocessTool {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let run_env = call.ctx.scheduled_run.iter().flat_map(|run| run.env());
        let mut child = crate::bot::child_env::clean_command(&self.command[0], &self.env)
            .args(&self.command[1..])
            .current_dir(&self.working_dir)
            .env("PORTHOLE_CORRELATION_ID", &call.ctx.correlation_id)
            .envs(run_env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", self.command[0]))?;
        // Dropped before `child` (declared after it): a timeout, or a call abandoned
        // mid-way, kills the tool's whole process group while its pid still names it.
        let group = GroupGuard::of(&child);
        if let Some(mut stdin) = child.stdin.take() {
            let input = call.args.to_string();
            // A tool that does not read stdin closes it early; that is not an error.
            let _ = stdin.write_all(input.as_bytes()).await;
        }
        let output = tokio::time::timeout(self.timeout, wait_with_output(&mut child))
            .await
            .map_err(|_| {
                format!(
                    "timed out after {} s and was stopped",
                    self.timeout.as_secs()
                )
            })?
            .map_err(|e| format!("failed while running: {e}"))?;
        group.release();
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr.bytes);
            let chars = stderr.chars().count();
            let tail: String = stderr
                .chars()
                .skip(chars.saturating_sub(STDERR_QUOTED))
                .collect();
            return Err(format!("exited with {}: {}", output.status, tail.trim()));
        }
        Ok(result_of(&output.stdout))
    }
}

/// The tool's result: its stdout as JSON when it is JSON, else as text; stdout that was
/// cut is text, ending with a line that says so.
fn result_of(stdout: &Captured) -> Value {
    let text = String::from_utf8_lossy(&stdout.bytes);
    if stdout.total <= stdout.bytes.len() {
        return serde_json::from_str(text.trim())
            .unwrap_or_else(|_| Value::String(text.into_owned()));
    }
    Value::String(format!(
        "{text}\n[cut: the tool wrote {} bytes; only the first {OUTPUT_LIMIT} are kept]",
        stdout.total
    ))
}

/// What a run left: its exit status and the part of each stream that was kept.
struct Finished {
    status: ExitStatus,
    stdout: Captured,
    stderr: Captured,
}

/// Part of what a stream carried, and how many bytes it carried in all.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    total: usize,
}

/// Which part of a stream is kept.
#[derive(Clone, Copy)]
enum Keep {
    /// The first bytes, up to the limit.
    Head(usize),
    /// The last bytes, at least the limit's worth (up to twice it).
    Tail(usize),
}

/// Reads `pipe` to its end, keeping the part `keep` names and dropping the rest as it
/// comes, so a stream of any length holds a bounded amount of memory.
async fn read_kept(pipe: Option<impl AsyncRead + Unpin>, keep: Keep) -> std::io::Result<Captured> {
    let mut captured = Captured::default();
    let Some(mut pipe) = pipe else {
        return Ok(captured);
    };
    let mut chunk = vec![0; 16 * 1024];
    loop {
        let read = pipe.read(&mut chunk).await?;
        if read == 0 {
            return Ok(captured);
        }
        captured.total += read;
        match keep {
            Keep::Head(limit) => {
                let room = limit.saturating_sub(captured.bytes.len());
                captured.bytes.extend_from_slice(&chunk[..read.min(room)]);
            }
            Keep::Tail(limit) => {
                captured.bytes.extend_from_slice(&chunk[..read]);
                if captured.bytes.len() > 2 * limit {
                    let dropped = captured.bytes.len() - limit;
                    captured.bytes.drain(..dropped);
                }
            }
        }
    }
}

/// The child's exit status and what it wrote (bounded: [`read_kept`]), without giving
/// up the child (so it is not reaped, and its group not left, before the caller decides).
async fn wait_with_output(child: &mut Child) -> std::io::Result<Finished> {
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (status, stdout, stderr) = tokio::try_join!(
        child.wait(),
        read_kept(stdout, Keep::Head(OUTPUT_LIMIT)),
        read_kept(stderr, Keep::Tail(STDERR_TAIL))
    )?;
    Ok(Finished {
        status,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bot::tools::ExecContext;
    use serde_json::json;

    fn write(dir: &Path, name: &str, body: &str) {
        std::fs::write(dir.join(name), body).unwrap();
    }

    /// Found by the `user_manifest` fuzz target: serde's message echoed an unknown
    /// field name with its newline, splitting the log line that reports it.
    #[test]
    fn a_refused_manifest_gives_one_line_and_registers_nothing() {
        let runner = ToolRunner::new(Duration::from_secs(5));
        let error = fuzz_load_manifest(
            &runner,
            "{\"name\": \"x\", \"descriptio\\n\": 1, \"command\": [\"true\"]}",
        )
        .unwrap_err();
        assert!(!error.chars().any(char::is_control), "{error:?}");
        assert!(error.contains("descriptio\\n"), "{error}");
        assert!(runner.is_empty());
    }

    #[tokio::test]
    async fn runs_subprocess_with_stdin_and_skips_broken_manifests() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "upper.json",
            r#"{"name":"upper","description":"uppercases text",
                "input_schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},
                "command":["sh","-c","tr a-z A-Z"]}"#,
        );
        write(
            dir.path(),
            "slow.json",
            r#"{"name":"slow","description":"sleeps","command":["sleep","30"],"timeout_secs":1}"#,
        );
        write(
            dir.path(),
            "fails.json",
            r#"{"name":"fails","description":"exits 3","command":["sh","-c","echo bad thing >&2; exit 3"]}"#,
        );
        write(dir.path(), "broken.json", "{ not json");
        write(
            dir.path(),
            "noname.json",
            r#"{"name":"","description":"x","command":["true"]}"#,
        );

        let runner = ToolRunner::new(Duration::from_secs(30));
        let report = load_user_tools(&runner, dir.path(), Duration::from_secs(10));
        assert_eq!(report.loaded, vec!["fails", "slow", "upper"]);
        assert_eq!(report.skipped.len(), 2);

        let ctx = ExecContext::new(&[]);
        let out = runner
            .call("upper", json!({"text": "abc"}), &ctx)
            .await
            .unwrap();
        // stdin carried the JSON arguments; stdout is JSON again after uppercasing.
        assert_eq!(out, json!({"TEXT": "ABC"}));
        assert_eq!(runner.get("upper").unwrap().def.source, ToolSource::User);

        let err = runner.call("slow", json!({}), &ctx).await.unwrap_err();
        assert!(err.to_string().contains("timed out after 1 s"), "{err}");
        let err = runner.call("fails", json!({}), &ctx).await.unwrap_err();
        assert!(err.to_string().contains("bad thing"), "{err}");
    }

    /// A tool that writes megabytes runs to its end; the result keeps the first MiB of
    /// stdout and says it was cut, and a failure quotes the end of a long stderr.
    #[tokio::test]
    async fn long_output_is_cut_and_said_so() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "flood.json",
            r#"{"name":"flood","description":"writes 3 MB","command":["sh","-c",
                "head -c 3000000 /dev/zero | tr '\\0' a; head -c 2000000 /dev/zero >&2"]}"#,
        );
        write(
            dir.path(),
            "noisy.json",
            r#"{"name":"noisy","description":"fails after 2 MB of stderr","command":["sh","-c",
                "head -c 2000000 /dev/zero | tr '\\0' n >&2; echo the real reason >&2; exit 4"]}"#,
        );
        let runner = ToolRunner::new(Duration::from_secs(30));
        let report = load_user_tools(&runner, dir.path(), Duration::from_secs(20));
        assert_eq!(
            report.loaded,
            vec!["flood", "noisy"],
            "{:?}",
            report.skipped
        );
        let ctx = ExecContext::new(&[]);

        let out = runner.call("flood", json!({}), &ctx).await.unwrap();
        let text = out.as_str().expect("cut output is text");
        let kept = text.bytes().take_while(|&b| b == b'a').count();
        assert_eq!(kept, OUTPUT_LIMIT);
        assert!(
            text[kept..].contains("cut: the tool wrote 3000000 bytes"),
            "{}",
            &text[kept..]
        );

        let err = runner.call("noisy", json!({}), &ctx).await.unwrap_err();
        let err = err.to_string();
        assert!(err.contains("the real reason"), "{err}");
        assert!(err.len() < 2 * STDERR_QUOTED, "{} bytes", err.len());
    }
}
