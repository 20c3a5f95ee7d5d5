//! `porthole-stdio`: a relay for MCP clients that only speak stdio (such as Claude
//! Desktop) to the running bot's `/mcp` endpoint.
//!
//! It reads newline-delimited JSON-RPC from stdin and POSTs each message to
//! `PORTHOLE_URL` (default `http://127.0.0.1:3000/mcp`; a base URL such as
//! `http://127.0.0.1:3000` gets `/mcp` added) with `PORTHOLE_TOKEN` as the bearer
//! token (the design documents' `OLLIEBOT_URL` and `OLLIEBOT_TOKEN` are read when these
//! are unset), keeping the session id the bot hands out. Messages that arrive while an
//! `initialize` is unanswered wait for its answer, so they carry the new session id.
//! A loopback URL is never sent through `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY`: the
//! token must not leave the machine on its way to a bot on the same machine. Replies — plain JSON or SSE
//! streams — are written to stdout one message per line; once a session exists, the
//! session's GET notification stream is relayed too. Diagnostics go to stderr only.
//! When the bot is down or refuses the token, the client gets a JSON-RPC error for
//! its request (never a silent hang); a request the client cancels
//! (`notifications/cancelled`) is no longer waited for, even one the bot never answers,
//! and an `initialize` the bot leaves unanswered for 10 s is answered with an error.
//! On stdin EOF the answers still running are awaited, the session is ended and the
//! relay exits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod endpoint;
mod message;

use futures::StreamExt;
use futures::future::{FutureExt, Shared};
use porthole::sse_decoder::SseDecoder;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use endpoint::{endpoint_url, http_client, setting};
use message::{
    answers, cancelled_request, carries_a_request, is_initialize, request_id, with_routing_headers,
};

/// A message this large that fails to send most likely hit the bot's body limit
/// (the smallest `MCP_MAX_BODY_BYTES` allows is 1 KiB; most bots keep 4 MiB).
const LARGE_MESSAGE_BYTES: usize = 1024 * 1024;

/// How long a notification (or a response to the bot) may wait for the bot to take it:
/// a bot answers those at once (202), and nothing answers the client for them, so one
/// stuck on a bot that never answers would only keep the relay from exiting.
const NOTIFICATION_TIMEOUT: Duration = Duration::from_secs(5);

/// How long `initialize` may wait for its answer. A bot answers it at once (it runs no
/// tool), clients may not cancel it, and every message behind it waits for it: without
/// a limit, a bot that takes connections and never answers would hold the client and
/// the relay forever.
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the relay remembers between messages.
#[derive(Default)]
struct Session {
    id: Option<String>,
    protocol_version: Option<String>,
    notifications_open: bool,
}

struct Relay {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    session: Mutex<Session>,
    out: mpsc::UnboundedSender<String>,
}

fn log(message: &str) {
    eprintln!("porthole-stdio: {message}");
}

impl Relay {
    fn emit(&self, message: &Value) {
        let _ = self.out.send(message.to_string());
    }

