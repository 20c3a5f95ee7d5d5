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

use base64::Engine;
use futures::StreamExt;
use futures::future::{FutureExt, Shared};
use porthole::sse_decoder::SseDecoder;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

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

/// `Mcp-Name` values that are not plain ASCII travel Base64-encoded.
/// 2026-era clients put their version in `_meta`; it is mirrored (with the method and
/// name) in the headers the server checks. Other messages go without them, so a bare
/// request (no initialize, no `_meta`) is served statelessly.
fn with_routing_headers(
    mut request: reqwest::RequestBuilder,
    method: &str,
    params: &Value,
) -> reqwest::RequestBuilder {
    let modern_version = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str();
    if let Some(version) = modern_version {
        request = request.header("mcp-protocol-version", version);
    }
    if modern_version.is_some() && !method.is_empty() {
        request = request.header("mcp-method", method);
    }
    if let Some(name) = params["name"].as_str().or(params["uri"].as_str())
        && modern_version.is_some()
        && matches!(method, "tools/call" | "prompts/get" | "resources/read")
    {
        request = request.header("mcp-name", header_safe(name));
    }
    request
}

fn header_safe(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x21..0x7f).contains(&b)) && !value.starts_with("=?base64?");
    if plain {
        value.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
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
        let request = self
            .request(reqwest::Method::POST, "application/json, text/event-stream")
            .header("content-type", "application/json");
        let request = with_routing_headers(request, &method, &message["params"]);
        let waits_for_an_answer = carries_a_request(&message);
        let request = if !waits_for_an_answer {
            request.timeout(NOTIFICATION_TIMEOUT)
        } else if is_initialize(&message) {
            request.timeout(INITIALIZE_TIMEOUT)
        } else {
            request
        };
        let length = line.len();
        let response = match request.body(line).send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() && !waits_for_an_answer => {
                return log(&format!(
                    "the bot at {} did not take a message without an id ({method}) within {} s; dropped it",
                    self.url,
                    NOTIFICATION_TIMEOUT.as_secs()
                ));
            }
            // Only `initialize` has a time limit among requests.
            Err(e) if e.is_timeout() => {
                return self.fail(
                    id.as_ref(),
                    format!("the bot at {} took the connection but did not answer `initialize` within {} s: is it stuck? Restart it, then reconnect", self.url, INITIALIZE_TIMEOUT.as_secs()),
                );
            }
            // A bot refuses a body over its limit before reading it, which the sender
            // sees as a broken connection, not as the 413.
            Err(e) if length > LARGE_MESSAGE_BYTES => {
                return self.fail(
                    id.as_ref(),
                    format!("the bot at {} did not take this {length}-byte message ({}): over its MCP_MAX_BODY_BYTES limit (4 MiB unless set)?", self.url, e.without_url()),
                );
            }
            Err(e) => {
                return self.fail(
                    id.as_ref(),
                    format!("cannot reach the Porthole bot at {}: {} (is it running with MCP_SERVER_ENABLED=true?)", self.url, e.without_url()),
                );
            }
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
        match serde_json::from_str::<Value>(body) {
            Ok(mut reply) => {
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
            // A plain 404 is a bot (or another server) without `/mcp` mounted.
            Err(_) if status == reqwest::StatusCode::NOT_FOUND => self.fail(
                id,
                format!(
                    "{} has no MCP endpoint (HTTP 404): start the bot with MCP_SERVER_ENABLED=true (`porthole token` sets it in .env), or point PORTHOLE_URL at the bot's /mcp",
                    self.url
                ),
            ),
            Err(_) => self.fail(
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

/// A setting by its name, or by the name the design documents give it (`OLLIEBOT_URL`,
/// `OLLIEBOT_TOKEN`, for a configuration copied from them): the value, and the name it
/// was found under, for messages. An empty value counts as unset.
fn setting(name: &'static str, design_name: &'static str) -> Option<(String, &'static str)> {
    [name, design_name].into_iter().find_map(|n| {
        std::env::var(n)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| (v, n))
    })
}

/// The `/mcp` endpoint for `PORTHOLE_URL` (`name`: the variable it came from): a base
/// URL gets `/mcp` appended, a URL that already ends in `/mcp` is kept. The error says
/// what to set.
fn endpoint_url(text: &str, name: &str) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(text.trim()).map_err(|e| {
        format!("{name}=\"{text}\" is not a URL ({e}); use e.g. http://127.0.0.1:3000")
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "{name}=\"{text}\" must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:3000"
        ));
    }
    let path = url.path().trim_end_matches('/').to_string();
    if path.ends_with("/mcp") {
        url.set_path(&path);
    } else {
        url.set_path(&format!("{path}/mcp"));
    }
    Ok(url)
}

/// Whether `url` points at this machine: `localhost`, `127.0.0.0/8`, `::1`, their
/// IPv4-mapped forms, `0.0.0.0` and `::` (which reach this machine too), or a name
/// that resolves to those addresses only (this machine's own host name, a name in
/// `MCP_ALLOWED_HOSTS`).
fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return is_this_machine(ip);
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    let port = url.port_or_known_default().unwrap_or(80);
    std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), port)).is_ok_and(|addresses| {
        let mut addresses = addresses.peekable();
        addresses.peek().is_some() && addresses.all(|a| is_this_machine(a.ip()))
    })
}

