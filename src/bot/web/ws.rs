//! `/ws`: chat with streamed tokens and tool events, and the browser console feed.
//!
//! Frames are JSON text. A malformed frame gets an `error` frame back and is logged; the
//! socket stays open. Chats run in their own tasks so the socket keeps reading (console
//! lines, pings) while a reply streams; closing the socket cancels them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::bot::agents::AgentEvent;
use crate::bot::tools::ExecContext;
use crate::bot::{Bot, WebLogLine};
use crate::redact::RedactedStream;

/// Largest frame accepted from a browser.
const MAX_FRAME_BYTES: usize = 256 * 1024;
/// Chats one connection may have in flight: each is a turn with calls to the model,
/// and the connection needs no token.
const MAX_CHATS_IN_FLIGHT: usize = 4;
/// Console levels the page may forward.
const LEVELS: [&str; 4] = ["log", "info", "warn", "error"];

pub fn router(bot: Arc<Bot>) -> Router {
    Router::new().route("/ws", get(upgrade)).with_state(bot)
}

async fn upgrade(
    State(bot): State<Arc<Bot>>,
    place: Option<axum::Extension<crate::serve::ConnectionPlace>>,
    headers: axum::http::HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    // Browsers send Origin on WebSocket handshakes and apply no CORS to them: refuse
    // pages from other sites, so they cannot chat as the user.
    if let Err(reason) = super::origin_is_ours(&headers, &bot.config.web_allowed_origins) {
        tracing::warn!(%reason, "refused a WebSocket from another site");
        return (
            axum::http::StatusCode::FORBIDDEN,
            format!("/ws refused: {reason}"),
        )
            .into_response();
    }
    ws.max_message_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket| async move {
            // The socket keeps its connection's place under HTTP_MAX_CONNECTIONS.
            let _place = place;
            serve(bot, socket).await
        })
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ClientFrame {
    Chat {
        content: String,
        conversation_id: Option<String>,
        request_id: Option<String>,
    },
    WebLog {
        level: String,
        message: String,
        timestamp: Option<String>,
    },
    Ping,
}

/// Counts a connected client for as long as it lives.
struct ClientGuard(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn serve(bot: Arc<Bot>, mut socket: WebSocket) {
    let counter = bot.web.clients.clone();
    counter.fetch_add(1, Ordering::Relaxed);
    let _guard = ClientGuard(counter);
    let client_id = uuid::Uuid::new_v4().to_string();
    tracing::debug!(%client_id, "websocket client connected");

    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let _ = out_tx.send(json!({"type": "hello", "client_id": client_id}));
    let mut chats = JoinSet::new();
    // A browser answers pings by itself, even in a tab in the background; a peer that
    // answers nothing for three rounds is gone, or holds the socket on purpose.
    let ping_every = bot.config.http_header_timeout;
    let mut pings = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    let mut last_heard = tokio::time::Instant::now();

    loop {
        tokio::select! {
            _ = pings.tick() => {
                if last_heard.elapsed() > 3 * ping_every {
                    tracing::debug!(%client_id, "websocket client silent; closing");
                    break;
                }
                if !sent_in_time(&mut socket, Message::Ping(Default::default()), 3 * ping_every).await {
                    break;
                }
            }
            outgoing = out_rx.recv() => {
                let Some(mut frame) = outgoing else { break };
                // Tool results and replies can quote secrets: the page gets what /mcp would.
                bot.redactor.redact(&mut frame);
                let text = Message::Text(frame.to_string().into());
                if !sent_in_time(&mut socket, text, 3 * ping_every).await {
                    break;
                }
            }
            incoming = socket.recv() => {
                last_heard = tokio::time::Instant::now();
                let text = match incoming {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Binary(_))) => {
                        reject(&out_tx, "binary frames are not supported; send JSON text");
                        continue;
                    }
                    Some(Ok(Message::Close(_))) | None => break,
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        tracing::debug!(%client_id, error = %e, "websocket read failed");
                        break;
                    }
                };
                handle_frame(&bot, &text, &out_tx, &mut chats);
            }
            Some(_) = chats.join_next(), if !chats.is_empty() => {}
        }
    }
    // Dropping the set aborts chats still running for this client.
    chats.abort_all();
    tracing::debug!(%client_id, "websocket client disconnected");
}

/// Sends `message`, giving up after `limit`: a peer that stops reading must not hold the
/// socket (and its place under the connection cap) with a send that never completes.
async fn sent_in_time(socket: &mut WebSocket, message: Message, limit: Duration) -> bool {
    matches!(
        tokio::time::timeout(limit, socket.send(message)).await,
        Ok(Ok(()))
    )
}

