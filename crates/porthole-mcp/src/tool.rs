//! The tool seam: what an MCP tool is ([`Tool`]), what it returns ([`Outcome`] of a
//! [`CallToolResult`]), and the [`ToolSet`] that lists them in a fixed order and
//! validates arguments against each input schema before a handler runs.
//!
//! A property may declare other accepted spellings with `"x-aliases": ["…"]` in its
//! schema (for example `tool_name` with `name`): the set renames an alias to the
//! declared name before validation, so handlers and schemas only know one spelling,
//! and a call that gives two spellings of one property is refused with a clear error.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::context::RequestContext;
use super::error::SetupError;
use super::guard::Access;
use super::jsonrpc::RpcError;
use super::schema::{input_schema_of, schema_of};
use super::tool_result::CallToolResult;

/// Hints about a tool's behaviour (MCP `ToolAnnotations`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Annotations {
    /// It changes nothing (`readOnlyHint`); only such tools are open to the read-only
    /// token.
    pub read_only: bool,
    /// It may delete or overwrite state (`destructiveHint`).
    pub destructive: bool,
    /// Calling it again with the same arguments has no further effect (`idempotentHint`).
    pub idempotent: bool,
    /// It reaches things outside the server's own domain, such as the web
    /// (`openWorldHint`).
    pub open_world: bool,
}

impl Annotations {
    /// A tool that only reads.
    pub const READ_ONLY: Annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    /// A tool that may change or destroy state.
    pub const DESTRUCTIVE: Annotations = Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
}

/// How a tool is listed.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The name clients call it by: 1–64 of `A-Z a-z 0-9 _ . -`, unique in a [`ToolSet`].
    pub name: String,
    /// A display name, also listed as `annotations.title`; `None` lists none.
    pub title: Option<String>,
    /// What the tool does; must not be blank.
    pub description: String,
    /// The JSON Schema the arguments must match; checked before the tool runs.
    pub input_schema: Value,
    /// The JSON Schema of the structured result; `None` declares none.
    pub output_schema: Option<Value>,
    /// Hints about its behaviour; `read_only` also opens it to the read-only token.
    pub annotations: Annotations,
    /// The most characters a result may hold, for tools whose answer can be large:
    /// listed as `_meta["anthropic/maxResultSizeChars"]` so a client that cuts long
    /// results (Claude Code) keeps what the caller asked for in full.
    pub max_result_chars: Option<usize>,
}

impl ToolSpec {
    /// A listed tool that takes no arguments, declares no output schema and hints
    /// nothing; [`input_of`](Self::input_of), [`output_of`](Self::output_of) and
    /// [`annotations`](Self::annotations) add what it has, so a spec reads as its parts.
    pub fn new(name: &str, title: &str, description: impl Into<String>) -> Self {
        ToolSpec {
            name: name.into(),
            title: Some(title.into()),
            description: description.into(),
            input_schema: input_schema_of::<NoArguments>(),
            output_schema: None,
            annotations: Annotations::default(),
            max_result_chars: None,
        }
    }

    /// Structured output described by the answer's own type: the schema is derived from
    /// `T` (its members, their types, which may be null, which are always there), so it
    /// says what the answer holds and cannot drift from it. Serialize the answer from a
    /// `T` ([`CallToolResult::typed`](crate::CallToolResult::typed)).
    pub fn output_of<T: schemars::JsonSchema>(mut self) -> Self {
        let mut schema = schema_of::<T>();
        // `T`'s own doc comment is for the code's readers ("`list_orders`' answer");
        // the tool's description says what it answers.
        if let Some(object) = schema.as_object_mut() {
            object.remove("description");
        }
        self.output_schema = Some(schema);
        self
    }

    /// Arguments described by their own type: the input schema is derived from `T`
    /// ([`input_schema_of`]: its members, which are required, their ranges, patterns,
    /// defaults and descriptions), so what is validated is what the tool parses.
    pub fn input_of<T: schemars::JsonSchema>(mut self) -> Self {
        self.input_schema = input_schema_of::<T>();
        self
    }

    /// Sets the hints about the tool's behaviour.
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Declares the size the tool's answer is capped to (its own byte budget).
    pub fn max_result_size(mut self, chars: usize) -> Self {
        self.max_result_chars = Some(chars);
        self
    }

    /// The `Tool` object of `tools/list` (the set adds `execution` when tasks apply).
    pub fn to_json(&self) -> Value {
        let a = self.annotations;
        let mut tool = json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": {
                "readOnlyHint": a.read_only,
                "destructiveHint": a.destructive,
                "idempotentHint": a.idempotent,
                "openWorldHint": a.open_world,
            },
        });
        if let Some(title) = &self.title {
            tool["title"] = json!(title);
            tool["annotations"]["title"] = json!(title);
        }
        if let Some(schema) = &self.output_schema {
            tool["outputSchema"] = schema.clone();
        }
        if let Some(chars) = self.max_result_chars {
            tool["_meta"] = json!({"anthropic/maxResultSizeChars": chars});
        }
        tool
    }
}

