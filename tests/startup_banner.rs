//! What the real `porthole` binary prints at start-up about `/mcp`: the `claude mcp
//! add` line only when the endpoint can be used, and what to set when it cannot.

mod common;

use std::time::Duration;

use common::spawn_porthole;

/// Starts the binary in an empty folder (no `.env`) with `env` on top of a minimal
/// environment; returns its standard output up to the first blank line after the
/// endpoint paragraph, and the port it listens on.
async fn startup_output(env: &[(&str, &str)]) -> (String, u16) {
    let dir = tempfile::tempdir().unwrap();
    let (mut bot, mut lines) = spawn_porthole(dir.path(), env);
    let mut seen = String::new();
    let mut port = 0;
    tokio::time::timeout(Duration::from_secs(20), async {
        let mut in_paragraph = false;
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("listening on http://127.0.0.1:").nth(1) {
                port = rest.trim().parse().unwrap_or(0);
            }
            if line.starts_with("Porthole MCP endpoint") {
                in_paragraph = true;
            }
            if in_paragraph {
                if line.trim().is_empty() {
                    return;
                }
                seen.push_str(&line);
                seen.push('\n');
            }
        }
        panic!("the bot exited before announcing /mcp; it printed:\n{seen}");
    })
    .await
    .expect("the bot announces /mcp");
    let _ = bot.kill().await;
    (seen, port)
}

#[tokio::test]
async fn without_a_secret_start_up_says_what_to_set_instead_of_how_to_connect() {
    let (out, _) = startup_output(&[]).await;
    assert!(
        !out.contains("Connect Claude Code"),
        "no connect line for an endpoint that answers 500:\n{out}"
    );
    assert!(!out.contains("claude mcp add"), "{out}");
    assert!(out.contains("NOT usable"), "{out}");
    assert!(out.contains("MCP_SERVER_SECRET is not set"), "{out}");
    assert!(out.contains("porthole token"), "{out}");
    assert!(out.contains("500"), "{out}");
}

#[tokio::test]
async fn with_a_secret_start_up_prints_the_connect_line_without_the_token() {
    let token = "banner-test-secret-0123456789abcdef";
    let (out, port) = startup_output(&[("MCP_SERVER_SECRET", token)]).await;
    assert!(out.contains("Connect Claude Code"), "{out}");
    assert!(
        out.contains(&format!(
            "claude mcp add --transport http porthole http://127.0.0.1:{port}/mcp --header \"Authorization: Bearer $MCP_SERVER_SECRET\""
        )),
        "{out}"
    );
    assert!(!out.contains(token), "the token is never printed:\n{out}");
}

#[tokio::test]
async fn with_auth_disabled_the_connect_line_has_no_header() {
    let (out, port) = startup_output(&[("MCP_SERVER_AUTH_DISABLED", "true")]).await;
    assert!(out.contains("authentication is DISABLED"), "{out}");
    assert!(
        out.contains(&format!(
            "claude mcp add --transport http porthole http://127.0.0.1:{port}/mcp\n"
        )),
        "{out}"
    );
}

/// Runs `porthole <args>` to its end in a folder holding `.env` = `env_file`, with
/// `env` on top of a minimal environment; returns the output and the `.env` after it.
fn run_with_env_file(
    args: &[&str],
    env_file: &str,
    env: &[(&str, &str)],
) -> (std::process::Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".env");
    std::fs::write(&path, env_file).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_porthole"))
        .args(args)
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .output()
        .expect("the porthole binary runs");
    (out, std::fs::read_to_string(&path).unwrap())
}

