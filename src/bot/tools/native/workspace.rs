//! `list_files` and `read_file`: the workspace folder, read-only, with every path
//! the model gives kept inside it (no absolute paths, no `..`, no escaping links).

use serde_json::{Value, json};
use std::path::{Component, Path, PathBuf};

use super::{NativeTool, native};
use crate::bot::tools::FnTool;

pub(super) fn list_files(root: PathBuf) -> NativeTool {
    native(
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
    )
}

pub(super) fn read_file(root: PathBuf) -> NativeTool {
    native(
        "read_file",
        "Reads a UTF-8 text file inside the workspace folder (first 100 KB).",
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "minLength": 1}},
            "required": ["path"],
            "additionalProperties": false
        }),
        FnTool(move |args: Value| {
            let relative = args["path"].as_str().unwrap_or_default().to_string();
            off_the_runtime(root.clone(), relative, read_text)
        }),
    )
}

/// Runs blocking file work on `relative` on the blocking pool, so a slow disk never
/// stalls the async runtime.
async fn off_the_runtime(
    root: PathBuf,
    relative: String,
    work: fn(&Path, &str) -> Result<Value, String>,
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
fn read_text(root: &Path, relative: &str) -> Result<Value, String> {
    use std::io::Read;
    let cannot = |e: std::io::Error| format!("cannot read `{relative}`: {e}");
    let file = open_in_workspace(root, relative)?;
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
fn open_in_workspace(root: &Path, relative: &str) -> Result<std::fs::File, String> {
    let path = resolve_in_workspace(root, relative)?;
    let through_a_link =
        || format!("path `{relative}` leads outside the workspace (through a link)");
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
        if let (Ok(opened), Ok(root)) = (opened, root)
            && !opened.starts_with(&root)
        {
            return Err(through_a_link());
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
        let err = read_text(&root, "pipe").unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn files_are_listed_and_read() {
        let (_dir, root) = workspace_beside_a_secret();
        let listed = list_dir(&root, "notes").unwrap();
        assert_eq!(listed["entries"][0]["name"], "a.txt");
        assert_eq!(read_text(&root, "notes/a.txt").unwrap()["content"], "hello");
    }
}
