//! Change notifications: the server's owner reports changes through a [`Notifier`];
//! every open notification stream receives them and forwards what its client asked for
//! — legacy sessions on their GET stream, modern clients on `subscriptions/listen`.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::jsonrpc;
use super::protocol::META_SUBSCRIPTION_ID;
use super::task_record::TaskRecord;

#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    ToolsListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated(Arc<str>),
    /// A task changed (any era); streams forward it only to its owner.
    Task(Arc<TaskRecord>),
}

impl Change {
    /// The notification for this change, tagged with a subscription id when given.
    pub fn to_notification(&self, subscription_id: Option<&Value>) -> Value {
        let (method, mut params) = match self {
            Change::ToolsListChanged => ("notifications/tools/list_changed", json!({})),
            Change::PromptsListChanged => ("notifications/prompts/list_changed", json!({})),
            Change::ResourcesListChanged => ("notifications/resources/list_changed", json!({})),
            Change::ResourceUpdated(uri) => (
                "notifications/resources/updated",
                json!({"uri": uri.as_ref()}),
            ),
            Change::Task(task) => ("notifications/tasks", task.detailed()),
        };
        if let Some(id) = subscription_id {
            params["_meta"] = json!({META_SUBSCRIPTION_ID: id});
        }
        jsonrpc::notification(method, params)
    }
}

/// Reports changes to every connected client that wants them. Cheap to clone.
#[derive(Clone)]
pub struct Notifier {
    tx: broadcast::Sender<Change>,
}

impl Default for Notifier {
    fn default() -> Self {
        Notifier {
            tx: broadcast::channel(256).0,
        }
    }
}

impl Notifier {
    pub fn send(&self, change: Change) {
        // No open streams is normal.
        let _ = self.tx.send(change);
    }

    pub fn tools_changed(&self) {
        self.send(Change::ToolsListChanged);
    }

    pub fn prompts_changed(&self) {
        self.send(Change::PromptsListChanged);
    }

    pub fn resource_updated(&self, uri: &str) {
        self.send(Change::ResourceUpdated(uri.into()));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }
}

/// What a modern `subscriptions/listen` stream asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListenFilter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    pub resource_uris: Vec<String>,
    /// Tasks whose `notifications/tasks` the client wants, with the owner key they
    /// must belong to.
    pub task_ids: Vec<String>,
    pub task_owner: Option<Arc<str>>,
}

impl ListenFilter {
    /// Reads `params.notifications`, keeping only what the server supports.
    pub fn from_params(notifications: &Value, has_prompts: bool) -> Self {
        ListenFilter {
            tools: notifications["toolsListChanged"] == true,
            prompts: has_prompts && notifications["promptsListChanged"] == true,
            resources: notifications["resourcesListChanged"] == true,
            resource_uris: notifications["resourceSubscriptions"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|u| u.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            task_ids: Vec::new(),
            task_owner: None,
        }
    }

    /// The filter as echoed in the acknowledgment: what will actually be delivered.
    pub fn to_json(&self) -> Value {
        let mut honoured = json!({});
        if self.tools {
            honoured["toolsListChanged"] = json!(true);
        }
        if self.prompts {
            honoured["promptsListChanged"] = json!(true);
        }
        if self.resources {
            honoured["resourcesListChanged"] = json!(true);
        }
        if !self.resource_uris.is_empty() {
            honoured["resourceSubscriptions"] = json!(self.resource_uris);
        }
        if self.task_owner.is_some() {
            honoured["taskIds"] = json!(self.task_ids);
        }
        honoured
    }

    pub fn wants(&self, change: &Change) -> bool {
        match change {
            Change::ToolsListChanged => self.tools,
            Change::PromptsListChanged => self.prompts,
            Change::ResourcesListChanged => self.resources,
            Change::ResourceUpdated(uri) => self.resource_uris.iter().any(|u| u == uri.as_ref()),
            Change::Task(task) => {
                self.task_owner.as_deref() == Some(task.owner.as_str())
                    && self.task_ids.iter().any(|id| *id == task.id)
            }
        }
    }
}