fn is_this_machine(ip: std::net::IpAddr) -> bool {
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    ip.is_loopback() || ip.is_unspecified()
}

/// The HTTP client: never through a proxy for a loopback URL (the bearer token would
/// travel to the proxy); other URLs follow the usual proxy variables.
fn http_client(url: &reqwest::Url) -> reqwest::Client {
    let builder = porthole::http_client::builder();
    let builder = if is_loopback(url) {
        builder.no_proxy()
    } else {
        builder
    };
    builder.build().unwrap_or_else(|e| {
        log(&format!(
            "cannot build the HTTP client with the proxy settings ({e}); going direct"
        ));
        porthole::http_client::builder()
            .no_proxy()
            .build()
            .unwrap_or_default()
    })
}

/// Whether `message` is the response to request `id` (a result or an error).
fn answers(message: &str, id: &Value) -> bool {
    serde_json::from_str::<Value>(message).is_ok_and(|m| {
        m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some())
    })
}

/// Whether a message is an `initialize` request (later messages wait for its answer).
fn is_initialize(message: &Value) -> bool {
    message["method"] == "initialize" && message.get("id").is_some()
}

/// Whether a message (or a batch) holds a request, whose answer the client waits for.
fn carries_a_request(message: &Value) -> bool {
    let is_request = |m: &Value| m.get("method").is_some() && m.get("id").is_some();
    match message {
        Value::Array(batch) => batch.iter().any(is_request),
        single => is_request(single),
    }
}

/// The id of a request (a message with a method and an id), as JSON text.
fn request_id(message: &Value) -> Option<String> {
    message.get("method")?;
    Some(message.get("id")?.to_string())
}

/// The id a `notifications/cancelled` names (`params.requestId`), as JSON text.
fn cancelled_request(message: &Value) -> Option<String> {
    (message["method"] == "notifications/cancelled")
        .then(|| message["params"].get("requestId").map(Value::to_string))
        .flatten()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_and_full_urls_name_the_same_endpoint() {
        for (given, expected) in [
            ("http://127.0.0.1:3000", "http://127.0.0.1:3000/mcp"),
            ("http://127.0.0.1:3000/", "http://127.0.0.1:3000/mcp"),
            ("http://127.0.0.1:3000/mcp", "http://127.0.0.1:3000/mcp"),
            ("http://127.0.0.1:3000/mcp/", "http://127.0.0.1:3000/mcp"),
            (
                "https://bot.example/porthole",
                "https://bot.example/porthole/mcp",
            ),
        ] {
            assert_eq!(
                endpoint_url(given, "PORTHOLE_URL").unwrap().as_str(),
                expected,
                "{given}"
            );
        }
        assert!(endpoint_url("127.0.0.1:3000", "PORTHOLE_URL").is_err());
        assert!(
            endpoint_url("ftp://127.0.0.1/", "PORTHOLE_URL")
                .unwrap_err()
                .contains("http://")
        );
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for url in [
            "http://127.0.0.1:1",
            "http://127.9.9.9",
            "http://[::1]:3",
            "http://LOCALHOST:3000",
            "http://[::ffff:127.0.0.1]:3000",
            "http://0.0.0.0:3000",
            "http://[::]:3000",
        ] {
            assert!(is_loopback(&reqwest::Url::parse(url).unwrap()), "{url}");
        }
        for url in ["http://10.0.0.1", "http://example.com", "http://[::2]"] {
            assert!(!is_loopback(&reqwest::Url::parse(url).unwrap()), "{url}");
        }
    }
}
