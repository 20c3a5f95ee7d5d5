//! The `/mcp` transport over real HTTP: guards, both eras, sessions, SSE, subscriptions.

use crate::common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

#[tokio::test]
async fn guards_answer_with_the_right_status_and_a_json_rpc_body() {
    let app = start_bot(&[("MCP_MAX_BODY_BYTES", "2048")]).await;
    let url = format!("{}/mcp", app.url());
    let ping = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let c = client();
    let send = |req: reqwest::RequestBuilder| async { into_reply(req.send().await.unwrap()).await };
    let base = || {
        c.post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
    };

    // No token, wrong token (same length and different length).
    let r = send(base().body(ping.to_string())).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Bearer realm=\"porthole\"")
    );
    assert!(
        r.body()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Authorization")
    );
    assert!(
        r.body().get("id").is_none(),
        "errors without a known id carry no id"
    );
    let wrong_same_len = "x".repeat(TOKEN.len());
    for wrong in [wrong_same_len.as_str(), "short"] {
        let r = send(base().bearer_auth(wrong).body(ping.to_string())).await;
        assert_eq!(r.status, 401, "{wrong}");
    }

    let authed = || base().bearer_auth(TOKEN);
    // DNS rebinding: a foreign Host or Origin is refused even with the token.
    let r = send(
        authed()
            .header("host", "evil.example.com")
            .body(ping.to_string()),
    )
    .await;
    assert_eq!(r.status, 403);
    let r = send(
        authed()
            .header("origin", "http://evil.example.com")
            .body(ping.to_string()),
    )
    .await;
    assert_eq!(r.status, 403);
    let r = send(
        authed()
            .header("origin", format!("http://{}", app.addr))
            .body(ping.to_string()),
    )
    .await;
    assert_eq!(r.status, 200);

    // Media types and size.
    let r = send(
        c.post(&url)
            .bearer_auth(TOKEN)
            .header("content-type", "text/plain")
            .body("{}"),
    )
    .await;
    assert_eq!(r.status, 415);
    assert!(r.raw.contains("application/json"));
    let html_only = c
        .post(&url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "text/html");
    let r = send(html_only.body(ping.to_string())).await;
    assert_eq!(r.status, 406);
    let r = send(authed().body(format!("{{\"pad\":\"{}\"}}", "a".repeat(4096)))).await;
    assert_eq!(r.status, 413);
    assert!(r.raw.contains("MCP_MAX_BODY_BYTES"));

    // Methods other than POST/GET/DELETE.
    let r = c.put(&url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert!(r.headers().get("allow").is_some());

    // OAuth discovery probes get a JSON 404, never HTML.
    let r = c
        .get(format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            app.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.headers()["content-type"], "application/json");

    // Paths that are not `/mcp` are a JSON 404 naming the endpoint, token or not (a
    // mistyped URL is not blamed on MCP being off); `/mcp` itself still asks for the
    // token, whatever the method.
    for path in ["/favicon.ico", "/mpc", "/mcpx", "/mcp/", "/mcp/extra"] {
        for post in [false, true] {
            let target = format!("{}{path}", app.url());
            let request = if post { c.post(target) } else { c.get(target) };
            let r = request.send().await.unwrap();
            assert_eq!(r.status(), 404, "{path}");
            assert_eq!(r.headers()["content-type"], "application/json", "{path}");
            let body: serde_json::Value = r.json().await.unwrap();
            assert_eq!(
                body["error"], "Not Found: no route for this path; the MCP endpoint is /mcp",
                "{path}"
            );
        }
    }
    let r = c.put(&url).send().await.unwrap();
    assert_eq!(r.status(), 401, "PUT /mcp without a token");
    app.shutdown().await;
}

#[tokio::test]
async fn malformed_messages_get_json_rpc_errors() {
    let app = start_bot(&[]).await;
    let raw = |body: &'static str| {
        let app_url = format!("{}/mcp", app.url());
        async move {
            into_reply(
                client()
                    .post(app_url)
                    .bearer_auth(TOKEN)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(body)
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let r = raw("{not json").await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32700)));
    let r = raw(r#"{"jsonrpc":"2.0","id":1,"method":"tools/li"#).await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32700)), "truncated");
    let r = raw("[]").await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32600)));
    let r = raw(r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#).await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32600)));
    // Deep nesting is refused by the parser, not a crash.
    let deep: &'static str =
        Box::leak(format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_boxed_str());
    let r = raw(deep).await;
    assert_eq!(r.status, 400);
    // The server still serves afterwards.
    let r = modern(&app, 1, "tools/list", json!({})).await;
    assert_eq!(r.status, 200);
    app.shutdown().await;
}

