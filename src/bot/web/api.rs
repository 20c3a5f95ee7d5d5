//! `/api/*`: the REST API of the web page. JSON in and out; every error is
//! `{"error": "…"}` with the right status and a message that says what to fix.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, State};
use axum::http::StatusCode;
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;

use crate::bot::Bot;
use crate::bot::agents::{AgentError, AgentInfo};
use crate::bot::schedule::{RunAs, ScheduleError};
use crate::bot::store::{MessageQuery, SpanQuery, StoreError, is_admin_conversation};
use crate::bot::tools::{ExecContext, USER_ROLE};
use crate::model::{REPLAY_SOURCE, SpanRecord};

/// Largest request body `/api` accepts.
pub const API_BODY_LIMIT: usize = 1024 * 1024;
/// How long a request body may take to arrive in full: a client that sends it a byte at
/// a time must not hold a connection (the server's header timeout ends at the body).
const API_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({"error": self.message}))).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let status = match rejection {
            JsonRejection::MissingJsonContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            JsonRejection::BytesRejection(_) => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        let message = match status {
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                "send the body as JSON with `Content-Type: application/json`".to_string()
            }
            StatusCode::PAYLOAD_TOO_LARGE => {
                format!("the request body is over the {API_BODY_LIMIT}-byte limit")
            }
            _ => format!("invalid JSON body: {}", rejection.body_text()),
        };
        ApiError::new(status, message)
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid query string: {}", rejection.body_text()),
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(m) => ApiError::new(StatusCode::NOT_FOUND, m),
            StoreError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, m),
            other => {
                tracing::error!(error = %other, "store error in /api");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "database error; see the server log",
                )
            }
        }
    }
}

impl From<AgentError> for ApiError {
    fn from(e: AgentError) -> Self {
        match e {
            AgentError::UnknownConversation(_) => {
                ApiError::new(StatusCode::NOT_FOUND, e.to_string())
            }
            AgentError::EmptyMessage | AgentError::MessageTooLong { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, e.to_string())
            }
            AgentError::Store(s) => s.into(),
        }
    }
}

impl From<ScheduleError> for ApiError {
    fn from(e: ScheduleError) -> Self {
        match e {
            ScheduleError::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, e.to_string()),
            ScheduleError::AlreadyRunning(_) => ApiError::new(StatusCode::CONFLICT, e.to_string()),
            ScheduleError::NeedsAdmin(_) => ApiError::new(StatusCode::FORBIDDEN, e.to_string()),
            ScheduleError::TooMany(_) | ScheduleError::TooManyForUsers(_) => {
                ApiError::new(StatusCode::CONFLICT, e.to_string())
            }
            ScheduleError::Store(s) => s.into(),
            other => ApiError::new(StatusCode::BAD_REQUEST, other.to_string()),
        }
    }
}

/// `Json<T>` whose rejections use our error shape.
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub(super) struct ApiJson<T>(pub(super) T);

/// `Path<T>` whose rejections use our error shape (an id that is not UTF-8, say).
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub(super) struct ApiPath<T>(pub(super) T);

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("invalid id in the URL: {}", rejection.body_text()),
        )
    }
}

type ApiResult = Result<Json<Value>, ApiError>;

pub fn router(bot: Arc<Bot>) -> Router {
    Router::new()
        .route("/info", get(info))
        .route(
            "/conversations",
            get(list_conversations).post(create_conversation),
        )
        .route("/conversations/{id}/messages", get(list_messages))
        .route("/conversations/{id}/traces", get(conversation_traces))
        .route(
            "/conversations/{id}/replay",
            post(super::replay::replay_in_conversation),
        )
        .route("/traces/{trace_id}", get(get_trace))
        .route("/messages", post(send_message))
        .route("/tools", get(list_tools))
        .route("/agents", get(list_agents))
        .route("/clients", get(count_clients))
        .route("/tasks", get(list_tasks).post(create_task))
        .route("/tasks/{id}/run", post(run_task))
        .route("/skills", get(list_skills))
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "no such API route; see docs/api.md")
        })
        .layer(RequestBodyLimitLayer::new(API_BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(
            bot.clone(),
            same_site_json_writes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            bot.clone(),
            redact_json,
        ))
        .layer(cors(&bot.config.web_allowed_origins))
        .with_state(bot)
}

/// A request that changes state must come from this bot's page (or an allowed origin)
/// and carry a JSON body type. A form post from another site is a "simple" request
/// that browsers send without asking first; requiring JSON forces a CORS preflight,
/// which `cors` answers only for allowed origins.
async fn same_site_json_writes(
    State(bot): State<Arc<Bot>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    if let Err(reason) = super::origin_is_ours(request.headers(), &bot.config.web_allowed_origins) {
        tracing::warn!(%reason, path = %request.uri().path(), "refused a cross-site /api request");
        return ApiError::new(StatusCode::FORBIDDEN, reason).into_response();
    }
    let json_body = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json_body {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send `Content-Type: application/json` (with `{}` as the body when there is nothing to send)",
        )
        .into_response();
    }
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(API_BODY_TIMEOUT, axum::body::to_bytes(body, API_BODY_LIMIT));
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is over the {API_BODY_LIMIT}-byte limit"),
            )
            .into_response();
        }
        Err(_) => {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    API_BODY_TIMEOUT.as_secs()
                ),
            )
            .into_response();
        }
    };
    let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    next.run(request).await
}

