//! The web surface over real HTTP and WebSocket: `/`, `/api/*`, `/ws`.

use crate::common;

use std::time::Duration;

use common::{client, start_bot};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

async fn get(url: String) -> (u16, Value) {
    let r = client().get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn post(url: String, body: &str) -> (u16, Value) {
    let r = client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn page_and_every_api_route() {
    let app = start_bot(&[]).await;
    let base = app.url();
    let page = client().get(&base).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.text().await.unwrap().contains("app.js"));
    for asset in [
        "/app.js",
        "/trace-panel.js",
        "/replay-form.js",
        "/style.css",
    ] {
        assert_eq!(
            client()
                .get(format!("{base}{asset}"))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
    }

    let (s, info) = get(format!("{base}/api/info")).await;
    assert_eq!(
        (s, info["llm"]["provider"].as_str()),
        (200, Some("offline"))
    );

    let (s, created) = post(
        format!("{base}/api/conversations"),
        r#"{"title":"from the api"}"#,
    )
    .await;
    assert_eq!(s, 201);
    let id = created["id"].as_str().unwrap().to_string();
    let (s, sent) = post(
        format!("{base}/api/messages"),
        &json!({"content": "/help", "conversation_id": id}).to_string(),
    )
    .await;
    assert_eq!(s, 200);
    assert!(sent["response"].as_str().unwrap().contains("/run"));
    let (_, list) = get(format!("{base}/api/conversations?limit=10")).await;
    assert_eq!(list["conversations"][0]["id"], id.as_str());
    assert_eq!(list["conversations"][0]["message_count"], 2);
    // The turn's trace, for the page's "what happened" panel (GET, read-only).
    let trace_id = sent["trace_id"].as_str().expect("a trace id").to_string();
    let (s, trace) = get(format!("{base}/api/traces/{trace_id}")).await;
    assert_eq!(s, 200);
    let kinds: Vec<&str> = trace["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|span| span["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["turn", "llm"]);
    assert_eq!(trace["spans"][0]["source"], "web");
    let (s, traces) = get(format!("{base}/api/conversations/{id}/traces")).await;
    assert_eq!(s, 200);
    assert_eq!(traces["traces"][0]["trace_id"], trace_id.as_str());
    assert_eq!(traces["traces"][0]["output"], sent["response"]);
    let (s, e) = get(format!("{base}/api/traces/not-a-trace")).await;
    assert_eq!(s, 400);
    assert!(
        e["error"].as_str().unwrap().contains("32 lowercase hex"),
        "{e}"
    );
    let (s, _) = get(format!("{base}/api/traces/{}", "ab".repeat(16))).await;
    assert_eq!(s, 404);
    let (s, page) = get(format!("{base}/api/conversations/{id}/messages?limit=1")).await;
    assert_eq!(s, 200);
    assert_eq!(page["messages"].as_array().unwrap().len(), 1);
    assert_eq!(page["has_more"], true);
    let before = page["messages"][0]["id"].as_i64().unwrap();
    let (_, older) = get(format!(
        "{base}/api/conversations/{id}/messages?before={before}"
    ))
    .await;
    assert_eq!(older["messages"][0]["role"], "user");

    let (_, tools) = get(format!("{base}/api/tools")).await;
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "calculator")
    );
    let (_, agents) = get(format!("{base}/api/agents")).await;
    assert_eq!(agents["supervisor"]["status"], "idle");
    let (_, skills) = get(format!("{base}/api/skills")).await;
    assert!(skills["skills"].is_array());
    let (s, task) = post(
        format!("{base}/api/tasks"),
        r#"{"name":"clock","schedule":"*/5 * * * *","action":{"tool":"current_time"}}"#,
    )
    .await;
    assert_eq!(s, 201);
    let (s, e) = post(
        format!("{base}/api/tasks"),
        r#"{"name":"clock","schedule":"0 * * * *","action":{"tool":"current_time"}}"#,
    )
    .await;
    assert_eq!(s, 409, "{e}");
    assert!(e["error"].as_str().unwrap().contains("already exists"));
    let (_, tasks) = get(format!("{base}/api/tasks")).await;
    assert_eq!(tasks["tasks"][0]["name"], "clock");
    let (s, run) = post(format!("{base}/api/tasks/{}/run", task["id"]), "").await;
    assert_eq!((s, run["status"].as_str()), (200, Some("ok")));

    // CORS applies to /api only, and only for this machine's origins.
    let preflight = |origin: &'static str| {
        client()
            .request(reqwest::Method::OPTIONS, format!("{base}/api/info"))
            .header("origin", origin)
            .header("access-control-request-method", "GET")
            .send()
    };
    let local = preflight("http://localhost:5173").await.unwrap();
    assert_eq!(
        local.headers()["access-control-allow-origin"],
        "http://localhost:5173"
    );
    let foreign = preflight("http://evil.example.com").await.unwrap();
    assert!(
        foreign
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
    let mcp = client()
        .post(format!("{base}/mcp"))
        .header("origin", "http://localhost:5173")
        .send()
        .await
        .unwrap();
    assert!(
        mcp.headers().get("access-control-allow-origin").is_none(),
        "/mcp has no CORS"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn other_sites_cannot_reach_the_web_surface() {
    let app = start_bot(&[]).await;
    let base = app.url();
    // DNS rebinding: a foreign Host name is refused on every web route.
    for path in ["/", "/api/info", "/ws"] {
        let r = client()
            .get(format!("{base}{path}"))
            .header("host", "evil.example.com")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
    }
    // A WebSocket from a page on another site is refused; same-origin is fine.
    let url = format!("ws://{}/ws", app.addr);
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
            url.as_str(),
        )
        .unwrap();
    request
        .headers_mut()
        .insert("origin", "http://evil.example.com".parse().unwrap());
    assert!(tokio_tungstenite::connect_async(request).await.is_err());
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
            url.as_str(),
        )
        .unwrap();
    request
        .headers_mut()
        .insert("origin", format!("http://{}", app.addr).parse().unwrap());
    assert!(tokio_tungstenite::connect_async(request).await.is_ok());
    app.shutdown().await;
}

