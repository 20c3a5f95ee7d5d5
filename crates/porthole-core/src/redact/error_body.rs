//! Error answers redacted on their way out (`/mcp`'s and the page's). A refusal or a
//! protocol error often quotes what the caller sent: a method's name, a header's value,
//! the `Host` or `Origin`. What leaves the process never holds a secret, whoever typed
//! it, so every answer with an error status passes through the redactor here, whichever
//! check wrote it. Answers with a success status (results, SSE streams) pass untouched:
//! the errors they can hold are redacted where they are made.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::Response;
use serde_json::Value;

use super::Redactor;

/// The largest error body read back; the guards' and the transport's are a few hundred
/// bytes. A larger one is not one of them, and is never sent unread: [`TOO_LARGE`] goes
/// in its place.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// What an error answer too large to read back says instead.
const TOO_LARGE: &str = r#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error: the error answer was too large to check for secrets, so it was not sent"}}"#;

/// [`redact_error`] as a middleware (`axum::middleware::map_response_with_state`), for
/// a router whose every answer passes it. `/mcp`'s handlers call [`redact_error`]
/// themselves: a middleware costs each request allocations of its own.
pub async fn redact_error_body(
    State(redactor): State<Arc<Redactor>>,
    response: Response,
) -> Response {
    redact_error(&redactor, response).await
}

/// The response, its body redacted when its status is an error. The rewriting is
/// boxed, so a success answer's future does not carry its room.
pub async fn redact_error(redactor: &Redactor, response: Response) -> Response {
    let status = response.status();
    if !status.is_client_error() && !status.is_server_error() {
        return response;
    }
    Box::pin(rewrite_body(redactor, response)).await
}

async fn rewrite_body(redactor: &Redactor, response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let clean = match to_bytes(body, MAX_ERROR_BODY).await {
        Ok(bytes) => redacted(redactor, &bytes),
        Err(_) => TOO_LARGE.as_bytes().to_vec(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(clean))
}

/// A JSON body redacted value by value (so a redaction never breaks its syntax), any
/// other body as text.
fn redacted(redactor: &Redactor, bytes: &[u8]) -> Vec<u8> {
    if let Ok(mut value) = serde_json::from_slice::<Value>(bytes) {
        redactor.redact(&mut value);
        return serde_json::to_vec(&value).unwrap_or_default();
    }
    let text = String::from_utf8_lossy(bytes);
    redactor.redact_text(&text).into_owned().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;

    const SECRET: &str = "mcp-secret-0123456789abcdef";

    async fn body_of(response: Response) -> String {
        let bytes = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn redactor() -> State<Arc<Redactor>> {
        State(Arc::new(Redactor::new([SECRET.to_string()])))
    }

    #[tokio::test]
    async fn an_error_quoting_a_secret_loses_it_and_stays_json() {
        let quoting = serde_json::json!({
            "jsonrpc": "2.0",
            "error": {"code": -32601, "message": format!("Method not found: {SECRET}")},
        });
        let response = (StatusCode::NOT_FOUND, axum::Json(quoting)).into_response();
        let response = redact_error_body(redactor(), response).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let body = body_of(response).await;
        assert!(!body.contains(SECRET), "{body}");
        let value: Value = serde_json::from_str(&body).expect("still JSON");
        assert_eq!(value["error"]["code"], -32601, "{body}");
    }

    #[tokio::test]
    async fn an_error_too_large_to_read_is_replaced_not_sent() {
        let huge = format!("{SECRET} {}", "x".repeat(MAX_ERROR_BODY));
        let response = (StatusCode::BAD_REQUEST, huge).into_response();
        let response = redact_error(&Redactor::new([SECRET.to_string()]), response).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body = body_of(response).await;
        let value: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(value["error"]["code"], -32603, "{body}");
    }

    #[tokio::test]
    async fn a_text_error_is_redacted_and_a_success_passes_untouched() {
        let text = (StatusCode::FORBIDDEN, format!("refused: {SECRET}")).into_response();
        let body = body_of(redact_error_body(redactor(), text).await).await;
        assert_eq!(body, "refused: [REDACTED]");
        let result = (StatusCode::OK, format!("a result naming {SECRET}")).into_response();
        let body = body_of(redact_error_body(redactor(), result).await).await;
        assert!(
            body.contains(SECRET),
            "results are redacted where they are made, not read again here"
        );
    }
}
