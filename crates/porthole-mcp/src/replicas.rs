//! Replicas: servers that share their state (the application's database) behind a load
//! balancer. What one must tell the others goes through the [`Replicas`] seam the
//! application gives (the bot's is PostgreSQL's `NOTIFY`); what the others announce is
//! applied here ([`McpServer::apply_replica_change`]). Without a seam nothing is
//! announced and a lone server behaves exactly as before.
//!
//! Each announcement carries what the receiver needs and no more: a changed task's id,
//! status and owner key (its record is read from the shared task store), an ended
//! session's id, or that a task another replica runs got an answer or a cancel.

use std::sync::Arc;

pub use super::subscriptions::Replicas;
pub use porthole_core::replica_changes::Changed;

use super::subscriptions::Change;
use super::{McpServer, ServerInner};

impl McpServer {
    /// Applies what another replica announced: its clients' notifications reach this
    /// replica's streams, an ended session is refused here too, a task this replica runs
    /// takes the answer or the cancel another replica received for it.
    pub async fn apply_replica_change(&self, what: Changed) {
        apply(&self.inner, what).await;
    }
}

async fn apply(inner: &Arc<ServerInner>, what: Changed) {
    let notifier = &inner.notifier;
    match what {
        Changed::Tools => notifier.deliver(Change::ToolsListChanged),
        Changed::Prompts => notifier.deliver(Change::PromptsListChanged),
        Changed::Resources => notifier.deliver(Change::ResourcesListChanged),
        Changed::ResourceUpdated { uri } => notifier.deliver(Change::ResourceUpdated(uri.into())),
        Changed::Task { id, .. } => inner.tasks.changed_elsewhere(&id).await,
        Changed::TaskInput { id } => inner.tasks.take_forwarded_input(&id).await,
        Changed::TaskCancel { id } => inner.tasks.cancelled_elsewhere(&id).await,
        Changed::SessionEnded { id } => inner.sessions.ended_elsewhere(&id),
        // The application's own business (the bot's MCP client connections).
        Changed::McpServer { .. } => {}
    }
}
