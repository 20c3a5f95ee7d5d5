//! The skills the bot loaded from `SKILLS_DIR`: `list_skills`.

use serde_json::json;

use super::typed_tool::{Answer, DiagnosticTool, NoArgs};
use super::{Diagnostics, done};
use crate::mcp::{Annotations, RequestContext, ToolSpec};

pub(super) struct ListSkills;

impl DiagnosticTool for ListSkills {
    type Args = NoArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_skills",
            "List skills",
            "The skills the bot loaded from SKILLS_DIR: name, description and source file.",
        )
        .output(
            json!({"skills": {"type": "array", "items": {"type": "object"}}, "skills_dir": {"type": "string"}}),
            &["skills"],
        )
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, _: NoArgs, _: &RequestContext) -> Answer {
        Ok(done(json!({
            "skills": d.bot.skills.summaries(),
            "skills_dir": d.bot.config.skills_dir.display().to_string(),
        })))
    }
}
