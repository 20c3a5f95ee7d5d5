//! `delegate`: hands a self-contained sub-task to a worker agent, which runs its own
//! tool loop with the caller's roles and returns its answer.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Delegation, NativeTool, native};
use crate::bot::tools::{ToolCall, ToolHandler};

pub(super) fn delegate(workers: Arc<dyn Delegation>) -> NativeTool {
    native(
        "delegate",
        "Hands a self-contained sub-task to a worker agent and returns its answer.",
        json!({
            "type": "object",
            "properties": {
                "task": {"type": "string", "minLength": 1, "description": "What the worker should do"},
                "worker_name": {"type": "string", "description": "Optional display name for the worker"}
            },
            "required": ["task"],
            "additionalProperties": false
        }),
        DelegateTool { workers },
    )
}

struct DelegateTool {
    workers: Arc<dyn Delegation>,
}

#[async_trait]
impl ToolHandler for DelegateTool {
    async fn call(&self, call: ToolCall<'_>) -> Result<Value, String> {
        let task = call.args["task"].as_str().unwrap_or_default();
        let name = call.args["worker_name"].as_str().unwrap_or("worker");
        let answer = self
            .workers
            .run(name, task, call.runner, call.ctx)
            .await
            .map_err(|e| e.to_string())?;
        Ok(json!({"worker": name, "answer": answer}))
    }
}