#[tokio::test]
async fn legacy_session_lifecycle() {
    let app = start_bot(&[]).await;
    // Version negotiation: a known version is echoed, an unknown one gets the newest.
    let r = post(
        &app,
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        &[],
    )
    .await;
    assert_eq!(r.result()["protocolVersion"], "2025-11-25");
    let session = legacy_session(&app, "2025-06-18", json!({})).await;
    assert!(session.bytes().all(|b| (0x21..=0x7e).contains(&b)));

    let r = legacy(&app, &session, 2, "ping", json!({})).await;
    assert_eq!(r.result(), &json!({}), "legacy ping is exactly {{}}");
    let r = legacy(
        &app,
        &session,
        3,
        "logging/setLevel",
        json!({"level": "warning"}),
    )
    .await;
    assert_eq!(r.result(), &json!({}));
    let r = legacy(&app, &session, 4, "tools/list", json!({})).await;
    let tools = r.result()["tools"].as_array().unwrap();
    assert!(tools.len() >= 18, "{} tools", tools.len());
    assert!(
        r.result().get("resultType").is_none(),
        "no 2026 fields in the legacy era"
    );
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "deterministic order");

    // Missing session → 400; unknown → 404; unsupported version header → 400.
    let r = post(
        &app,
        &json!({"jsonrpc":"2.0","id":5,"method":"tools/list"}),
        &[("mcp-protocol-version", "2025-11-25")],
    )
    .await;
    assert_eq!(r.status, 400);
    let r = legacy(&app, "bogus-session", 6, "tools/list", json!({})).await;
    assert_eq!(r.status, 404);
    let r = post(
        &app,
        &json!({"jsonrpc":"2.0","id":7,"method":"tools/list"}),
        &[
            ("mcp-session-id", &session),
            ("mcp-protocol-version", "2024-01-01"),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    // Unknown method in a session: a JSON-RPC error.
    let r = legacy(&app, &session, 8, "nope/nothing", json!({})).await;
    assert_eq!(r.error_code(), Some(-32601));

    // DELETE ends it; afterwards 404.
    assert_eq!(end_session(&app, &session).await, 204);
    let r = legacy(&app, &session, 9, "tools/list", json!({})).await;
    assert_eq!(r.status, 404);
    app.shutdown().await;
}

#[tokio::test]
async fn sessions_survive_a_restart_but_forged_ids_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bot.db").display().to_string();
    let first = start_bot(&[("DATABASE_PATH", &db)]).await;
    let session = legacy_session(&first, "2025-11-25", json!({})).await;
    first.shutdown().await;

    let second = start_bot(&[("DATABASE_PATH", &db)]).await;
    let r = legacy(&second, &session, 2, "tools/list", json!({})).await;
    assert_eq!(
        r.status, 200,
        "a session minted before the restart still works: {}",
        r.raw
    );
    let mut forged = session.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let r = legacy(&second, &forged, 3, "tools/list", json!({})).await;
    assert_eq!(r.status, 404);
    second.shutdown().await;
}

