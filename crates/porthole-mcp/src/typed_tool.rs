//! A tool written as its types: an argument type, an answer type and `run`
//! ([`TypedTool`]). Both schemas are derived from the types ([`crate::schema`]), the
//! arguments arrive parsed, and the answer is sent as structured content that its
//! `outputSchema` describes; [`typed`] makes one a [`Tool`] for the [`ToolSet`].
//!
//! [`arguments`] is the parse every typed tool goes through, also for tools that keep
//! their own [`Tool`] implementation (the bot's diagnostics wrap each call in a trace
//! span): one wording of an argument error for every tool.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::context::RequestContext;
use crate::jsonrpc::RpcError;
use crate::tool::{Outcome, Tool, ToolSpec};
use crate::tool_result::CallToolResult;

/// A tool's failure, told to the caller as a tool error (`isError`): the call ran and
/// this is what went wrong, worded so the caller can fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError(pub String);

impl ToolError {
    /// A failure saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(message.into())
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ToolError {}

/// A tool as its argument type, its answer type and `run`; [`typed`] lists it with
/// both schemas derived from the types.
///
/// ```
/// use porthole_mcp::{RequestContext, ToolError, ToolSpec, TypedTool};
///
/// /// Adds two numbers.
/// struct Add;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Terms {
///     /// The first term
///     a: i64,
///     /// The second term
///     b: i64,
/// }
///
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct Sum {
///     sum: i64,
/// }
///
/// #[async_trait::async_trait]
/// impl TypedTool for Add {
///     type Args = Terms;
///     type Answer = Sum;
///
///     fn spec(&self) -> ToolSpec {
///         ToolSpec::new("add", "Add", "Adds two whole numbers")
///     }
///
///     async fn run(&self, t: Terms, _: &RequestContext) -> Result<Sum, ToolError> {
///         let sum = t.a.checked_add(t.b).ok_or(ToolError::new("the sum overflows an i64"))?;
///         Ok(Sum { sum })
///     }
/// }
///
/// let tool = porthole_mcp::typed(Add);
/// assert_eq!(tool.spec().input_schema["required"], serde_json::json!(["a", "b"]));
/// ```
#[async_trait]
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments; the input schema is derived from this type.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// The answer, sent as structured content; the output schema is derived from this
    /// type. It must serialise as a JSON object.
    type Answer: Serialize + JsonSchema + Send;

    /// The tool's name, title, description and annotations (its schemas are added).
    fn spec(&self) -> ToolSpec;

    /// The work, on arguments the input schema has validated.
    async fn run(&self, args: Self::Args, ctx: &RequestContext) -> Result<Self::Answer, ToolError>;
}

/// `tool` as a [`Tool`] for the [`ToolSet`](crate::ToolSet).
pub fn typed(tool: impl TypedTool) -> Arc<dyn Tool> {
    let name = tool.spec().name;
    Arc::new(Typed { tool, name })
}

struct Typed<T> {
    tool: T,
    /// For argument errors (the spec is built only when listed).
    name: String,
}

#[async_trait]
impl<T: TypedTool> Tool for Typed<T> {
    fn spec(&self) -> ToolSpec {
        self.tool
            .spec()
            .input_of::<T::Args>()
            .output_of::<T::Answer>()
    }

    async fn call(
        &self,
        args: Value,
        ctx: &RequestContext,
    ) -> Result<Outcome<CallToolResult>, RpcError> {
        let result = match arguments::<T::Args>(&self.name, args) {
            Err(refused) => refused,
            Ok(args) => match self.tool.run(args, ctx).await {
                Ok(answer) => match serde_json::to_value(&answer) {
                    Ok(value) => CallToolResult::structured(value),
                    Err(e) => CallToolResult::error(format!("the answer did not serialise: {e}")),
                },
                Err(e) => CallToolResult::error(e.0),
            },
        };
        Ok(Outcome::Complete(result))
    }
}

/// `args` as the tool `tool` takes them, or the tool error that says why not. The
/// tool set has validated them against the input schema derived from `A`, so this
/// fails only when a hand-written schema and the type disagree; a number written with a
/// fraction of zero (`10.0`, as some clients write every number) is taken as the whole
/// number JSON Schema's `integer` already accepted.
pub fn arguments<A: DeserializeOwned>(tool: &str, mut args: Value) -> Result<A, CallToolResult> {
    whole_floats_as_integers(&mut args);
    serde_json::from_value(args).map_err(|e| {
        CallToolResult::error(format!(
            "Invalid arguments for {tool}: {e}. See the tool's inputSchema (tools/list)"
        ))
    })
}

/// `10.0` as `10` in the top-level arguments.
fn whole_floats_as_integers(args: &mut Value) {
    let Some(map) = args.as_object_mut() else {
        return;
    };
    for value in map.values_mut() {
        if let Some(float) = value.as_f64().filter(|_| value.is_f64())
            && float.fract() == 0.0
            && float.abs() < 9.0e15
        {
            // Exact: a float this small with no fraction is an integer.
            *value = Value::from(float as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, serde::Deserialize, JsonSchema)]
    struct Limit {
        limit: u32,
    }

    /// A tool whose answer is a bare list.
    struct Names;

    #[async_trait]
    impl TypedTool for Names {
        type Args = Limit;
        type Answer = Vec<String>;

        fn spec(&self) -> ToolSpec {
            ToolSpec::new("names", "Names", "Lists names")
        }

        async fn run(&self, _: Limit, _: &RequestContext) -> Result<Vec<String>, ToolError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn an_answer_that_is_no_object_is_refused_when_the_set_is_built() {
        let refused = crate::ToolSet::new(vec![typed(Names)])
            .err()
            .expect("refused");
        let text = refused.to_string();
        assert!(
            text.contains("names") && text.contains("wrap a list"),
            "{text}"
        );
    }

    #[test]
    fn a_whole_float_is_taken_as_an_integer_and_a_mismatch_names_the_tool() {
        let parsed: Limit = arguments("t", json!({"limit": 10.0})).unwrap();
        assert_eq!(parsed.limit, 10);
        let refused = arguments::<Limit>("t", json!({"limit": "ten"})).unwrap_err();
        assert!(refused.is_error);
        let text = refused.content[0]["text"].as_str().unwrap();
        assert!(text.starts_with("Invalid arguments for t:"), "{text}");
    }
}
