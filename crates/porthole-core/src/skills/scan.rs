//! Reading a skills folder: each direct subfolder with a `SKILL.md` is a skill; its
//! files (not following symbolic links, skipping hidden names) are its manifest, each
//! with its size and SHA-256 digest. Also the cheap fingerprint the watcher compares.
//!
//! Which skill wins when two folders give the same `name` does not depend on the order
//! the file system lists them in: folders are read sorted by folder name, the first
//! keeps the name and the others are skipped with a warning.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::frontmatter;

/// Most files in one skill, and most bytes (the extension's limits).
const MAX_FILES: usize = 512;
const MAX_BYTES: u64 = 16 * 1024 * 1024;

/// One file of a skill.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillFile {
    /// Path within the skill folder, `/`-separated.
    pub relative: String,
    /// Its length in bytes.
    pub size: u64,
    /// `sha256:<64 hex>` of the raw bytes.
    pub digest: String,
}

/// One skill as served.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillEntry {
    /// The front matter's `name`: the skill path of its URIs.
    pub name: String,
    /// The skill's folder, the subfolder of the skills folder that holds its `SKILL.md`.
    pub folder: PathBuf,
    /// Every member of the `SKILL.md` front matter, `name` and `description` included.
    pub frontmatter: Map<String, Value>,
    /// Its files, `SKILL.md` included, sorted by relative path.
    pub files: Vec<SkillFile>,
}

impl SkillEntry {
    /// The front matter's `description`.
    pub fn description(&self) -> &str {
        self.frontmatter["description"].as_str().unwrap_or_default()
    }

    /// The skill's `SKILL.md`.
    pub fn source(&self) -> PathBuf {
        self.folder.join("SKILL.md")
    }
}

/// What one reading of a skills folder found.
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// The readable skills, sorted by name.
    pub skills: Vec<SkillEntry>,
    /// How many folders with a `SKILL.md` were skipped (each logged with why).
    pub skipped: usize,
}

/// Every readable skill under `dir`; problems are logged and the skill skipped. A
/// missing folder has no skills.
pub(super) fn scan(dir: &Path) -> Scan {
    let mut found = Scan::default();
    for folder in subfolders(dir) {
        if !folder.join("SKILL.md").is_file() {
            continue;
        }
        match read_skill(&folder) {
            Ok(skill) if found.skills.iter().any(|s| s.name == skill.name) => {
                found.skipped += 1;
                tracing::warn!(target: "porthole::skills", folder = %folder.display(), name = %skill.name, "skipping a skill whose name a skill in an earlier folder (by folder name) already has");
            }
            Ok(skill) => found.skills.push(skill),
            Err(reason) => {
                found.skipped += 1;
                tracing::warn!(target: "porthole::skills", folder = %folder.display(), %reason, "skipping a skill");
            }
        }
    }
    found.skills.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

fn subfolders(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut folders: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    folders.sort();
    folders
}

/// Agent Skills names: 1–64 of lowercase letters, digits and single inner hyphens.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

fn read_skill(folder: &Path) -> Result<SkillEntry, String> {
    let manifest = folder.join("SKILL.md");
    if std::fs::symlink_metadata(&manifest).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err("SKILL.md is a symbolic link; skills are read without following links".into());
    }
    let size = std::fs::metadata(&manifest).map(|m| m.len()).unwrap_or(0);
    if size > MAX_BYTES {
        return Err(format!(
            "SKILL.md is over {MAX_BYTES} bytes, the extension's limit"
        ));
    }
    let text =
        std::fs::read_to_string(&manifest).map_err(|e| format!("cannot read SKILL.md: {e}"))?;
    let frontmatter = frontmatter::parse(&text)?;
    let name = frontmatter["name"].as_str().unwrap_or_default().to_string();
    if !valid_name(&name) {
        return Err(format!(
            "`name: {name}` must be 1–64 lowercase letters, digits and single hyphens"
        ));
    }
    let mut relatives = Vec::new();
    walk(folder, "", &mut relatives)?;
    relatives.sort();
    let mut files = Vec::with_capacity(relatives.len());
    let mut total = 0u64;
    for relative in relatives {
        // Read no further than the budget allows: one huge file costs no more memory
        // than the limit, and is refused all the same.
        let bytes = read_at_most(&folder.join(&relative), MAX_BYTES - total + 1)
            .map_err(|e| format!("cannot read {relative}: {e}"))?;
        total += bytes.len() as u64;
        if total > MAX_BYTES {
            return Err(format!(
                "its files exceed {MAX_BYTES} bytes, the extension's limit"
            ));
        }
        files.push(SkillFile {
            digest: format!("sha256:{}", crate::text::hex(&Sha256::digest(&bytes))),
            size: bytes.len() as u64,
            relative,
        });
    }
    Ok(SkillEntry {
        name,
        folder: folder.to_path_buf(),
        frontmatter,
        files,
    })
}

