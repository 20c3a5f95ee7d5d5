//! What crosses between replicas for a task: `tasks/update` answers and `tasks/cancel`
//! that another replica received for a task running here (the answers wait in the
//! store, the cancel is already written there), and the status changes of tasks running
//! elsewhere, read from the store and delivered to this replica's listeners.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::TaskEngine;
use crate::jsonrpc::RpcError;
use crate::subscriptions::Change;
use porthole_core::replica_changes::Changed;

const TARGET: &str = "porthole::mcp::tasks";

impl TaskEngine {
    /// `tasks/update` of a task this replica does not run: the answers wait in the store
    /// for the replica that runs it, which is told to take them.
    pub(super) async fn forward_input(
        &self,
        id: &str,
        answers: &Map<String, Value>,
    ) -> Result<(), RpcError> {
        self.config
            .store
            .forward_input(id, answers)
            .await
            .map_err(|e| RpcError::internal(format!("the task store failed: {e}")))?;
        self.notifier.announce(Changed::TaskInput { id: id.into() });
        Ok(())
    }

    /// Another replica received answers for task `id`: if it runs here, its work takes
    /// them as if `tasks/update` had come here.
    pub(crate) async fn take_forwarded_input(&self, id: &str) {
        if !self.running().contains_key(id) {
            return;
        }
        match self.config.store.take_forwarded_input(id).await {
            Ok(Some(answers)) => {
                if let Err(e) = self.accept_input(id, answers).await {
                    tracing::warn!(target: TARGET, task = %id, error = %e.message, "could not hand a task the answers another replica received");
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(target: TARGET, task = %id, error = %e, "could not read the answers another replica received for a task")
            }
        }
    }

    /// Another replica cancelled task `id` (the store says so already): if it runs here,
    /// its work stops, and its record here reads what the store holds.
    pub(crate) async fn cancelled_elsewhere(&self, id: &str) {
        let Some((record, abort)) = self
            .running()
            .get(id)
            .map(|r| (r.record.clone(), r.abort.clone()))
        else {
            return;
        };
        if let Ok(Some(kept)) = self.config.store.get(id).await {
            *record.lock().await = kept;
        }
        abort.abort();
    }

    /// A task another replica runs changed: this replica's listeners hear it, as the
    /// store has it.
    pub(crate) async fn changed_elsewhere(&self, id: &str) {
        if !self.notifier.has_listeners() {
            return;
        }
        match self.config.store.get(id).await {
            Ok(Some(record)) => self.notifier.deliver(Change::Task(Arc::new(record))),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(target: TARGET, task = %id, error = %e, "could not read a task another replica changed")
            }
        }
    }
}
