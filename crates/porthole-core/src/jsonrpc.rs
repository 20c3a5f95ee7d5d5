//! JSON-RPC 2.0 messages as MCP uses them: parsing an incoming body into a
//! [`Incoming`] message, and building responses and errors. The endpoint reads its
//! clients' messages with it, and the bot's own MCP client its servers' (one reader of
//! the protocol's messages on either side).
//!
//! Ids are kept as raw JSON values so a response echoes the request's id with the same
//! type (a number stays a number). An error whose request id is unknown carries no `id`
//! at all: the 2025-11-25 and 2026 schemas do not allow `"id": null`.

use serde_json::{Map, Value, json};

/// JSON-RPC: the body is not valid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the message is not a valid request; also the code of a refused HTTP request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the method is unknown (or not served in the request's era).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: the method exists but its `params` are wrong.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the server failed on its side.
pub const INTERNAL_ERROR: i64 = -32603;
/// 2025 revisions: `resources/read` of a URI no resource has (2026-07-28 says -32602).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// 2026: an HTTP header disagrees with the body (or is missing or malformed).
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026: the request needs a client capability the client did not declare.
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
/// 2026: the requested protocol version is not supported.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A JSON-RPC error, ready to be sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code: one of the constants above, or a tool's or the application's own.
    pub code: i64,
    /// A short description for the client, sent as the error's `message`.
    pub message: String,
    /// More detail sent as the error's `data`; `None` leaves the member out.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with this code and message and no `data`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with `data` (replacing any it had).
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The error with its message and data redacted: an error often quotes what the
    /// caller sent (a tool's name, an argument), and what leaves the process never
    /// holds a secret, whoever typed it.
    pub fn redacted(mut self, redactor: &crate::redact::Redactor) -> Self {
        if let std::borrow::Cow::Owned(clean) = redactor.redact_text(&self.message) {
            self.message = clean;
        }
        if let Some(data) = &mut self.data {
            redactor.redact(data);
        }
        self
    }

    /// An [`INVALID_PARAMS`] error with this message.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// A [`METHOD_NOT_FOUND`] error that names the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    /// An [`INTERNAL_ERROR`] with this message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// A [`HEADER_MISMATCH`] error, its message prefixed with `Header mismatch: `.
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(
            HEADER_MISMATCH,
            format!("Header mismatch: {}", message.into()),
        )
    }

    /// The error object (without the envelope).
    pub fn to_value(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

/// The envelope of a successful response. Moves `result` in (`json!` would copy it).
pub fn response(id: &Value, result: Value) -> Value {
    let mut envelope = Map::with_capacity(3);
    envelope.insert("jsonrpc".into(), Value::String("2.0".into()));
    envelope.insert("id".into(), id.clone());
    envelope.insert("result".into(), result);
    Value::Object(envelope)
}

/// The envelope of an error response; `id` is left out when unknown.
pub fn error_response(id: Option<&Value>, error: &RpcError) -> Value {
    let mut body = json!({"jsonrpc": "2.0", "error": error.to_value()});
    if let Some(id) = id {
        body["id"] = id.clone();
    }
    body
}

/// A notification (no `id`) of `method` with these params.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// One parsed message from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it has an `id` and a `method`, and wants a response.
    Request {
        /// Its id, a string or an integer, echoed as sent in the response.
        id: Value,
        /// The method called (`tools/call`, `initialize`, ...).
        method: String,
        /// Its `params`; empty when they were absent or null.
        params: Map<String, Value>,
        /// Whether the body had a `params` member at all (2026 requires it).
        has_params: bool,
    },
    /// A notification: a `method` without an `id`, answered with nothing.
    Notification {
        /// The notification's method (`notifications/initialized`, ...).
        method: String,
        /// Its `params`; empty when they were absent or null.
        params: Map<String, Value>,
    },
    /// The client's answer to a request the server sent (legacy era).
    Response {
        /// The id of the server's request it answers.
        id: Value,
        /// Its `result`, or its `error` object as sent.
        outcome: Result<Value, Value>,
    },
}

impl Incoming {
    /// The method of a request or notification; `None` for a response.
    pub fn method(&self) -> Option<&str> {
        match self {
            Incoming::Request { method, .. } | Incoming::Notification { method, .. } => {
                Some(method)
            }
            Incoming::Response { .. } => None,
        }
    }