/// The first `limit` bytes of the file at `path` (all of it when it is shorter).
fn read_at_most(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let mut bytes = Vec::with_capacity(size.min(limit) as usize);
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Collects the regular files under `dir` as `/`-separated paths after `prefix`.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().to_string();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if name.starts_with('.') || kind.is_symlink() {
            continue;
        }
        let relative = format!("{prefix}{name}");
        if kind.is_dir() {
            walk(&entry.path(), &format!("{relative}/"), out)?;
        } else if kind.is_file() {
            out.push(relative);
            if out.len() > MAX_FILES {
                return Err(format!(
                    "it has more than {MAX_FILES} files, the extension's limit"
                ));
            }
        }
    }
    Ok(())
}

/// Reads a file of a skill's manifest now. The manifest was made earlier, and a file
/// swapped for a symbolic link since (or under a folder swapped for one) must not lead
/// outside the skill: the path must resolve to itself, and the file opened must be the
/// one that path names, not a link.
pub fn read_unlinked(folder: &Path, relative: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let linked = || std::io::Error::other("it is (or lies under) a symbolic link now");
    let path = folder.canonicalize()?.join(relative);
    if path.canonicalize()? != path {
        return Err(linked());
    }
    let file = std::fs::File::open(&path)?;
    let (opened, named) = (file.metadata()?, std::fs::symlink_metadata(&path)?);
    if named.file_type().is_symlink() || (opened.dev(), opened.ino()) != (named.dev(), named.ino())
    {
        return Err(linked());
    }
    let mut bytes = Vec::with_capacity(opened.len().min(MAX_BYTES) as usize);
    file.take(MAX_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Paths, sizes and modification times of everything under `dir`: when this changes,
/// the skills may have.
pub(super) fn fingerprint(dir: &Path) -> super::Fingerprint {
    let mut seen = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() && !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                pending.push(entry.path());
            }
            seen.push((entry.path(), meta.len(), meta.modified().ok()));
        }
        if seen.len() > 100_000 {
            break;
        }
    }
    seen.sort();
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skill_folder_becomes_a_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("folder-name");
        std::fs::create_dir_all(skill.join("templates")).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: pdf\ndescription: PDFs\n---\nBody\n",
        )
        .unwrap();
        std::fs::write(skill.join("templates/a.md"), "abc").unwrap();
        std::fs::write(skill.join(".hidden"), "x").unwrap();
        std::fs::create_dir_all(dir.path().join("broken")).unwrap();
        std::fs::write(dir.path().join("broken/SKILL.md"), "no front matter").unwrap();
        let found = scan(dir.path());
        assert_eq!(found.skipped, 1);
        let skills = found.skills;
        assert_eq!(skills.len(), 1);
        let files: Vec<&str> = skills[0]
            .files
            .iter()
            .map(|f| f.relative.as_str())
            .collect();
        assert_eq!(files, ["SKILL.md", "templates/a.md"]);
        assert_eq!(
            skills[0].files[1].digest,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(skills[0].files[1].size, 3);
        assert!(!fingerprint(dir.path()).is_empty());
    }

    #[test]
    fn of_two_skills_with_one_name_the_first_folder_by_name_wins() {
        let dir = tempfile::tempdir().unwrap();
        for (folder, description) in [("b-second", "second"), ("a-first", "first")] {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
            std::fs::write(
                dir.path().join(folder).join("SKILL.md"),
                format!("---\nname: twin\ndescription: {description}\n---\n"),
            )
            .unwrap();
        }
        let found = scan(dir.path());
        assert_eq!(found.skipped, 1);
        assert_eq!(found.skills.len(), 1);
        assert_eq!(found.skills[0].description(), "first");
        assert_eq!(
            found.skills[0].source(),
            dir.path().join("a-first/SKILL.md")
        );
    }
}
