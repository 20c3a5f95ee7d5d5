//! `porthole-stdio` as a real subprocess, relaying to a real bot.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

struct Relay {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

fn spawn_relay(url: &str, token: &str) -> Relay {
    spawn_relay_with(url, token, &[])
}

/// The relay with extra environment variables (proxy settings); inherited proxy
/// variables are removed so only `env` decides.
fn spawn_relay_with(url: &str, token: &str, env: &[(&str, &str)]) -> Relay {
    let settings = [("PORTHOLE_URL", url), ("PORTHOLE_TOKEN", token)];
    spawn_relay_set(&[&settings[..], env].concat())
}

/// The relay with exactly `env` among its settings and proxy variables.
fn spawn_relay_set(env: &[(&str, &str)]) -> Relay {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_porthole-stdio"));
    for inherited in [
        "PORTHOLE_URL",
        "PORTHOLE_TOKEN",
        "OLLIEBOT_URL",
        "OLLIEBOT_TOKEN",
    ] {
        command.env_remove(inherited);
    }
    for proxy in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ] {
        command.env_remove(proxy);
    }
    let mut child = command
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("porthole-stdio runs");
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    Relay {
        child,
        stdin,
        stdout,
    }
}

impl Relay {
    async fn send(&mut self, message: Value) {
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }

    /// The next line that is a response (has an id and a result or error).
    async fn response(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let line = self.stdout.next_line().await.unwrap().expect("a line");
                let v: Value = serde_json::from_str(&line).expect("stdout carries JSON only");
                if v.get("id").is_some() && (v.get("result").is_some() || v.get("error").is_some())
                {
                    return v;
                }
            }
        })
        .await
        .expect("the relay answers")
    }
}

#[tokio::test]
async fn relays_a_legacy_session_and_exits_on_eof() {
    let app = start_bot(&[]).await;
    let mut relay = spawn_relay(&format!("{}/mcp", app.url()), TOKEN);
    relay
        .send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))
        .await;
    let init = relay.response().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "porthole");
    relay
        .send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
        .await;
    relay.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"health","arguments":{}}})).await;
    let health = relay.response().await;
    assert_eq!(health["id"], 2);
    assert!(
        health["result"]["structuredContent"]["uptime_secs"].is_u64(),
        "{health}"
    );
    assert_eq!(app.mcp.as_ref().unwrap().live_sessions(), 1);

    drop(relay.stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), relay.child.wait())
        .await
        .expect("exits on EOF")
        .unwrap();
    assert!(status.success());
    app.shutdown().await;
}

/// The design documents configure the shim with `OLLIEBOT_URL` and `OLLIEBOT_TOKEN`: a
/// configuration copied from them works as written.
#[tokio::test]
async fn the_design_documents_variable_names_work() {
    let app = start_bot(&[]).await;
    let mut relay = spawn_relay_set(&[("OLLIEBOT_URL", &app.url()), ("OLLIEBOT_TOKEN", TOKEN)]);
    relay
        .send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))
        .await;
    let init = relay.response().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "porthole", "{init}");
    app.shutdown().await;
}

#[tokio::test]
async fn bot_down_or_wrong_token_is_an_error_not_a_hang() {
    // Nothing listens on this port once the listener is dropped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut relay = spawn_relay(&format!("http://127.0.0.1:{port}/mcp"), TOKEN);
    relay
        .send(json!({"jsonrpc":"2.0","id":"a","method":"tools/list"}))
        .await;
    let reply = relay.response().await;
    assert_eq!(reply["id"], "a");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach"),
        "{reply}"
    );

    let app = start_bot(&[]).await;
    let mut relay = spawn_relay(&format!("{}/mcp", app.url()), "wrong-token-wrong-token");
    relay
        .send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))
        .await;
    let reply = relay.response().await;
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("PORTHOLE_TOKEN"),
        "{reply}"
    );
    app.shutdown().await;

    // A bot whose `/mcp` is off answers a plain 404: the relay says what to switch on.
    let app = start_bot(&[("MCP_SERVER_ENABLED", "false")]).await;
    let mut relay = spawn_relay(&format!("{}/mcp", app.url()), TOKEN);
    relay
        .send(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .await;
    let reply = relay.response().await;
    assert_eq!(reply["id"], 2);
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("MCP_SERVER_ENABLED=true"), "{reply}");
    app.shutdown().await;
}

/// The seed's usage: a base URL, and requests written back to back without waiting for
/// the initialize answer; every one is answered within the session.
#[tokio::test]
async fn base_url_and_back_to_back_requests_are_all_answered() {
    let app = start_bot(&[]).await;
    let mut relay = spawn_relay(&app.url(), TOKEN);
    relay
        .send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))
        .await;
    relay
        .send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
        .await;
    relay
        .send(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .await;
    relay
        .send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"health","arguments":{}}}))
        .await;
    let mut answers = std::collections::BTreeMap::new();
    for _ in 0..3 {
        let reply = relay.response().await;
        answers.insert(reply["id"].as_i64().unwrap(), reply);
    }
    assert_eq!(answers[&1]["result"]["serverInfo"]["name"], "porthole");
    assert!(
        answers[&2]["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() > 10),
        "tools/list within the session: {}",
        answers[&2]
    );
    assert!(
        answers[&3]["result"]["structuredContent"]["uptime_secs"].is_u64(),
        "health within the session: {}",
        answers[&3]
    );
    assert_eq!(app.mcp.as_ref().unwrap().live_sessions(), 1);
    drop(relay.stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), relay.child.wait()).await;
    app.shutdown().await;
}

