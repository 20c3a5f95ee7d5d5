//! `logging/setLevel` (legacy): the least severe log notification a session wants.
//! Modern requests carry their level in `_meta`, read by the transport.

use porthole_core::params::SetLevelParams;
use serde_json::{Value, json};

use crate::context::RequestContext;

pub(super) fn set_level(params: SetLevelParams, ctx: &RequestContext) -> Value {
    if let Some(session) = &ctx.session {
        session.set_log_level(params.level.rank());
    }
    json!({})
}