/// The arguments of a tool that takes none.
#[derive(schemars::JsonSchema)]
struct NoArguments {}

/// MRTR (modern era): the handler needs answers from the client before it can finish.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequired {
    /// key → `{"method": …, "params": …}`
    pub input_requests: Map<String, Value>,
    /// The tool's sealed state, sent as `requestState` for the client to echo back with
    /// its answers; `None` sends none.
    pub request_state: Option<String>,
}

/// An MRTR input request: `{"method": …, "params": …}`.
pub fn input_request(method: &str, params: Value) -> Value {
    json!({"method": method, "params": params})
}

impl InputRequired {
    /// A result asking the client for one input under `key` (`request` as built by
    /// [`input_request`]), with the tool's sealed `state` to echo back.
    pub fn ask(key: &str, request: Value, state: Option<String>) -> InputRequired {
        let mut input_requests = Map::new();
        input_requests.insert(key.to_string(), request);
        InputRequired {
            input_requests,
            request_state: state,
        }
    }

    /// The result as sent: `{resultType: "input_required", inputRequests?, requestState?}`.
    pub fn to_json(&self) -> Value {
        let mut result = json!({"resultType": "input_required"});
        if !self.input_requests.is_empty() {
            result["inputRequests"] = Value::Object(self.input_requests.clone());
        }
        if let Some(state) = &self.request_state {
            result["requestState"] = json!(state);
        }
        result
    }
}

/// A finished result, or a request for more input.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// The finished result.
    Complete(T),
    /// Answers the client must give before the request can finish (MRTR).
    InputRequired(InputRequired),
}

/// Whether a tool's calls may run as tasks (MCP `ToolExecution.taskSupport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Always answered in the call itself.
    #[default]
    Forbidden,
    /// A task for clients that support tasks, a blocking call for the others.
    Optional,
    /// Only as a task: clients without task support get `-32021`.
    Required,
}

impl TaskSupport {
    /// The value as listed in `execution.taskSupport`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

/// An MCP tool: how it is listed, and what a call does.
#[async_trait]
pub trait Tool: Send + Sync {
    /// How the tool is listed; read once, when the set is built.
    fn spec(&self) -> ToolSpec;

    /// Whether calls may run as tasks; listed as `execution.taskSupport`.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Forbidden
    }

    /// For a tool that supports tasks, whether this call should become one now. A tool
    /// that first gathers input in the call itself (MRTR) answers `false` until it has
    /// it; one that is quick for some arguments may answer `false` for those.
    fn starts_task(&self, _args: &Value, _ctx: &RequestContext) -> bool {
        true
    }

