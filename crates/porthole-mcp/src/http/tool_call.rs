//! The fast path for `tools/call`, the request clients send most, in both eras: the
//! body is read straight into the type the general path reads a `tools/call`'s params
//! as (`porthole_core::params::CallToolParams`), borrowed from the body (no `Value` tree
//! for the envelope, `params` or `_meta`; only `arguments` are values, as tools take
//! them), checked by the same functions as the general path, and run.
//!
//! It serves every call in the usual shape that passes every check: `_meta` members it
//! does not know are skipped unread, as the general path ignores them, so the calls real
//! clients send (Claude Code's `claudecode/toolUseId`, VS Code's `vscode.*` and
//! `tracestate`, Codex's `x-codex-turn-metadata`) take this path (`tests/it/allocations.rs`
//! counts each). Anything else (another method, an envelope member it does not know,
//! answers to input requests, a duplicate key, a `null` where the general path reads
//! more into it, a check that fails) is left to the general path, which reads the body
//! again and answers as it always has: so what a client sees is the same either way,
//! errors included.

use std::sync::Arc;

use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde::de::{Deserializer, Error as _};
use serde_json::{Map, Value};

use super::headers::{Accepts, PROTOCOL_VERSION, apply_headers, check_param_headers, header};
use super::legacy::{run_legacy, session_context};
use super::modern::{check_routing_headers, checked_version, run_stateless};
use super::reply::session_not_found;
use super::{Routing, is_bare, is_legacy, is_progress_token};
use crate::ServerInner;
use crate::context::RequestContext;
use crate::guard::Access;
use crate::jsonrpc;
use crate::methods::{ToolCall, Work};
use crate::protocol::{self, Era};
use crate::session::{Lookup, Session};
use porthole_core::params::{CallToolParams, object};
use porthole_core::trace_context::{CALLER_ID_KEYS, CallerTag, TraceParent};

const TOOLS_CALL: &str = "tools/call";

/// A `tools/call` message, borrowed from its body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    jsonrpc: &'a str,
    id: Value,
    /// Read before `params` in the usual order, so another method stops the read early.
    #[serde(rename = "method")]
    _method: ToolsCall,
    #[serde(borrow, deserialize_with = "object")]
    params: CallToolParams<'a, Meta<'a>>,
}

/// `"tools/call"`, and nothing else.
struct ToolsCall;

impl<'de> Deserialize<'de> for ToolsCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ToolsCall, D::Error> {
        match <&str>::deserialize(d)? {
            TOOLS_CALL => Ok(ToolsCall),
            _ => Err(D::Error::custom("another method")),
        }
    }
}

/// The members of `_meta` a `tools/call` reads; any other is skipped, by both paths. To
/// the general path a `null` version, capabilities or level is present (and wrong), so
/// those are a [`Member`]; a `null` token or trace parent is ignored by both. Read only
/// from an object, as the general path reads it ([`object`]).
struct Meta<'a>(MetaMembers<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for Meta<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Meta<'a>, D::Error> {
        object(d).map(Meta)
    }
}

impl<'a> std::ops::Deref for Meta<'a> {
    type Target = MetaMembers<'a>;
    fn deref(&self) -> &MetaMembers<'a> {
        &self.0
    }
}

#[derive(Deserialize)]
struct MetaMembers<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", default, borrow)]
    protocol_version: Member<&'a str>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", default)]
    client_capabilities: Member<Map<String, Value>>,
    /// Sent by every 2026 client: its name and version go on the call's span.
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default, borrow)]
    client_info: Option<ClientInfo<'a>>,
    #[serde(rename = "io.modelcontextprotocol/logLevel", default, borrow)]
    log_level: Member<&'a str>,
    #[serde(rename = "progressToken", default)]
    progress_token: Option<Value>,
    #[serde(default, borrow)]
    traceparent: Option<&'a str>,
    // The caller's own ids for the call (`trace_context::CALLER_ID_KEYS`, in order).
    #[serde(rename = "claudecode/toolUseId", default, borrow)]
    claude_code_tool_use_id: Option<&'a str>,
    #[serde(rename = "vscode.conversationId", default, borrow)]
    vscode_conversation_id: Option<&'a str>,
    #[serde(rename = "vscode.requestId", default, borrow)]
    vscode_request_id: Option<&'a str>,
}