#[tokio::test]
async fn api_bad_input_gets_json_errors() {
    let app = start_bot(&[]).await;
    let base = app.url();
    let (s, e) = post(format!("{base}/api/messages"), "{not json").await;
    assert_eq!(s, 400);
    assert!(e["error"].as_str().unwrap().contains("invalid JSON"), "{e}");
    let (s, e) = post(format!("{base}/api/messages"), r#"{"content": 5}"#).await;
    assert_eq!(s, 400);
    assert!(e["error"].as_str().unwrap().contains("content"), "{e}");
    let (s, e) = post(format!("{base}/api/messages"), r#"{"content": "  "}"#).await;
    assert_eq!(s, 400);
    assert!(e["error"].as_str().unwrap().contains("empty"));
    let (s, _) = post(
        format!("{base}/api/messages"),
        r#"{"content": "hi", "conversation_id": "nope"}"#,
    )
    .await;
    assert_eq!(s, 404);
    let (s, _) = get(format!("{base}/api/conversations/nope/messages")).await;
    assert_eq!(s, 404);
    // A task from the page: at most once a minute, a short schedule, a plain-text name.
    for (task, words) in [
        (
            json!({"name": "flood", "schedule": "* * * * * *", "action": {"prompt": "hi"}}),
            "at most once a minute",
        ),
        // Seconds fields whose first word is a number: the parser reads `0 -59` as
        // `0-59` and `0 /1` as `0/1`, every second.
        (
            json!({"name": "spaced", "schedule": "0 -59 * * * * *", "action": {"prompt": "hi"}}),
            "at most once a minute",
        ),
        (
            json!({"name": "stepped", "schedule": "0 /1 * * * * *", "action": {"prompt": "hi"}}),
            "at most once a minute",
        ),
        (
            json!({"name": "twice", "schedule": "0,50 0 3 * * *", "action": {"prompt": "hi"}}),
            "at most once a minute",
        ),
        (
            json!({"name": "long", "schedule": format!("{} * * * *", "0,".repeat(150) + "0"),
                   "action": {"prompt": "hi"}}),
            "schedule",
        ),
        (
            json!({"name": "x\n\u{1b}[2Jforged", "schedule": "0 0 * * *", "action": {"prompt": "hi"}}),
            "control character",
        ),
    ] {
        let (s, e) = post(format!("{base}/api/tasks"), &task.to_string()).await;
        assert_eq!(s, 400, "{task}: {e}");
        assert!(e["error"].as_str().unwrap().contains(words), "{e}");
    }
    let (s, e) = post(
        format!("{base}/api/tasks"),
        &json!({"name": "half-minutely", "schedule": "30 * * * * *", "action": {"prompt": "hi"}})
            .to_string(),
    )
    .await;
    assert_eq!(s, 201, "a single second in 6 fields is once a minute: {e}");
    // A message longer than a turn takes is refused before anything is stored.
    let long = json!({"content": "x".repeat(100_001)});
    let (s, e) = post(format!("{base}/api/messages"), &long.to_string()).await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"].as_str().unwrap().contains("send at most 100000"),
        "{e}"
    );
    let (s, e) = get(format!("{base}/api/conversations?limit=lots")).await;
    assert_eq!(s, 400);
    assert!(e["error"].as_str().unwrap().contains("query"));
    let (s, e) = post(
        format!("{base}/api/tasks"),
        r#"{"name":"x","schedule":"whenever","action":{"tool":"t"}}"#,
    )
    .await;
    assert_eq!(s, 400);
    assert!(e["error"].as_str().unwrap().contains("cron"));
    let long_name = format!(
        r#"{{"name":"{}","schedule":"*/5 * * * *","action":{{"prompt":"hi"}}}}"#,
        "n".repeat(201)
    );
    let (s, e) = post(format!("{base}/api/tasks"), &long_name).await;
    assert_eq!(s, 400);
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("`name` is 201 characters"),
        "{e}"
    );
    let long_prompt = format!(
        r#"{{"name":"x","schedule":"*/5 * * * *","action":{{"prompt":"{}"}}}}"#,
        "p".repeat(20_000)
    );
    let (s, e) = post(format!("{base}/api/tasks"), &long_prompt).await;
    assert_eq!(s, 400);
    assert!(e["error"].as_str().unwrap().contains("`action`"), "{e}");
    let (s, _) = post(format!("{base}/api/tasks/abc/run"), "").await;
    assert_eq!(s, 400);
    // An id that is not UTF-8 gets the API's own error shape, not axum's plain text.
    for path in [
        "conversations/%FF/messages",
        "traces/%FF",
        "conversations/%FF/traces",
    ] {
        let (s, e) = get(format!("{base}/api/{path}")).await;
        assert_eq!(s, 400, "{path}");
        assert!(
            e["error"].as_str().unwrap().contains("invalid id"),
            "{path}: {e}"
        );
    }
    let (s, e) = post(format!("{base}/api/tasks/%FF/run"), "").await;
    assert_eq!(s, 400);
    assert!(e["error"].is_string(), "{e}");
    let (s, _) = post(format!("{base}/api/tasks/999/run"), "").await;
    assert_eq!(s, 404);
    let (s, e) = get(format!("{base}/api/nothing-here")).await;
    assert_eq!(s, 404);
    assert!(e["error"].is_string());
    let huge = format!(r#"{{"content": "{}"}}"#, "a".repeat(2 * 1024 * 1024));
    let (s, _) = post(format!("{base}/api/messages"), &huge).await;
    assert_eq!(s, 413);
    let r = client()
        .post(format!("{base}/api/messages"))
        .header("content-type", "text/plain")
        .body("hi")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    // Nothing was half-written by the rejected requests.
    let (_, list) = get(format!("{base}/api/conversations")).await;
    assert!(list["conversations"].as_array().unwrap().is_empty());
    app.shutdown().await;
}

#[tokio::test]
async fn websocket_chat_streams_and_console_lines_reach_the_sink() {
    let app = start_bot(&[]).await;
    let url = format!("ws://{}/ws", app.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let hello = loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(text) = frame {
            break serde_json::from_str::<Value>(&text).unwrap();
        }
    };
    assert_eq!(hello["type"], "hello");
    assert_eq!(app.bot.web.connected_clients(), 1);
    let (status, clients) = get(format!("{}/api/clients", app.url())).await;
    assert_eq!((status, clients), (200, json!({"count": 1})));

    let send = |v: &str| Message::Text(v.to_string().into());
    ws.send(send("this is not json")).await.unwrap();
    ws.send(send(r#"{"type":"web_log","level":"shout","message":"x"}"#))
        .await
        .unwrap();
    ws.send(send(r#"{"type":"web_log","level":"warn","message":"probe-ws-123","timestamp":"2026-01-01T00:00:00Z"}"#)).await.unwrap();
    ws.send(send(r#"{"type":"chat","content":"/run calculator {\"expression\":\"4*4\"}","conversation_id":null,"request_id":"r1"}"#)).await.unwrap();
    let mut frames = Vec::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(text) = frame {
            let v: Value = serde_json::from_str(&text).unwrap();
            let done = v["type"] == "done";
            frames.push(v);
            if done {
                break;
            }
        }
    }
    let kinds: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "error").count(),
        2,
        "two malformed frames: {kinds:?}"
    );
    for kind in ["conversation", "tool_call", "tool_result", "token", "done"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    let done = frames.last().unwrap();
    assert_eq!(done["request_id"], "r1");
    assert!(done["response"].as_str().unwrap().contains("16"));

    // The console line reached the sink: with MCP on, the web_log buffer.
    let r = common::call_tool(&app, "web_log", json!({"grep": "probe-ws-123"})).await;
    let line = &r["structuredContent"]["lines"][0];
    assert_eq!(line["level"], "warn");
    assert_eq!(line["fields"]["browser_timestamp"], "2026-01-01T00:00:00Z");

    ws.close(None).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while app.bot.web.connected_clients() != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the client count drops on close");
    app.shutdown().await;
}

#[tokio::test]
async fn the_page_sees_a_turns_trace_but_no_mcp_call_that_shares_its_id() {
    let app = start_bot(&[]).await;
    let base = format!("http://{}", app.addr);
    // A page turn, then an /mcp call whose client names the turn's trace id.
    let (status, sent) = post(
        format!("{base}/api/messages"),
        &json!({"content": "hi"}).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{sent}");
    let trace = sent["trace_id"].as_str().unwrap().to_string();
    let meta = json!({"traceparent": format!("00-{trace}-00f067aa0ba902b7-01")});
    let failing = json!({"name": "db_query", "_meta": meta,
                         "arguments": {"query": "SELECT * FROM no_such_admin_table"}});
    common::modern(&app, 1, "tools/call", failing).await;
    // A run_tool is a trace root of its own (source run_tool), with no conversation.
    let ran = json!({"name": "run_tool", "_meta": meta,
                     "arguments": {"tool_name": "calculator", "parameters": {"expression": "123456*7"}}});
    common::modern(&app, 2, "tools/call", ran).await;

    let (status, body) = get(format!("{base}/api/traces/{trace}")).await;
    assert_eq!(status, 200, "{body}");
    let text = body.to_string();
    assert!(
        text.contains("\"kind\":\"llm\""),
        "the turn's spans: {text}"
    );
    assert!(!text.contains("no_such_admin_table"), "{text}");
    assert!(!text.contains("864192"), "the run_tool's result: {text}");
    assert!(!text.contains("db_query"), "{text}");
    app.shutdown().await;
}

/// One connection, no token: at most four chats in flight, each a turn with calls to
/// the model. The fifth is refused with an error naming its request; the others go on.
#[tokio::test]
async fn a_connection_has_at_most_four_chats_in_flight() {
    let llm_never_answers = common::llm_that_never_answers().await;
    let app = common::start_bot(&[
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", &llm_never_answers),
    ])
    .await;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws", app.addr))
        .await
        .unwrap();
    for n in 1..=5 {
        let chat = json!({"type": "chat", "content": format!("question {n}"), "request_id": format!("r{n}")});
        ws.send(Message::Text(chat.to_string().into()))
            .await
            .unwrap();
    }
    let refused = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(frame)) = ws.next().await {
            if let Message::Text(text) = frame {
                let frame: Value = serde_json::from_str(&text).unwrap();
                if frame["type"] == "error" {
                    return frame;
                }
            }
        }
        panic!("the connection closed");
    })
    .await
    .expect("the fifth chat is refused");
    assert_eq!(refused["request_id"], "r5", "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("in flight"),
        "{refused}"
    );
    app.shutdown().await;
}

/// What admin work leaves in shared state stays off the page: a tool's last error from an
/// `/mcp` `run_tool` (it named a private file), counted but not quoted in `/api/tools`.
#[tokio::test]
async fn the_page_gets_tool_counts_not_an_admins_errors() {
    let app = start_bot(&[]).await;
    let base = app.url();
    let failed = common::call_tool(
        &app,
        "run_tool",
        json!({"tool_name": "read_file", "parameters": {"path": "hr/salary-of-alice.txt"}}),
    )
    .await;
    assert!(failed.to_string().contains("salary-of-alice"), "{failed}");
    let (status, tools) = get(format!("{base}/api/tools")).await;
    assert_eq!(status, 200);
    let read_file = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_file")
        .cloned()
        .unwrap_or_else(|| panic!("read_file is a user tool: {tools}"));
    assert_eq!(read_file["stats"]["errors"], 1, "{read_file}");
    assert!(read_file["stats"]["last_error"].is_null(), "{read_file}");
    assert!(!tools.to_string().contains("salary-of-alice"), "{tools}");
    app.shutdown().await;
}

/// A WebSocket keeps its connection's place under `HTTP_MAX_CONNECTIONS` while it is
/// open (the upgrade ends the HTTP connection's own task), and a socket whose peer
/// answers no ping is closed, giving the place back.
#[tokio::test]
async fn websockets_count_under_the_connection_cap_and_silent_ones_are_closed() {
    let app = start_bot(&[
        ("HTTP_MAX_CONNECTIONS", "16"),
        ("HTTP_HEADER_TIMEOUT_SECS", "1"),
    ])
    .await;
    let url = format!("ws://{}/ws", app.addr);
    // The start-up's own keep-alive connections close after the header timeout: then
    // every place is free.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Sixteen sockets whose clients stop reading, so they answer no ping.
    let mut sockets = Vec::new();
    for _ in 0..16 {
        sockets.push(tokio_tungstenite::connect_async(&url).await.unwrap().0);
    }
    // Every place is taken: a request waits for one (it was served at once before).
    let started = std::time::Instant::now();
    let info = tokio::time::timeout(
        Duration::from_secs(15),
        client().get(format!("{}/api/info", app.url())).send(),
    )
    .await
    .expect("served once the silent sockets were closed")
    .unwrap();
    assert_eq!(info.status(), 200);
    assert!(
        started.elapsed() > Duration::from_secs(1),
        "the request waited for a place: {:?}",
        started.elapsed()
    );
    // And the sockets were closed by the server: past the pings queued for them, the
    // stream ends.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match sockets[0].next().await {
                Some(Ok(Message::Ping(_))) | Some(Ok(Message::Text(_))) => continue,
                _ => return,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the silent socket was still open");
    app.shutdown().await;
}
