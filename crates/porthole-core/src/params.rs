//! The `params` of every request method MCP defines that the endpoint serves or the
//! bot's client sends, as types: the endpoint reads each request's `params` into its
//! method's type, and the client writes its requests from the same types, so the two
//! sides share one model of the protocol (the names as the schema spells them, in
//! `camelCase`).
//!
//! Members a type does not name are accepted and ignored (a `_meta` member a client
//! adds, a field of a later revision). What `_meta` itself carries is read by the
//! endpoint's transport (the era's checks run before the method's), so only
//! [`CallToolParams`], whose `_meta` the `tools/call` fast read takes, has it as a member.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::protocol::LOG_LEVELS;

/// A client's or server's name and version (the schema's `Implementation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Implementation {
    /// Its name, as a program knows it.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// `initialize` (2025): the version the client asks for, what it can do, who it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The protocol version the client asks for; the server answers with the one it speaks.
    pub protocol_version: String,
    /// What the client can do (an empty object when it offers nothing).
    pub capabilities: Map<String, Value>,
    /// Who the client is.
    #[serde(deserialize_with = "object")]
    pub client_info: Implementation,
}

/// A paginated list (`tools/list`, `resources/list`, `prompts/list`, `skills/list`,
/// `tasks/list` …): where to start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PageParams {
    /// The `nextCursor` of the previous page, unchanged; none for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `tools/call`: which tool, with which arguments. `M` is what `_meta` is read as: the
/// endpoint's fast read takes the members it needs, the general path leaves it to the
/// transport ([`serde::de::IgnoredAny`]), a client writes its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "M: Deserialize<'de>"))]
pub struct CallToolParams<'a, M = Map<String, Value>> {
    /// The tool's name.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// Its arguments; none is the same as `{}` to a tool without required arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
    /// 2025-11-25: how a client asks for the call to run as a task (`{"ttl": …}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Value>,
    /// 2026: the answers to the input requests of an earlier `input_required` result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<Value>,
    /// 2026: the `requestState` of an earlier `input_required` result, unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<Value>,
    /// The request's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<M>,
}

/// A request about one URI: `resources/read`, `resources/subscribe`,
/// `resources/unsubscribe`, `skills/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UriParams {
    /// The resource's (or skill's) URI.
    pub uri: String,
}

/// `resources/directory/read` (the Skills extension): one page of a directory's entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectoryReadParams {
    /// The directory's URI.
    pub uri: String,
    /// The `nextCursor` of the previous page, unchanged; none for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `prompts/get`: which prompt, rendered with which arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetPromptParams {
    /// The prompt's name.
    pub name: String,
    /// Its arguments, an object of strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
}

/// `completion/complete`: suggestions for what the user is typing into one argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteParams {
    /// The prompt or resource template the argument belongs to.
    #[serde(rename = "ref", deserialize_with = "object")]
    pub reference: CompletionReference,
    /// The argument, and what the user typed of it so far.
    #[serde(deserialize_with = "object")]
    pub argument: CompletionArgument,
}

/// What a completion is for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum CompletionReference {
    /// A prompt's argument.
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// The prompt's name.
        name: String,
    },
    /// A resource template's variable.
    #[serde(rename = "ref/resource")]
    Resource {
        /// The template's URI.
        uri: String,
    },
}

/// The argument being completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionArgument {
    /// The argument's (or variable's) name.
    pub name: String,
    /// What the user typed of it so far (`""` for nothing yet).
    pub value: String,
}

/// `logging/setLevel` (2025): the least severe log notification the session wants.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SetLevelParams {
    /// The level.
    pub level: LoggingLevel,
}

/// A log level, in increasing severity (RFC 5424's names, as MCP uses them), read only
/// from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)] // The names are RFC 5424's.
pub enum LoggingLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LoggingLevel {
    /// Every level, in the order of [`LOG_LEVELS`].
    const ALL: [LoggingLevel; 8] = [
        LoggingLevel::Debug,
        LoggingLevel::Info,
        LoggingLevel::Notice,
        LoggingLevel::Warning,
        LoggingLevel::Error,
        LoggingLevel::Critical,
        LoggingLevel::Alert,
        LoggingLevel::Emergency,
    ];