#[tokio::test]
async fn modern_requests_are_validated_in_order() {
    let app = start_bot(&[]).await;
    let discover = modern(&app, 1, "server/discover", json!({})).await;
    assert_eq!(discover.status, 200);
    let d = discover.result();
    assert_eq!(d["resultType"], "complete");
    assert_eq!(d["supportedVersions"], json!(["2026-07-28"]));
    assert!(d["ttlMs"].is_u64() && d["cacheScope"] == "private");
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "porthole"
    );

    // Missing _meta → 400 -32602, even with good headers.
    let r = post(
        &app,
        &json!({"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}),
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "server/discover"),
        ],
    )
    .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32602)));
    assert_eq!(r.body()["id"], 2);

    let body = |v: &str| {
        json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{
            "io.modelcontextprotocol/protocolVersion": v, "io.modelcontextprotocol/clientCapabilities": {}}}})
    };
    // Header ≠ _meta → -32020; unsupported version → -32022 with data.
    let r = post(
        &app,
        &body("v999.0.0"),
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/list"),
        ],
    )
    .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    let r = post(
        &app,
        &body("v999.0.0"),
        &[
            ("mcp-protocol-version", "v999.0.0"),
            ("mcp-method", "tools/list"),
        ],
    )
    .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32022)));
    assert_eq!(r.body()["error"]["data"]["requested"], "v999.0.0");
    assert_eq!(
        r.body()["error"]["data"]["supported"],
        json!(["2026-07-28"])
    );
    // Mcp-Method mismatch (case-sensitive value) and missing.
    let r = post(
        &app,
        &body(MODERN),
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "TOOLS/LIST"),
        ],
    )
    .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    let r = post(&app, &body(MODERN), &[("mcp-protocol-version", MODERN)]).await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    // Header names are case-insensitive, values trimmed.
    let r = post(
        &app,
        &body(MODERN),
        &[
            ("MCP-PROTOCOL-VERSION", MODERN),
            ("Mcp-Method", "  tools/list "),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.result()["resultType"], "complete");

    // Mcp-Name must match (Base64 sentinel decoded, strictly).
    let call = json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"health","arguments":{},"_meta":modern_meta()}});
    let headers = |name: &'static str| {
        vec![
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", name),
        ]
    };
    assert_eq!(
        post(&app, &call, &headers("=?base64?aGVhbHRo?="))
            .await
            .status,
        200
    );
    assert_eq!(
        post(&app, &call, &headers("wrong_tool")).await.error_code(),
        Some(-32020)
    );
    assert_eq!(
        post(&app, &call, &headers("=?base64?aGVhbHRo?"))
            .await
            .status,
        400
    );
    let r = post(
        &app,
        &call,
        &[
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/call"),
        ],
    )
    .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));

    // Legacy-only and unknown methods → 404 -32601.
    for method in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "unknown/method",
    ] {
        let r = modern(&app, 5, method, json!({})).await;
        assert_eq!((r.status, r.error_code()), (404, Some(-32601)), "{method}");
    }
    // Notifications are accepted without a body.
    let r = post(
        &app,
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":modern_meta()}}),
        &[],
    )
    .await;
    assert_eq!(r.status, 202);
    // Unknown tool: a JSON-RPC error with close names, HTTP 200.
    let r = modern(
        &app,
        6,
        "tools/call",
        json!({"name": "helth", "arguments": {}}),
    )
    .await;
    assert_eq!(r.error_code(), Some(-32602));
    assert!(r.raw.contains("health"), "{}", r.raw);
    // An unknown resource: -32602 with the uri, never empty contents.
    let r = modern(&app, 7, "resources/read", json!({"uri": "porthole://nope"})).await;
    assert_eq!(r.error_code(), Some(-32602));
    assert_eq!(r.body()["error"]["data"]["uri"], "porthole://nope");
    app.shutdown().await;
}

#[tokio::test]
async fn cacheable_lists_carry_hints_and_resources_read() {
    let app = start_bot(&[]).await;
    for method in [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ] {
        let r = modern(&app, 1, method, json!({})).await;
        assert_eq!(r.status, 200, "{method}: {}", r.raw);
        assert!(r.result()["ttlMs"].is_u64(), "{method}");
        assert_eq!(r.result()["cacheScope"], "private");
    }
    let r = modern(
        &app,
        2,
        "resources/read",
        json!({"uri": "porthole://db/schema"}),
    )
    .await;
    let text = r.result()["contents"][0]["text"].as_str().unwrap();
    let schema: Value = serde_json::from_str(text).unwrap();
    let tables: Vec<&str> = schema["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for table in ["conversations", "messages", "tasks", "embeddings"] {
        assert!(tables.contains(&table), "{tables:?}");
    }
    let r = modern(
        &app,
        3,
        "resources/read",
        json!({"uri": "porthole://config"}),
    )
    .await;
    assert!(
        r.raw.contains("[REDACTED]"),
        "the MCP secret shows as redacted"
    );
    assert!(!r.raw.contains(TOKEN));
    app.shutdown().await;
}