#[test]
fn a_env_line_that_cannot_be_read_stops_start_up_with_its_line_number() {
    // Before, `hello world` silently dropped itself and every line after it (the bot
    // listened on 3000), and an unclosed quote left the secret unset.
    let cases = [
        ("# settings\nhello world\nPORT=40455\n", "line 2"),
        (
            "PORT=0\nMCP_SERVER_SECRET=\"unclosed-0123456789abcdef\nX=1\n",
            "line 2",
        ),
    ];
    for (text, line) in cases {
        let (out, _) = run_with_env_file(&[], text, &[("DATABASE_PATH", ":memory:")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?}: {stderr}");
        assert!(stderr.contains(line) && stderr.contains(".env"), "{stderr}");
        assert!(
            !stderr.contains("unclosed-0123"),
            "the value is not echoed: {stderr}"
        );
    }
}

#[test]
fn porthole_token_reads_env_as_the_bot_does() {
    // The environment's PORT wins over `.env`'s, as it does for the bot.
    let (out, written) = run_with_env_file(&["token"], "PORT=5555\n", &[("PORT", "4321")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("http://127.0.0.1:4321/mcp"), "{stdout}");
    assert!(written.contains("MCP_SERVER_SECRET="), "{written}");
    // `.env`'s port when the environment has none; a quoted secret is kept.
    let (out, written) = run_with_env_file(
        &["token"],
        "PORT=5555\nMCP_SERVER_SECRET='kept-secret-0123456789abcdef'\n",
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("http://127.0.0.1:5555/mcp"), "{stdout}");
    assert!(stdout.contains("already set"), "{stdout}");
    assert!(
        written.contains("'kept-secret-0123456789abcdef'"),
        "{written}"
    );
    // A secret the bot could not read is refused, and `.env` is left as it was.
    let broken = "MCP_SERVER_SECRET=\"never-closed\nPORT=1\n";
    let (out, written) = run_with_env_file(&["token"], broken, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("line 1"), "{stderr}");
    assert_eq!(written, broken);
}

/// The start-up log lines `docs/getting-started.md` shows, each as (what it says, its
/// `key=value` fields), with the port made neutral.
fn log_lines(text: &str) -> Vec<(String, Vec<String>)> {
    let port = regex::Regex::new(r"127\.0\.0\.1:\d+").unwrap();
    let field = regex::Regex::new(r#" ([a-z_]+)=("[^"]*"|\S+)"#).unwrap();
    text.lines()
        .filter_map(|line| Some(line.split_once("INFO ")?.1))
        .map(|line| {
            let line = port.replace_all(line, "127.0.0.1:PORT");
            let says = field.replace_all(&line, "").trim().to_string();
            let fields = field
                .captures_iter(&line)
                .filter(|c| &c[1] != "replica" && &c[1] != "path")
                .map(|c| format!("{}={}", &c[1], &c[2]))
                .collect();
            (says, fields)
        })
        .collect()
}

#[tokio::test]
async fn the_start_up_log_in_getting_started_is_what_the_bot_prints() {
    let doc = include_str!("../docs/getting-started.md");
    let sample = doc
        .split("```text")
        .find(|block| block.contains("database ready"))
        .and_then(|block| block.split("```").next())
        .expect("getting-started.md shows the start-up log");
    let shown = log_lines(sample);
    assert!(shown.len() >= 5, "{shown:?}");

    let dir = tempfile::tempdir().unwrap();
    let (mut bot, mut lines) = spawn_porthole(
        dir.path(),
        &[
            ("NO_COLOR", "1"),
            ("MCP_SERVER_SECRET", "getting-started-0123456789abcdef"),
        ],
    );
    let mut printed = String::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            printed.push_str(&line);
            printed.push('\n');
            if line.contains("MCP endpoint ready") {
                return;
            }
        }
    })
    .await
    .expect("the bot says its MCP endpoint is ready");
    let _ = bot.kill().await;
    let ansi = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
    let printed = log_lines(&ansi.replace_all(&printed, ""));
    for line in &shown {
        assert!(
            printed.contains(line),
            "getting-started.md shows {line:?}; the bot printed:\n{printed:#?}"
        );
    }
}

#[test]
fn a_database_url_that_cannot_be_parsed_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_porthole"))
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DATABASE_URL", "postgres://user:pa55word-77@h:notaport/db")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("configuration error: DATABASE_URL="),
        "{said}"
    );
    assert!(said.contains("USER:PASSWORD@"), "{said}");
    assert!(!said.contains("pa55word-77"), "{said}");
}

#[test]
fn a_command_given_arguments_it_does_not_take_is_refused() {
    let (out, env_after) = run_with_env_file(&["token", "extra"], "PORT=40455\n", &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("takes no arguments"), "{stderr}");
    assert_eq!(env_after, "PORT=40455\n", ".env is left as it was");
}
