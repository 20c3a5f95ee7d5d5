//! Data: `db_query` (any SQL on the bot's database), `list_conversations`,
//! `list_messages`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::trace_view::MAX_MAX_BYTES;
use super::typed_tool::{Answer, DiagnosticTool};
use super::{Diagnostics, done, failed};
use crate::bot::store::{Conversation, MessageQuery, StatementSummary, StoreError};
use crate::mcp::{
    Annotations, InputRequired, Outcome, RequestContext, RpcError, TaskSupport, ToolSpec,
    default_of, input_request,
};
use crate::model::Message;
use crate::redact::{REDACTED, is_secret_key};

pub(super) struct DbQuery;

#[derive(Deserialize, JsonSchema)]
pub(super) struct DbQueryArgs {
    /// One SQL statement
    // The design's name; `sql`, the older spelling, is renamed to it by the tool set.
    #[schemars(length(min = 1, max = 100_000), extend("x-aliases" = ["sql"]))]
    query: String,
    /// Positional parameters for ?1, ?2…
    #[serde(default)]
    #[schemars(length(max = 100), extend("items" = {"type": ["string", "number", "integer", "boolean", "null"]}))]
    params: Vec<Value>,
    /// Most rows to return
    #[serde(default = "default_of::<100>")]
    #[schemars(range(min = 1, max = 1000))]
    limit: usize,
}

impl DiagnosticTool for DbQuery {
    type Args = DbQueryArgs;

    fn spec(&self, d: &Diagnostics) -> ToolSpec {
        let (backend, placeholders) = match d.bot.store.backend_name() {
            "postgres" => ("PostgreSQL", "$1, $2…"),
            _ => ("SQLite", "?1, ?2…"),
        };
        let mode = if d.settings.db_query_readonly {
            "This bot runs it read-only (DB_QUERY_READONLY=true): only statements that read run, on a read-only \
             connection of their own."
        } else {
            "Full access: writes change the live bot's data."
        };
        ToolSpec::new(
            "db_query",
            "Run SQL",
            format!(
                "Runs one SQL statement (SELECT, INSERT, UPDATE, DELETE, DDL, PRAGMA) on the bot's {backend} database, given \
                 as `query` (tables: conversations, messages, tasks, embeddings, memories, and the bot's own bookkeeping). Use {placeholders} with \
                 `params`. Columns also answer to the design's camelCase names (createdAt, updatedAt, conversationId, \
                 lastRun, nextRun). Rows come back as arrays matching `columns`; blobs as {{\"base64\": …}}; values in columns \
                 named like secrets (password, api_key…) are redacted. {mode} Clients that support elicitation are \
                 asked to confirm a write before it runs, shown what it writes."
            ),
        )
        .output_of::<QueryResult>()
        .annotations(Annotations::DESTRUCTIVE)
        .max_result_size(MAX_MAX_BYTES)
    }

    /// Long work: a client that supports tasks gets a handle to poll.
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Optional
    }

    async fn run(&self, d: &Diagnostics, args: DbQueryArgs, ctx: &RequestContext) -> Answer {
        let sql = args.query;
        let limit = args.limit.clamp(1, 1000);
        let settings = &d.settings;
        // A write on a client that can ask its user: ask first, showing what it writes.
        // Clients that cannot ask get the full-access behaviour unchanged.
        if !settings.db_query_readonly && ctx.can_ask_client("elicitation") {
            let summary = match d.bot.store.describe_statement(&sql).await {
                Ok(summary) => summary,
                Err(e) => return Ok(failed(sql_error_text(&e, settings))),
            };
            if !summary.read_only {
                match confirm_write(ctx, &sql, &summary).await? {
                    Confirmation::Confirmed => {}
                    Confirmation::Declined => {
                        return Ok(failed(
                            "the user declined to run the statement; nothing was changed",
                        ));
                    }
                    Confirmation::Ask(input) => return Ok(Outcome::InputRequired(input)),
                }
            }
        }
        // The trace writer gathers spans for a moment before storing them: a statement
        // about traces sees every turn that has ended, as the trace tools do.
        let lowercase = sql.to_ascii_lowercase();
        if lowercase.contains("trace_spans") || lowercase.contains("trace_turns") {
            d.bot.tracer.flush().await;
        }
        let outcome = d
            .bot
            .store
            .run_sql(
                &sql,
                args.params,
                limit,
                settings.db_query_readonly,
                settings.statement_timeout,
            )
            .await;
        match outcome {
            Ok(mut o) => {
                redact_secret_columns(&o.columns, &mut o.rows);
                let cut = keep_rows_within_budget(&mut o.rows);
                Ok(done(json!(QueryResult {
                    row_count: o.rows.len(),
                    columns: o.columns,
                    rows: o.rows,
                    truncated: o.truncated || cut,
                    rows_affected: o.rows_affected,
                    last_insert_rowid: o.last_insert_rowid,
                })))
            }
            Err(e) => Ok(failed(sql_error_text(&e, settings))),
        }
    }
}

