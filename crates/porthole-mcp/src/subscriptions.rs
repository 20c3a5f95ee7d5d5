//! Change notifications: the server's owner reports changes through a [`Notifier`];
//! every open notification stream receives them and forwards what its client asked for
//! — legacy sessions on their GET stream, modern clients on `subscriptions/listen` —
//! and, with replicas, the other replicas' streams too (see `replicas`).

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::jsonrpc;
use super::protocol::META_SUBSCRIPTION_ID;
use super::task_record::TaskRecord;
use porthole_core::replica_changes::Changed;

/// A change clients can be notified of.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The list of tools changed (`notifications/tools/list_changed`).
    ToolsListChanged,
    /// The list of prompts changed (`notifications/prompts/list_changed`).
    PromptsListChanged,
    /// The list of resources changed (`notifications/resources/list_changed`).
    ResourcesListChanged,
    /// The resource at this URI changed; streams forward it only to its subscribers.
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

    /// What the other replicas are told: a task by id, status and owner key only.
    fn announced(&self) -> Changed {
        match self {
            Change::ToolsListChanged => Changed::Tools,
            Change::PromptsListChanged => Changed::Prompts,
            Change::ResourcesListChanged => Changed::Resources,
            Change::ResourceUpdated(uri) => Changed::ResourceUpdated {
                uri: uri.to_string(),
            },
            Change::Task(task) => Changed::Task {
                id: task.id.clone(),
                status: task.status.as_str().into(),
                owner: task.owner.clone(),
            },
        }
    }
}

/// Where a server's changes go to the other replicas (see `replicas`).
pub trait Replicas: Send + Sync {
    /// Called on request paths and under no lock: queue it, do not wait for it.
    fn announce(&self, what: Changed);
}

/// Reports changes to every connected client that wants them, on this replica and,
/// once `Notifier::relay_to` named them, on the others. Cheap to clone.
#[derive(Clone)]
pub struct Notifier {
    tx: broadcast::Sender<Change>,
    replicas: Arc<OnceLock<Arc<dyn Replicas>>>,
}

impl Default for Notifier {
    fn default() -> Self {
        Notifier {
            tx: broadcast::channel(256).0,
            replicas: Arc::default(),
        }
    }
}

impl Notifier {
    /// A change made here: this replica's streams hear it, and so do the others'.
    pub fn send(&self, change: Change) {
        if let Some(replicas) = self.replicas.get() {
            replicas.announce(change.announced());
        }
        self.deliver(change);
    }

    /// A change to this replica's streams only (one another replica announced).
    pub(crate) fn deliver(&self, change: Change) {
        // No open streams is normal.
        let _ = self.tx.send(change);
    }

    /// Something only the other replicas need to hear (not a client notification).
    pub(crate) fn announce(&self, what: Changed) {
        if let Some(replicas) = self.replicas.get() {
            replicas.announce(what);
        }
    }

    /// From now on, every change is also announced to the other replicas (set once).
    pub(crate) fn relay_to(&self, replicas: Arc<dyn Replicas>) {
        let _ = self.replicas.set(replicas);
    }

    /// Tells clients the list of tools changed.
    pub fn tools_changed(&self) {
        self.send(Change::ToolsListChanged);
    }

    /// Tells clients the list of prompts changed.
    pub fn prompts_changed(&self) {
        self.send(Change::PromptsListChanged);
    }

    /// Tells the clients subscribed to `uri` that the resource changed.
    pub fn resource_updated(&self, uri: &str) {
        self.send(Change::ResourceUpdated(uri.into()));
    }

    /// Whether any stream (or waiting `tasks/result`) listens at all.
    pub(crate) fn has_listeners(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// A receiver of every change that reaches this replica's streams from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }
}

/// What a modern `subscriptions/listen` stream asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ListenFilter {
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
    pub(crate) fn from_params(notifications: &Value, has_prompts: bool) -> Self {
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
    pub(crate) fn to_json(&self) -> Value {
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

    pub(crate) fn wants(&self, change: &Change) -> bool {
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