    /// The params of a request or notification; `None` for a response.
    pub fn params(&self) -> Option<&Map<String, Value>> {
        match self {
            Incoming::Request { params, .. } | Incoming::Notification { params, .. } => {
                Some(params)
            }
            Incoming::Response { .. } => None,
        }
    }
}

/// Why a message was rejected, with the id when it could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// The message's id if it had a valid one; `None` leaves `id` out of the response.
    pub id: Option<Value>,
    /// The error to answer with.
    pub error: RpcError,
}

/// Whether `id` can be a request id: a string or an integer.
pub fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_)) || id.as_i64().is_some() || id.as_u64().is_some()
}

/// What a body holds, as [`read_body`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// One message.
    One(Incoming),
    /// A JSON array: a batch (2025-03-26), whose items [`parse_message`] reads one by one.
    Batch(Vec<Value>),
}

/// Why a body holds no message.
#[derive(Debug, Clone, PartialEq)]
pub enum Unreadable {
    /// It is not JSON (`-32700`).
    NotJson(RpcError),
    /// It is JSON but no JSON-RPC message (`-32600`, or `-32602` for `params`).
    Rejected(Rejected),
}

/// The one reader of a message body. A request in its usual shape (`jsonrpc` "2.0", a
/// string or integer `id`, a string `method`, `params` an object, null or absent) is
/// read straight into an [`Incoming::Request`], without building the envelope as a
/// `Value` first; every other body (notifications, responses, batches, odd or invalid
/// ones) is read as JSON and interpreted by [`parse_message`], which says what is wrong.
/// Both lanes give the same message for a body both take (the `jsonrpc` fuzz target and
/// the tests below check this).
pub fn read_body(body: &[u8]) -> Result<Body, Unreadable> {
    if let Some(request) = read_plain_request(body) {
        return Ok(Body::One(request));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        Unreadable::NotJson(RpcError::new(PARSE_ERROR, format!("Parse error: {e}")))
    })?;
    match value {
        Value::Array(items) => Ok(Body::Batch(items)),
        value => parse_message(value)
            .map(Body::One)
            .map_err(Unreadable::Rejected),
    }
}

/// [`read_body`]'s fast lane: a request in its usual shape, or `None`.
fn read_plain_request(body: &[u8]) -> Option<Incoming> {
    #[derive(serde::Deserialize)]
    struct Plain<'a> {
        #[serde(borrow)]
        jsonrpc: &'a str,
        id: Value,
        method: String,
        #[serde(default)]
        params: Params,
    }
    /// `params` as sent: absent, null, or an object (anything else fails the read).
    #[derive(Default)]
    enum Params {
        #[default]
        Absent,
        Null,
        Object(Map<String, Value>),
    }
    impl<'de> serde::Deserialize<'de> for Params {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Params, D::Error> {
            Ok(Option::<Map<String, Value>>::deserialize(d)?.map_or(Params::Null, Params::Object))
        }
    }
    // serde reads a struct from an array too; an array body is a batch.
    if body.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    let plain: Plain = serde_json::from_slice(body).ok()?;
    if plain.jsonrpc != "2.0" || !valid_id(&plain.id) {
        return None;
    }
    let (params, has_params) = match plain.params {
        Params::Absent => (Map::new(), false),
        Params::Null => (Map::new(), true),
        Params::Object(params) => (params, true),
    };
    Some(Incoming::Request {
        id: plain.id,
        method: plain.method,
        params,
        has_params,
    })
}