    /// Answers the client's request `id` with an error, when it was a request.
    fn fail(&self, id: Option<&Value>, message: String) {
        log(&message);
        if let Some(id) = id {
            self.emit(
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}}),
            );
        }
    }

    fn request(&self, method: reqwest::Method, accept: &str) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .request(method, &self.url)
            .header("accept", accept);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let session = self.session();
        if let Some(id) = &session.id {
            request = request.header("mcp-session-id", id);
        }
        if let Some(version) = &session.protocol_version {
            request = request.header("mcp-protocol-version", version);
        }
        request
    }

    async fn relay(self: Arc<Self>, line: String) {
        let message: Value = match serde_json::from_str(&line) {
            Ok(m) => m,
            Err(e) => {
                log(&format!("ignoring a line that is not JSON: {e}"));
                self.emit(&json!({"jsonrpc": "2.0", "error": {"code": -32700, "message": format!("Parse error: {e}")}}));
                return;
            }
        };
        let id = message
            .get("id")
            .filter(|_| message.get("method").is_some())
            .cloned();
        let method = message["method"].as_str().unwrap_or_default().to_string();
        let response = match self.post(&message, &method, line).await {
            Ok(response) => response,
            Err(reason) => return self.fail(id.as_ref(), reason),
        };
        let status = response.status();
        if let Some(reason) = self.refusal(status) {
            return self.fail(id.as_ref(), reason);
        }
        if let Some(session) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            self.session().id = Some(session.to_string());
        }
        if status == reqwest::StatusCode::ACCEPTED {
            if method == "notifications/initialized" {
                self.clone().open_notifications();
            }
            return;
        }
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        if is_sse {
            let answered = self.relay_sse(response, id.as_ref()).await;
            if !answered {
                self.fail(
                    id.as_ref(),
                    "the bot's answer broke off before it was complete (was the bot stopped?); \
                     the work may have run: check before asking again"
                        .into(),
                );
            }
            return;
        }
        let body = response.text().await.unwrap_or_default();
        self.relay_json(&method, id.as_ref(), status, &body);
    }

    /// POSTs one stdin line (`message`, parsed) to the bot with the headers and the time
    /// limit it calls for. The error says what went wrong and what to do.
    async fn post(
        &self,
        message: &Value,
        method: &str,
        line: String,
    ) -> Result<reqwest::Response, String> {
        let request = self
            .request(reqwest::Method::POST, "application/json, text/event-stream")
            .header("content-type", "application/json");
        let request = with_routing_headers(request, method, &message["params"]);
        let waits_for_an_answer = carries_a_request(message);
        let request = if !waits_for_an_answer {
            request.timeout(NOTIFICATION_TIMEOUT)
        } else if is_initialize(message) {
            request.timeout(INITIALIZE_TIMEOUT)
        } else {
            request
        };
        let length = line.len();
        request.body(line).send().await.map_err(|e| {
            let url = &self.url;
            if e.is_timeout() && !waits_for_an_answer {
                let limit = NOTIFICATION_TIMEOUT.as_secs();
                format!("the bot at {url} did not take a message without an id ({method}) within {limit} s; dropped it")
            } else if e.is_timeout() {
                // Only `initialize` has a time limit among requests.
                let limit = INITIALIZE_TIMEOUT.as_secs();
                format!("the bot at {url} took the connection but did not answer `initialize` within {limit} s: is it stuck? Restart it, then reconnect")
            } else if length > LARGE_MESSAGE_BYTES {
                // A bot refuses a body over its limit before reading it, which the
                // sender sees as a broken connection, not as the 413.
                format!("the bot at {url} did not take this {length}-byte message ({}): over its MCP_MAX_BODY_BYTES limit (4 MiB unless set)?", e.without_url())
            } else {
                format!("cannot reach the Porthole bot at {url}: {} (is it running with MCP_SERVER_ENABLED=true?)", e.without_url())
            }
        })
    }

    /// The session of this relay (a panic elsewhere leaves it usable).
    fn session(&self) -> std::sync::MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What a refused request tells the client: a token the bot rejects, or a session
    /// the bot no longer knows (forgotten here, so the next `initialize` starts anew).
    fn refusal(&self, status: reqwest::StatusCode) -> Option<String> {
        match status.as_u16() {
            401 => Some("the bot rejected the token (HTTP 401): set PORTHOLE_TOKEN to the bot's MCP_SERVER_SECRET".into()),
            404 if self.session().id.is_some() => {
                *self.session() = Session::default();
                Some("the bot no longer knows this session (HTTP 404); reconnect to start a new one".into())
            }
            _ => None,
        }
    }

    /// Writes a JSON reply to stdout, noting the version `initialize` agreed on.
    fn relay_json(
        &self,
        method: &str,
        id: Option<&Value>,
        status: reqwest::StatusCode,
        body: &str,
    ) {
        // A JSON body that is no JSON-RPC message (the bot's 404 for a path it does not
        // serve) is not passed on as one.
        let message = serde_json::from_str::<Value>(body)
            .ok()
            .filter(|reply| reply.get("jsonrpc").is_some());
        match message {
            Some(mut reply) => {
                if method == "initialize"
                    && let Some(version) = reply["result"]["protocolVersion"].as_str()
                {
                    self.session().protocol_version = Some(version.to_string());
                }
                // A refusal of the HTTP request itself (413, 400 on a header) carries no
                // id; the client waits for its request's, so it gets that one.
                if let Some(id) = id
                    && reply.get("error").is_some()
                    && reply.get("id").is_none_or(Value::is_null)
                {
                    reply["id"] = id.clone();
                }
                self.emit(&reply);
            }
            // A 404 that is no JSON-RPC answer is a bot (or another server) without `/mcp`.
            None if status == reqwest::StatusCode::NOT_FOUND => self.fail(
                id,
                format!(
                    "{} has no MCP endpoint (HTTP 404): start the bot with MCP_SERVER_ENABLED=true (`cargo run --release -- token` sets it in .env), or point PORTHOLE_URL at the bot's /mcp",
                    self.url
                ),
            ),
            None => self.fail(
                id,
                format!(
                    "the bot answered HTTP {status} with a body that is not JSON-RPC: {}",
                    body.chars().take(200).collect::<String>()
                ),
            ),
        }
    }

    /// Writes every `data:` message of an SSE response to stdout until the stream ends
    /// or breaks. Returns whether the response to request `id` came (always true when
    /// there is none to wait for).
    async fn relay_sse(&self, response: reqwest::Response, id: Option<&Value>) -> bool {
        let mut stream = response.bytes_stream();
        let mut decoder = SseDecoder::default();
        let mut answered = id.is_none();
        while let Some(Ok(chunk)) = stream.next().await {
            for data in decoder.push(&chunk) {
                // One message per stdout line: a message split over several `data:`
                // lines is JSON broken between tokens, so the line breaks can go.
                let message = data.replace('\n', "");
                if message.trim().is_empty() {
                    continue;
                }
                answered |= id.is_some_and(|id| answers(&message, id));
                let _ = self.out.send(message);
            }
        }
        answered
    }

    /// Relays the session's GET notification stream, reconnecting while the session lives.
    fn open_notifications(self: Arc<Self>) {
        {
            let mut session = self.session();
            if session.notifications_open || session.id.is_none() {
                return;
            }
            session.notifications_open = true;
        }
        tokio::spawn(async move {
            loop {
                let response = self
                    .request(reqwest::Method::GET, "text/event-stream")
                    .send()
                    .await;
                match response {
                    Ok(r) if r.status().is_success() => {
                        self.relay_sse(r, None).await;
                    }
                    Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => break,
                    Ok(r) if r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED => break,
                    _ => {}
                }
                if self
                    .session
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .id
                    .is_none()
                {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            self.session
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .notifications_open = false;
        });
    }

    async fn end_session(&self) {
        let has_session = self
            .session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .id
            .is_some();
        if has_session {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                self.request(reqwest::Method::DELETE, "*/*").send(),
            )
            .await;
        }
    }
}