/// A client's `clientInfo`: the members a span records (the rest skipped).
#[derive(Deserialize)]
struct ClientInfo<'a> {
    #[serde(default, borrow)]
    name: Option<&'a str>,
    #[serde(default, borrow)]
    version: Option<&'a str>,
}

impl Meta<'_> {
    /// What the caller says about itself, as the general path reads it from `_meta`.
    fn caller_tag(&self, session: Option<&Session>) -> Option<Arc<CallerTag>> {
        let info = self.client_info.as_ref();
        let ids = [
            self.claude_code_tool_use_id,
            self.vscode_conversation_id,
            self.vscode_request_id,
        ];
        let ids = CALLER_ID_KEYS
            .into_iter()
            .zip(ids)
            .filter_map(|(key, id)| Some((key, id?)));
        crate::context::caller_tag(
            session,
            (info.and_then(|i| i.name), info.and_then(|i| i.version)),
            ids,
        )
    }
}

/// A member that may be absent but, when present, must read as `T`: `null` fails the
/// read, where an `Option` would take it for absent.
#[derive(Default)]
enum Member<T> {
    #[default]
    Absent,
    Present(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Member<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Member<T>, D::Error> {
        T::deserialize(d).map(Member::Present)
    }
}

impl<T> Member<T> {
    fn get(&self) -> Option<&T> {
        match self {
            Member::Absent => None,
            Member::Present(value) => Some(value),
        }
    }
}

/// A `tools/call` body in the usual shape, or `None` for the general path.
fn read(body: &[u8]) -> Option<Envelope<'_>> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    let envelope: Envelope = serde_json::from_slice(body).ok()?;
    let params = &envelope.params;
    // Answers to input requests are the general path's (`modern::request_context`).
    let answers = params.input_responses.is_some() || params.request_state.is_some();
    (envelope.jsonrpc == "2.0" && jsonrpc::valid_id(&envelope.id) && !answers).then_some(envelope)
}

/// What the fast path decided for a request.
enum Plan {
    Modern(RequestContext),
    Legacy(Arc<Session>, RequestContext),
    Answer(Response),
}

/// Serves `body` when it is a `tools/call` the fast path takes; `None` leaves the
/// request to the general path.
pub(super) async fn serve(
    inner: &Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    session_id: Option<&str>,
    body: &[u8],
    accept: Accepts,
) -> Option<Response> {
    let envelope = read(body)?;
    let plan = plan(inner, headers, access, session_id, &envelope)?;
    let work = Work::ToolCall(ToolCall::new(inner, envelope.params));
    Some(match plan {
        Plan::Modern(ctx) => run_stateless(inner.clone(), work, ctx, accept).await,
        Plan::Legacy(session, ctx) => run_legacy(inner.clone(), session, work, ctx, accept).await,
        Plan::Answer(response) => response,
    })
}

/// Routes the call by era as `handle_post` would, and builds its context.
fn plan(
    inner: &Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    session_id: Option<&str>,
    envelope: &Envelope<'_>,
) -> Option<Plan> {
    let meta = envelope.params.meta.as_ref();
    let routing = Routing {
        method: Some(TOOLS_CALL),
        is_request: true,
        meta_version: meta.is_some_and(|m| m.protocol_version.get().is_some()),
    };
    // A bare call is rare (a hand-written curl): the general path serves it.
    if is_bare(headers, session_id, &routing) {
        return None;
    }
    let mut ctx = if is_legacy(headers, session_id, &routing) {
        match legacy_context(inner, headers, access, session_id, &envelope.id)? {
            Ok((session, ctx)) => return Some(Plan::Legacy(session, with_meta(ctx, meta))),
            Err(answer) => return Some(Plan::Answer(answer)),
        }
    } else {
        modern_context(inner, headers, access, envelope)?
    };
    apply_headers(&mut ctx, headers);
    Some(Plan::Modern(with_meta(ctx, meta)))
}

/// The legacy checks of `legacy_post`, for a request that is no `initialize`: the
/// session and the context in it, or the answer when the session is gone.
#[allow(clippy::result_large_err)]
fn legacy_context(
    inner: &Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    session_id: Option<&str>,
    id: &Value,
) -> Option<Result<(Arc<Session>, RequestContext), Response>> {
    if header(headers, &PROTOCOL_VERSION).is_some_and(|v| protocol::legacy_version(v).is_none()) {
        return None;
    }
    let session = match inner.sessions.get_for(session_id?, access) {
        Lookup::Found(session) => session,
        Lookup::Unknown | Lookup::Ended => return Some(Err(session_not_found())),
    };
    // `tools/call` is served in both eras (`Method::profile`), so no era check here.
    let ctx = session_context(inner, headers, access, &session, id, None);
    Some(Ok((session, ctx)))
}

