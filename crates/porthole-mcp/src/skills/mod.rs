//! The Skills extension (`io.modelcontextprotocol/skills`): a folder of Agent Skills
//! served as `skill://<name>/<path>` resources, with `skills/list` and `skills/get`
//! (front matter verbatim plus a manifest of every file's size and SHA-256 digest) and
//! `resources/directory/read` over each skill's folders.
//!
//! The [`SkillCatalog`] serves a [`SkillFolder`] (`porthole_core::skills`: the one reader of
//! skills, whose live view the bot's `list_skills` shares). A watcher re-reads it when
//! the folder's fingerprint (paths, sizes, modification times) changes and announces
//! `notifications/resources/list_changed`. It polls rather than subscribing to OS file
//! events: one small `stat` walk every couple of seconds costs next to nothing, needs
//! no extra dependency, and behaves the same on every platform, in containers and on
//! network mounts, where file events are unreliable.
//!
//! Only files listed in a manifest can be read, and only while no symbolic link leads
//! to them (a file swapped for a link after the folder was read included), so nothing
//! outside the skills folder is reachable through a `skill://` URI.

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use serde_json::{Map, Value, json};

use super::context::RequestContext;
use super::jsonrpc::RpcError;
use super::resource::ResourceProvider;
use super::tool::Outcome;
use porthole_core::skills::{SkillEntry, SkillFolder, read_unlinked};

const SCHEME: &str = "skill://";
const DIRECTORY_MIME: &str = "inode/directory";

/// The skills of one folder, served through the extension and as resources.
pub struct SkillCatalog {
    folder: Arc<SkillFolder>,
}

fn mime_type(path: &str) -> &'static str {
    match path
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .as_deref()
    {
        Some("md" | "markdown") => "text/markdown",
        Some("txt") => "text/plain",
        Some("json") => "application/json",
        Some("py") => "text/x-python",
        Some("sh") => "application/x-sh",
        Some("js" | "mjs") => "text/javascript",
        Some("yaml" | "yml") => "application/yaml",
        Some("html") => "text/html",
        Some("csv") => "text/csv",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("pdf") => "application/pdf",
        _ => "application/octet-stream",
    }
}

fn entry_json(skill: &SkillEntry) -> Value {
    let resources: Vec<Value> = skill
        .files
        .iter()
        .map(|f| json!({"uri": format!("{SCHEME}{}/{}", skill.name, f.relative), "digest": f.digest, "size": f.size}))
        .collect();
    json!({
        "uri": format!("{SCHEME}{}/SKILL.md", skill.name),
        "frontmatter": skill.frontmatter,
        "resources": resources,
    })
}

fn unknown_skill(uri: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "No skill is served at {uri}; skills/list gives the URIs of the skills served"
    ))
    .with_data(json!({"uri": uri}))
}

impl SkillCatalog {
    /// A catalog serving the skills of `folder`, as its live view reads them.
    pub fn new(folder: Arc<SkillFolder>) -> Self {
        SkillCatalog { folder }
    }

    fn snapshot(&self) -> Arc<Vec<SkillEntry>> {
        self.folder.snapshot()
    }

    /// Re-reads the folder if it changed since the last look; `true` when it did.
    pub(crate) async fn refresh(&self) -> bool {
        self.folder.refresh().await
    }

    /// Every skill entry, for `skills/list`.
    pub(crate) fn entries(&self) -> Vec<Value> {
        self.snapshot().iter().map(entry_json).collect()
    }