/// Relays every stdin line until stdin closes, each message on a task of its own, and
/// waits for the answers still running.
///
/// A client that gives up on a request says so with `notifications/cancelled`: the relay
/// passes it on to the bot and stops waiting for that request's answer (no answer is
/// written for it, as the protocol asks), so a bot that never answers does not hold the
/// relay open once the client has cancelled and closed stdin.
async fn relay_stdin(relay: &Arc<Relay>) {
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut in_flight = tokio::task::JoinSet::new();
    let mut requests: HashMap<String, tokio::task::AbortHandle> = HashMap::new();
    // An unanswered `initialize`: messages written right behind it wait for its answer,
    // which brings the session id they must carry. They wait on their own tasks, so the
    // relay goes on reading stdin: a cancellation of that `initialize` still gets in.
    let mut handshake: Option<Shared<oneshot::Receiver<()>>> = None;
    let mut raw = Vec::new();
    loop {
        // Tasks that are done leave the set, so a relay that runs for days holds only
        // the ones still running.
        while in_flight.try_join_next().is_some() {}
        raw.clear();
        // Read as bytes: a line that is not UTF-8 is an error for that line, not the end.
        if stdin.read_until(b'\n', &mut raw).await.unwrap_or(0) == 0 {
            break;
        }
        let Ok(line) = std::str::from_utf8(&raw) else {
            log("answering a line that is not UTF-8 text with a parse error");
            relay.emit(&json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": "Parse error: the line is not UTF-8 text"}}));
            continue;
        };
        let line = line.trim_end_matches(['\n', '\r']).to_string();
        if line.trim().is_empty() {
            continue;
        }
        let message = serde_json::from_str::<Value>(&line).unwrap_or_default();
        if let Some(request) = cancelled_request(&message).and_then(|id| requests.remove(&id)) {
            request.abort();
            log("the client cancelled a request: no longer waiting for its answer");
        }
        let behind = handshake.clone();
        let answered = if is_initialize(&message) {
            let (done, answered) = oneshot::channel();
            handshake = Some(answered.shared());
            Some(done)
        } else {
            None
        };
        let relay = relay.clone();
        // Each message goes on its own task, so a long tool call never blocks others.
        let task = in_flight.spawn(async move {
            if let Some(handshake) = behind {
                let _ = handshake.await;
            }
            relay.relay(line).await;
            if let Some(done) = answered {
                let _ = done.send(());
            }
        });
        if let Some(id) = request_id(&message) {
            requests.retain(|_, task| !task.is_finished());
            requests.insert(id, task);
        }
    }
    while in_flight.join_next().await.is_some() {}
}

#[tokio::main]
async fn main() {
    let (configured, url_name) = setting("PORTHOLE_URL", "OLLIEBOT_URL")
        .unwrap_or_else(|| ("http://127.0.0.1:3000/mcp".into(), "PORTHOLE_URL"));
    let url = match endpoint_url(&configured, url_name) {
        Ok(url) => url,
        Err(message) => {
            log(&message);
            std::process::exit(2);
        }
    };
    let token = setting("PORTHOLE_TOKEN", "OLLIEBOT_TOKEN").map(|(token, _)| token);
    if token.is_none() {
        log(
            "PORTHOLE_TOKEN is not set; requests go without a token (fine only if the bot runs with MCP_SERVER_AUTH_DISABLED=true)",
        );
    }
    let (out, mut out_rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = out_rx.recv().await {
            if stdout
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
                || stdout.flush().await.is_err()
            {
                break;
            }
        }
    });
    let relay = Arc::new(Relay {
        http: http_client(&url),
        url: url.to_string(),
        token,
        session: Mutex::new(Session::default()),
        out,
    });
    relay_stdin(&relay).await;
    relay.end_session().await;
    drop(relay);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
}
