//! The modern, stateless era (2026-07-28): every request carries its `_meta` and the
//! routing headers, checked in the order the spec's tests expect, then runs without a
//! session. `subscriptions/listen` is in `listen.rs`.

use super::*;

pub(super) async fn modern_post(
    inner: Arc<ServerInner>,
    headers: &HeaderMap,
    access: Access,
    message: Incoming,
    accept: Accepts,
) -> Response {
    let (id, method, params, has_params) = match message {
        // No client→server notification needs an answer over HTTP.
        Incoming::Notification { .. } => return accepted(),
        Incoming::Response { id, .. } => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Some(&id),
                &RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    "Invalid Request: protocol 2026-07-28 servers send no requests, so there is nothing to respond to",
                ),
            );
        }
        Incoming::Request {
            id,
            method,
            params,
            has_params,
        } => (id, method, params, has_params),
    };
    let fail = |status: StatusCode, error: RpcError| rpc_error(status, Some(&id), &error);

    // 1. _meta must carry the protocol version and client capabilities.
    let meta = params.get("_meta").and_then(Value::as_object);
    let meta_version = meta
        .and_then(|m| m.get(protocol::META_PROTOCOL_VERSION))
        .and_then(Value::as_str);
    let capabilities = meta.and_then(|m| m.get(protocol::META_CLIENT_CAPABILITIES));
    let (Some(meta_version), Some(capabilities), true) = (meta_version, capabilities, has_params)
    else {
        return fail(
            StatusCode::BAD_REQUEST,
            RpcError::invalid_params(format!(
                "Invalid params: every request needs params._meta with \"{}\" and \"{}\" (or call initialize for the 2025 protocol)",
                protocol::META_PROTOCOL_VERSION,
                protocol::META_CLIENT_CAPABILITIES
            )),
        );
    };
    if !capabilities.is_object() {
        return fail(
            StatusCode::BAD_REQUEST,
            RpcError::invalid_params(format!(
                "`{}` must be an object",
                protocol::META_CLIENT_CAPABILITIES
            )),
        );
    }
    // 2. The version header must match _meta.
    if let Err(error) = header_equals(
        headers,
        protocol::HEADER_PROTOCOL_VERSION,
        "MCP-Protocol-Version",
        meta_version,
        false,
    ) {
        return fail(StatusCode::BAD_REQUEST, error);
    }
    // 3. The version must be one we serve.
    let Some(version) = protocol::modern_version(meta_version) else {
        return fail(
            StatusCode::BAD_REQUEST,
            RpcError::new(
                jsonrpc::UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
            )
            .with_data(json!({"supported": protocol::MODERN_VERSIONS, "requested": meta_version})),
        );
    };
    // 4. Mcp-Method and, where required, Mcp-Name must match the body.
    if let Err(error) = header_equals(
        headers,
        protocol::HEADER_METHOD,
        "Mcp-Method",
        &method,
        false,
    ) {
        return fail(StatusCode::BAD_REQUEST, error);
    }
    let name_member = match method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // The Tasks extension routes by task id.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(member) = name_member {
        let body_value = params
            .get(member)
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Err(error) =
            header_equals(headers, protocol::HEADER_NAME, "Mcp-Name", body_value, true)
        {
            return fail(StatusCode::BAD_REQUEST, error);
        }
    }
    // 5. The method must exist in this era.
    let Some(parsed) = Method::parse(&method, true) else {
        return fail(StatusCode::NOT_FOUND, RpcError::method_not_found(&method));
    };
    if parsed == Method::PromptsList && inner.prompts.is_empty() {
        return fail(StatusCode::NOT_FOUND, RpcError::method_not_found(&method));
    }
    // 6. Tool parameters mirrored in Mcp-Param-* headers.
    if parsed == Method::ToolsCall
        && let Err(reason) = check_param_headers(&inner, headers, &params)
    {
        return fail(StatusCode::BAD_REQUEST, RpcError::header_mismatch(reason));
    }
    // 7. An optional log level.
    let log_threshold = match meta.and_then(|m| m.get(protocol::META_LOG_LEVEL)) {
        None => None,
        Some(level) => match level.as_str().and_then(protocol::log_level_rank) {
            Some(rank) => Some(rank),
            None => {
                return fail(
                    StatusCode::BAD_REQUEST,
                    RpcError::invalid_params(format!(
                        "`{}` must be one of {}",
                        protocol::META_LOG_LEVEL,
                        protocol::LOG_LEVELS.join(", ")
                    )),
                );
            }
        },
    };

    if parsed == Method::SubscriptionsListen {
        let owner = caller(&inner, headers);
        return match listen_filter(&inner, &params, capabilities, owner).await {
            Ok(filter) => listen(&inner, &id, filter),
            Err(error) => fail(modern_status(&error), error),
        };
    }
    let mut ctx = inner.context(
        access,
        Era::Modern(version),
        None,
        id.clone(),
        Some(&params),
        log_threshold,
    );
    ctx.client_capabilities = capabilities.clone();
    ctx.caller = caller(&inner, headers);
    ctx.input_responses = params
        .get("inputResponses")
        .and_then(Value::as_object)
        .cloned();
    ctx.request_state = params
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_string);
    if params
        .get("inputResponses")
        .is_some_and(|v| !v.is_object() && !v.is_null())
    {
        return fail(
            StatusCode::OK,
            RpcError::invalid_params(
                "`inputResponses` must be an object keyed by the server's input request keys",
            ),
        );
    }
    if let Some(listing) = inner.cached_tools_list(parsed, &params, &ctx) {
        return raw_reply(&id, listing, accept);
    }
    run_stateless(inner, parsed, params, ctx, accept).await
}

/// Runs a request that belongs to no session (the modern era, or a bare request): the
/// work ends with the request.
pub(super) async fn run_stateless(
    inner: Arc<ServerInner>,
    method: Method,
    params: Map<String, Value>,
    ctx: RequestContext,
    accept: Accepts,
) -> Response {
    let id = ctx.request_id.clone();
    let modern = ctx.era.is_modern();
    let call = Call::new(
        inner.clone(),
        method,
        params,
        ctx,
        accept.sse,
        Lifetime::EndsWithRequest,
    );
    let (first, mut events, rest) = match call.run().await {
        Progress::Done(result) => return final_reply(&id, result, modern, accept),
        Progress::Streaming {
            first,
            events,
            rest,
        } => (first, events, rest),
    };
    // If the client goes away before the reply, the work stops.
    let cancel_on_drop = AbortOnDrop(rest.abort_handle());
    let (tx, rx) = mpsc::unbounded_channel();
    let pump = tokio::spawn(async move {
        let _cancel_on_drop = cancel_on_drop;
        let mut next = Some(first);
        while let Some(event) = next {
            // Modern streams cannot be resumed, so there is nothing to disconnect.
            if let StreamEvent::Message(message) = event {
                let _ = tx.send(sse_event(&message));
            }
            next = events.recv().await;
        }
        if let Some(message) = final_message(&id, rest_of(rest).await) {
            let _ = tx.send(sse_event(&message));
        }
    });
    sse_response(&inner, rx, Some(pump.abort_handle()))
}
