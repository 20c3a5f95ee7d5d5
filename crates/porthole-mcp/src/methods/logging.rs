//! `logging/setLevel` (legacy): the least severe log notification a session wants.
//! Modern requests carry their level in `_meta`, read by the transport.

use serde_json::{Map, Value, json};

use crate::context::RequestContext;
use crate::jsonrpc::RpcError;
use crate::params::required_str;
use crate::protocol::{self, log_level_rank};

pub(super) fn set_level(
    params: &Map<String, Value>,
    ctx: &RequestContext,
) -> Result<Value, RpcError> {
    let level = required_str(params, "level")?;
    let rank = log_level_rank(level).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "unknown log level `{level}`; use one of {}",
            protocol::LOG_LEVELS.join(", ")
        ))
    })?;
    if let Some(session) = &ctx.session {
        session.set_log_level(rank);
    }
    Ok(json!({}))
}
