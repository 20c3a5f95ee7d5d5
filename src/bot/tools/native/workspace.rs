//! `list_files` and `read_file`: the workspace folder, read-only, with every path
//! the model gives kept inside it (no absolute paths, no `..`, no escaping links), and
//! the bot's own files never read even when the workspace holds them.

use serde_json::{Value, json};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::{NativeTool, native, read_only};
use crate::bot::tools::FnTool;

/// The bot's own files, which `read_file` refuses wherever the workspace is: a chat
/// user's turn may call it, and a workspace set to the bot's own folder
/// (`WORKSPACE_DIR=.`) would hand the model `.env` (the `/mcp` token among its values),
/// `mcp.json` (servers' credentials), the user tools' manifests (their `env`) and the
/// database files.
#[derive(Debug, Default, Clone)]
pub struct PrivateFiles {
    /// Files, each as its folder (canonical) and its name: the name need not exist yet.
    files: Vec<(PathBuf, std::ffi::OsString)>,
    /// Folders whose whole content is the bot's own (canonical).
    folders: Vec<PathBuf>,
}

impl PrivateFiles {
    /// The files at `files` (with, for each database file, the `-wal`, `-shm` and
    /// `-journal` files SQLite keeps beside it) and everything under `folders`.
    pub fn new(files: &[&Path], databases: &[&Path], folders: &[&Path]) -> PrivateFiles {
        let mut private = PrivateFiles::default();
        let mut add = |path: &Path, suffix: &str| {
            let mut named = path.as_os_str().to_owned();
            named.push(suffix);
            let named = PathBuf::from(named);
            // The file as configured, and (when it is a link) the file it leads to.
            for path in std::iter::once(named.clone()).chain(named.canonicalize()) {
                let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                    continue;
                };
                let parent = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
                if let Ok(parent) = parent.canonicalize() {
                    private.files.push((parent, name.to_os_string()));
                }
            }
        };
        for file in files {
            add(file, "");
        }
        for database in databases {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                add(database, suffix);
            }
        }
        // A folder made later is known by where it will be.
        private.folders = folders
            .iter()
            .filter_map(|f| f.canonicalize().or_else(|_| std::path::absolute(f)).ok())
            .collect();
        private
    }

    /// Whether `path` (canonical) is one of them, or an `.env` file of any folder.
    fn holds(&self, path: &Path) -> bool {
        let name = path.file_name().unwrap_or_default();
        let env_file = name.to_str().is_some_and(|name| {
            (name == ".env" || name.starts_with(".env.")) && name != ".env.example"
        });
        env_file
            || self.folders.iter().any(|folder| path.starts_with(folder))
            || self
                .files
                .iter()
                .any(|(folder, file)| path.parent() == Some(folder.as_path()) && name == file)
    }
}

pub(super) fn list_files(root: PathBuf) -> NativeTool {
    read_only(native(
        "list_files",
        "Lists files and folders inside the workspace folder. Paths are relative to the workspace.",
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Folder relative to the workspace; default the workspace itself"}},
            "additionalProperties": false
        }),
        FnTool(move |args: Value| {
            let relative = args["path"].as_str().unwrap_or(".").to_string();
            off_the_runtime(root.clone(), relative, list_dir)
        }),
    ))
}

pub(super) fn read_file(root: PathBuf, private: PrivateFiles) -> NativeTool {
    let private = Arc::new(private);
    read_only(native(
        "read_file",
        "Reads a UTF-8 text file inside the workspace folder (first 100 KB). The bot's own settings, credentials and database files are never read.",
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "minLength": 1}},
            "required": ["path"],
            "additionalProperties": false
        }),
        FnTool(move |args: Value| {
            let relative = args["path"].as_str().unwrap_or_default().to_string();
            let private = Arc::clone(&private);
            off_the_runtime(root.clone(), relative, move |root, relative| {
                read_text(root, relative, &private)
            })
        }),
    ))
}

