//! `porthole-stdio` as a real subprocess, relaying to a real bot.

mod common;

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
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_porthole-stdio"))
        .env("PORTHOLE_URL", url)
        .env("PORTHOLE_TOKEN", token)
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
}
