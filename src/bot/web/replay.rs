//! `POST /api/conversations/{id}/replay`: the page's Replay form. It replays one LLM
//! call through the same engine as the MCP tool `replay_llm_call` (one provider call,
//! no tool run, the same checks and the same per-minute budget), or with `turn: true`
//! ("Replay from here") the whole turn from that call on as `replay_turn` does, reusing
//! the recorded tool results and running no tool at all. `/api` has no token: so only a
//! call of the conversation the page shows may be replayed, and only with the changes
//! the page's form offers.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::api::{ApiError, ApiJson, ApiPath};
use crate::bot::Bot;
use crate::bot::replay::{
    self, Changes, DEFAULT_TURN_STEPS, Options, ReplayError, ToolPolicy, TurnOptions,
};
use crate::model::SpanRecord;

/// What the page's form may change; everything else is sent as recorded.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplayBody {
    span_id: String,
    system: Option<String>,
    model: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u64>,
    /// Send even where the stored request holds `[REDACTED]` in place of a secret.
    #[serde(default)]
    allow_redacted: bool,
    /// Replay the whole turn from this call on ("Replay from here"), not the one call.
    #[serde(default)]
    turn: bool,
}

/// Replays the LLM call `span_id` of conversation `id` once, with the body's changes.
pub(super) async fn replay_in_conversation(
    State(bot): State<Arc<Bot>>,
    ApiPath(id): ApiPath<String>,
    body: Result<ApiJson<ReplayBody>, ApiError>,
) -> Response {
    let ApiJson(body) = match body {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let span = match belongs_to(&bot, &id, &body.span_id).await {
        Ok(span) => span,
        Err(e) => return e.into_response(),
    };
    let changes = Changes {
        system: body.system,
        model: body.model,
        temperature: body.temperature,
        max_tokens: body.max_tokens,
        ..Changes::default()
    };
    if body.turn {
        // No tool runs from the page: a call the recording did not make stops the replay.
        let options = TurnOptions {
            max_steps: DEFAULT_TURN_STEPS,
            tools: ToolPolicy::Recorded,
            allow_redacted: body.allow_redacted,
            progress: &|_, _| {},
        };
        return match replay::replay_turn(&bot, &span.span_id, &changes, options).await {
            Ok(turn) => Json(json!(turn)).into_response(),
            Err(e) => refused(e),
        };
    }
    let options = Options {
        runs: 1,
        allow_redacted: body.allow_redacted,
    };
    match replay::replay_span(&bot, span, &changes, options).await {
        Ok(replay) => Json(json!(replay)).into_response(),
        Err(e) => refused(e),
    }
}

/// The span `span_id` when it is one of conversation `id`: the page may replay nothing else.
async fn belongs_to(bot: &Bot, id: &str, span_id: &str) -> Result<SpanRecord, ApiError> {
    if !crate::trace_context::is_span_id(span_id) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{span_id}` is not a span id (16 lowercase hex digits)"),
        ));
    }
    super::api::shown_conversation(bot, id).await?;
    let Some(span) = replay::find_span(bot, span_id).await? else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no span `{span_id}`: it never existed or its trace was pruned"),
        ));
    };
    if replay::conversation_of(bot, &span).await?.as_deref() != Some(id) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "span `{span_id}` is not a call of conversation {id}: the page replays only the calls of the conversation it shows"
            ),
        ));
    }
    Ok(span)
}

/// A refused or failed replay as `{"error": …}` with a fitting status; a refusal for
/// the rate limit says when to retry (`Retry-After` and `retry_after_s`).
fn refused(error: ReplayError) -> Response {
    let status = match &error {
        ReplayError::UnknownSpan(_) => StatusCode::NOT_FOUND,
        ReplayError::NotAnLlmCall(..) | ReplayError::Invalid(_) => StatusCode::BAD_REQUEST,
        ReplayError::Cut(_) | ReplayError::NotRecordedInFull(_) | ReplayError::Redacted(_) => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        ReplayError::Offline | ReplayError::OtherProvider { .. } => StatusCode::CONFLICT,
        ReplayError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
        ReplayError::Provider(_) => StatusCode::BAD_GATEWAY,
        ReplayError::Store(detail) => {
            tracing::error!(error = %detail, "store error in a replay from /api");
            return ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "database error; see the server log",
            )
            .into_response();
        }
    };
    let mut body = json!({"error": error.to_string()});
    if let ReplayError::Redacted(parts) = &error {
        body["redacted"] = json!(parts);
    }
    let retry_after = match &error {
        ReplayError::RateLimited(refused) => refused.retry_after_secs(),
        _ => None,
    };
    if let Some(seconds) = retry_after {
        body["retry_after_s"] = json!(seconds);
    }
    let mut response = (status, Json(body)).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}