#[tokio::test]
async fn progress_turns_the_reply_into_an_sse_stream() {
    let app = start_bot(&[]).await;
    let r = modern(
        &app,
        9,
        "tools/call",
        json!({"name": "send_message", "arguments": {"content": "/help"}, "_meta": {"progressToken": "p-1"}}),
    )
    .await;
    assert!(r.is_sse(), "{:?}", r.headers);
    let progress: Vec<&Value> = r
        .messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 2, "{}", r.raw);
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "p-1")
    );
    let values: Vec<f64> = progress
        .iter()
        .map(|p| p["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress increases: {values:?}"
    );
    let last = r.body();
    assert_eq!(last["id"], 9);
    assert!(
        last["result"]["structuredContent"]["response"]
            .as_str()
            .unwrap()
            .contains("/run")
    );
    app.shutdown().await;
}

#[tokio::test]
async fn replies_follow_what_the_client_accepts() {
    let app = start_bot(&[]).await;
    let body = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send_message",
        "arguments":{"content":"/help"},"_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": "p"}}});
    let send = |accept: &'static str| {
        let url = format!("{}/mcp", app.url());
        let body = body.to_string();
        async move {
            let request = client()
                .post(url)
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .header("accept", accept)
                .header("mcp-protocol-version", MODERN)
                .header("mcp-method", "tools/call")
                .header("mcp-name", "send_message")
                .body(body);
            tokio::time::timeout(Duration::from_secs(10), async {
                into_reply(request.send().await.unwrap()).await
            })
            .await
            .expect("an answer, not a hang")
        }
    };
    // JSON only: progress is dropped, the result arrives as JSON.
    let r = send("application/json").await;
    assert!(!r.is_sse());
    assert_eq!(r.body()["id"], 3);
    // SSE only: even a plain result comes as an event stream.
    let r = send("text/event-stream").await;
    assert!(r.is_sse());
    assert_eq!(r.body()["id"], 3);
    let r = modern(&app, 4, "tools/list", json!({})).await;
    assert!(!r.is_sse());
    app.shutdown().await;
}

