//! Native tools, compiled into the bot: time, a calculator, long-term memory, files in
//! the workspace folder, delegation to a worker agent, and the two tools the bot
//! reports on itself with (`get_bot_status`, `list_available_tools`). Those two are
//! ordinary tools the model is offered, so a user can ask "what is your status?" or
//! "what can you do?"; the second lists only what the caller's roles allow, and the
//! status never carries a secret.
//!
//! One file per tool or pair of tools, each with its definition and its work:
//! `clock.rs` (`current_time`), `calculator.rs`, `memory.rs` (`remember`, `recall`),
//! `workspace.rs` (`list_files`, `read_file`), `delegate.rs`, and `self_report.rs`
//! (`list_available_tools`, `get_bot_status`).

mod calculator;
mod clock;
mod delegate;
mod memory;
mod self_report;
mod workspace;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::Value;

use super::{ExecContext, ToolHandler, ToolRunner};
use crate::bot::store::Store;
use crate::model::{ToolDef, ToolSource};
pub use calculator::calculate;
pub use workspace::{PrivateFiles, resolve_in_workspace};

/// What the status tool reports about the bot besides its tools.
pub struct StatusSources {
    pub started: Instant,
    pub llm_provider: String,
    pub llm_model: String,
    pub workers: Arc<dyn Delegation>,
    pub mcp_servers: Arc<dyn Fn() -> Value + Send + Sync>,
    /// Limits and switches from the configuration, secrets left out (see
    /// `Bot::operational_settings`).
    pub settings: Value,
}

/// What `delegate` and `get_bot_status` need of the worker agents. The agents layer
/// fills it in (`agents::Workers`): the agents call tools, so the tools reach the agents
/// only through this seam rather than pointing back at them.
#[async_trait]
pub trait Delegation: Send + Sync {
    /// Runs one worker on `task` with the caller's tools, roles and trace, and returns
    /// its answer (or what went wrong, for the model to read).
    async fn run(
        &self,
        name: &str,
        task: &str,
        runner: &ToolRunner,
        ctx: &ExecContext,
    ) -> Result<String, String>;

    /// The agents at work now, as `get_bot_status` lists them to a caller with `ctx`'s
    /// rights.
    fn agents(&self, ctx: &ExecContext) -> Value;
}

/// A native tool: its definition and what runs it.
type NativeTool = (ToolDef, Arc<dyn ToolHandler>);

/// Registers every native tool.
pub fn register_all(
    runner: &ToolRunner,
    store: Store,
    (workspace, private): (PathBuf, PrivateFiles),
    status: StatusSources,
) -> Result<(), String> {
    let tools: [NativeTool; 9] = [
        clock::current_time(),
        calculator::calculator(),
        memory::remember(store.clone()),
        memory::recall(store),
        workspace::list_files(workspace.clone()),
        workspace::read_file(workspace, private),
        delegate::delegate(status.workers.clone()),
        self_report::list_available_tools(),
        self_report::get_bot_status(status),
    ];
    for (def, handler) in tools {
        runner.register(def, handler)?;
    }
    Ok(())
}

/// A native tool open to every role.
fn native(
    name: &str,
    description: &str,
    schema: Value,
    handler: impl ToolHandler + 'static,
) -> NativeTool {
    let def = ToolDef {
        name: name.into(),
        source: ToolSource::Native,
        description: description.into(),
        input_schema: schema.into(),
        required_roles: vec![],
        internal: false,
        read_only: false,
    };
    (def, Arc::new(handler))
}

/// `tool`, marked as one that only reads (see [`ToolDef::read_only`]).
fn read_only((mut def, handler): NativeTool) -> NativeTool {
    def.read_only = true;
    (def, handler)
}