/// Interprets one JSON value as a JSON-RPC message.
pub fn parse_message(value: Value) -> Result<Incoming, Rejected> {
    let Value::Object(mut object) = value else {
        return Err(Rejected {
            id: None,
            error: RpcError::new(
                INVALID_REQUEST,
                "Invalid Request: a JSON-RPC message must be a JSON object",
            ),
        });
    };
    let id = object.remove("id");
    let reject = |id: &Option<Value>, message: &str| Rejected {
        id: id.clone().filter(valid_id),
        error: RpcError::new(INVALID_REQUEST, format!("Invalid Request: {message}")),
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(reject(&id, "`jsonrpc` must be \"2.0\""));
    }
    if let Some(id) = &id
        && !valid_id(id)
    {
        return Err(reject(&None, "`id` must be a string or an integer"));
    }
    match object.remove("method") {
        Some(Value::String(method)) => {
            let has_params = object.contains_key("params");
            let params = match object.remove("params") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(p)) => p,
                Some(_) => {
                    return Err(Rejected {
                        id: id.clone(),
                        error: RpcError::invalid_params("`params` must be an object"),
                    });
                }
            };
            Ok(match id {
                Some(id) => Incoming::Request {
                    id,
                    method,
                    params,
                    has_params,
                },
                None => Incoming::Notification { method, params },
            })
        }
        Some(_) => Err(reject(&id, "`method` must be a string")),
        None => {
            let Some(id) = id else {
                return Err(reject(
                    &None,
                    "a message needs a `method` (request or notification) or an `id` (response)",
                ));
            };
            let outcome = match (object.remove("result"), object.remove("error")) {
                (Some(result), None) => Ok(result),
                (None, Some(error)) => Err(error),
                _ => {
                    return Err(reject(
                        &Some(id),
                        "a response needs exactly one of `result` or `error`",
                    ));
                }
            };
            Ok(Incoming::Response { id, outcome })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_request_path_reads_only_what_the_general_path_reads_alike() {
        let same = [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#,
            r#" {"method":"ping","id":"a","jsonrpc":"2.0","extra":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#,
        ];
        for body in same {
            let fast = read_plain_request(body.as_bytes()).expect(body);
            let general = parse_message(serde_json::from_str(body).unwrap()).unwrap();
            assert_eq!(fast, general, "{body}");
            assert_eq!(read_body(body.as_bytes()), Ok(Body::One(general)), "{body}");
        }
        let null_params = read_plain_request(same[2].as_bytes()).unwrap();
        assert!(matches!(
            null_params,
            Incoming::Request {
                has_params: true,
                ..
            }
        ));
        let left_to_the_general_path = [
            r#"["2.0",1,"ping"]"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            r#"{"jsonrpc":"2\u002e0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            "{",
        ];
        for body in left_to_the_general_path {
            assert_eq!(read_plain_request(body.as_bytes()), None, "{body}");
        }
        assert!(matches!(read_body(b"[1]"), Ok(Body::Batch(items)) if items.len() == 1));
        assert!(matches!(read_body(b"{"), Err(Unreadable::NotJson(e)) if e.code == PARSE_ERROR));
        let no_method = read_body(br#"{"jsonrpc":"2.0","id":4}"#);
        assert!(
            matches!(no_method, Err(Unreadable::Rejected(r)) if r.id == Some(json!(4))),
            "a rejection keeps the id it could read"
        );
    }

    #[test]
    fn parses_each_kind_and_keeps_id_types() {
        let r = parse_message(json!({"jsonrpc":"2.0","id":7,"method":"ping"})).unwrap();
        assert!(matches!(r, Incoming::Request { ref id, .. } if *id == json!(7)));
        let n =
            parse_message(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).unwrap();
        assert!(matches!(n, Incoming::Notification { .. }));
        let resp = parse_message(json!({"jsonrpc":"2.0","id":"s-1","result":{}})).unwrap();
        assert!(matches!(resp, Incoming::Response { outcome: Ok(_), .. }));
    }

    #[test]
    fn rejects_malformed_messages_with_the_right_code() {
        for bad in [
            json!([1]),
            json!({"jsonrpc":"1.0","id":1,"method":"x"}),
            json!({"jsonrpc":"2.0","id":{"a":1},"method":"x"}),
            json!({"jsonrpc":"2.0","id":1.5,"method":"x"}),
            json!({"jsonrpc":"2.0","id":null,"method":"x"}),
            json!({"jsonrpc":"2.0","method":7}),
            json!({"jsonrpc":"2.0"}),
        ] {
            let err = parse_message(bad.clone()).unwrap_err();
            assert_eq!(err.error.code, INVALID_REQUEST, "{bad}");
        }
        let err =
            parse_message(json!({"jsonrpc":"2.0","id":3,"method":"x","params":[1]})).unwrap_err();
        assert_eq!((err.error.code, err.id), (INVALID_PARAMS, Some(json!(3))));
    }

    #[test]
    fn error_without_id_omits_the_member() {
        let body = error_response(None, &RpcError::new(PARSE_ERROR, "Parse error"));
        assert!(body.get("id").is_none());
    }
}
