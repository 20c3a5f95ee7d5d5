//! The skills the bot loaded from `SKILLS_DIR`: `list_skills`.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done};
use crate::mcp::{Annotations, RequestContext, ToolSpec};
use crate::skills::SkillSummary;

pub(super) struct ListSkills;

impl DiagnosticTool for ListSkills {
    type Args = NoArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_skills",
            "List skills",
            "The skills the bot loaded from SKILLS_DIR: name, description and source file.",
        )
        .output_of::<Skills>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        Ok(done(json!(Skills {
            skills: d.bot.skills.summaries(),
            skills_dir: d.bot.config.skills_dir.display().to_string(),
        })))
    }
}

/// `list_skills`' answer.
#[derive(Serialize, JsonSchema)]
struct Skills {
    /// By name.
    skills: Vec<SkillSummary>,
    /// The folder they were read from (`SKILLS_DIR`).
    skills_dir: String,
}
