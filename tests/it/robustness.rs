//! Bad input of every kind against a live bot: each gets the right status and JSON-RPC
//! code, and the bot keeps serving other clients throughout.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn post_raw(body: &[u8], extra_headers: &str) -> Vec<u8> {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n{extra_headers}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

#[tokio::test]
async fn malformed_bodies_and_fields() {
    let app = start_bot(&[]).await;
    // Invalid UTF-8 is a parse error.
    let reply = raw_http(
        app.addr,
        &post_raw(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}",
            "",
        ),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(reply.contains("-32700"));

    // Ids of every JSON type: strings and integers are echoed; others refused.
    for (id, ok) in [
        (json!("abc"), true),
        (json!(42), true),
        (json!(-7), true),
        (json!(1.5), false),
        (json!(true), false),
        (json!(null), false),
        (json!([1]), false),
        (json!({"a": 1}), false),
    ] {
        let body =
            json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":{"_meta":modern_meta()}});
        let r = post(
            &app,
            &body,
            &[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "tools/list"),
            ],
        )
        .await;
        if ok {
            assert_eq!((r.status, &r.body()["id"]), (200, &id), "{id}");
        } else {
            assert_eq!(
                (r.status, r.error_code()),
                (400, Some(-32600)),
                "{id}: {}",
                r.raw
            );
        }
    }

    // Wrong types for every field of tools/call.
    let cases: Vec<(Value, i64)> = vec![
        (
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":"health"}),
            -32602,
        ),
        (
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5,"_meta":modern_meta()}}),
            -32020,
        ),
        (
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"health","arguments":[1],"_meta":modern_meta()}}),
            -32602,
        ),
        (
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"health","_meta":[1]}}),
            -32602,
        ),
        (
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"health","_meta":{
            "io.modelcontextprotocol/protocolVersion": 2026, "io.modelcontextprotocol/clientCapabilities": {}}}}),
            -32602,
        ),
        (
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"health","_meta":{
            "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": "all"}}}),
            -32602,
        ),
    ];
    for (body, code) in cases {
        let r = post(
            &app,
            &body,
            &[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "tools/call"),
                ("mcp-name", "health"),
            ],
        )
        .await;
        assert_eq!(r.error_code(), Some(code), "{body}: {}", r.raw);
        assert!(r.status == 400 || r.status == 200, "{}", r.status);
    }

    // A huge string argument: refused by the tool's schema bounds, not a crash.
    let huge = "x".repeat(3 * 1024 * 1024);
    let r = modern(
        &app,
        2,
        "tools/call",
        json!({"name": "send_message", "arguments": {"content": huge}}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.result()["isError"], true);

    // Sentinel abuse in Mcp-Name.
    let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"health","arguments":{},"_meta":modern_meta()}});
    for name in [
        "=?base64??=",
        "=?base64?",
        "=?base64?////?=",
        "=?base64?aGVhbHRo?==?=",
    ] {
        let r = post(
            &app,
            &call,
            &[
                ("mcp-protocol-version", MODERN),
                ("mcp-method", "tools/call"),
                ("mcp-name", name),
            ],
        )
        .await;
        assert_eq!((r.status, r.error_code()), (400, Some(-32020)), "{name}");
    }
    // Control characters inside a header value are refused by the HTTP layer itself.
    let body = serde_json::to_vec(&call).unwrap();
    let reply = raw_http(app.addr, &post_raw(&body, "Mcp-Name: hea\rlth\r\n")).await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");

    // Still serving.
    assert_eq!(
        call_tool(&app, "health", json!({})).await["isError"],
        Value::Null
    );
    app.shutdown().await;
}

#[tokio::test]
async fn slow_bodies_time_out_and_others_are_served_meanwhile() {
    let app = start_bot(&[("MCP_BODY_TIMEOUT_SECS", "1")]).await;
    let started = Instant::now();
    let addr = app.addr;
    let slow = tokio::spawn(async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
             Accept: application/json\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut buffer = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .unwrap()
            .unwrap();
        String::from_utf8_lossy(&buffer[..n]).into_owned()
    });
    // Another client is served while the slow one dawdles.
    let r = modern(&app, 1, "tools/list", json!({})).await;
    assert_eq!(r.status, 200);
    let reply = slow.await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("MCP_BODY_TIMEOUT_SECS"));
    assert!(started.elapsed() < Duration::from_secs(5));
    app.shutdown().await;
}

#[tokio::test]
async fn duplicate_ids_in_one_session_do_not_hang() {
    let app = start_bot(&[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let mut calls = Vec::new();
    for _ in 0..8 {
        let url = app.url();
        let session = session.clone();
        calls.push(tokio::spawn(async move {
            let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents","arguments":{}}});
            let r = client()
                .post(format!("{url}/mcp"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", session)
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            into_reply(r).await
        }));
    }
    for call in calls {
        let reply = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("no hang")
            .unwrap();
        assert_eq!(reply.body()["id"], 1);
        assert!(reply.result()["structuredContent"]["count"].is_u64());
    }
    app.shutdown().await;
}

/// Asks for `/api/info` on a kept-alive connection; the first part of the answer.
async fn get_info(tcp: &mut tokio::net::TcpStream) -> String {
    tcp.write_all(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buffer)).await;
    let read = read.expect("answered").expect("readable");
    String::from_utf8_lossy(&buffer[..read]).into_owned()
}

/// At the connection cap, clients that trickle their headers make room for a
/// well-behaved request at once: the connection that has waited longest for its headers
/// is closed, never one that has sent a request (an idle keep-alive) or is streaming.
#[tokio::test]
async fn at_the_cap_the_slowest_header_makes_room_for_a_normal_request() {
    use futures::StreamExt;
    let app = start_bot(&[
        ("HTTP_MAX_CONNECTIONS", "16"),
        ("HTTP_HEADER_TIMEOUT_SECS", "60"),
    ])
    .await;
    // A stream, and a keep-alive connection that has been answered once and sits idle.
    let mut events = open_legacy_stream(&app).await;
    let mut kept_alive = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    assert!(get_info(&mut kept_alive).await.starts_with("HTTP/1.1 200"));

    // More slow clients than the cap, each stuck in the middle of its headers.
    let mut slow = slow_header_clients(app.addr, 40).await;
    // A normal request is answered at once, long before any header timeout.
    let started = Instant::now();
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        client().get(format!("{}/api/info", app.url())).send(),
    )
    .await
    .expect("answered at the cap")
    .unwrap();
    assert_eq!(reply.status(), 200);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?} at the cap",
        started.elapsed()
    );
    // The oldest slow client made room...
    let mut buffer = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), slow[0].read(&mut buffer))
        .await
        .expect("the oldest slow connection was closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // ...while the idle keep-alive connection and the stream stayed open.
    assert!(get_info(&mut kept_alive).await.starts_with("HTTP/1.1 200"));
    let next = tokio::time::timeout(Duration::from_millis(500), events.next()).await;
    assert!(
        matches!(next, Err(_) | Ok(Some(Ok(_)))),
        "the SSE stream was cut: {next:?}"
    );
    app.shutdown().await;
}