#[tokio::test]
async fn subscriptions_listen_acknowledges_then_delivers_tool_changes() {
    let app = start_bot(&[]).await;
    let response = listen(
        &app,
        json!("sub-1"),
        json!({"toolsListChanged": true, "promptsListChanged": false}),
    )
    .await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    let ack = read_sse_until(&mut stream, &mut seen, |m| m.first().cloned())
        .await
        .expect("the acknowledgment arrives at once");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );

    // Disabling a bot tool changes the tool list: the stream hears about it.
    assert!(app.bot.tools.set_enabled("calculator", false));
    let change = read_sse_until(&mut stream, &mut seen, |m| m.get(1).cloned())
        .await
        .expect("a list_changed notification");
    assert_eq!(change["method"], "notifications/tools/list_changed");
    assert_eq!(
        change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn legacy_get_stream_receives_list_changed() {
    let app = start_bot(&[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let response = legacy_get_stream(&app, &session).await;
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    // The priming event arrives first; then trigger a change.
    let first = stream.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("retry:"));
    app.bot.tools.set_enabled("calculator", false);
    let got = tokio::time::timeout(Duration::from_secs(5), async {
        let mut seen = String::new();
        loop {
            let chunk = stream.next().await.unwrap().unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("notifications/tools/list_changed") {
                return seen;
            }
        }
    })
    .await
    .expect("notification on the GET stream");
    assert!(got.contains("id: "), "events carry ids for resumption");
    // Ending the session closes its GET stream instead of idling on keep-alives.
    assert_eq!(end_session(&app, &session).await, 204);
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
    assert!(
        ended.is_ok(),
        "the GET stream closed when the session ended"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn many_sessions_and_stateless_requests_at_once() {
    let app = start_bot(&[]).await;
    let mut tasks = Vec::new();
    for n in 0..40u64 {
        let url = app.url();
        tasks.push(tokio::spawn(async move {
            let c = client();
            let body = if n % 2 == 0 {
                json!({"jsonrpc":"2.0","id":n,"method":"tools/list","params":{"_meta":modern_meta()}})
            } else {
                json!({"jsonrpc":"2.0","id":n,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})
            };
            let mut req = c
                .post(format!("{url}/mcp"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(body.to_string());
            if n % 2 == 0 {
                req = req.header("mcp-protocol-version", MODERN).header("mcp-method", "tools/list");
            }
            let reply = into_reply(req.send().await.unwrap()).await;
            assert_eq!(reply.status, 200);
            assert_eq!(reply.body()["id"], n, "each answer echoes its own id");
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(app.mcp.as_ref().unwrap().live_sessions(), 20);
    app.shutdown().await;
}

#[tokio::test]
async fn disabled_mcp_is_not_mounted_and_misconfigured_answers_500() {
    let off = start_bot(&[("MCP_SERVER_ENABLED", "false")]).await;
    let r = modern(&off, 1, "server/discover", json!({})).await;
    assert_eq!(r.status, 404);
    assert!(
        r.raw.contains("the MCP endpoint is off") && r.raw.contains("-- token"),
        "a 404 that says how to turn /mcp on: {}",
        r.raw
    );
    assert!(off.mcp.is_none());
    let other = reqwest::get(format!("{}/nowhere", off.url()))
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
    assert!(
        other
            .text()
            .await
            .unwrap()
            .contains("no route for this path")
    );
    off.shutdown().await;

    let mut vars = vec![("MCP_SERVER_ENABLED", "true")];
    vars.push(("MCP_SERVER_SECRET", ""));
    let misconfigured = start_bot(&vars).await;
    let r = modern(&misconfigured, 1, "server/discover", json!({})).await;
    assert_eq!(r.status, 500);
    assert!(r.raw.contains("Server misconfigured"));
    misconfigured.shutdown().await;
}

#[tokio::test]
async fn batches_only_in_2025_03_26_sessions() {
    let app = start_bot(&[]).await;
    let old = legacy_session(&app, "2025-03-26", json!({})).await;
    let batch = json!([
        {"jsonrpc":"2.0","id":1,"method":"ping"},
        {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}},
        {"jsonrpc":"2.0","id":"two","method":"tools/list"},
        {"jsonrpc":"2.0","id":3,"method":"no/such"}
    ]);
    let r = post(
        &app,
        &batch,
        &[
            ("mcp-session-id", &old),
            ("mcp-protocol-version", "2025-03-26"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.raw);
    let answers = r.body().as_array().unwrap().clone();
    assert_eq!(
        answers.len(),
        3,
        "one answer per request, none for the notification"
    );
    assert_eq!(answers[0]["id"], 1);
    assert_eq!(answers[1]["id"], "two");
    assert!(answers[1]["result"]["tools"].is_array());
    assert_eq!(answers[2]["error"]["code"], -32601);
    // What one small request can make the server hold is bounded: 32 messages a batch.
    let too_many: Vec<Value> = (0..33)
        .map(|id| json!({"jsonrpc":"2.0","id":id,"method":"ping"}))
        .collect();
    let r = post(
        &app,
        &Value::Array(too_many),
        &[
            ("mcp-session-id", &old),
            ("mcp-protocol-version", "2025-03-26"),
        ],
    )
    .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32600)), "{}", r.raw);
    assert!(r.raw.contains("at most 32"), "{}", r.raw);

    let new = legacy_session(&app, "2025-11-25", json!({})).await;
    let r = post(
        &app,
        &batch,
        &[
            ("mcp-session-id", &new),
            ("mcp-protocol-version", "2025-11-25"),
        ],
    )
    .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32600)));
    assert!(r.raw.contains("2025-03-26"));
    app.shutdown().await;
}

#[tokio::test]
async fn legacy_cancellation_stops_the_work() {
    let llm_never_answers = llm_that_never_answers().await;
    let app = start_bot(&[
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", &llm_never_answers),
    ])
    .await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let url = format!("{}/mcp", app.url());
    let call = tokio::spawn({
        let session = session.clone();
        async move {
            client()
                .post(url)
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .header("accept", "application/json")
                .header("mcp-session-id", session)
                .body(json!({"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"send_message","arguments":{"content":"hi"}}}).to_string())
                .send()
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(5), async {
        while app.bot.supervisor.state().status != "processing" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the agent starts");
    let r = post(
        &app,
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"user stop"}}),
        &[("mcp-session-id", &session), ("mcp-protocol-version", "2025-11-25")],
    )
    .await;
    assert_eq!(r.status, 202);
    tokio::time::timeout(Duration::from_secs(5), async {
        while app.bot.supervisor.state().status != "idle" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the agent stopped");
    let _ = tokio::time::timeout(Duration::from_secs(5), call).await;
    app.shutdown().await;
}

#[tokio::test]
async fn a_tool_result_carries_what_its_era_adds_and_nothing_else() {
    let app = start_bot(&[]).await;
    let args = json!({"name": "list_agents", "arguments": {}});
    let modern_reply = modern(&app, 1, "tools/call", args.clone()).await;
    assert_eq!(modern_reply.status, 200, "{}", modern_reply.raw);
    let result = modern_reply.result();
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "porthole"
    );
    assert!(result.get("ttlMs").is_none(), "tools/call is not cacheable");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        result["structuredContent"]
    );

    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let legacy_reply = legacy(&app, &session, 2, "tools/call", args).await;
    let result = legacy_reply.result();
    assert!(
        result["structuredContent"].is_object(),
        "{}",
        legacy_reply.raw
    );
    assert!(result.get("resultType").is_none() && result.get("_meta").is_none());
}

#[tokio::test]
async fn get_and_delete_refuse_a_protocol_version_no_session_speaks() {
    let app = start_bot(&[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let send = |method: reqwest::Method, version: &'static str| {
        client()
            .request(method, format!("{}/mcp", app.url()))
            .bearer_auth(TOKEN)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", version)
            .send()
    };
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let garbage = send(method.clone(), "garbage").await.unwrap();
        assert_eq!(garbage.status(), 400, "{method} with an unknown version");
        let body: Value = garbage.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("`garbage`") && message.contains("2025-11-25"),
            "{message}"
        );

        let modern = send(method.clone(), "2026-07-28").await.unwrap();
        assert_eq!(modern.status(), 405, "{method} with 2026-07-28");
        assert_eq!(modern.headers()["allow"], "POST");
    }
    // Refused, not obeyed: the session lives on.
    let still = legacy(&app, &session, 2, "tools/list", json!({})).await;
    assert_eq!(still.status, 200, "{}", still.raw);
    let ended = send(reqwest::Method::DELETE, "2025-11-25").await.unwrap();
    assert_eq!(ended.status(), 204);
    app.shutdown().await;
}

#[tokio::test]
async fn an_unknown_resource_gets_each_eras_own_error_code() {
    let app = start_bot(&[]).await;
    let uri = json!({"uri": "porthole://nope"});
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let session = legacy_session(&app, version, json!({})).await;
        let r = post(
            &app,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": uri}),
            &[
                ("mcp-session-id", &session),
                ("mcp-protocol-version", version),
            ],
        )
        .await;
        assert_eq!(r.error_code(), Some(-32002), "{version}: {}", r.raw);
        assert_eq!(r.body()["error"]["data"]["uri"], "porthole://nope");
    }
    let r = modern(&app, 3, "resources/read", uri).await;
    assert_eq!(r.error_code(), Some(-32602), "2026-07-28: {}", r.raw);
    app.shutdown().await;
}

#[tokio::test]
async fn initialize_without_what_the_schema_requires_opens_no_session() {
    let app = start_bot(&[]).await;
    let client_info = json!({"name": "t", "version": "1"});
    for (params, names) in [
        (
            json!({"protocolVersion": 5, "capabilities": {}, "clientInfo": client_info}),
            "protocolVersion",
        ),
        (
            json!({"protocolVersion": null, "capabilities": {}, "clientInfo": client_info}),
            "protocolVersion",
        ),
        (json!({}), "protocolVersion"),
        (
            json!({"protocolVersion": "2025-11-25", "clientInfo": client_info}),
            "capabilities",
        ),
        (
            json!({"protocolVersion": "2025-11-25", "capabilities": []}),
            "capabilities",
        ),
        (
            json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
            "clientInfo",
        ),
        (
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}),
            "clientInfo.version",
        ),
    ] {
        let r = post(
            &app,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}),
            &[],
        )
        .await;
        assert_eq!(
            (r.status, r.error_code()),
            (400, Some(-32602)),
            "{params}: {}",
            r.raw
        );
        assert!(r.header("mcp-session-id").is_none(), "{params}");
        let message = r.body()["error"]["message"].as_str().unwrap();
        for name in names.split('.') {
            assert!(message.contains(&format!("`{name}`")), "{message}");
        }
    }
    // A version the server does not speak is negotiated, not refused.
    let r = post(
        &app,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": client_info}}),
        &[],
    )
    .await;
    assert_eq!(r.result()["protocolVersion"], "2025-11-25", "{}", r.raw);
    app.shutdown().await;
}

#[tokio::test]
async fn a_repeated_mcp_header_is_refused_not_read_first_wins() {
    let app = start_bot(&[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let other = legacy_session(&app, "2025-11-25", json!({})).await;
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    for (name, first, second) in [
        ("mcp-session-id", session.as_str(), other.as_str()),
        ("mcp-protocol-version", "2025-11-25", "2025-06-18"),
    ] {
        let mut request = client()
            .post(format!("{}/mcp", app.url()))
            .bearer_auth(TOKEN)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if name != "mcp-session-id" {
            request = request.header("mcp-session-id", &session);
        }
        let r = request
            .header(name, first)
            .header(name, second)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{name}");
        let error: Value = r.json().await.unwrap();
        let message = error["error"]["message"].as_str().unwrap().to_lowercase();
        assert!(
            message.contains(&format!("exactly one {name}")),
            "{message}"
        );
    }
    // Refused, the sessions are untouched.
    let still = legacy(&app, &other, 3, "tools/list", json!({})).await;
    assert_eq!(still.status, 200, "{}", still.raw);
    app.shutdown().await;
}

#[tokio::test]
async fn a_subscribed_conversation_announces_its_new_messages() {
    let app = start_bot(&[]).await;
    let first = call_tool(&app, "send_message", json!({"content": "/help"})).await;
    let id = first["structuredContent"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let uri = format!("porthole://conversations/{id}");
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let subscribed = legacy(
        &app,
        &session,
        2,
        "resources/subscribe",
        json!({"uri": uri}),
    )
    .await;
    assert_eq!(subscribed.status, 200, "{}", subscribed.raw);
    let mut stream = legacy_get_stream(&app, &session).await.bytes_stream();
    call_tool(
        &app,
        "send_message",
        json!({"content": "/help", "conversation_id": id}),
    )
    .await;
    let mut seen = String::new();
    let updated = read_sse_until(&mut stream, &mut seen, |messages| {
        messages
            .iter()
            .find(|m| m["method"] == "notifications/resources/updated")
            .cloned()
    })
    .await
    .unwrap_or_else(|| panic!("no update on the stream: {seen}"));
    assert_eq!(updated["params"]["uri"], uri.as_str());
    app.shutdown().await;
}

#[tokio::test]
async fn initialize_inside_a_session_is_refused_and_with_an_ended_one_is_not_found() {
    let app = start_bot(&[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let again = post(&app, &init, &[("mcp-session-id", &session)]).await;
    assert_eq!(again.status, 400, "{}", again.raw);
    assert!(again.raw.contains("already initialized"), "{}", again.raw);
    assert_eq!(end_session(&app, &session).await, 204);
    let after = post(&app, &init, &[("mcp-session-id", &session)]).await;
    assert_eq!(after.status, 404, "{}", after.raw);
    app.shutdown().await;
}

/// What a session keeps for its life is bounded: the capabilities it declared (64 KiB of
/// JSON), and the resources it follows (256, each URI at most 2 KiB). A read-only token
/// grew the server by 290 MB with 60 subscriptions to 3.9 MB URIs.
#[tokio::test]
async fn what_a_session_keeps_is_bounded() {
    let app = start_bot(&[]).await;
    let huge = json!({"experimental": {"x": "y".repeat(100_000)}});
    let init = post(
        &app,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": huge,
            "clientInfo": {"name": "t", "version": "1"}}}),
        &[],
    )
    .await;
    assert_eq!(
        (init.status, init.error_code()),
        (400, Some(-32602)),
        "{}",
        init.raw
    );
    assert!(init.header("mcp-session-id").is_none());

    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let long = format!("porthole://conversations/{}", "a".repeat(5000));
    let refused = legacy(
        &app,
        &session,
        2,
        "resources/subscribe",
        json!({"uri": long}),
    )
    .await;
    assert_eq!(refused.error_code(), Some(-32602), "{}", refused.raw);
    for n in 0..256 {
        let uri = format!("porthole://conversations/c{n}");
        let ok = legacy(
            &app,
            &session,
            10 + n,
            "resources/subscribe",
            json!({"uri": uri}),
        )
        .await;
        assert!(ok.error_code().is_none(), "{}", ok.raw);
    }
    let one_more = json!({"uri": "porthole://conversations/extra"});
    let full = legacy(&app, &session, 3, "resources/subscribe", one_more.clone()).await;
    assert_eq!(full.error_code(), Some(-32602), "{}", full.raw);
    assert!(full.raw.contains("unsubscribe"), "{}", full.raw);
    let gone = json!({"uri": "porthole://conversations/c0"});
    legacy(&app, &session, 4, "resources/unsubscribe", gone).await;
    let room = legacy(&app, &session, 5, "resources/subscribe", one_more).await;
    assert!(room.error_code().is_none(), "{}", room.raw);
    app.shutdown().await;
}

/// A legacy `GET` notification stream whose connection is cut, resumed with
/// `Last-Event-ID`, gets every notification sent while it was away, then the rest; an
/// id the session no longer holds opens a new stream whose first lines say so.
#[tokio::test]
async fn a_cut_notification_stream_resumes_without_losing_what_was_sent() {
    let app = start_bot(&[]).await;
    let session = legacy_session(&app, "2025-11-25", json!({})).await;
    let get = |last_event_id: Option<String>| {
        let mut request = client()
            .get(format!("{}/mcp", app.url()))
            .bearer_auth(TOKEN)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        request.send()
    };
    let listed_changes = |messages: &[serde_json::Value]| {
        messages
            .iter()
            .filter(|m| m["method"] == "notifications/tools/list_changed")
            .count()
    };
    // One burst of changes is one notification (the bot gathers 100 ms of them).
    let change_tools = || async {
        app.bot.tools.set_enabled("calculator", false);
        app.bot.tools.set_enabled("calculator", true);
        tokio::time::sleep(Duration::from_millis(300)).await;
    };

    // The stream's first event (its priming event) gives the id to resume from.
    let mut first = get(None).await.unwrap().bytes_stream();
    let mut seen = String::new();
    while seen_id(&seen).is_none() {
        let chunk = tokio::time::timeout(Duration::from_secs(5), first.next()).await;
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap().unwrap()));
    }
    let last = seen_id(&seen).unwrap();
    drop(first);
    // While the client is away, the tool list changes twice.
    tokio::time::sleep(Duration::from_millis(200)).await;
    change_tools().await;
    change_tools().await;

    let resumed = get(Some(last)).await.unwrap();
    assert_eq!(resumed.status(), 200);
    let mut resumed = resumed.bytes_stream();
    let mut seen = String::new();
    let missed = read_sse_until(&mut resumed, &mut seen, |messages| {
        (listed_changes(messages) >= 2).then_some(())
    })
    .await;
    assert!(
        missed.is_some(),
        "both changes sent while away arrive: {seen}"
    );
    // And the stream goes on live.
    change_tools().await;
    let live = read_sse_until(&mut resumed, &mut seen, |messages| {
        (listed_changes(messages) >= 3).then_some(())
    })
    .await;
    assert!(
        live.is_some(),
        "later changes arrive on the resumed stream: {seen}"
    );

    // An id of a stream this session never had: a new stream that says so.
    let lost = get(Some("9999-3".into())).await.unwrap();
    assert_eq!(lost.status(), 200);
    let mut lost = lost.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("this is a new stream") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), lost.next()).await;
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap().unwrap()));
    }
    assert!(seen.starts_with("id: "), "the priming event first: {seen}");
    app.shutdown().await;
}

/// The `id:` of the first SSE event in `text`, once it has arrived.
fn seen_id(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix("id: "))
        .map(|id| id.trim().to_string())
}
