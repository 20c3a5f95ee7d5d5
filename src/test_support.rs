//! For tests only: what a test does when a service or program it needs is missing, and
//! how many threads the process has (tests that a burst does not take a thread each).
//!
//! Locally a test may skip then, after printing why. CI sets
//! `PORTHOLE_REQUIRE_SERVICES=1` and provides every service, so there a missing one is a
//! broken setup and the test fails with what is missing and how to provide it, instead
//! of passing without having run. The unit tests use this module from the library
//! (`crate::test_support`); the integration tests include the same file in
//! `tests/it/common`, so both follow one rule.

/// The variable that turns a missing service from a skip into a failure.
pub const REQUIRE_SERVICES: &str = "PORTHOLE_REQUIRE_SERVICES";

/// The running test's name (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string()
}

/// Says that `what` is missing and how to provide it (`how`): panics when
/// `PORTHOLE_REQUIRE_SERVICES=1`, otherwise prints the reason so the caller can skip.
pub fn service_missing(what: &str, how: &str) {
    let test = test_name();
    if std::env::var(REQUIRE_SERVICES).is_ok_and(|v| v == "1") {
        panic!("{test}: {what} is missing and {REQUIRE_SERVICES}=1 requires it; {how}");
    }
    eprintln!("{test}: skipped, {what} is missing ({how})");
}

/// Whether `program --version` runs; when it does not, [`service_missing`] says so.
pub fn has_program(program: &str, how: &str) -> bool {
    let runs = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !runs {
        service_missing(&format!("the program `{program}`"), how);
    }
    runs
}

/// Whether python3 runs (the stdio MCP fixture and several tools are Python scripts).
pub fn has_python() -> bool {
    has_program("python3", "install Python 3 (apt-get install python3)")
}

/// The value of the environment variable `name`, or `None` after [`service_missing`]
/// (an empty value counts as unset).
pub fn service_var(name: &str, how: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            service_missing(&format!("{name} (it is unset)"), how);
            None
        }
    }
}

/// The PostgreSQL server the tests may use (`PORTHOLE_TEST_DATABASE_URL`), or `None`
/// after [`service_missing`].
pub fn test_database_url() -> Option<String> {
    service_var(
        "PORTHOLE_TEST_DATABASE_URL",
        "set it to a PostgreSQL URL whose user may create schemas; \
         `.ci/run` and `scripts/replicas.sh` start a throwaway server and set it",
    )
}

/// The reference "everything" MCP server, installed by `scripts/interop.sh --install-only`.
pub const EVERYTHING_SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scripts/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
);

/// Whether node and [`EVERYTHING_SERVER`] are there; when not, [`service_missing`] says so.
pub fn has_everything_server() -> bool {
    const HOW: &str = "run scripts/interop.sh --install-only";
    if !has_program("node", HOW) {
        return false;
    }
    let installed = std::path::Path::new(EVERYTHING_SERVER).exists();
    if !installed {
        service_missing("@modelcontextprotocol/server-everything", HOW);
    }
    installed
}

/// How many threads this process has now (`Threads:` in `/proc/self/status`). Tests run
/// side by side in one process, so a test comparing two counts leaves a margin for
/// theirs.
pub fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|count| count.trim().parse().ok())
        .expect("a Threads: line in /proc/self/status")
}
