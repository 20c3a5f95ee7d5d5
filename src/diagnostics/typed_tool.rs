//! The typed-arguments helper every diagnostics tool is written with.
//!
//! A [`DiagnosticTool`] is its spec and its work: `run` receives the arguments already
//! parsed into the tool's own struct, and the [`Diagnostics`] it works on. [`adapt`]
//! makes one an `mcp::Tool`. The tool set has validated the arguments against the input
//! schema before any of this runs, so parsing fails only when the struct and the schema
//! disagree (a bug); it is then a tool error naming the tool, worded as the tool set
//! words its own argument errors.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Diagnostics, failed};
use crate::mcp::{CallToolResult, Outcome, RequestContext, RpcError, TaskSupport, Tool, ToolSpec};

/// What a tool's work comes to: a finished result (a tool error included), a request for
/// more input, or a protocol error.
pub(super) type Answer = Result<Outcome<CallToolResult>, RpcError>;

pub(super) trait DiagnosticTool: Send + Sync + 'static {
    /// The arguments, as the input schema describes them.
    type Args: DeserializeOwned + Send;

    /// How the tool is listed. `d` is there for the few specs that depend on the
    /// settings (`db_query` says whether it runs read-only).
    fn spec(&self, d: &Diagnostics) -> ToolSpec;

    /// Whether calls may run as tasks; see [`Tool::task_support`].
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Forbidden
    }

    /// The work, written `async fn run(…) -> Answer` (the future must be `Send`, as
    /// every tool call may run on another thread).
    fn run(
        &self,
        d: &Diagnostics,
        args: Self::Args,
        ctx: &RequestContext,
    ) -> impl Future<Output = Answer> + Send;
}

/// The arguments of a tool that takes none.
#[derive(Deserialize)]
pub(super) struct NoArgs {}

/// `tool` as an `mcp::Tool` over `d`.
pub(super) fn adapt(d: &Arc<Diagnostics>, tool: impl DiagnosticTool) -> Arc<dyn Tool> {
    Arc::new(Adapted { d: d.clone(), tool })
}

struct Adapted<T> {
    d: Arc<Diagnostics>,
    tool: T,
}

#[async_trait]
impl<T: DiagnosticTool> Tool for Adapted<T> {
    fn spec(&self) -> ToolSpec {
        self.tool.spec(&self.d)
    }

    fn task_support(&self) -> TaskSupport {
        self.tool.task_support()
    }

    async fn call(&self, args: Value, ctx: &RequestContext) -> Answer {
        match serde_json::from_value(args) {
            Ok(args) => self.tool.run(&self.d, args, ctx).await,
            Err(e) => {
                let name = self.tool.spec(&self.d).name;
                Ok(failed(format!("Invalid arguments for {name}: {e}")))
            }
        }
    }
}
