//! What the real `porthole` binary prints at start-up about `/mcp`: the `claude mcp
//! add` line only when the endpoint can be used, and what to set when it cannot.

use crate::common;

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
    assert!(out.contains("`cargo run --release -- token`"), "{out}");
    assert!(out.contains("500"), "{out}");
}

#[tokio::test]
async fn without_a_secret_start_up_never_says_ready() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bot, mut lines) = spawn_porthole(dir.path(), &[("NO_COLOR", "1")]);
    let mut printed = String::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        // The last line start-up prints is the paragraph's last one.
        while let Some(line) = lines.next_line().await.unwrap() {
            printed.push_str(&line);
            printed.push('\n');
            if line.contains("then restart the bot") {
                return;
            }
        }
    })
    .await
    .expect("the bot says /mcp is not usable");
    // Lines logged right after the paragraph would still be in flight: give them time.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = bot.kill().await;
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_millis(200), lines.next_line()).await
    {
        printed.push_str(&line);
        printed.push('\n');
    }
    assert!(printed.contains("ERROR"), "{printed}");
    assert!(!printed.to_lowercase().contains("ready at"), "{printed}");
}

#[tokio::test]
async fn with_a_secret_start_up_prints_the_connect_line_without_the_token() {
    let token = "banner-test-secret-0123456789abcdef";
    let (out, port) = startup_output(&[("MCP_SERVER_SECRET", token)]).await;
    assert!(
        out.contains("Connect Claude Code from this folder"),
        "{out}"
    );
    assert!(out.contains(&connect_line(port)), "{out}");
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

/// The one connect line the banner, `token` and the docs print.
fn connect_line(port: u16) -> String {
    format!(
        "claude mcp add --transport http porthole http://127.0.0.1:{port}/mcp --header \"Authorization: Bearer $(cargo run -q --release -- token --print)\""
    )
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
    assert!(stdout.contains(&connect_line(4321)), "{stdout}");
    assert!(written.contains("MCP_SERVER_SECRET="), "{written}");
    // `.env`'s port when the environment has none; a quoted secret is kept.
    let (out, written) = run_with_env_file(
        &["token"],
        "PORT=5555\nMCP_SERVER_SECRET='kept-secret-0123456789abcdef'\n",
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&connect_line(5555)), "{stdout}");
    assert!(stdout.contains("already set"), "{stdout}");
    assert!(!stdout.contains("kept-secret"), "{stdout}");
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
    let doc = include_str!("../../docs/getting-started.md");
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
    assert!(stderr.contains("takes only `--print`"), "{stderr}");
    assert_eq!(env_after, "PORT=40455\n", ".env is left as it was");
}

/// Every way the bot reads `.env` lets `token --print` read the same secret: the recipe
/// every doc page gives for the token.
#[test]
fn token_print_reads_env_files_as_the_bot_does() {
    let secret = "print-me-0123456789abcdef";
    for env_file in [
        format!("MCP_SERVER_SECRET={secret}\n"),
        format!("export MCP_SERVER_SECRET={secret}\n"),
        format!("MCP_SERVER_SECRET = {secret}\n"),
        format!("MCP_SERVER_SECRET=\"{secret}\"\n"),
        format!("MCP_SERVER_SECRET='{secret}'\n"),
        format!("PORT=3000\r\nMCP_SERVER_SECRET={secret}\r\n"),
        format!("export MCP_SERVER_SECRET = \"{secret}\"\r\n"),
    ] {
        let (out, _) = run_with_env_file(&["token", "--print"], &env_file, &[]);
        assert!(out.status.success(), "{env_file:?}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{secret}\n"),
            "{env_file:?}"
        );
    }
    // The environment wins, as it does for the bot.
    let (out, _) = run_with_env_file(
        &["token", "--print"],
        &format!("MCP_SERVER_SECRET={secret}\n"),
        &[("MCP_SERVER_SECRET", "from-the-environment-0123")],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "from-the-environment-0123\n"
    );
    // No secret: nothing a `$(…)` could take for a token, and the way to make one.
    let (out, _) = run_with_env_file(&["token", "--print"], "PORT=3000\n", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("`cargo run --release -- token`"));
}

/// The connect line, pasted into a shell that never saw `.env` (nothing exported),
/// gives `claude mcp add` a header with the token. `cargo` and `claude` are stand-ins on
/// `PATH`: `cargo run … -- ARGS` runs this build's binary with ARGS, `claude` writes down
/// the arguments it was given.
#[tokio::test]
async fn the_printed_connect_line_carries_the_token_in_a_clean_shell() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "pasted-line-0123456789abcdef";
    std::fs::write(
        dir.path().join(".env"),
        format!("export MCP_SERVER_SECRET = \"{secret}\"\r\nMCP_SERVER_ENABLED=true\r\n"),
    )
    .unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let stand_in = |name: &str, script: String| {
        use std::os::unix::fs::PermissionsExt;
        let path = bin.join(name);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    stand_in(
        "cargo",
        format!(
            "#!/bin/sh\nwhile [ \"$1\" != \"--\" ]; do shift; done\nshift\nexec '{}' \"$@\"\n",
            env!("CARGO_BIN_EXE_porthole")
        ),
    );
    let args_file = dir.path().join("claude-args");
    stand_in(
        "claude",
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n",
            args_file.display()
        ),
    );
    let path = format!("{}:/usr/bin:/bin", bin.display());

    // The line as `token` prints it and as the banner prints it.
    let token = std::process::Command::new(env!("CARGO_BIN_EXE_porthole"))
        .arg("token")
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", &path)
        .output()
        .unwrap();
    let token_says = String::from_utf8_lossy(&token.stdout).to_string();
    let (mut bot, mut lines) = spawn_porthole(dir.path(), &[]);
    let banner = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.trim_start().starts_with("claude mcp add") {
                return line;
            }
        }
        panic!("the bot printed no connect line");
    })
    .await
    .unwrap();
    let _ = bot.kill().await;
    let port = banner
        .split("127.0.0.1:")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let banner = banner.replace(&format!(":{port}/"), ":3000/");
    assert!(
        token_says.contains(banner.trim()),
        "token:\n{token_says}\nbanner:\n{banner}"
    );
    assert!(!token_says.contains(secret) && !banner.contains(secret));

    let ran = std::process::Command::new("bash")
        .args(["-c", banner.trim()])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(ran.status.success(), "{ran:?}");
    let args = std::fs::read_to_string(&args_file).unwrap();
    let args: Vec<&str> = args.lines().collect();
    let header = args.iter().position(|a| *a == "--header").unwrap();
    assert_eq!(
        args[header + 1],
        format!("Authorization: Bearer {secret}"),
        "{args:?}"
    );
}