/// Keeps the first rows that fit the answer's byte budget ([`MAX_MAX_BYTES`], the size
/// `tools/list` declares); says whether later rows were left out.
fn keep_rows_within_budget(rows: &mut Vec<Vec<Value>>) -> bool {
    let mut size = 0;
    let fitting = rows
        .iter()
        .take_while(|row| {
            size += serde_json::to_string(row).map_or(0, |row| row.len()) + 1;
            size <= MAX_MAX_BYTES
        })
        .count();
    let cut = fitting < rows.len();
    rows.truncate(fitting);
    cut
}

/// Rows are arrays, so redaction by key never sees column names: a column named like a
/// secret (`password`, `api_key`) has its values replaced here.
fn redact_secret_columns(columns: &[String], rows: &mut [Vec<Value>]) {
    let secret: Vec<usize> = (0..columns.len())
        .filter(|&i| is_secret_key(&columns[i]))
        .collect();
    for row in rows {
        for &i in &secret {
            if let Some(cell) = row.get_mut(i).filter(|c| !c.is_null()) {
                *cell = json!(REDACTED);
            }
        }
    }
}

/// A store error as `db_query` reports it, with what to do about it.
fn sql_error_text(error: &StoreError, settings: &super::Settings) -> String {
    let text = match error {
        StoreError::Sqlite(e) => e.to_string(),
        StoreError::Postgres(text) => text.clone(),
        StoreError::ReadOnly(_) if settings.db_query_readonly => {
            return format!("{error} (DB_QUERY_READONLY=true)");
        }
        StoreError::ReadOnly(kind) => {
            return format!(
                "a {kind} statement is not run by db_query: it would change the session or the \
                 transaction db_query wraps each statement in, or reach outside the database"
            );
        }
        other => return format!("database error: {other}"),
    };
    let hint = if text.contains("interrupted") || text.contains("statement timeout") {
        format!(
            " (the statement ran longer than {} s and was stopped)",
            settings.statement_timeout.as_secs()
        )
    } else if !settings.db_query_readonly && text.contains("not authorized") {
        // Refused in every mode: the functions that reach outside the database.
        " (db_query never runs functions that reach outside the database, such as \
         load_extension, readfile or writefile)"
            .to_string()
    } else if text.contains("not authorized")
        || text.contains("readonly")
        || text.contains("read-only")
        || text.contains("read only")
    {
        " (DB_QUERY_READONLY=true: only statements that read are allowed)".to_string()
    } else {
        String::new()
    };
    format!("SQL error: {text}{hint}")
}

enum Confirmation {
    Confirmed,
    Declined,
    /// 2026: ask through an `input_required` result first.
    Ask(InputRequired),
}

const CONFIRM_KEY: &str = "confirm_write";

/// How much of the statement the confirmation quotes.
const SHOWN_SQL_CHARS: usize = 500;

/// The question put to the user. It leads with what the statement writes, found by
/// compiling it, so no amount of comment padding can push the write out of sight.
fn confirmation_request(sql: &str, summary: &StatementSummary) -> Value {
    let total = sql.chars().count();
    let mut shown: String = sql.chars().take(SHOWN_SQL_CHARS).collect();
    if total > SHOWN_SQL_CHARS {
        shown.push_str(&format!(
            "\n[… cut: {} more characters not shown]",
            total - SHOWN_SQL_CHARS
        ));
    }
    let writes = if summary.writes.is_empty() {
        format!("changes the database ({})", summary.kind)
    } else {
        summary.writes.join(", ")
    };
    json!({
        "mode": "form",
        "message": format!(
            "Run this {} statement on the live bot database?\nIt writes: {writes}.\n\n{shown}",
            summary.kind
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "title": "Run it", "default": false}},
            "required": ["confirm"],
        },
    })
}

fn accepted(answer: &Value) -> bool {
    answer["action"] == "accept" && answer["content"]["confirm"] == true
}

