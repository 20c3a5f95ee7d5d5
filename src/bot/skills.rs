//! Skills: one folder per skill in `SKILLS_DIR`, each with a `SKILL.md` whose front
//! matter gives its name and description:
//!
//! ```text
//! ---
//! name: summarise-logs
//! description: How to summarise a day of server logs
//! ---
//! (instructions…)
//! ```
//!
//! A malformed file is reported and skipped.

use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Where it was loaded from: the `SKILL.md` path.
    pub source: String,
}

#[derive(Debug, Default)]
pub struct SkillReport {
    pub skills: Vec<Skill>,
    pub skipped: Vec<(PathBuf, String)>,
}

/// Reads every `*/SKILL.md` under `dir`. A missing folder means no skills.
pub fn load_skills(dir: &Path) -> SkillReport {
    let mut report = SkillReport::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return report;
    };
    let mut folders: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    for folder in folders {
        let file = folder.join("SKILL.md");
        if !file.exists() {
            continue;
        }
        match std::fs::read_to_string(&file)
            .map_err(|e| e.to_string())
            .and_then(|text| parse_front_matter(&text))
        {
            Ok((name, description)) => report.skills.push(Skill {
                name,
                description,
                source: file.display().to_string(),
            }),
            Err(reason) => {
                tracing::warn!(file = %file.display(), %reason, "skipping skill");
                report.skipped.push((file, reason));
            }
        }
    }
    report
}

/// Extracts `name` and `description` from `---`-delimited front matter.
fn parse_front_matter(text: &str) -> Result<(String, String), String> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return Err("SKILL.md must start with a `---` front matter block".into());
    }
    let (mut name, mut description) = (None, None);
    let mut closed = false;
    for line in lines {
        if line.trim() == "---" {
            closed = true;
            break;
        }
        if let Some((key, value)) = line.split_once(':') {
            let value = value.trim().trim_matches(['"', '\'']).to_string();
            match key.trim() {
                "name" => name = Some(value),
                "description" => description = Some(value),
                _ => {}
            }
        }
    }
    if !closed {
        return Err("the front matter has no closing `---`".into());
    }
    match (name, description) {
        (Some(n), Some(d)) if !n.is_empty() => Ok((n, d)),
        _ => Err("the front matter needs both `name:` and `description:`".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_valid_skills_and_skips_malformed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let write = |folder: &str, text: &str| {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
            std::fs::write(dir.path().join(folder).join("SKILL.md"), text).unwrap();
        };
        write(
            "a",
            "---\nname: alpha\ndescription: \"first skill\"\n---\nbody",
        );
        write("b", "no front matter");
        write("c", "---\nname: gamma\n---\n");
        let report = load_skills(dir.path());
        assert_eq!(report.skills.len(), 1);
        assert_eq!(report.skills[0].name, "alpha");
        assert_eq!(report.skills[0].description, "first skill");
        assert_eq!(report.skipped.len(), 2);
    }
}