    /// The level's place in [`LOG_LEVELS`] (0 for `debug`).
    pub fn rank(self) -> u8 {
        self as u8
    }
}

impl<'de> Deserialize<'de> for LoggingLevel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<LoggingLevel, D::Error> {
        let name = String::deserialize(d)?;
        LOG_LEVELS
            .iter()
            .position(|level| *level == name)
            .map(|rank| LoggingLevel::ALL[rank])
            .ok_or_else(|| D::Error::unknown_variant(&name, &LOG_LEVELS))
    }
}

/// Reads `T` only from a JSON object, as MCP's schema has it: serde reads a struct from
/// an array too (its members in order), and an internally tagged enum from `[tag, …]`.
/// For `#[serde(deserialize_with = "object")]`.
pub fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    struct Object<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Object<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_map(Object(PhantomData))
}

/// A request about one task: `tasks/get`, `tasks/cancel`, `tasks/result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskParams {
    /// The task's id, as the task handle gave it.
    pub task_id: String,
}

/// `tasks/update` (the Tasks extension): answers to a task's input requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    /// The task's id.
    pub task_id: String,
    /// The answers, keyed as the task's `inputRequests` are.
    pub input_responses: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use serde::de::IgnoredAny;
    use serde_json::json;

    use super::*;
    use crate::protocol::log_level_rank;

    #[test]
    fn a_client_writes_what_the_endpoint_reads() {
        let call = CallToolParams::<Map<String, Value>> {
            name: "list_agents".into(),
            arguments: Some(Map::new()),
            task: None,
            input_responses: None,
            request_state: None,
            meta: None,
        };
        let written = serde_json::to_value(&call).unwrap();
        assert_eq!(written, json!({"name": "list_agents", "arguments": {}}));
        let read: CallToolParams<IgnoredAny> = CallToolParams::deserialize(&written).unwrap();
        assert_eq!((read.name, read.arguments), (call.name, call.arguments));
    }

    #[test]
    fn members_it_does_not_name_are_ignored_and_names_are_the_schemas() {
        let read: InitializeParams = serde_json::from_value(json!({
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1", "title": "C"}, "_meta": {"x": 1}
        }))
        .unwrap();
        assert_eq!(read.client_info.name, "c");
        let complete: CompleteParams = serde_json::from_value(json!({
            "ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}
        }))
        .unwrap();
        assert_eq!(
            complete.reference,
            CompletionReference::Prompt { name: "p".into() }
        );
        assert!(serde_json::from_value::<TaskParams>(json!({"task_id": "t"})).is_err());
    }

    #[test]
    fn log_levels_rank_as_the_protocol_lists_them() {
        for name in LOG_LEVELS {
            let level: LoggingLevel = serde_json::from_value(json!(name)).unwrap();
            assert_eq!(Some(level.rank()), log_level_rank(name));
            assert_eq!(serde_json::to_value(level).unwrap(), json!(name));
        }
        assert!(serde_json::from_value::<LoggingLevel>(json!("verbose")).is_err());
    }

    #[test]
    fn what_the_schema_has_as_objects_and_names_is_read_from_nothing_else() {
        let from = |value: Value| SetLevelParams::deserialize(&value).is_ok();
        assert!(from(json!({"level": "debug"})));
        assert!(!from(json!({"level": {"debug": null}})));
        let hello = |client_info: Value| {
            InitializeParams::deserialize(&json!({
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client_info
            }))
            .is_ok()
        };
        assert!(hello(json!({"name": "c", "version": "1"})));
        assert!(!hello(json!(["c", "1"])));
        let complete = |reference: Value, argument: Value| {
            CompleteParams::deserialize(&json!({"ref": reference, "argument": argument})).is_ok()
        };
        let (prompt, typed) = (
            json!({"type": "ref/prompt", "name": "p"}),
            json!({"name": "a", "value": ""}),
        );
        assert!(complete(prompt.clone(), typed.clone()));
        assert!(!complete(json!(["ref/prompt", "p"]), typed));
        assert!(!complete(prompt, json!(["a", ""])));
    }
}
