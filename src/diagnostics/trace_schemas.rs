//! The output schemas of the trace tools: the shapes `trace_view` builds (a span's
//! summary, a span tree, a listed trace, one span in full), described member by member
//! so a client knows what each answer holds. `tests/it/output_schemas.rs` calls every tool
//! and fails when an answer holds a member these leave out.

use serde_json::{Map, Value, json};

use crate::mcp::ToolSpec;

/// Where a span tree's nodes are described, in the output schema of a tool that shows
/// one ([`with_span_tree`]).
const SPAN_NODE: &str = "#/$defs/span_node";

/// The members of a span summary: those every span has, then those it has when they apply.
fn span_properties() -> Map<String, Value> {
    let properties = json!({
        "span_id": {"type": "string"},
        "kind": {"type": "string", "enum": ["turn", "llm", "tool", "agent"]},
        "name": {"type": "string"},
        "status": {"type": "string", "enum": ["ok", "error"]},
        "started_at": {"type": "string", "description": "RFC 3339, UTC"},
        "duration_ms": {"type": "number"},
        "error": {"type": "string"},
        "model": {"type": "string", "description": "LLM calls: the model"},
        "tool": {"type": "string", "description": "Tool calls: the tool"},
        "input_tokens": {"type": "integer"},
        "output_tokens": {"type": "integer"},
        "source": {"type": "string", "description": "Roots: what started the trace (web, send_message, task, run_tool, mcp, replay…)"},
        "conversation_id": {"type": "string"},
        "time_to_first_token_ms": {"type": "number"},
        "finish_reason": {"type": "string"},
        "provider": {"type": "string"},
        "tool_calls": {"type": "array", "items": {"type": "string"},
                       "description": "LLM calls: the tools the model asked for, by name"},
    });
    match properties {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

const SPAN_REQUIRED: [&str; 6] = [
    "span_id",
    "kind",
    "name",
    "status",
    "started_at",
    "duration_ms",
];

fn object(properties: Map<String, Value>, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// One span without its payloads.
pub fn span_summary() -> Value {
    object(span_properties(), &SPAN_REQUIRED)
}

/// A span tree: the roots, each with its `children`.
pub fn span_tree() -> Value {
    json!({"type": "array", "items": {"$ref": SPAN_NODE}})
}

/// `spec` with the span tree's node described under `$defs`, for tools whose answer
/// holds a [`span_tree`].
pub fn with_span_tree(mut spec: ToolSpec) -> ToolSpec {
    let mut node = span_properties();
    node.insert(
        "children".into(),
        json!({"type": "array", "items": {"$ref": SPAN_NODE},
               "description": "The spans this one started, in start order"}),
    );
    if let Some(schema) = spec.output_schema.as_mut() {
        schema["$defs"] = json!({"span_node": object(node, &SPAN_REQUIRED)});
    }
    spec
}

/// An LLM call as `get_llm_calls` lists it: its summary and its trace.
pub fn llm_call_row() -> Value {
    let mut properties = span_properties();
    properties.insert("trace_id".into(), json!({"type": "string"}));
    let mut required = SPAN_REQUIRED.to_vec();
    required.push("trace_id");
    object(properties, &required)
}

/// A trace as `list_traces` lists it: its root's summary and counts over the trace.
pub fn trace_row() -> Value {
    let mut properties = span_properties();
    let counts = json!({
        "trace_id": {"type": "string"},
        "status": {"type": "string", "enum": ["ok", "error"], "description": "error when any span failed"},
        "root_status": {"type": "string", "enum": ["ok", "error"]},
        "spans": {"type": "integer"},
        "llm_calls": {"type": "integer"},
        "tool_calls": {"type": "integer", "description": "Tool calls in the trace"},
        "failed_spans": {"type": "integer"},
        "input_tokens": {"type": "integer", "description": "Over the trace's LLM calls"},
        "output_tokens": {"type": "integer"},
        "remote_parent_span_id": {"type": "string", "description": "The caller's span (traceparent), when there was one"},
    });
    if let Value::Object(counts) = counts {
        properties.extend(counts);
    }
    let mut required = SPAN_REQUIRED.to_vec();
    required.extend([
        "trace_id",
        "root_status",
        "spans",
        "llm_calls",
        "tool_calls",
        "failed_spans",
        "input_tokens",
        "output_tokens",
    ]);
    object(properties, &required)
}

/// One span with its payloads.
pub fn full_span() -> Value {
    let mut properties = span_properties();
    let more = json!({
        "trace_id": {"type": "string"},
        "parent_span_id": {"type": ["string", "null"]},
        "attributes": {"type": "object", "additionalProperties": true,
                       "description": "Everything else the span recorded: request, response, arguments, result, provider, timings"},
        "cut_by_max_bytes": {"type": "array", "items": {"type": "string"},
                             "description": "The attributes cut to keep the answer within max_bytes"},
    });
    if let Value::Object(more) = more {
        properties.extend(more);
    }
    let mut required = SPAN_REQUIRED.to_vec();
    required.extend(["trace_id", "parent_span_id", "attributes"]);
    object(properties, &required)
}