/// Every JSON answer is redacted like `/mcp`'s: task results, messages and tool lists
/// can quote secrets, and this surface has no token.
async fn redact_json(
    State(bot): State<Arc<Bot>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let response = next.run(request).await;
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the answer could not be read",
        )
        .into_response();
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    bot.redactor.redact(&mut value);
    let body = serde_json::to_vec(&value).unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// Cross-origin calls are allowed from this machine's origins (a front-end dev server
/// on another port, say) and from `WEB_ALLOWED_ORIGINS`; never from arbitrary sites.
fn cors(allowed: &[String]) -> CorsLayer {
    let allowed = allowed.to_vec();
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, _| {
            origin
                .to_str()
                .is_ok_and(|o| crate::net::origin_is_allowed(o, &allowed))
        }))
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::CONTENT_TYPE])
}

async fn info(State(bot): State<Arc<Bot>>) -> Json<Value> {
    Json(json!({
        "name": "porthole",
        "version": env!("CARGO_PKG_VERSION"),
        "llm": {"provider": bot.llm.provider(), "model": bot.llm.model()},
        "web_console_forwarding": bot.web.console_forwarding,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitQuery {
    limit: Option<usize>,
}

async fn list_conversations(
    State(bot): State<Arc<Bot>>,
    query: Result<Query<LimitQuery>, QueryRejection>,
) -> ApiResult {
    let Query(query) = query?;
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let conversations = bot.store.list_user_conversations(limit).await?;
    Ok(Json(json!({"conversations": conversations})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewConversation {
    title: Option<String>,
}

async fn create_conversation(
    State(bot): State<Arc<Bot>>,
    body: Result<ApiJson<NewConversation>, ApiError>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let ApiJson(body) = body?;
    let title = body.title.unwrap_or_else(|| "New conversation".into());
    if title.chars().count() > 200 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "`title` must be at most 200 characters",
        ));
    }
    let conversation = bot.store.create_conversation(&title).await?;
    Ok((StatusCode::CREATED, Json(json!(conversation))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessagesQuery {
    limit: Option<usize>,
    before: Option<i64>,
    after: Option<i64>,
}

/// The conversation's turn traces, newest first: id, time, status, and the answer they
/// ended with (the page matches it to the answer it shows).
async fn conversation_traces(
    State(bot): State<Arc<Bot>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult {
    shown_conversation(&bot, &id).await?;
    bot.tracer.flush().await;
    let page = bot
        .store
        .list_traces(SpanQuery {
            conversation_id: Some(id),
            limit: 200,
            ..SpanQuery::default()
        })
        .await?;
    let traces: Vec<Value> = page
        .items
        .iter()
        .map(|t| {
            json!({
                "trace_id": t.root.trace_id,
                "start_us": t.root.start_us,
                "status": t.status(),
                "output": t.root.attributes.get("output"),
            })
        })
        .collect();
    Ok(Json(json!({"traces": traces})))
}

/// One trace's spans in start order, with their (redacted, cut) payloads: what the
/// page's "what happened" panel shows.
async fn get_trace(State(bot): State<Arc<Bot>>, ApiPath(trace_id): ApiPath<String>) -> ApiResult {
    if !crate::trace_context::is_trace_id(&trace_id) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "a trace id is 32 lowercase hex digits",
        ));
    }
    bot.tracer.flush().await;
    let spans = shown_on_the_page(bot.store.trace_spans(&trace_id).await?);
    if spans.is_empty() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "no trace {trace_id}: it was never recorded or was pruned (TRACE_MAX_TURNS, TRACE_MAX_MCP_CALLS, TRACE_MAX_AGE_SECS)"
            ),
        ));
    }
    Ok(Json(json!({"trace_id": trace_id, "spans": spans})))
}

/// The spans the page may show: those of the turns of conversations it may show, and of
/// replays of their calls. A client's `traceparent` can give an `/mcp` call (a
/// `run_tool`'s arguments and result, a `db_query`'s error) the trace id of a turn, and
/// `/api` answers without a token: a root that belongs to no conversation the page
/// shows (an `/mcp` call, a `run_tool`, a tool task, an admin conversation's turn, a
/// replay of one) is left out with its spans.
fn shown_on_the_page(spans: Vec<SpanRecord>) -> Vec<SpanRecord> {
    let turns: HashSet<String> = spans
        .iter()
        .filter(|s| s.is_root && conversation_of_root(s).is_some_and(|c| !is_admin_conversation(c)))
        .map(|s| s.span_id.clone())
        .collect();
    spans
        .into_iter()
        .filter(|s| turns.contains(&s.root_span_id))
        .collect()
}

/// The conversation a root belongs to: its own, or for a replay the one whose call it
/// replayed.
fn conversation_of_root(root: &SpanRecord) -> Option<&str> {
    if root.source.as_deref() == Some(REPLAY_SOURCE) {
        return root.attributes["replay.conversation_id"].as_str();
    }
    root.conversation_id.as_deref()
}

/// Conversation `id` when a chat user may see it; otherwise the same 404 as for an id
/// that never existed (one started with admin rights is not the page's business).
pub(super) async fn shown_conversation(bot: &Bot, id: &str) -> Result<(), ApiError> {
    if is_admin_conversation(id) || bot.store.get_conversation(id).await?.is_none() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("conversation {id} does not exist"),
        ));
    }
    Ok(())
}

