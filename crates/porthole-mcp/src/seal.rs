//! The server's sealing key: an HMAC-SHA256 key only this server knows, one per purpose.
//! It mints and verifies the self-validating legacy session ids (`session/id.rs`), binds
//! tasks to their owner (`tasks`), and seals the modern era's multi-round-trip request
//! state (MRTR). A client can echo a sealed value back but not alter it.
//!
//! The key is derived from the bearer secret when there is one, so values sealed before
//! a restart still open after it; without a secret a random key is made per process.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use serde_json::Value;

use super::jsonrpc::RpcError;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// How long sealed MRTR state stays valid.
const STATE_LIFETIME_SECS: i64 = 3600;

/// A key for one purpose (session ids, task owners, MRTR state).
pub struct SealingKey {
    /// The HMAC with the key already absorbed: each MAC starts from a copy of it instead
    /// of hashing the key's two pads again (a session id is verified on every legacy
    /// request).
    keyed: HmacSha256,
}

impl SealingKey {
    /// `secret` is the bearer token (or `None` for a random per-process key); `purpose`
    /// separates keys used for different things.
    pub fn new(secret: Option<&str>, purpose: &str) -> Self {
        let key: [u8; 32] = match secret {
            Some(secret) => {
                let mut mac = HmacSha256::new_from_slice(secret.as_bytes())
                    .expect("HMAC accepts keys of any length");
                mac.update(b"porthole/");
                mac.update(purpose.as_bytes());
                mac.finalize().into_bytes().into()
            }
            None => rand::random(),
        };
        SealingKey {
            keyed: HmacSha256::new_from_slice(&key).expect("HMAC accepts keys of any length"),
        }
    }

    /// A MAC of `data`, truncated to 16 bytes (128 bits is plenty against forgery).
    pub fn tag(&self, data: &[u8]) -> [u8; 16] {
        let mut mac = self.keyed.clone();
        mac.update(data);
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&full[..16]);
        tag
    }

    /// Whether `tag` is the MAC of `data`, compared in constant time.
    pub fn verify(&self, data: &[u8], tag: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        tag.len() == 16 && bool::from(self.tag(data).ct_eq(tag))
    }

    /// Seals a JSON value with an expiry, as `payload.tag` in URL-safe Base64.
    pub fn seal(&self, state: &Value) -> String {
        let envelope = serde_json::json!({
            "v": state,
            "exp": chrono::Utc::now().timestamp() + STATE_LIFETIME_SECS,
        });
        let payload = envelope.to_string();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload.as_bytes()),
            URL_SAFE_NO_PAD.encode(self.tag(payload.as_bytes()))
        )
    }

    /// Opens a sealed value; any alteration or expiry is a `-32602` error.
    pub fn open(&self, token: &str) -> Result<Value, RpcError> {
        let invalid = || {
            RpcError::invalid_params(
                "requestState was altered or has expired; start the request again without it",
            )
        };
        let (payload, tag) = token.split_once('.').ok_or_else(invalid)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| invalid())?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| invalid())?;
        if !self.verify(&payload, &tag) {
            return Err(invalid());
        }
        let envelope: Value = serde_json::from_slice(&payload).map_err(|_| invalid())?;
        if envelope["exp"].as_i64().unwrap_or(0) < chrono::Utc::now().timestamp() {
            return Err(invalid());
        }
        Ok(envelope["v"].clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sealed_state_round_trips_and_tampering_is_rejected() {
        let sealer = SealingKey::new(Some("0123456789abcdef0123"), "mrtr");
        let token = sealer.seal(&json!({"step": 2}));
        assert_eq!(sealer.open(&token).unwrap(), json!({"step": 2}));
        assert!(sealer.open(&format!("{token}-TAMPERED")).is_err());
        let other = SealingKey::new(Some("another-secret-value-here"), "mrtr");
        assert!(other.open(&token).is_err());
        // The same secret gives the same key: state survives a restart.
        let again = SealingKey::new(Some("0123456789abcdef0123"), "mrtr");
        assert!(again.open(&token).is_ok());
    }
}