/// Runs blocking file work on `relative` on the blocking pool, so a slow disk never
/// stalls the async runtime.
async fn off_the_runtime(
    root: PathBuf,
    relative: String,
    work: impl FnOnce(&Path, &str) -> Result<Value, String> + Send + 'static,
) -> Result<Value, String> {
    tokio::task::spawn_blocking(move || work(&root, &relative))
        .await
        .map_err(|e| e.to_string())?
}

/// Resolves a caller-supplied relative path inside `root`, refusing anything that
/// could escape it: absolute paths, `..`, and symlinks pointing outside.
pub fn resolve_in_workspace(root: &Path, relative: &str) -> Result<PathBuf, String> {
    let candidate = Path::new(relative);
    if candidate.is_absolute()
        || candidate
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return Err(format!(
            "path `{relative}` is outside the workspace; give a path relative to the workspace without `..`"
        ));
    }
    let root = root.canonicalize().map_err(|e| {
        format!(
            "the workspace folder {} is not available: {e}",
            root.display()
        )
    })?;
    let full = root
        .join(candidate)
        .canonicalize()
        .map_err(|_| format!("`{relative}` does not exist in the workspace"))?;
    if !full.starts_with(&root) {
        return Err(format!(
            "path `{relative}` leads outside the workspace (through a link)"
        ));
    }
    Ok(full)
}

fn list_dir(root: &Path, relative: &str) -> Result<Value, String> {
    let dir = resolve_in_workspace(root, relative)?;
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| format!("cannot list `{relative}`: {e}"))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let meta = entry.metadata().map_err(|e| e.to_string())?;
        entries.push(json!({
            "name": entry.file_name().to_string_lossy(),
            "kind": if meta.is_dir() { "dir" } else { "file" },
            "size": meta.len(),
        }));
    }
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(json!({"path": relative, "entries": entries}))
}

const READ_LIMIT: usize = 100 * 1024;

/// Reads at most [`READ_LIMIT`] bytes: a huge file costs no more memory than a small one.
fn read_text(root: &Path, relative: &str, private: &PrivateFiles) -> Result<Value, String> {
    use std::io::Read;
    let cannot = |e: std::io::Error| format!("cannot read `{relative}`: {e}");
    let file = open_in_workspace(root, relative, private)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(format!(
            "`{relative}` is not a regular file; list_files shows what the workspace holds"
        ));
    }
    let mut bytes = Vec::with_capacity(READ_LIMIT.min(meta.len() as usize));
    file.take(READ_LIMIT as u64)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    let size = meta.len().max(bytes.len() as u64);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(
        json!({"path": relative, "content": text, "bytes": size, "truncated": size > bytes.len() as u64}),
    )
}

/// Opens the file `relative` names in the workspace for reading. The path is checked
/// first ([`resolve_in_workspace`]), and the file opened is checked again, since a
/// folder on the way may have become a link meanwhile: on Linux, where the open file
/// really lies must be inside the workspace. The last part of the path may not be a
/// link, and a named pipe opens without waiting for a writer (and is then refused as
/// not a regular file).
fn open_in_workspace(
    root: &Path,
    relative: &str,
    private: &PrivateFiles,
) -> Result<std::fs::File, String> {
    let path = resolve_in_workspace(root, relative)?;
    let through_a_link =
        || format!("path `{relative}` leads outside the workspace (through a link)");
    let refuse_private = |path: &Path| {
        if private.holds(path) {
            return Err(format!(
                "`{relative}` is one of the bot's own files (its settings, credentials or database); the file tools do not read it"
            ));
        }
        Ok(())
    };
    refuse_private(&path)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NOFOLLOW | libc::O_NONBLOCK,
    );
    let file = options.open(&path).map_err(|e| {
        if is_a_link(&e) {
            through_a_link()
        } else {
            format!("cannot read `{relative}`: {e}")
        }
    })?;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let opened = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let root = root.canonicalize();
        if let (Ok(opened), Ok(root)) = (opened, root) {
            if !opened.starts_with(&root) {
                return Err(through_a_link());
            }
            refuse_private(&opened)?;
        }
    }
    Ok(file)
}

/// Whether opening failed because the path's last part is a link (`O_NOFOLLOW`).
#[cfg(unix)]
fn is_a_link(error: &std::io::Error) -> bool {
    error.raw_os_error() == Some(libc::ELOOP)
}