/// The modern checks of `modern_post` for `tools/call`, all of which must pass, and
/// the request's context (its caller aside).
fn modern_context(
    inner: &ServerInner,
    headers: &HeaderMap,
    access: Access,
    envelope: &Envelope<'_>,
) -> Option<RequestContext> {
    let params = &envelope.params;
    let meta = params.meta.as_ref()?;
    let (version, capabilities) = (
        meta.protocol_version.get()?,
        meta.client_capabilities.get()?,
    );
    let version = checked_version(headers, version).ok()?;
    check_routing_headers(headers, TOOLS_CALL, Some(&params.name)).ok()?;
    check_param_headers(
        inner,
        headers,
        Some(&params.name),
        params.arguments.as_ref(),
    )
    .ok()?;
    let log_threshold = match meta.log_level.get() {
        Some(level) => Some(protocol::log_level_rank(level)?),
        None => None,
    };
    let era = Era::Modern(version);
    let mut ctx = inner.context(access, era, None, envelope.id.clone(), None, log_threshold);
    ctx.client_capabilities = Value::Object(capabilities.clone());
    Some(ctx)
}

/// What `_meta` gives every request's context: the progress token, the trace parent
/// (over the header's: `_meta` wins) and what the caller says about itself.
fn with_meta(mut ctx: RequestContext, meta: Option<&Meta<'_>>) -> RequestContext {
    if let Some(meta) = meta {
        ctx.progress_token = meta
            .progress_token
            .as_ref()
            .filter(|t| is_progress_token(t))
            .cloned();
        if let Some(parent) = meta.traceparent.and_then(TraceParent::parse) {
            ctx.trace_parent = Some(parent);
        }
        ctx.caller_tag = meta.caller_tag(ctx.session.as_deref());
    }
    ctx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::progress_token;
    use crate::jsonrpc::Incoming;

    /// The fast read and the general one agree on every body the fast read takes.
    fn same_as_general(body: &str) {
        let fast = read(body.as_bytes()).unwrap_or_else(|| panic!("not read: {body}"));
        let Ok(jsonrpc::Body::One(Incoming::Request {
            id, method, params, ..
        })) = jsonrpc::read_body(body.as_bytes())
        else {
            panic!("the general path reads no request: {body}")
        };
        assert_eq!((&fast.id, method.as_str()), (&id, TOOLS_CALL), "{body}");
        let general: CallToolParams<serde::de::IgnoredAny> =
            crate::params::read(TOOLS_CALL, &params).unwrap();
        let p = fast.params;
        assert_eq!(
            (&p.name, &p.arguments, &p.task),
            (&general.name, &general.arguments, &general.task),
            "{body}"
        );
        let meta = params.get("_meta");
        let member = |key: &str| meta.and_then(|m| m.get(key)).cloned();
        let fast_meta = p.meta.as_ref();
        let text = |v: Option<&str>| v.map(|t| Value::String(t.into()));
        let caps = fast_meta.and_then(|m| m.client_capabilities.get().cloned());
        assert_eq!(
            (
                text(fast_meta.and_then(|m| m.protocol_version.get().copied())),
                caps.map(Value::Object),
                text(fast_meta.and_then(|m| m.log_level.get().copied())),
                fast_meta.and_then(|m| m.progress_token.clone().filter(is_progress_token)),
                text(fast_meta.and_then(|m| m.traceparent)),
            ),
            (
                member(protocol::META_PROTOCOL_VERSION),
                member(protocol::META_CLIENT_CAPABILITIES),
                member(protocol::META_LOG_LEVEL),
                // What the general path makes of these two (`null` is none of them).
                meta.and_then(progress_token),
                member("traceparent").filter(Value::is_string),
            ),
            "{body}"
        );
        assert_eq!(
            fast_meta.and_then(|m| m.caller_tag(None)),
            crate::context::caller_tag_of_meta(None, meta),
            "{body}"
        );
    }

    #[test]
    fn reads_the_usual_calls_as_the_general_path_does() {
        for body in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_agents","arguments":{}}}"#,
            r#" {"params":{"name":"x","arguments":{"a":[1,{"b":null}]},"task":{"ttl":5000}},"id":"s","method":"tools/call","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":null,"task":null,"_meta":{"progressToken":3}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{
                "io.modelcontextprotocol/protocolVersion":"2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":{"extensions":{"x":{}}},
                "io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},
                "io.modelcontextprotocol/logLevel":"debug",
                "traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}"#,
            // What Claude Code, VS Code and Codex add to every call.
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","arguments":{},"_meta":{
                "claudecode/toolUseId":"toolu_01","progressToken":4,
                "io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.337"}}}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":{
                "vscode.conversationId":"c","vscode.requestId":"r","tracestate":"a=b",
                "traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"x","_meta":{
                "x-codex-turn-metadata":{"turn":[1,{"deep":null}]},"other":1,"other":2}}}"#,
            // An escaped name is read unescaped; a `null` _meta is none.
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"\u0078","_meta":null}}"#,
        ] {
            same_as_general(body);
        }
    }

    /// Every member of a full call removed or given another type, one at a time: each
    /// variant the fast read takes, it reads as the general path does.
    #[test]
    fn every_variant_it_takes_it_reads_as_the_general_path_does() {
        let full = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": TOOLS_CALL, "params": {
            "name": "x", "arguments": {"a": [1]}, "task": {"ttl": 1000}, "_meta": {
                protocol::META_PROTOCOL_VERSION: "2026-07-28",
                protocol::META_CLIENT_CAPABILITIES: {"sampling": {}},
                protocol::META_CLIENT_INFO: {"name": "c"},
                protocol::META_LOG_LEVEL: "info",
                "progressToken": "p",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        }}});
        fn paths(value: &Value, at: &[String], out: &mut Vec<Vec<String>>) {
            for (key, child) in value.as_object().into_iter().flatten() {
                let path = [at, std::slice::from_ref(key)].concat();
                paths(child, &path, out);
                out.push(path);
            }
        }
        fn member<'v>(value: &'v mut Value, path: &[String]) -> &'v mut Map<String, Value> {
            let parent = path[..path.len() - 1]
                .iter()
                .fold(value, |v, key| &mut v[key.as_str()]);
            parent.as_object_mut().expect("an object")
        }
        let mut all = Vec::new();
        paths(&full, &[], &mut all);
        let others = [
            Value::Null,
            1.into(),
            1.5.into(),
            "y".into(),
            Value::Array(vec![]),
        ];
        let (mut taken, mut tried) = (0, 0);
        for path in &all {
            let last = path.last().expect("a member").clone();
            let mut variants = vec![full.clone()];
            member(&mut variants[0], path).remove(&last);
            for other in others.iter().chain([&Value::Object(Map::new())]) {
                let mut variant = full.clone();
                member(&mut variant, path).insert(last.clone(), other.clone());
                variants.push(variant);
            }
            for variant in variants {
                let body = variant.to_string();
                tried += 1;
                if read(body.as_bytes()).is_some() {
                    same_as_general(&body);
                    taken += 1;
                }
            }
        }
        assert!(taken > 20 && taken < tried, "{taken} of {tried} taken");
    }

    #[test]
    fn leaves_every_other_shape_to_the_general_path() {
        let call = |params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)
        };
        let mut others = vec![
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x"}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"x"}}"#.into(),
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}"#.into(),
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"extra":0}"#
                .into(),
            r#"["2.0",1,"tools/call",{"name":"x"}]"#.into(),
        ];
        for params in [
            "null",
            r#"["x",{}]"#,
            r#"{"name":"x","name":"y"}"#,
            r#"{"name":7}"#,
            r#"{"arguments":{}}"#,
            r#"{"name":"x","inputResponses":{}}"#,
            r#"{"name":"x","requestState":"s"}"#,
            r#"{"name":"x","_meta":[]}"#,
            r#"{"name":"x","_meta":{"io.modelcontextprotocol/logLevel":null}}"#,
            r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":7}}"#,
            r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":null}}"#,
            r#"{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":null}}"#,
            r#"{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":[]}}"#,
            r#"{"name":"x","_meta":{"traceparent":1}}"#,
            r#"{"name":"x","_meta":{"progressToken":1,"progressToken":2}}"#,
        ] {
            others.push(call(params));
        }
        for body in others {
            assert!(read(body.as_bytes()).is_none(), "{body}");
        }
    }
}