/// A proxy in the environment never sees a request (and so never the token) for a bot
/// on the same machine.
#[tokio::test]
async fn a_loopback_bot_is_never_reached_through_a_proxy() {
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = connections.clone();
    let recorder = tokio::spawn(async move {
        while let Ok((socket, _)) = proxy.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });
    let app = start_bot(&[]).await;
    for host_url in [app.url(), app.url().replace("127.0.0.1", "localhost")] {
        let mut relay = spawn_relay_with(
            &host_url,
            TOKEN,
            &[
                ("HTTP_PROXY", &proxy_url),
                ("http_proxy", &proxy_url),
                ("HTTPS_PROXY", &proxy_url),
                ("ALL_PROXY", &proxy_url),
            ],
        );
        relay
            .send(json!({"jsonrpc":"2.0","id":9,"method":"tools/list"}))
            .await;
        let reply = relay.response().await;
        assert!(
            reply["result"]["tools"].is_array(),
            "{host_url}: answered directly: {reply}"
        );
    }
    assert_eq!(
        connections.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the proxy saw a connection"
    );
    recorder.abort();
    app.shutdown().await;
}

#[tokio::test]
async fn a_line_that_is_not_utf8_is_answered_and_the_relay_goes_on() {
    let app = start_bot(&[]).await;
    let mut relay = spawn_relay(&app.url(), TOKEN);
    relay.stdin.write_all(b"{\"x\": \"\xff\"}\n").await.unwrap();
    let error = relay.response().await;
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert!(error["id"].is_null());
    relay
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list",
                     "params": {"_meta": modern_meta()}}))
        .await;
    let listed = relay.response().await;
    assert_eq!(listed["id"], 7, "{listed}");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    drop(relay.stdin);
    let _ = relay.child.wait().await;
    app.shutdown().await;
}

#[tokio::test]
async fn an_answer_that_breaks_off_mid_stream_is_an_error_for_its_request() {
    // A server that starts an SSE answer, sends one progress message, then drops the
    // connection (a bot stopped in the middle of a long call).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = vec![0u8; 65536];
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut request).await;
            let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}"#;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let event = format!("data: {progress}\n\n");
            let chunk = format!("{:x}\r\n{event}\r\n", event.len());
            let _ = socket.write_all(format!("{head}{chunk}").as_bytes()).await;
            // Dropped without the closing chunk: the body breaks off.
        }
    });
    let mut relay = spawn_relay(&format!("http://{addr}"), TOKEN);
    relay
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                     "params": {"name": "send_message", "arguments": {"content": "hi"}}}))
        .await;
    let answer = relay.response().await;
    assert_eq!(answer["id"], 7, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("broke off"), "{message}");
}

#[tokio::test]
async fn a_message_over_the_bots_body_limit_says_so() {
    let app = start_bot(&[]).await;
    let mut relay = spawn_relay(&app.url(), TOKEN);
    let huge = "x".repeat(5 * 1024 * 1024);
    relay
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "server_log", "arguments": {"grep": huge},
                                "_meta": modern_meta()}}))
        .await;
    let answer = relay.response().await;
    assert_eq!(answer["id"], 3);
    // The bot's own 413, given the request's id (the bot's refusal has none).
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("MCP_MAX_BODY_BYTES"), "{answer:.300}");
    app.shutdown().await;
}

#[tokio::test]
async fn a_bot_that_never_answers_holds_neither_the_client_nor_the_relay() {
    // A bot that takes every connection and never answers (stuck).
    let addr = server_that_never_answers().await;
    let mut relay = spawn_relay(&format!("http://{addr}/mcp"), TOKEN);
    relay
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "t", "version": "1"}}}))
        .await;
    // Waits behind the unanswered initialize, which must not stop the relay reading:
    // the client gives up on it.
    relay
        .send(json!({"jsonrpc": "2.0", "id": "two", "method": "tools/list"}))
        .await;
    relay
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": "two", "reason": "the client gave up"}}),
        )
        .await;
    let Relay {
        mut child,
        stdin,
        mut stdout,
    } = relay;
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(40), child.wait())
        .await
        .expect("the relay exits once stdin is closed")
        .unwrap();
    assert!(status.success(), "{status}");
    let mut answers = Vec::new();
    while let Some(line) = stdout.next_line().await.unwrap() {
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    // initialize may not be cancelled: it is answered, with an error that says why.
    assert_eq!(answers.len(), 1, "only initialize is answered: {answers:?}");
    assert_eq!(answers[0]["id"], 1, "{answers:?}");
    let message = answers[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("did not answer `initialize`"), "{message}");
}