/// Answers a frame the page would never send. Logged at debug only: the client is told,
/// and a flood of such frames must not push the journal's warnings and audit lines out.
fn reject(out: &mpsc::UnboundedSender<Value>, message: &str) {
    tracing::debug!(reason = message, "malformed websocket frame");
    let _ = out.send(json!({"type": "error", "message": message}));
}

fn handle_frame(
    bot: &Arc<Bot>,
    text: &str,
    out: &mpsc::UnboundedSender<Value>,
    chats: &mut JoinSet<()>,
) {
    let frame: ClientFrame = match serde_json::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            let message = format!(
                "malformed frame ({e}); expected {{\"type\":\"chat\"|\"web_log\"|\"ping\", …}}"
            );
            reject(out, &message);
            return;
        }
    };
    match frame {
        ClientFrame::Ping => {
            let _ = out.send(json!({"type": "pong"}));
        }
        ClientFrame::WebLog {
            level,
            message,
            timestamp,
        } => {
            if !LEVELS.contains(&level.as_str()) {
                reject(
                    out,
                    &format!("web_log level `{level}` must be one of log, info, warn, error"),
                );
                return;
            }
            bot.web.log_sink.record(WebLogLine {
                level,
                message,
                timestamp,
            });
        }
        ClientFrame::Chat {
            content,
            conversation_id,
            request_id,
        } => {
            if chats.len() >= MAX_CHATS_IN_FLIGHT {
                let _ = out.send(json!({
                    "type": "error",
                    "request_id": request_id,
                    "message": format!(
                        "{MAX_CHATS_IN_FLIGHT} chats are already in flight on this connection; \
                         send this one once an answer has come"
                    ),
                }));
                return;
            }
            let bot = bot.clone();
            let out = out.clone();
            chats.spawn(async move { chat(bot, content, conversation_id, request_id, out).await });
        }
    }
}

async fn chat(
    bot: Arc<Bot>,
    content: String,
    conversation_id: Option<String>,
    request_id: Option<String>,
    out: mpsc::UnboundedSender<Value>,
) {
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let forward = {
        let out = out.clone();
        let request_id = request_id.clone();
        let bot = bot.clone();
        async move {
            let mut conversation: Option<String> = None;
            // The answer's text, let out whole words at a time: a secret streamed in
            // pieces too short to recognise must not reach the page piece by piece.
            let mut text = RedactedStream::new(&bot.redactor);
            let send = |mut frame: Value, conversation: &Option<String>| {
                frame["request_id"] = json!(request_id);
                frame["conversation_id"] = json!(conversation);
                let _ = out.send(frame);
            };
            let token = |text: String| json!({"type": "token", "text": text});
            while let Some(event) = events_rx.recv().await {
                let frame = match event {
                    AgentEvent::Token(piece) => {
                        if let Some(clean) = text.push(&piece) {
                            send(token(clean), &conversation);
                        }
                        continue;
                    }
                    AgentEvent::Step(_) => continue,
                    AgentEvent::Conversation(id) => {
                        conversation = Some(id.clone());
                        json!({"type": "conversation", "conversation_id": id})
                    }
                    AgentEvent::ToolCall { name, arguments } => {
                        json!({"type": "tool_call", "name": name, "arguments": arguments})
                    }
                    AgentEvent::ToolResult {
                        name,
                        content,
                        is_error,
                    } => {
                        json!({"type": "tool_result", "name": name, "content": content, "is_error": is_error})
                    }
                };
                // The text before a tool call is over: it goes out before the call.
                if let Some(clean) = text.flush() {
                    send(token(clean), &conversation);
                }
                send(frame, &conversation);
            }
            if let Some(clean) = text.flush() {
                send(token(clean), &conversation);
            }
        }
    };
    let mut ctx = ExecContext::new(&[crate::bot::tools::USER_ROLE]);
    ctx.trace = bot.tracer.root("web", None);
    let send = bot
        .supervisor
        .send(conversation_id.as_deref(), &content, &ctx, Some(events_tx));
    let (reply, ()) = tokio::join!(send, forward);
    let frame = match reply {
        Ok(reply) => json!({
            "type": "done",
            "request_id": request_id,
            "conversation_id": reply.conversation_id,
            "response": reply.response,
            "trace_id": reply.trace_id,
        }),
        Err(e) => json!({"type": "error", "request_id": request_id, "message": e.to_string()}),
    };
    let _ = out.send(frame);
}