/// A refused token leaves a WARN line in the bot's log, once for a burst of retries,
/// and never the token it was sent.
#[tokio::test]
async fn a_refused_token_is_logged_once_without_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bot, mut lines) = spawn_porthole(
        dir.path(),
        &[
            ("NO_COLOR", "1"),
            ("MCP_SERVER_SECRET", "the-right-secret-0123456789"),
        ],
    );
    let port = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("listening on http://127.0.0.1:").nth(1) {
                return rest.trim().parse::<u16>().unwrap();
            }
        }
        panic!("the bot exited before listening");
    })
    .await
    .unwrap();
    let client = reqwest::Client::new();
    for header in [
        "Bearer wrong-guess-abcdef0123456789",
        "Bearer wrong-guess-abcdef0123456789",
        "Bearer ",
    ] {
        let r = client
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .header("Authorization", header)
            .header("Content-Type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        let body = r.text().await.unwrap();
        if header == "Bearer " {
            assert!(body.contains("with no token after it"), "{body}");
            assert!(body.contains("token --print"), "{body}");
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = bot.kill().await;
    let mut warnings = Vec::new();
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_millis(200), lines.next_line()).await
    {
        if line.contains("refused /mcp request") {
            warnings.push(line);
        }
    }
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("WARN"), "{warnings:?}");
    assert!(
        warnings[0].contains("does not match MCP_SERVER_SECRET"),
        "{warnings:?}"
    );
    assert!(!warnings[0].contains("wrong-guess"), "{warnings:?}");
}

/// README and every page under `docs/`, with their names.
fn pages() -> Vec<(String, String)> {
    let mut pages = vec![(
        "README.md".to_string(),
        include_str!("../../README.md").to_string(),
    )];
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    for entry in std::fs::read_dir(docs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push((
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    pages
}

/// The lines of every fenced block of the pages that contains `marker`, each block's
/// lines trimmed (the README indents its blocks inside a list).
fn blocks_with(marker: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (name, text) in pages() {
        for block in text.split("```").skip(1).step_by(2) {
            if block.contains(marker) {
                let body: Vec<&str> = block.lines().skip(1).map(str::trim).collect();
                found.push((name.clone(), body.join("\n").trim().to_string()));
            }
        }
    }
    found
}

/// What the docs show of `token` and of the start-up banner is what they print, and
/// every connect line a page gives is the one they print.
#[tokio::test]
async fn the_docs_show_the_token_output_banner_and_connect_line_the_bot_prints() {
    let (created, _) = run_with_env_file(&["token"], "", &[]);
    let (kept, _) = run_with_env_file(&["token"], "MCP_SERVER_SECRET=kept-0123456789abcdef\n", &[]);
    let printed = |out: &std::process::Output| {
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.lines().map(str::trim).collect::<Vec<_>>().join("\n")
    };
    let (created, kept) = (printed(&created), printed(&kept));
    let shown = blocks_with("Wrote MCP_SERVER_ENABLED=true");
    assert!(!shown.is_empty());
    for (page, block) in shown {
        assert_eq!(block, created, "{page} shows another output of `token`");
    }
    for (page, block) in blocks_with("MCP_SERVER_SECRET is already set") {
        assert_eq!(block, kept, "{page} shows another output of `token`");
    }

    let (banner, port) =
        startup_output(&[("MCP_SERVER_SECRET", "banner-doc-0123456789abcdef")]).await;
    let banner = banner
        .replace(&format!(":{port}/"), ":3000/")
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("\n");
    let shown = blocks_with("Porthole MCP endpoint: http://127.0.0.1:3000/mcp\n");
    assert!(!shown.is_empty());
    for (page, block) in shown {
        // A page may show the log lines before it too.
        assert!(
            block.ends_with(&banner),
            "{page} shows another start-up banner:\n{block}\nthe bot prints:\n{banner}"
        );
    }

    let line = connect_line(3000);
    for (page, text) in pages() {
        for shown in text.lines().map(str::trim) {
            if shown
                .starts_with("claude mcp add --transport http porthole http://127.0.0.1:3000/mcp")
            {
                assert_eq!(shown, line, "{page} gives another connect line");
            }
        }
    }
}