    /// Runs the tool with validated arguments. Tool failures are
    /// `Ok(Outcome::Complete(CallToolResult::error(..)))`; `Err` is for protocol errors.
    async fn call(
        &self,
        args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError>;
}

/// Hears of the `tools/call`s refused before any tool ran (an unknown tool, arguments
/// its schema rejects), with the answer they got: the application may record them as it
/// records the calls its tools run (a trace span each).
pub trait RefusedCalls: Send + Sync {
    /// A call to `tool` was refused with `answer` before any tool ran.
    fn refused(
        &self,
        tool: &str,
        ctx: &RequestContext,
        answer: &Result<Outcome<CallToolResult>, RpcError>,
    );
}

struct Entry {
    /// The name, shared: a call names its tool with a copy of this, not a new string.
    name: Arc<str>,
    tool: Arc<dyn Tool>,
    validator: jsonschema::Validator,
    /// `x-mcp-header` annotations: (property name, header name).
    param_headers: Vec<(String, String)>,
    /// `x-aliases` annotations: (alias, property name).
    aliases: Vec<(String, String)>,
    /// Annotated read-only: callable with [`Access::ReadOnly`].
    read_only: bool,
}

/// What a spec must be to be served: a valid name, a description, and schemas that
/// compile and describe objects (MCP lists both as JSON Schemas of objects: arguments
/// are an object, and so is a structured result; an answer type that is a list or a
/// number would give clients a schema they cannot use). Returns the arguments'
/// validator, or what is wrong.
fn checked(spec: &ToolSpec) -> Result<jsonschema::Validator, String> {
    if !valid_tool_name(&spec.name) {
        return Err("its name is not 1–64 of [A-Za-z0-9_.-]".into());
    }
    if spec.description.trim().is_empty() {
        return Err("it needs a description".into());
    }
    if spec.input_schema["type"] != "object" {
        return Err("its input schema must describe an object (\"type\": \"object\")".into());
    }
    if let Some(output) = &spec.output_schema {
        if output["type"] != "object" {
            return Err("its output schema must describe an object (\"type\": \"object\"); wrap a list or a value in a struct".into());
        }
        jsonschema::validator_for(output)
            .map_err(|e| format!("its output schema is invalid: {e}"))?;
    }
    jsonschema::validator_for(&spec.input_schema)
        .map_err(|e| format!("its input schema is invalid: {e}"))
}

impl Entry {
    /// Checks a tool's spec and compiles what each call needs (the validator, the
    /// header and alias annotations); also returns its `tools/list` entry.
    fn new(spec: &ToolSpec, tool: Arc<dyn Tool>) -> Result<(Entry, Value), SetupError> {
        let validator = checked(spec).map_err(|reason| SetupError::Tool {
            name: spec.name.clone(),
            reason,
        })?;
        let param_headers = spec.input_schema["properties"]
            .as_object()
            .map(|props| {
                props
                    .iter()
                    .filter_map(|(prop, schema)| {
                        schema["x-mcp-header"]
                            .as_str()
                            .map(|h| (prop.clone(), h.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut listed = spec.to_json();
        let support = tool.task_support();
        if support != TaskSupport::Forbidden {
            listed["execution"] = json!({"taskSupport": support.as_str()});
        }
        let entry = Entry {
            name: spec.name.as_str().into(),
            tool,
            validator,
            param_headers,
            aliases: property_aliases(&spec.input_schema),
            read_only: spec.annotations.read_only,
        };
        Ok((entry, listed))
    }
}

/// The tools of a server, sorted by name, with their listings precomputed: all of them,
/// and the read-only ones a read-only token sees.
pub struct ToolSet {
    entries: HashMap<String, Entry>,
    listing: Vec<Value>,
    read_only_listing: Vec<Value>,
    refused: Option<Arc<dyn RefusedCalls>>,
}

/// Tool names must be 1–64 characters of `A-Z a-z 0-9 _ . -` (what every client accepts).
pub(crate) fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

impl ToolSet {
    /// Builds the set; fails on a bad name, an empty description, a duplicate, or a
    /// schema that does not compile or does not describe an object.
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Self, SetupError> {
        let mut specs: Vec<(ToolSpec, Arc<dyn Tool>)> =
            tools.into_iter().map(|t| (t.spec(), t)).collect();
        specs.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let mut entries = HashMap::new();
        let mut listing = Vec::new();
        let mut read_only_listing = Vec::new();
        for (spec, tool) in specs {
            let (entry, listed) = Entry::new(&spec, tool)?;
            if entry.read_only {
                read_only_listing.push(listed.clone());
            }
            listing.push(listed);
            if entries.insert(spec.name.clone(), entry).is_some() {
                return Err(SetupError::Duplicate {
                    kind: "tool",
                    name: spec.name,
                });
            }
        }
        Ok(ToolSet {
            entries,
            listing,
            read_only_listing,
            refused: None,
        })
    }

    /// Tells `refused` of every call refused before a tool ran.
    pub fn with_refused_calls(mut self, refused: Option<Arc<dyn RefusedCalls>>) -> Self {
        self.refused = refused;
        self
    }

    /// Refuses a tool that changes state to a request with the read-only token. Checked
    /// before anything starts, a task included.
    pub fn check_access(&self, name: &str, access: Access) -> Result<(), RpcError> {
        match self.entries.get(name) {
            Some(entry) if !entry.read_only && access == Access::ReadOnly => {
                Err(RpcError::invalid_params(format!(
                    "tool `{name}` changes state and the read-only token (MCP_SERVER_READONLY_SECRET) may call only \
                     read-only tools; use MCP_SERVER_SECRET for it"
                )))
            }
            _ => Ok(()),
        }
    }

    /// The tools a request with `access` may see.
    pub fn listing(&self, access: Access) -> &[Value] {
        match access {
            Access::Full => &self.listing,
            Access::ReadOnly => &self.read_only_listing,
        }
    }

    /// How many tools the set holds.
    pub fn len(&self) -> usize {
        self.listing.len()
    }

    /// Whether the set holds no tools.
    pub fn is_empty(&self) -> bool {
        self.listing.is_empty()
    }

    /// Whether the set has a tool named `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// The name of the tool named `name`, shared, if there is one.
    pub(crate) fn shared_name(&self, name: &str) -> Option<Arc<str>> {
        self.entries.get(name).map(|e| e.name.clone())
    }

    /// The tool named `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.entries.get(name).map(|e| &e.tool)
    }

    /// `(property, header)` pairs declared with `x-mcp-header` for a tool.
    pub fn param_headers(&self, name: &str) -> &[(String, String)] {
        self.entries
            .get(name)
            .map(|e| e.param_headers.as_slice())
            .unwrap_or_default()
    }

    /// Names close to `name` among the tools a request with `access` may see, for the
    /// unknown-tool error: the read-only token's typo names no tool it may not call.
    fn similar(&self, name: &str, access: Access) -> Vec<String> {
        let visible = self
            .entries
            .iter()
            .filter(|(_, entry)| access == Access::Full || entry.read_only)
            .map(|(name, _)| name.as_str());
        porthole_core::text::closest(visible, name, 5)
    }

    /// Validates arguments and runs the tool. Unknown tools are a `-32602` error naming
    /// close matches; invalid arguments are a tool error result naming the field.
    /// Access is checked before, once, with [`ToolSet::check_access`]: `tools/call` does
    /// it before anything starts, and a task's later rounds keep to the access it
    /// started with.
    pub(crate) async fn call(
        &self,
        name: &str,
        args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        match self.admit(name, args, ctx.access) {
            Ok((entry, args)) => entry.tool.call(args, ctx).await,
            Err(refusal) => {
                if let Some(refused) = &self.refused {
                    refused.refused(name, ctx, &refusal);
                }
                refusal
            }
        }
    }

    /// The tool `name` and its arguments once its schema accepts them, or the answer
    /// of a call refused before any tool runs.
    fn admit(
        &self,
        name: &str,
        args: Value,
        access: Access,
    ) -> Result<(&Entry, Value), Result<Outcome<CallToolResult>, RpcError>> {
        let Some(entry) = self.entries.get(name) else {
            let similar = self.similar(name, access);
            let hint = if similar.is_empty() {
                "call tools/list to see the tools".to_string()
            } else {
                format!("did you mean {}?", similar.join(", "))
            };
            return Err(Err(RpcError::invalid_params(format!(
                "Unknown tool: {name}; {hint}"
            ))));
        };
        let mut args = if args.is_null() { json!({}) } else { args };
        if let Err(problem) = rename_aliases(&mut args, &entry.aliases) {
            return Err(Ok(Outcome::Complete(CallToolResult::error(format!(
                "Invalid arguments for {name}: {problem}"
            )))));
        }
        if entry.validator.is_valid(&args) {
            return Ok((entry, args));
        }
        // Invalid: now say why (collecting the errors costs more than the check).
        let problems: Vec<String> = entry
            .validator
            .iter_errors(&args)
            .take(5)
            .map(|e| {
                // The validator quotes the offending value, which may be huge.
                let problem = porthole_core::text::elide_middle(&e.to_string(), 200);
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    problem
                } else {
                    format!("`{}`: {problem}", path.trim_start_matches('/'))
                }
            })
            .collect();
        Err(Ok(Outcome::Complete(CallToolResult::error(format!(
            "Invalid arguments for {name}: {}. See the tool's inputSchema.",
            problems.join("; ")
        )))))
    }
}

/// The `(alias, property)` pairs a schema declares with `x-aliases` on its properties.
fn property_aliases(schema: &Value) -> Vec<(String, String)> {
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .flat_map(|(property, schema)| {
            schema["x-aliases"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(move |alias| (alias.to_string(), property.clone()))
        })
        .collect()
}

/// Renames each alias present in `args` to its property; two spellings of one property
/// in the same call are an error naming both.
fn rename_aliases(args: &mut Value, aliases: &[(String, String)]) -> Result<(), String> {
    let Some(object) = args.as_object_mut() else {
        return Ok(());
    };
    for (alias, property) in aliases {
        let Some(value) = object.remove(alias) else {
            continue;
        };
        if object.contains_key(property) {
            return Err(format!(
                "`{alias}` is another spelling of `{property}`; give only one of them"
            ));
        }
        object.insert(property.clone(), value);
    }
    Ok(())
}

#[cfg(test)]
mod alias_tests {
    use super::*;

    #[test]
    fn aliases_are_renamed_and_doubles_refused() {
        let schema = json!({"properties": {
            "tool_name": {"type": "string", "x-aliases": ["name"]},
            "parameters": {"type": "object", "x-aliases": ["arguments"]}
        }});
        let aliases = property_aliases(&schema);
        let mut args = json!({"name": "calculator", "arguments": {"a": 1}});
        rename_aliases(&mut args, &aliases).unwrap();
        assert_eq!(
            args,
            json!({"tool_name": "calculator", "parameters": {"a": 1}})
        );
        let mut both = json!({"name": "a", "tool_name": "b"});
        let error = rename_aliases(&mut both, &aliases).unwrap_err();
        assert!(
            error.contains("`name` is another spelling of `tool_name`"),
            "{error}"
        );
        let mut not_object = json!([1]);
        assert!(rename_aliases(&mut not_object, &aliases).is_ok());
    }
}
