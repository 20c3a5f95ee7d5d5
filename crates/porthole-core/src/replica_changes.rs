//! What one replica announces to the others when they share a database: the typed
//! payload of a PostgreSQL `NOTIFY` on the store's channel (`bot::store` carries it,
//! `mcp` and `diagnostics` say and apply it). Every change the MCP notifier knows is
//! here, with what the receiving side needs to deliver it; state itself stays in the
//! database (a task's record, a forwarded input), so no payload holds a secret, a token
//! or a result, and every payload stays far below PostgreSQL's 8000-byte limit.

use serde::{Deserialize, Serialize};

/// The largest payload PostgreSQL accepts in a `NOTIFY` (its default build).
pub const MAX_PAYLOAD_BYTES: usize = 8000;

/// A change one replica announced to all (itself included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The replica that made the change; it ignores its own echo.
    pub replica: String,
    /// What changed; its fields sit beside `replica` in the JSON, tagged by `kind`.
    #[serde(flatten)]
    pub what: Changed,
}

/// What changed, tagged by `kind` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Changed {
    /// The tools changed (a tool toggled, saved in the shared store; an MCP server
    /// connected or gone): apply the saved settings, tell clients the list changed.
    Tools,
    /// The prompts changed: tell clients the prompt list changed.
    Prompts,
    /// The resources changed: tell clients the resource list changed.
    Resources,
    /// One resource's content changed: tell the clients subscribed to it.
    ResourceUpdated {
        /// The resource's URI.
        uri: String,
    },
    /// A task's status changed; its record is read from the store. `owner` is the keyed
    /// hash that binds it to its caller (what a listener's owner check compares).
    Task {
        /// The task's id, as its record in the store has it.
        id: String,
        /// Its new status as on the wire (`working`, `input_required`, `completed`, ...).
        status: String,
        /// The keyed hash of the owning caller's credentials.
        owner: String,
    },
    /// `tasks/update` answers for a task another replica runs, left in the store for it.
    TaskInput {
        /// The task the answers are for.
        id: String,
    },
    /// `tasks/cancel` of a task another replica runs, already written to the store.
    TaskCancel {
        /// The cancelled task's id.
        id: String,
    },
    /// A legacy `/mcp` session was ended (DELETE): refuse its id here too.
    SessionEnded {
        /// The ended session's id (its `Mcp-Session-Id`).
        id: String,
    },
    /// An MCP server (one the bot is a client of) was switched on or off.
    McpServer {
        /// The server's name in the bot's configuration.
        name: String,
        /// Whether it is now switched on (connect it) or off (stop it).
        enabled: bool,
    },
}

impl Change {
    /// The payload as sent: JSON, refused when PostgreSQL would refuse it.
    pub fn to_payload(&self) -> Result<String, PayloadError> {
        let payload = serde_json::to_string(self).map_err(PayloadError::Json)?;
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(PayloadError::TooLarge {
                kind: self.what.kind(),
                bytes: payload.len(),
            });
        }
        Ok(payload)
    }
}

/// Why a change cannot be announced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// It does not serialise (a bug: every member is plain data).
    #[error("cannot write the change as JSON: {0}")]
    Json(serde_json::Error),
    /// Its JSON is over what PostgreSQL's `NOTIFY` carries.
    #[error(
        "a `{kind}` change of {bytes} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte NOTIFY payload limit"
    )]
    TooLarge {
        /// The change's wire tag ([`Changed::kind`]).
        kind: &'static str,
        /// Its JSON's length.
        bytes: usize,
    },
}

impl Changed {
    /// The wire tag, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Changed::Tools => "tools",
            Changed::Prompts => "prompts",
            Changed::Resources => "resources",
            Changed::ResourceUpdated { .. } => "resource_updated",
            Changed::Task { .. } => "task",
            Changed::TaskInput { .. } => "task_input",
            Changed::TaskCancel { .. } => "task_cancel",
            Changed::SessionEnded { .. } => "session_ended",
            Changed::McpServer { .. } => "mcp_server",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_tagged_and_bounded() {
        let tools = Change {
            replica: "a".into(),
            what: Changed::Tools,
        };
        // The shape replicas of the previous release sent and understood.
        assert_eq!(
            tools.to_payload().unwrap(),
            r#"{"replica":"a","kind":"tools"}"#
        );
        let task = Change {
            replica: "b".into(),
            what: Changed::Task {
                id: "t".into(),
                status: "working".into(),
                owner: "o".into(),
            },
        };
        let back: Change = serde_json::from_str(&task.to_payload().unwrap()).unwrap();
        assert_eq!(back, task);
        let huge = Change {
            replica: "a".into(),
            what: Changed::ResourceUpdated {
                uri: "x".repeat(MAX_PAYLOAD_BYTES),
            },
        };
        let refused = huge.to_payload().unwrap_err().to_string();
        assert!(refused.contains("resource_updated"), "{refused}");
    }
}
