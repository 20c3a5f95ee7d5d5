//! The environment a child process of the bot starts with (user tools, stdio MCP
//! servers): a handful of harmless variables inherited from the bot, then what the
//! child's own configuration asks for. Everything else, the bot's API keys and the
//! `/mcp` token among them, stays in the bot's process.
//!
//! A child also dies with the bot: it runs in a process group of its own and, on Linux,
//! gets SIGKILL when the bot exits, however it exits (SIGKILL and the OOM killer
//! included). So a replica that dies takes the attempt it was running along, and a rerun
//! of that due time on another replica never overlaps it. What the child itself starts
//! shares its group: a call that times out or is abandoned kills the whole group
//! ([`GroupGuard`]), grandchildren too. Only the parent-death signal stops at the child:
//! a grandchild outlives a replica killed outright unless the child ends it.

use std::collections::BTreeMap;

use tokio::process::{Child, Command};

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
    die_with_the_bot(&mut command);
    command
}

/// Its own process group (a terminal's Ctrl+C reaches the bot, which stops its children
/// itself), and on Linux the parent-death signal. The signal follows the thread that
/// started the child: the bot starts children from the runtime's worker threads, which
/// live as long as the bot.
fn die_with_the_bot(command: &mut Command) {
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let bot = std::process::id() as libc::pid_t;
        // SAFETY: runs in the child between fork and exec and calls only prctl and
        // getppid, which are async-signal-safe; it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The bot may have died before the prctl; then no signal would come.
                // (An OS error code: building a message would allocate.)
                if libc::getppid() != bot {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
}

/// Kills a child's whole process group when dropped (a call that timed out or was
/// abandoned), unless [`GroupGuard::release`]d after the child exited by itself. Made
/// before the child is waited for, so its pid still names the group when the guard acts.
pub struct GroupGuard {
    #[cfg(unix)]
    group: Option<libc::pid_t>,
}

impl GroupGuard {
    /// The guard of `child`'s group (started by [`clean_command`], so it leads one).
    pub fn of(child: &Child) -> GroupGuard {
        GroupGuard {
            #[cfg(unix)]
            group: child.id().and_then(|pid| libc::pid_t::try_from(pid).ok()),
        }
    }

    /// The child ended on its own: leave what it left behind alone.
    pub fn release(mut self) {
        #[cfg(unix)]
        {
            self.group = None;
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(group) = self.group {
            // SAFETY: only sends a signal. The group is led by our child, which is not
            // reaped before the guard is released, or still has members: its id cannot
            // name anything else.
            unsafe {
                libc::killpg(group, libc::SIGKILL);
            }
        }
    }
}