    /// `skills/get`: the entry of the skill whose `SKILL.md` is `uri`.
    pub(crate) fn get(&self, uri: &str) -> Result<Value, RpcError> {
        let name = uri
            .strip_prefix(SCHEME)
            .and_then(|rest| rest.strip_suffix("/SKILL.md"))
            .ok_or_else(|| unknown_skill(uri))?;
        let skills = self.snapshot();
        let skill = skills
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| unknown_skill(uri))?;
        Ok(json!({"skill": entry_json(skill)}))
    }

    /// `resources/directory/read`: the direct children of a skill folder or subfolder.
    pub(crate) fn read_directory(&self, uri: &str) -> Result<Vec<Value>, RpcError> {
        let not_directory = || {
            RpcError::invalid_params(format!(
                "{uri} is not a directory resource; directories are skill://<name> and its subfolders"
            ))
            .with_data(json!({"uri": uri}))
        };
        let path = uri.strip_prefix(SCHEME).ok_or_else(not_directory)?;
        let (name, sub) = path.split_once('/').unwrap_or((path, ""));
        let skills = self.snapshot();
        let skill = skills
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(not_directory)?;
        let prefix = if sub.is_empty() {
            String::new()
        } else {
            format!("{sub}/")
        };
        let mut children: Vec<Value> = Vec::new();
        let mut folders: Vec<&str> = Vec::new();
        for file in &skill.files {
            let Some(rest) = file.relative.strip_prefix(&prefix) else {
                continue;
            };
            match rest.split_once('/') {
                Some((folder, _)) if !folders.contains(&folder) => folders.push(folder),
                Some(_) => {}
                None => children.push(json!({
                    "uri": format!("{SCHEME}{name}/{}", file.relative),
                    "name": rest,
                    "mimeType": mime_type(rest),
                    "size": file.size,
                })),
            }
        }
        if children.is_empty() && folders.is_empty() {
            return Err(not_directory());
        }
        for folder in folders {
            children.push(json!({
                "uri": format!("{SCHEME}{name}/{prefix}{folder}"),
                "name": folder,
                "mimeType": DIRECTORY_MIME,
            }));
        }
        Ok(children)
    }
}

#[async_trait]
impl ResourceProvider for SkillCatalog {
    fn resources(&self) -> Vec<Value> {
        self.snapshot()
            .iter()
            .map(|skill| {
                json!({
                    "uri": format!("{SCHEME}{}/SKILL.md", skill.name),
                    "name": skill.name,
                    "description": skill.frontmatter["description"],
                    "mimeType": "text/markdown",
                })
            })
            .collect()
    }

    async fn read(
        &self,
        uri: &str,
        ctx: &RequestContext,
    ) -> Result<Option<Outcome<Vec<Value>>>, RpcError> {
        let Some(path) = uri.strip_prefix(SCHEME) else {
            return Ok(None);
        };
        let Some((name, relative)) = path.split_once('/') else {
            return Ok(None);
        };
        let skills = self.snapshot();
        // Only files of a manifest are served: no path leaves the skill's folder.
        let Some(skill) = skills
            .iter()
            .find(|s| s.name == name && s.files.iter().any(|f| f.relative == relative))
        else {
            return Ok(None);
        };
        let (folder, file) = (skill.folder.clone(), relative.to_string());
        let bytes = tokio::task::spawn_blocking(move || read_unlinked(&folder, &file))
            .await
            .map_err(|e| RpcError::internal(e.to_string()))?
            .map_err(|e| RpcError::internal(format!("cannot read {uri}: {e}")))?;
        let mime = mime_type(relative);
        let mut content = Map::new();
        content.insert("uri".into(), json!(uri));
        content.insert("mimeType".into(), json!(mime));
        match String::from_utf8(bytes) {
            Ok(text) => content.insert("text".into(), json!(text)),
            Err(e) => {
                // Redaction cannot see into Base64: a file that is not UTF-8 but holds
                // text a secret is found in is served as that text, redacted.
                let bytes = e.into_bytes();
                let as_text = String::from_utf8_lossy(&bytes);
                match ctx.redactor.redact_text(&as_text) {
                    std::borrow::Cow::Owned(redacted) => {
                        content.insert("mimeType".into(), json!("text/plain"));
                        content.insert("text".into(), json!(redacted))
                    }
                    std::borrow::Cow::Borrowed(_) => content.insert(
                        "blob".into(),
                        json!(base64::engine::general_purpose::STANDARD.encode(&bytes)),
                    ),
                }
            }
        };
        Ok(Some(Outcome::Complete(vec![Value::Object(content)])))
    }
}
