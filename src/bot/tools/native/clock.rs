//! `current_time`: the date and time in UTC, which a model cannot know by itself.

use serde_json::{Value, json};

use super::{NativeTool, native, read_only};
use crate::bot::tools::FnTool;

pub(super) fn current_time() -> NativeTool {
    read_only(native(
        "current_time",
        "The current date and time in UTC (RFC 3339) and as a Unix timestamp.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        FnTool(|_args: Value| async move {
            let now = chrono::Utc::now();
            Ok(json!({"utc": now.to_rfc3339(), "unix": now.timestamp()}))
        }),
    ))
}
