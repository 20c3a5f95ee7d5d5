//! What a session id carries and how it is checked: the negotiated version, the
//! client's capabilities as bits (and whether the read-only token opened it), the moment
//! it was minted and a tag of the process that minted it, signed with a key
//! derived from the bearer secret (minting and verifying are `Sessions::create` and
//! `Sessions::verify` in `mod.rs`).

use serde_json::{Value, json};

use crate::guard::Access;

pub(super) const CAP_SAMPLING: u8 = 1;
pub(super) const CAP_ELICITATION: u8 = 2;
pub(super) const CAP_ROOTS: u8 = 4;
/// Not a capability: set when the read-only token opened the session, which is then
/// held to that token (another one finds no such session).
pub(super) const OPENED_READ_ONLY: u8 = 0x80;

pub(super) fn access_bit(access: Access) -> u8 {
    match access {
        Access::Full => 0,
        Access::ReadOnly => OPENED_READ_ONLY,
    }
}

pub(super) fn bit_to_access(bits: u8) -> Access {
    if bits & OPENED_READ_ONLY != 0 {
        Access::ReadOnly
    } else {
        Access::Full
    }
}

pub(super) fn caps_to_bits(caps: &Value) -> u8 {
    let has = |name: &str| caps.get(name).is_some_and(|v| !v.is_null());
    (if has("sampling") { CAP_SAMPLING } else { 0 })
        | (if has("elicitation") {
            CAP_ELICITATION
        } else {
            0
        })
        | (if has("roots") { CAP_ROOTS } else { 0 })
}

pub(super) fn bits_to_caps(bits: u8) -> Value {
    let mut caps = json!({});
    if bits & CAP_SAMPLING != 0 {
        caps["sampling"] = json!({});
    }
    if bits & CAP_ELICITATION != 0 {
        caps["elicitation"] = json!({});
    }
    if bits & CAP_ROOTS != 0 {
        caps["roots"] = json!({});
    }
    caps
}

/// Bytes of an id that name the process that minted it (the first of its random part).
pub(super) const INSTANCE_TAG_LEN: usize = 4;

/// What a session id carries.
pub(super) struct Minted {
    pub(super) version: &'static str,
    pub(super) client_capabilities: Value,
    /// The token that opened the session.
    pub(super) access: Access,
    pub(super) minted_ms: u64,
    /// The minting process's random tag.
    pub(super) instance: [u8; INSTANCE_TAG_LEN],
}

pub(super) fn unix_ms() -> u64 {
    chrono::Utc::now().timestamp_millis().max(0) as u64
}

/// The start of a session id (its first 8 characters), enough to tell sessions apart
/// in logs. Cut at a character boundary, so any string is safe to pass.
pub fn short(id: &str) -> &str {
    id.char_indices().nth(8).map_or(id, |(end, _)| &id[..end])
}
