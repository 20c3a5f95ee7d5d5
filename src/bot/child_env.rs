//! The environment a child process of the bot starts with (user tools, stdio MCP
//! servers): a handful of harmless variables inherited from the bot, then what the
//! child's own configuration asks for. Everything else, the bot's API keys and the
//! `/mcp` token among them, stays in the bot's process.

use std::collections::BTreeMap;

use tokio::process::Command;

/// Variables a child inherits from the bot: where programs and interpreters are, the
/// user, the locale, the temp folder.
const INHERITED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "SYSTEMROOT",
    "PYENV_ROOT",
    "NVM_DIR",
    "VIRTUAL_ENV",
];

/// A command for `program` whose environment is the inherited set plus `extra`.
pub fn clean_command(program: &str, extra: &BTreeMap<String, String>) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .envs(
            INHERITED_ENV
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (*k, v))),
        )
        .envs(extra);
    command
}