#[cfg(not(unix))]
fn is_a_link(_: &std::io::Error) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace `ws` holding `notes/a.txt`, beside a `secret.txt` outside it.
    fn workspace_beside_a_secret() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("notes")).unwrap();
        std::fs::write(root.join("notes/a.txt"), "hello").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "nope").unwrap();
        (dir, root)
    }

    #[test]
    fn workspace_paths_cannot_escape() {
        let (dir, root) = workspace_beside_a_secret();
        assert!(resolve_in_workspace(&root, "notes/a.txt").is_ok());
        for bad in ["../secret.txt", "notes/../../secret.txt", "/etc/passwd"] {
            let err = resolve_in_workspace(&root, bad).unwrap_err();
            assert!(err.contains("outside the workspace"), "{bad}: {err}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link")).unwrap();
            let err = resolve_in_workspace(&root, "link").unwrap_err();
            assert!(err.contains("through a link"), "{err}");
        }
    }

    /// A named pipe is refused at once, not waited on for a writer that never comes.
    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_refused_without_waiting() {
        let (_dir, root) = workspace_beside_a_secret();
        let fifo = std::ffi::CString::new(root.join("pipe").to_str().unwrap()).unwrap();
        // SAFETY: makes a FIFO at a path of our own temporary folder.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let err = read_text(&root, "pipe", &PrivateFiles::default()).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }

    /// A workspace that holds the bot's own folder does not hand out its files: `.env`
    /// files by name, the database and its companions, `mcp.json`, the user tools.
    #[test]
    fn the_bots_own_files_are_not_read_even_inside_the_workspace() {
        let (_dir, root) = workspace_beside_a_secret();
        for file in [
            ".env",
            "notes/.env.local",
            ".env.example",
            "bot.db",
            "bot.db-wal",
            "bot.traces.db",
            "mcp.json",
            "tools/weather.json",
            "notes/readme.md",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "MCP_SERVER_SECRET=abc").unwrap();
        }
        let private = PrivateFiles::new(
            &[&root.join("mcp.json")],
            &[&root.join("bot.db"), &root.join("bot.traces.db")],
            &[&root.join("tools")],
        );
        for refused in [
            ".env",
            "notes/.env.local",
            "bot.db",
            "bot.db-wal",
            "./bot.traces.db",
            "mcp.json",
            "tools/weather.json",
        ] {
            let err = read_text(&root, refused, &private).unwrap_err();
            assert!(err.contains("the bot's own files"), "{refused}: {err}");
        }
        for read in [".env.example", "notes/readme.md"] {
            let ok = read_text(&root, read, &private).unwrap();
            assert_eq!(ok["content"], "MCP_SERVER_SECRET=abc", "{read}");
        }
    }

    /// A database path that is a link names the file it leads to as well, and a private
    /// folder made after start-up is private all the same.
    #[cfg(unix)]
    #[test]
    fn a_linked_database_and_a_later_folder_stay_private() {
        let (dir, root) = workspace_beside_a_secret();
        std::fs::write(root.join("data.sqlite"), "rows").unwrap();
        let link = dir.path().join("bot.db");
        std::os::unix::fs::symlink(root.join("data.sqlite"), &link).unwrap();
        let private = PrivateFiles::new(&[], &[&link], &[&root.join("later")]);
        std::fs::create_dir_all(root.join("later")).unwrap();
        std::fs::write(root.join("later/tool.json"), "{}").unwrap();
        for refused in ["data.sqlite", "later/tool.json"] {
            let err = read_text(&root, refused, &private).unwrap_err();
            assert!(err.contains("the bot's own files"), "{refused}: {err}");
        }
    }

    #[test]
    fn files_are_listed_and_read() {
        let (_dir, root) = workspace_beside_a_secret();
        let listed = list_dir(&root, "notes").unwrap();
        assert_eq!(listed["entries"][0]["name"], "a.txt");
        let none = PrivateFiles::default();
        assert_eq!(
            read_text(&root, "notes/a.txt", &none).unwrap()["content"],
            "hello"
        );
    }
}