/// Asks the user to confirm a write: a server request in the legacy era, an MRTR input
/// request in the modern one. The sealed state ties the answer to this exact statement.
async fn confirm_write(
    ctx: &RequestContext,
    sql: &str,
    summary: &StatementSummary,
) -> Result<Confirmation, RpcError> {
    if !ctx.era.is_modern() {
        let answer = ctx
            .request_client(
                "elicitation/create",
                confirmation_request(sql, summary),
                "elicitation",
            )
            .await?;
        return Ok(if accepted(&answer) {
            Confirmation::Confirmed
        } else {
            Confirmation::Declined
        });
    }
    let state = ctx.request_state()?;
    match (state, ctx.input_response(CONFIRM_KEY)) {
        (Some(state), Some(answer)) if state["sql"] == sql => Ok(if accepted(answer) {
            Confirmation::Confirmed
        } else {
            Confirmation::Declined
        }),
        _ => Ok(Confirmation::Ask(InputRequired::ask(
            CONFIRM_KEY,
            input_request("elicitation/create", confirmation_request(sql, summary)),
            Some(ctx.seal_state(&json!({"sql": sql}))),
        ))),
    }
}

/// `db_query`'s answer.
#[derive(Serialize, JsonSchema)]
struct QueryResult {
    /// The result's column names.
    columns: Vec<String>,
    /// One array per row, its values in the order of `columns`: text, a number, null, or
    /// {"base64": …} for a blob.
    rows: Vec<Vec<Value>>,
    /// The rows returned.
    row_count: usize,
    /// More rows matched than `limit`, or than the answer's byte budget holds.
    truncated: bool,
    /// Rows a write changed.
    rows_affected: Option<usize>,
    /// The row id an INSERT gave (SQLite).
    last_insert_rowid: Option<i64>,
}

pub(super) struct ListConversations;

#[derive(Deserialize, JsonSchema)]
pub(super) struct LimitArgs {
    #[serde(default = "default_of::<20>")]
    #[schemars(range(min = 1, max = 500))]
    limit: usize,
}

impl DiagnosticTool for ListConversations {
    type Args = LimitArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_conversations",
            "List conversations",
            "Lists the bot's conversations, most recently active first: id, title, created/updated times, message count.",
        )
        .output_of::<Conversations>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, args: LimitArgs, _: &RequestContext) -> Answer {
        match d.bot.store.list_conversations(args.limit).await {
            Ok(conversations) => Ok(done(json!(Conversations { conversations }))),
            Err(e) => Ok(failed(format!("database error: {e}"))),
        }
    }
}

/// `list_conversations`' answer.
#[derive(Serialize, JsonSchema)]
struct Conversations {
    /// Most recently active first.
    conversations: Vec<Conversation>,
}

pub(super) struct ListMessages;

/// `list_messages`' answer.
#[derive(Serialize, JsonSchema)]
struct Messages {
    conversation: Conversation,
    /// Oldest first.
    messages: Vec<Message>,
    /// More messages follow in the direction read.
    has_more: bool,
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct ListMessagesArgs {
    /// From list_conversations
    #[schemars(length(min = 1), extend("x-aliases" = ["conversationId"]))]
    conversation_id: String,
    #[serde(default = "default_of::<50>")]
    #[schemars(range(min = 1, max = 200))]
    limit: usize,
    /// Only messages with a smaller id
    #[schemars(range(min = 1))]
    before: Option<i64>,
    /// Only messages with a larger id
    #[schemars(range(min = 0))]
    after: Option<i64>,
}

impl DiagnosticTool for ListMessages {
    type Args = ListMessagesArgs;

    fn spec(&self, _: &Diagnostics) -> ToolSpec {
        ToolSpec::new(
            "list_messages",
            "List messages",
            "A page of one conversation's messages (user, assistant, tool), oldest first. Without cursors: the newest page. \
             Page back with `before` = the first id you have, forward with `after` = the last id you have. \
             A page holds at most 4 MiB of message text (`has_more` then says more follow).",
        )
        .output_of::<Messages>()
        .annotations(Annotations::READ_ONLY)
    }

    async fn run(&self, d: &Diagnostics, args: ListMessagesArgs, _: &RequestContext) -> Answer {
        let store = &d.bot.store;
        let conversation = match store.get_conversation(&args.conversation_id).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Ok(failed(format!(
                    "no conversation with id `{}`; call list_conversations for valid ids",
                    args.conversation_id
                )));
            }
            Err(e) => return Ok(failed(format!("database error: {e}"))),
        };
        let query = MessageQuery {
            limit: args.limit.clamp(1, 200),
            before: args.before,
            after: args.after,
        };
        match store.list_messages(&conversation.id, query).await {
            Ok(page) => Ok(done(json!(Messages {
                conversation,
                messages: page.messages,
                has_more: page.has_more,
            }))),
            Err(e) => Ok(failed(format!("database error: {e}"))),
        }
    }
}