async fn list_messages(
    State(bot): State<Arc<Bot>>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<MessagesQuery>, QueryRejection>,
) -> ApiResult {
    let Query(query) = query?;
    shown_conversation(&bot, &id).await?;
    let page = bot
        .store
        .list_messages(
            &id,
            MessageQuery {
                limit: query.limit.unwrap_or(100).clamp(1, 1000),
                before: query.before,
                after: query.after,
            },
        )
        .await?;
    Ok(Json(json!(page)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendMessage {
    content: String,
    conversation_id: Option<String>,
}

async fn send_message(
    State(bot): State<Arc<Bot>>,
    body: Result<ApiJson<SendMessage>, ApiError>,
) -> ApiResult {
    let ApiJson(body) = body?;
    let mut ctx = ExecContext::new(&[USER_ROLE]);
    ctx.trace = bot.tracer.root("web", None);
    let reply = bot
        .supervisor
        .send(body.conversation_id.as_deref(), &body.content, &ctx, None)
        .await?;
    Ok(Json(json!(reply)))
}

/// The tools a chat user may use: internal and admin-only ones are not the page's business.
async fn list_tools(State(bot): State<Arc<Bot>>) -> Json<Value> {
    let mut tools = bot.tools.available_to(&ExecContext::new(&[USER_ROLE]));
    // A tool's last error may come from anyone's call (an admin's `run_tool` naming a
    // private file): the page gets the counts, not the text.
    for tool in &mut tools {
        tool.stats.last_error = None;
    }
    Json(json!({"tools": tools}))
}

/// How many pages hold a WebSocket open (the design's `GET /api/clients`; `health`
/// reports the same count).
async fn count_clients(State(bot): State<Arc<Bot>>) -> Json<Value> {
    Json(json!({"count": bot.web.connected_clients()}))
}

/// The agents as a chat user may see them: what a turn with admin rights asked a worker
/// to do, and which admin conversations are in progress, are left out.
async fn list_agents(State(bot): State<Arc<Bot>>) -> Json<Value> {
    let agents: Vec<AgentInfo> = bot
        .agents
        .list()
        .into_iter()
        .map(AgentInfo::for_chat_users)
        .collect();
    let mut supervisor = bot.supervisor.state();
    supervisor
        .processing
        .retain(|(conversation, _)| !is_admin_conversation(conversation));
    supervisor.active_workers = supervisor
        .active_workers
        .into_iter()
        .map(AgentInfo::for_chat_users)
        .collect();
    Json(json!({"agents": agents, "supervisor": supervisor}))
}

/// Every task, but what an admin task does and returned stays with `/mcp`: the page
/// answers without a token, and an admin task may read what a chat user may not.
async fn list_tasks(State(bot): State<Arc<Bot>>) -> ApiResult {
    let mut tasks = bot.schedule.list().await?;
    for task in tasks
        .iter_mut()
        .filter(|t| t.run_as != RunAs::User.as_str())
    {
        task.action = Value::Null;
        task.last_result = None;
    }
    Ok(Json(json!({"tasks": tasks})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTask {
    name: String,
    #[serde(default)]
    description: String,
    schedule: String,
    action: Value,
}

async fn create_task(
    State(bot): State<Arc<Bot>>,
    body: Result<ApiJson<NewTask>, ApiError>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let ApiJson(body) = body?;
    if body.name.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "`name` must not be empty",
        ));
    }
    let task = bot
        .schedule
        .create(
            &body.name,
            &body.description,
            &body.schedule,
            body.action,
            RunAs::User,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(json!(task))))
}

async fn run_task(State(bot): State<Arc<Bot>>, ApiPath(id): ApiPath<String>) -> ApiResult {
    let id: i64 = id.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("task id `{id}` is not a number"),
        )
    })?;
    Ok(Json(json!(bot.schedule.run_now(id, RunAs::User).await?)))
}

async fn list_skills(State(bot): State<Arc<Bot>>) -> Json<Value> {
    Json(json!({"skills": bot.skills.summaries()}))
}
