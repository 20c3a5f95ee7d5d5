//! What `db_query` refuses on PostgreSQL before a statement runs, by reading its text:
//! anything but a query in read-only mode, transaction and session control, and
//! functions whose effect escapes the statement's transaction or whose SQL is built as
//! it runs (`postgres/console.rs` runs what passes, one statement, inside a transaction
//! of its own on a connection of its own). A function the statement defines in full
//! mode (`CREATE FUNCTION … EXECUTE`) runs SQL no text check can read: that takes a
//! database role without those rights (docs/security.md).

use crate::bot::store::StoreError;
use crate::bot::store::console::statement_kind;

/// Statements read-only mode runs (their first keyword).
const READING_KINDS: &[&str] = &["SELECT", "WITH", "VALUES", "TABLE", "SHOW", "EXPLAIN"];

/// Statements refused in every mode: they control the transaction the console wraps
/// the statement in, change the session, or reach outside the database.
const REFUSED_KINDS: &[&str] = &[
    "BEGIN",
    "START",
    "COMMIT",
    "END",
    "ROLLBACK",
    "ABORT",
    "SAVEPOINT",
    "RELEASE",
    "PREPARE",
    "SET",
    "RESET",
    "LISTEN",
    "UNLISTEN",
    "NOTIFY",
    "DISCARD",
    "COPY",
    "DO",
    "LOAD",
    "DECLARE",
    "FETCH",
    "MOVE",
    "CLOSE",
    "DEALLOCATE",
    "EXECUTE",
    "CHECKPOINT",
    "VACUUM",
];

/// Functions whose effect escapes any transaction (other sessions, server files, the
/// server process), refused in every mode wherever they appear in the text.
const OUTSIDE_FUNCTIONS: &[&str] = &[
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_promote",
    "pg_switch_wal",
    "pg_create_restore_point",
    "pg_log_backend_memory_contexts",
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_dir",
    "pg_stat_file",
    "pg_file_write",
    "lo_import",
    "lo_export",
    "lo_from_bytea",
    "lo_create",
    "lo_unlink",
    "pg_notify",
    "set_config",
    "pg_advisory_lock",
    "pg_advisory_lock_shared",
    "pg_try_advisory_lock",
    "pg_try_advisory_lock_shared",
];

/// Families of such functions, refused by the start of their names: every `dblink…`,
/// `pg_stat_reset…`, `pg_ls_…dir` and replication slot or origin call (not the views
/// that only report, such as `pg_replication_slots`). And the functions that run a
/// query given as text (`query_to_xml('SELECT pg_' || '…')`, `ts_stat`, `ts_rewrite`,
/// `crosstab`): the text is built when the statement runs, so no check of the
/// statement's own text can see what it calls.
const OUTSIDE_FUNCTION_PREFIXES: &[&str] = &[
    "dblink",
    "pg_stat_reset",
    "pg_ls_",
    "pg_create_",
    "pg_drop_replication_slot",
    "pg_copy_",
    "pg_replication_origin_advance",
    "pg_replication_origin_create",
    "pg_replication_origin_drop",
    "pg_replication_origin_session_",
    "pg_replication_origin_xact_",
    "pg_replication_slot_advance",
    "pg_logical_",
    "query_to_xml",
    "cursor_to_xml",
    "ts_stat",
    "ts_rewrite",
    "crosstab",
];

/// Why a statement is refused before it runs, if it is.
pub(super) fn refusal(sql: &str, read_only: bool) -> Option<StoreError> {
    let kind = statement_kind(sql);
    if REFUSED_KINDS.contains(&kind.as_str())
        || (read_only && !READING_KINDS.contains(&kind.as_str()))
    {
        return Some(StoreError::ReadOnly(if kind.is_empty() {
            "empty".into()
        } else {
            kind
        }));
    }
    // Quoting a name does not hide it: `"pg_read_file"(…)` is the same function. A
    // Unicode-escaped identifier (`U&"…"`) could spell any name, so it is refused too.
    let lowered = sql.to_ascii_lowercase();
    if lowered.contains("u&\"") || lowered.contains("u&'") {
        return Some(StoreError::Postgres(
            "Unicode-escaped identifiers or strings (U&\"…\") are not accepted by db_query; \
             write the name plainly"
                .into(),
        ));
    }
    let folded = lowered.replace('"', "");
    let named = OUTSIDE_FUNCTIONS
        .iter()
        .find(|f| contains_word(&folded, f))
        .map(|f| f.to_string());
    let prefixed = || {
        OUTSIDE_FUNCTION_PREFIXES
            .iter()
            .find(|p| contains_word_start(&folded, p))
            .map(|p| format!("{p}…"))
    };
    named.or_else(prefixed).map(|f| {
        StoreError::Postgres(format!(
            "{f} reaches outside the statement's transaction (other sessions, server files \
             or the server itself) or runs SQL given as text, which db_query cannot check, so \
             db_query does not call it"
        ))
    })
}

/// Whether `text` holds `word` not as part of a longer identifier.
fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let after = text[at + word.len()..].chars().next();
        starts_identifier(text, at) && !after.is_some_and(is_identifier_char)
    })
}

/// Whether `text` holds an identifier that starts with `prefix`.
fn contains_word_start(text: &str, prefix: &str) -> bool {
    text.match_indices(prefix)
        .any(|(at, _)| starts_identifier(text, at))
}

fn starts_identifier(text: &str, at: usize) -> bool {
    !text[..at]
        .chars()
        .next_back()
        .is_some_and(is_identifier_char)
}

fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_changes_and_escapes_are_refused_before_running() {
        for sql in [
            "SET search_path = x",
            "set statement_timeout = 0",
            "LISTEN x",
            "COPY messages TO PROGRAM 'id'",
            "DO $$ BEGIN END $$",
            "BEGIN",
            "/* hidden */ COMMIT",
            "SELECT pg_terminate_backend(1)",
            "SELECT \"pg_read_file\"('/etc/passwd')",
            "SELECT U&\"pg\\005fsleep\"(1)",
            "SELECT set_config('search_path', 'x', false)",
            "SELECT query_to_xml('SELECT pg_'||'terminate_backend(1)', true, false, '')",
            "SELECT * FROM dblink_exec('host=x', 'DROP TABLE t')",
            "SELECT pg_stat_reset_shared('bgwriter')",
            "SELECT * FROM pg_ls_waldir()",
            "SELECT pg_create_physical_replication_slot('s')",
            "SELECT pg_logical_emit_message(false, 'p', 'm')",
            "SELECT * FROM ts_stat('SELECT to_tsvector(pg_'||'terminate_backend(1)::text)')",
            "SELECT * FROM crosstab('SELECT 1')",
            "SELECT pg_replication_origin_create('o')",
        ] {
            assert!(refusal(sql, false).is_some(), "{sql}");
            assert!(refusal(sql, true).is_some(), "{sql}");
        }
        assert!(refusal("DELETE FROM messages", true).is_some());
        assert!(refusal("DELETE FROM messages", false).is_none());
        assert!(refusal("SELECT my_pg_read_file_copy FROM t", true).is_none());
        assert!(refusal("SELECT my_dblink_notes FROM t", true).is_none());
        assert!(refusal("SELECT * FROM pg_replication_slots", true).is_none());
        assert!(refusal("SELECT dblink_exec('x')", true).is_some());
        assert!(refusal("SELECT pg_stat_reset()", true).is_some());
        assert!(refusal("WITH x AS (SELECT 1) SELECT * FROM x", true).is_none());
        assert!(refusal("SELECT 'you&me'", true).is_none());
    }
}
