//! `subscriptions/listen` (2026-07-28): the request becomes a long-lived SSE stream of
//! the change notifications it asked for (tools, resources, prompts, the caller's tasks).

use std::sync::Arc;

use axum::response::Response;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::sse_response::{sse_event, sse_response};
use crate::ServerInner;
use crate::jsonrpc::{self, RpcError};
use crate::protocol;
use crate::subscriptions::ListenFilter;

/// What a `subscriptions/listen` asks for; task ids need the Tasks extension, and only
/// the caller's own live tasks are agreed to.
pub(super) async fn listen_filter(
    inner: &ServerInner,
    params: &Map<String, Value>,
    capabilities: &Value,
    owner: Arc<str>,
) -> Result<ListenFilter, RpcError> {
    let notifications = params.get("notifications").unwrap_or(&Value::Null);
    let mut filter = ListenFilter::from_params(notifications, !inner.prompts.is_empty());
    let Some(task_ids) = notifications.get("taskIds").filter(|v| !v.is_null()) else {
        return Ok(filter);
    };
    if capabilities["extensions"]
        .get(protocol::TASKS_EXTENSION)
        .is_none()
    {
        return Err(crate::tasks::missing_tasks_capability());
    }
    let ids = task_ids.as_array().ok_or_else(|| {
        RpcError::invalid_params("`notifications.taskIds` must be an array of task ids")
    })?;
    filter.task_ids = inner.tasks.agreed_task_ids(ids, &owner).await?;
    filter.task_owner = Some(owner);
    Ok(filter)
}

/// `subscriptions/listen`: acknowledgment first, then the changes the client asked for.
pub(super) fn listen(inner: &Arc<ServerInner>, id: &Value, filter: ListenFilter) -> Response {
    let (tx, rx) = mpsc::unbounded_channel();
    let ack = jsonrpc::notification(
        "notifications/subscriptions/acknowledged",
        json!({"_meta": {protocol::META_SUBSCRIPTION_ID: id}, "notifications": filter.to_json()}),
    );
    let _ = tx.send(sse_event(&ack));
    let mut changes = inner.notifier.subscribe();
    let subscription_id = id.clone();
    let forwarder = tokio::spawn(async move {
        loop {
            match changes.recv().await {
                Ok(change) if filter.wants(&change) => {
                    if tx
                        .send(sse_event(&change.to_notification(Some(&subscription_id))))
                        .is_err()
                    {
                        break;
                    }
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
    });
    sse_response(inner, rx, Some(forwarder.abort_handle()))
}
