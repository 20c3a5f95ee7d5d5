//! Agent Skills on disk: one folder per skill under a skills folder (`SKILLS_DIR`), each
//! with a `SKILL.md` whose YAML front matter gives at least `name` and `description`:
//!
//! ```text
//! ---
//! name: summarise-logs
//! description: How to summarise a day of server logs
//! ---
//! (instructions…)
//! ```
//!
//! The one reader of that front matter (`frontmatter`) and of a folder (`scan`), and the
//! one live view of it, [`SkillFolder`], which the bot (`list_skills`, `/api/skills`)
//! and `/mcp` (the Skills extension) both serve from, so they never disagree about a
//! folder. A malformed skill is logged and skipped. Ground floor: this module imports
//! nothing from `bot`, `mcp` or `diagnostics`.

mod frontmatter;
mod scan;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use serde::Serialize;

pub use scan::{SkillEntry, SkillFile, read_unlinked};

type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

/// The skills of one folder, as last read.
pub struct SkillFolder {
    dir: PathBuf,
    skills: RwLock<Arc<Vec<SkillEntry>>>,
    fingerprint: Mutex<Fingerprint>,
}

/// A skill as the bot lists it: `list_skills` and `/api/skills`.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct SkillSummary {
    /// The front matter's `name`.
    pub name: String,
    /// The front matter's `description`.
    pub description: String,
    /// Where it was loaded from: the `SKILL.md` path.
    pub source: String,
}

impl SkillFolder {
    /// Reads `dir` now (a missing folder has no skills).
    pub fn load(dir: PathBuf) -> Self {
        let found = scan::scan(&dir);
        tracing::info!(
            target: "porthole::skills",
            loaded = found.skills.len(),
            skipped = found.skipped,
            "skills loaded"
        );
        let fingerprint = scan::fingerprint(&dir);
        SkillFolder {
            dir,
            skills: RwLock::new(Arc::new(found.skills)),
            fingerprint: Mutex::new(fingerprint),
        }
    }

    /// The skills folder this view reads.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The skills as last read, sorted by name.
    pub fn snapshot(&self) -> Arc<Vec<SkillEntry>> {
        self.skills
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Name, description and source of every skill, as last read.
    pub fn summaries(&self) -> Vec<SkillSummary> {
        self.snapshot()
            .iter()
            .map(|skill| SkillSummary {
                name: skill.name.clone(),
                description: skill.description().to_string(),
                source: skill.source().display().to_string(),
            })
            .collect()
    }

    /// Re-reads the folder if it changed since the last look; `true` when it did.
    pub async fn refresh(self: &Arc<Self>) -> bool {
        let folder = self.clone();
        tokio::task::spawn_blocking(move || {
            let now = scan::fingerprint(&folder.dir);
            let mut last = folder.fingerprint.lock().unwrap_or_else(|p| p.into_inner());
            if *last == now {
                return false;
            }
            *last = now;
            let skills = Arc::new(scan::scan(&folder.dir).skills);
            *folder.skills.write().unwrap_or_else(|p| p.into_inner()) = skills;
            true
        })
        .await
        .unwrap_or(false)
    }
}
