//! Resources: a [`ResourceProvider`] lists resources and URI templates and reads URIs
//! it owns; several providers can serve one server. It can complete template variables
//! (`completion/complete`).

use async_trait::async_trait;
use serde_json::Value;

use super::context::RequestContext;
use super::jsonrpc::RpcError;
use super::tool::Outcome;

/// A source of resources: lists what it has and reads the URIs it owns.
#[async_trait]
pub trait ResourceProvider: Send + Sync {
    /// `Resource` objects: `{uri, name, title?, description?, mimeType?}`.
    fn resources(&self) -> Vec<Value>;
    /// `ResourceTemplate` objects: `{uriTemplate, name, description?, mimeType?}`.
    fn templates(&self) -> Vec<Value> {
        Vec::new()
    }
    /// The contents of `uri`, or `Ok(None)` when this provider does not own it.
    async fn read(
        &self,
        uri: &str,
        ctx: &RequestContext,
    ) -> Result<Option<Outcome<Vec<Value>>>, RpcError>;
    /// Values for a template variable that start like `value`.
    async fn complete(&self, _template: &str, _argument: &str, _value: &str) -> Vec<String> {
        Vec::new()
    }
}
