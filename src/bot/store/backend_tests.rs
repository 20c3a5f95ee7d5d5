//! Tests every store method on each backend [`test_stores`] gives: SQLite always,
//! PostgreSQL when `PORTHOLE_TEST_DATABASE_URL` names a server (which CI must give:
//! under `PORTHOLE_REQUIRE_SERVICES=1` a missing one fails the test). The same
//! assertions run on both, so the backends cannot drift apart unnoticed.

use std::time::Duration;

use serde_json::{Map, json};

use super::*;
use crate::model::{ConversationLimits, NewMessage, Role, SpanKind, SpanRecord, ToolCall};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Limits no test reaches.
const NO_LIMITS: TaskLimits = TaskLimits {
    all: usize::MAX,
    run_as_user: usize::MAX,
};

/// How `db_query` SQL names its first parameter on this backend.
fn first_placeholder(store: &Store) -> &'static str {
    if store.backend_name() == "postgres" {
        "$1"
    } else {
        "?1"
    }
}

/// Runs `check` on every test store, naming the backend when it fails.
macro_rules! on_every_backend {
    ($check:ident) => {
        for store in test_stores() {
            eprintln!("{} on {}", stringify!($check), store.backend_name());
            $check(store).await;
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_and_titles() {
    on_every_backend!(conversations_and_titles_on);
}

async fn conversations_and_titles_on(store: Store) {
    let first = store.create_conversation("first").await.unwrap();
    let second = store.create_conversation("second").await.unwrap();
    // Timestamps have millisecond precision: make "later" unambiguous.
    tokio::time::sleep(Duration::from_millis(5)).await;
    store
        .append_message(&first.id, NewMessage::text(Role::User, "hello"))
        .await
        .unwrap();
    store
        .set_conversation_title(&second.id, "renamed")
        .await
        .unwrap();
    let listed = store.list_conversations(10).await.unwrap();
    assert_eq!(listed.len(), 2);
    // `first` got a message after `second` was made, so it is the most recent.
    assert_eq!(listed[0].id, first.id);
    assert_eq!(listed[0].message_count, 1);
    let renamed = store.get_conversation(&second.id).await.unwrap().unwrap();
    assert_eq!(renamed.title.as_deref(), Some("renamed"));
    // The design documents' "simulate corrupted state" example, on a real id.
    let placeholder = first_placeholder(&store);
    store
        .run_sql(
            &format!("UPDATE conversations SET title = NULL WHERE id = {placeholder}"),
            vec![json!(second.id)],
            10,
            false,
            TIMEOUT,
        )
        .await
        .unwrap();
    let untitled = store.get_conversation(&second.id).await.unwrap().unwrap();
    assert_eq!(untitled.title, None);
    assert!(store.get_conversation("missing").await.unwrap().is_none());
    let tool_message = NewMessage {
        role: Role::Assistant,
        content: String::new(),
        tool_calls: Some(vec![ToolCall {
            id: "call-1".into(),
            name: "calculator".into(),
            arguments: json!({"expression": "1+1"}),
        }]),
        tool_call_id: None,
        name: None,
    };
    store.append_message(&first.id, tool_message).await.unwrap();
    let history = store.conversation_history(&first.id).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(
        history[1].tool_calls.as_ref().unwrap()[0].name,
        "calculator"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_created_once_per_name() {
    on_every_backend!(tasks_are_created_once_per_name_on);
}

async fn tasks_are_created_once_per_name_on(store: Store) {
    let task = store
        .create_task(
            "nightly",
            "d",
            "0 3 * * *",
            json!({"prompt": "hi"}),
            None,
            "admin",
            NO_LIMITS,
        )
        .await
        .unwrap()
        .expect("under no limit");
    assert_eq!(task.run_as, "admin");
    assert!(task.enabled);
    assert_eq!(task.action, json!({"prompt": "hi"}));
    let again = store
        .create_task(
            "nightly",
            "d",
            "0 3 * * *",
            json!({}),
            None,
            "user",
            NO_LIMITS,
        )
        .await
        .unwrap_err();
    assert!(matches!(again, StoreError::Conflict(_)), "{again}");
    assert_eq!(store.count_tasks().await.unwrap(), 1);
    assert_eq!(store.list_tasks().await.unwrap()[0].name, "nightly");
    assert_eq!(store.get_task(task.id).await.unwrap().unwrap().id, task.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_tasks_are_claimed_once_and_leases_expire() {
    on_every_backend!(due_tasks_are_claimed_once_on);
}

async fn due_tasks_are_claimed_once_on(store: Store) {
    let due = "2020-01-01T00:00:00.000Z".to_string();
    let task = store
        .create_task(
            "due",
            "",
            "* * * * *",
            json!({"prompt": "x"}),
            Some(due.clone()),
            "admin",
            NO_LIMITS,
        )
        .await
        .unwrap()
        .expect("under no limit");
    let now = now_rfc3339();
    let far = Utc::now().timestamp_millis() + 60_000;
    // Two replicas claim at once: exactly one gets the task.
    let (a, b) = tokio::join!(
        store.claim_due_tasks("replica-a", &now, far),
        store.claim_due_tasks("replica-b", &now, far)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.len() + b.len(), 1, "claimed by a: {a:?}, by b: {b:?}");
    let winner = if a.is_empty() {
        "replica-b"
    } else {
        "replica-a"
    };
    let loser = if a.is_empty() {
        "replica-a"
    } else {
        "replica-b"
    };
    assert!(
        store
            .claim_due_tasks(loser, &now, far)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!store.mark_task_running(task.id, loser, far).await.unwrap());
    assert!(
        store
            .renew_task_lease(task.id, winner, far + 1)
            .await
            .unwrap()
    );
    assert!(
        !store
            .renew_task_lease(task.id, loser, far + 1)
            .await
            .unwrap()
    );
    // Nothing is interrupted while the lease holds; once it has run out, the run is
    // marked interrupted and the same due time is claimed again, as a second attempt.
    assert_eq!(store.interrupt_expired_runs(far - 1).await.unwrap(), 0);
    assert_eq!(store.interrupt_expired_runs(far + 2).await.unwrap(), 1);
    let interrupted = store.get_task(task.id).await.unwrap().unwrap();
    assert_eq!(interrupted.status, "interrupted");
    assert!(interrupted.last_result.unwrap().contains(winner));
    let again = store.claim_due_tasks(loser, &now, far).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(store.run_attempt(task.id, &due).await.unwrap(), Some(2));
    // The replica that lost its claim cannot overwrite the run now going on.
    store
        .finish_task_run(
            task.id,
            winner,
            "ok",
            "late",
            Some("2099-01-01T00:00:00.000Z".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        store.get_task(task.id).await.unwrap().unwrap().status,
        "running"
    );
    store
        .finish_task_run(
            task.id,
            loser,
            "ok",
            "done",
            Some("2099-01-01T00:00:00.000Z".into()),
        )
        .await
        .unwrap();
    let finished = store.get_task(task.id).await.unwrap().unwrap();
    assert_eq!(finished.status, "ok");
    assert_eq!(finished.last_result.as_deref(), Some("done"));
    let ledger = store
        .run_sql(
            "SELECT due_at, replica, attempts, status FROM task_runs",
            vec![],
            10,
            true,
            TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(
        ledger.rows,
        vec![vec![json!(due), json!(loser), json!(2), json!("ok")]]
    );
    // Not due any more.
    assert!(
        store
            .claim_due_tasks(winner, &now_rfc3339(), far)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_runs_are_reset_at_start() {
    on_every_backend!(stale_runs_are_reset_on);
}

async fn stale_runs_are_reset_on(store: Store) {
    let task = store
        .create_task(
            "stale",
            "",
            "* * * * *",
            json!({"prompt": "x"}),
            None,
            "user",
            NO_LIMITS,
        )
        .await
        .unwrap()
        .expect("under no limit");
    let far = Utc::now().timestamp_millis() + 60_000;
    assert!(store.mark_task_running(task.id, "me", far).await.unwrap());
    assert_eq!(store.reset_stale_running_tasks("me").await.unwrap(), 1);
    assert_eq!(
        store.get_task(task.id).await.unwrap().unwrap().status,
        "interrupted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_settings_and_sessions() {
    on_every_backend!(memories_settings_and_sessions_on);
}

async fn memories_settings_and_sessions_on(store: Store) {
    use crate::bot::store::{Memory, MemoryScope::*};
    store.remember(User, "Colour", "blue").await.unwrap();
    store.remember(User, "Colour", "green").await.unwrap();
    store.remember(User, "100%_sure", "yes").await.unwrap();
    let memory = |key: &str, value: &str, scope: &str| Memory {
        key: key.into(),
        value: value.into(),
        scope: scope.into(),
    };
    assert_eq!(
        store.recall(&[User], "colour").await.unwrap(),
        vec![memory("Colour", "green", "user")]
    );
    // `%` and `_` are literal, not wildcards.
    assert_eq!(store.recall(&[User], "0%_").await.unwrap().len(), 1);
    assert_eq!(store.recall(&[User], "").await.unwrap().len(), 2);
    // An admin's memory under the same key is another memory: a user's turn neither
    // finds nor overwrites it; reading both scopes finds both.
    store.remember(Admin, "Colour", "red").await.unwrap();
    store.remember(User, "Colour", "grey").await.unwrap();
    assert_eq!(
        store.recall(&[User], "colour").await.unwrap(),
        vec![memory("Colour", "grey", "user")]
    );
    let mut both = store.recall(&[Admin, User], "colour").await.unwrap();
    both.sort_by(|a, b| a.scope.cmp(&b.scope));
    assert_eq!(
        both,
        vec![
            memory("Colour", "red", "admin"),
            memory("Colour", "grey", "user")
        ]
    );

    store.save_tool_enabled("calculator", false).await.unwrap();
    store.save_tool_enabled("calculator", true).await.unwrap();
    store.save_tool_enabled("clock", false).await.unwrap();
    assert_eq!(
        store.tool_settings().await.unwrap(),
        vec![
            ("calculator".to_string(), true),
            ("clock".to_string(), false)
        ]
    );

    store
        .save_mcp_server_enabled("github", false)
        .await
        .unwrap();
    store.save_mcp_server_enabled("github", true).await.unwrap();
    store.save_mcp_server_enabled("files", false).await.unwrap();
    assert_eq!(
        store.mcp_server_settings().await.unwrap(),
        vec![("files".to_string(), false), ("github".to_string(), true)]
    );
    assert_eq!(
        store.tool_settings().await.unwrap().len(),
        2,
        "apart from the tools"
    );

    let ended = |id: &str, minted_ms| (id.to_string(), minted_ms);
    store
        .record_ended_sessions(&[ended("old", 10), ended("new", 1000)])
        .await
        .unwrap();
    store
        .record_ended_sessions(&[ended("new", 1000)])
        .await
        .unwrap();
    assert_eq!(
        store.ended_sessions(500).await.unwrap(),
        vec!["new".to_string()]
    );
    // What a running ledger prunes as sessions end: ids past their age go.
    store
        .record_ended_sessions(&[ended("newer", 3000)])
        .await
        .unwrap();
    store.prune_ended_sessions(2000).await.unwrap();
    assert_eq!(
        store.ended_sessions(0).await.unwrap(),
        vec!["newer".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_events_keep_the_newest_and_their_replica() {
    on_every_backend!(log_events_on);
}

async fn log_events_on(store: Store) {
    let events = (0..5)
        .map(|i| {
            let level = if i % 2 == 0 { "warn" } else { "error" };
            (
                i as i64 * 10,
                level.to_string(),
                format!("{{\"message\":\"Event {i}\"}}"),
            )
        })
        .collect();
    store
        .append_log_events(events, "replica-1", 4)
        .await
        .unwrap();
    let all = store.log_events(vec![], None, None, 100).await.unwrap();
    assert_eq!(all.len(), 4, "the oldest beyond `keep` are gone");
    assert_eq!(all[0].0, "{\"message\":\"Event 4\"}");
    assert_eq!(all[0].1.as_deref(), Some("replica-1"));
    let errors = store
        .log_events(vec!["error".into()], None, None, 100)
        .await
        .unwrap();
    assert_eq!(errors.len(), 2);
    let found = store
        .log_events(vec![], Some(15), Some("event 3".into()), 100)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "case-insensitive contains, after a time");
}

pub(super) fn span(trace: &str, id: &str, root: &str, kind: SpanKind, start_us: i64) -> SpanRecord {
    SpanRecord {
        trace_id: trace.into(),
        span_id: id.into(),
        parent_span_id: (id != root).then(|| root.to_string()),
        is_root: id == root,
        root_span_id: root.into(),
        kind,
        name: id.to_string().into(),
        source: (id == root).then_some("web".into()),
        conversation_id: Some("c1".into()),
        start_us,
        duration_us: 100,
        error: None,
        model: (kind == SpanKind::Llm).then(|| "gpt".to_string()),
        tool: None,
        input_tokens: (kind == SpanKind::Llm).then_some(7),
        output_tokens: (kind == SpanKind::Llm).then_some(3),
        attributes: Map::from_iter([("request".to_string(), json!({"n": 1}))]),
        mcp_request: None,
    }
}

/// `span` failed.
fn failed(mut span: SpanRecord) -> SpanRecord {
    span.error = Some("boom".into());
    span
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_stored_listed_and_pruned() {
    on_every_backend!(traces_on);
}

async fn traces_on(store: Store) {
    let failing_tool = failed(span("t1", "s-tool", "r1", SpanKind::Tool, 1_300));
    store
        .append_spans(
            vec![
                span("t1", "r1", "r1", SpanKind::Turn, 1_000),
                span("t1", "s-llm", "r1", SpanKind::Llm, 1_100),
                failing_tool,
                span("t2", "r2", "r2", SpanKind::Turn, 2_000),
                span("t2", "s-llm2", "r2", SpanKind::Llm, 2_100),
            ],
            Prune::default(),
        )
        .await
        .unwrap();
    let page = store
        .list_traces(SpanQuery {
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].root.span_id, "r2");
    let next = store
        .list_traces(SpanQuery {
            limit: 5,
            after: page.next.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let first = &next.items[0];
    assert_eq!(first.root.span_id, "r1");
    let counts = first.counts;
    assert_eq!(
        (counts.spans, counts.llm_calls, counts.tool_calls),
        (3, 1, 1)
    );
    assert_eq!(
        (
            counts.failed_spans,
            counts.input_tokens,
            counts.output_tokens
        ),
        (1, 7, 3)
    );
    assert_eq!(first.status(), "error");
    let failed = store
        .list_traces(SpanQuery {
            status: Some("error".into()),
            limit: 5,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.items.len(), 1);
    let llm = store
        .list_spans(
            SpanKind::Llm,
            SpanQuery {
                model: Some("gpt".into()),
                limit: 5,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(llm.items.len(), 2);
    assert_eq!(llm.items[0].attributes["request"], json!({"n": 1}));
    assert_eq!(store.trace_spans("t1").await.unwrap().len(), 3);
    assert_eq!(
        store.span("s-llm").await.unwrap().unwrap().input_tokens,
        Some(7)
    );
    assert_eq!(store.step_spans_since(0).await.unwrap().len(), 3);
    assert_eq!(
        store.last_failed_span().await.unwrap().unwrap().span_id,
        "s-tool"
    );
    // Keep one trace: the older turn goes, spans and all.
    store
        .append_spans(
            vec![],
            Prune {
                keep_turns: Some(1),
                keep_mcp_calls: None,
                before_us: Some(0),
            },
        )
        .await
        .unwrap();
    assert!(store.trace_spans("t1").await.unwrap().is_empty());
    assert_eq!(store.trace_spans("t2").await.unwrap().len(), 2);
}

/// The trace of one `/mcp` tool call: a root tool span of source `mcp`.
fn mcp_call(trace: &str, start_us: i64, error: Option<&str>) -> SpanRecord {
    let mut call = span(trace, trace, trace, SpanKind::Tool, start_us);
    call.source = Some(crate::model::MCP_CALL_SOURCE.into());
    call.tool = Some("db_query".into());
    call.conversation_id = None;
    call.error = error.map(String::from);
    call
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_calls_are_kept_listed_and_pruned_apart_from_turns() {
    on_every_backend!(mcp_calls_on);
}

async fn mcp_calls_on(store: Store) {
    let turns = vec![
        span("t1", "r1", "r1", SpanKind::Turn, 1_000),
        failed(span("t1", "s-tool", "r1", SpanKind::Tool, 1_300)),
        span("t2", "r2", "r2", SpanKind::Turn, 2_000),
    ];
    store.append_spans(turns, Prune::default()).await.unwrap();
    let calls = vec![
        mcp_call("m1", 1_500, None),
        mcp_call("m2", 2_500, None),
        mcp_call("m3", 3_000, Some("no such table: nope")),
    ];
    store.append_spans(calls, Prune::default()).await.unwrap();
    let listed = |source: Option<&str>| {
        let query = SpanQuery {
            source: source.map(String::from),
            limit: 10,
            ..Default::default()
        };
        let store = store.clone();
        async move {
            let page = store.list_traces(query).await.unwrap();
            let roots = page.items.iter().map(|t| t.root.span_id.clone());
            roots.collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(None).await, ["r2", "r1"], "turns by default");
    assert_eq!(listed(Some("mcp")).await, ["m3", "m2", "m1"]);
    assert_eq!(
        store.last_failed_span().await.unwrap().unwrap().span_id,
        "s-tool",
        "a failed MCP call is its caller's mistake, not the bot's failure"
    );
    assert_eq!(
        store.step_spans_since(0).await.unwrap().len(),
        1,
        "the statistics count the bot's own tool calls"
    );
    let prune = |keep_turns, keep_mcp_calls| Prune {
        keep_turns,
        keep_mcp_calls,
        before_us: None,
    };
    store
        .append_spans(vec![], prune(None, Some(1)))
        .await
        .unwrap();
    assert_eq!(listed(Some("mcp")).await, ["m3"]);
    assert_eq!(listed(None).await, ["r2", "r1"], "no turn went");
    store
        .append_spans(vec![], prune(Some(1), None))
        .await
        .unwrap();
    assert_eq!(listed(None).await, ["r2"]);
    assert_eq!(listed(Some("mcp")).await, ["m3"], "no MCP call went");
}

/// `list_traces`' `client` and `caller_id` find the calls a client's ids name, on both
/// backends (PostgreSQL's JSONB text spaces its members), with `LIKE`'s wildcards and
/// quotes in a value matched as text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_found_by_what_the_caller_said() {
    on_every_backend!(callers_on);
}

async fn callers_on(store: Store) {
    let tagged = |trace: &str, start_us, client: &str, id: &str| {
        let mut call = mcp_call(trace, start_us, None);
        call.attributes
            .insert("mcp.client.name".into(), client.into());
        call.attributes
            .insert("claudecode/toolUseId".into(), id.into());
        call
    };
    let calls = vec![
        tagged("m1", 1_000, "claude-code", "toolu_1"),
        tagged("m2", 2_000, "claude-code", "toolu_%\"2"),
        tagged("m3", 3_000, "Visual Studio Code", "toolu_3"),
        span("t1", "r1", "r1", SpanKind::Turn, 4_000),
    ];
    store.append_spans(calls, Prune::default()).await.unwrap();
    let listed = |client: Option<&str>, caller_id: Option<&str>| {
        let query = SpanQuery {
            client: client.map(String::from),
            caller_id: caller_id.map(String::from),
            limit: 10,
            ..Default::default()
        };
        let store = store.clone();
        async move {
            let page = store.list_traces(query).await.unwrap();
            let roots = page.items.iter().map(|t| t.root.span_id.clone());
            roots.collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(Some("claude-code"), None).await, ["m2", "m1"]);
    assert_eq!(listed(Some("Visual Studio Code"), None).await, ["m3"]);
    assert!(listed(Some("claude"), None).await.is_empty());
    assert_eq!(listed(None, Some("toolu_1")).await, ["m1"]);
    assert_eq!(listed(None, Some("toolu_%\"2")).await, ["m2"]);
    assert!(listed(None, Some("toolu_%")).await.is_empty());
    assert!(listed(None, Some("toolu__")).await.is_empty());
    assert_eq!(listed(Some("claude-code"), Some("toolu_1")).await, ["m1"]);
}

/// A turn's spans may reach the store in several batches: children before their root
/// (the batch closed while the turn went on) and after it (a cancelled child). Each part
/// is merged into the turn's one row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_stored_in_parts_is_one_turn() {
    on_every_backend!(turn_in_parts_on);
}

async fn turn_in_parts_on(store: Store) {
    let mut failing = span("t1", "tool", "r1", SpanKind::Tool, 1_200);
    failing.error = Some("boom".into());
    let mut root = span("t1", "r1", "r1", SpanKind::Turn, 1_000);
    root.duration_us = 900;
    let mut late = span("t1", "late", "r1", SpanKind::Llm, 1_800);
    late.error = Some("cancelled".into());
    for part in [
        vec![span("t1", "llm", "r1", SpanKind::Llm, 1_100), failing],
        vec![root],
        vec![late],
    ] {
        store.append_spans(part, Prune::default()).await.unwrap();
        let listed = store
            .list_traces(SpanQuery {
                limit: 5,
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(listed.items.len() <= 1, "never more than one turn");
    }
    let listed = store
        .list_traces(SpanQuery {
            status: Some("error".into()),
            min_duration_us: Some(900),
            limit: 5,
            ..Default::default()
        })
        .await
        .unwrap();
    let turn = &listed.items[0];
    assert_eq!(
        (
            turn.root.span_id.as_str(),
            turn.root.start_us,
            turn.root.duration_us
        ),
        ("r1", 1_000, 900),
        "the root's own fields, though children arrived first"
    );
    let counts = turn.counts;
    assert_eq!(
        (counts.spans, counts.llm_calls, counts.failed_spans),
        (4, 2, 2)
    );
    let spans = store.trace_spans("t1").await.unwrap();
    assert_eq!(
        spans.iter().map(|s| s.span_id.as_str()).collect::<Vec<_>>(),
        ["r1", "llm", "tool", "late"]
    );
    assert_eq!(
        store.span("late").await.unwrap().unwrap().root_span_id,
        "r1"
    );
    assert_eq!(
        store.last_failed_span().await.unwrap().unwrap().span_id,
        "late"
    );
    // A turn is kept or pruned whole, however many parts it came in.
    store
        .append_spans(
            vec![span("t2", "r2", "r2", SpanKind::Turn, 5_000)],
            Prune {
                keep_turns: Some(1),
                ..Prune::default()
            },
        )
        .await
        .unwrap();
    assert!(store.trace_spans("t1").await.unwrap().is_empty());
    assert!(store.span("late").await.unwrap().is_none());
}

/// LLM calls across turns come newest first by their own start, page after page, even
/// from a long turn that started before the others and made its last call after them
/// (the listing walks turns by when their last span ended, a few at a time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_calls_across_many_turns_come_newest_first() {
    on_every_backend!(llm_calls_across_turns_on);
}

async fn llm_calls_across_turns_on(store: Store) {
    let mut spans = Vec::new();
    let mut long_root = span("long", "long-root", "long-root", SpanKind::Turn, 0);
    long_root.duration_us = 1_000_000;
    spans.push(long_root);
    let mut late_call = span("long", "long-call", "long-root", SpanKind::Llm, 999_000);
    late_call.error = Some("refused".into());
    spans.push(late_call);
    for n in 0..70_i64 {
        let trace = format!("t{n}");
        let (root, call) = (format!("r{n}"), format!("c{n:02}"));
        spans.push(span(
            &trace,
            &root,
            &root,
            SpanKind::Turn,
            1_000 + n * 1_000,
        ));
        let mut llm = span(&trace, &call, &root, SpanKind::Llm, 1_100 + n * 1_000);
        if n == 69 {
            llm.error = Some("timeout".into());
        }
        spans.push(llm);
    }
    store.append_spans(spans, Prune::default()).await.unwrap();
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_spans(
                SpanKind::Llm,
                SpanQuery {
                    limit: 7,
                    after: after.clone(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        seen.extend(page.items.iter().map(|s| (s.start_us, s.span_id.clone())));
        after = page.next;
        if after.is_none() {
            break;
        }
    }
    assert_eq!(seen.len(), 71, "every call once");
    assert_eq!(
        seen[0].1, "long-call",
        "the newest call, from the oldest turn"
    );
    assert!(
        seen.windows(2).all(|w| w[0] > w[1]),
        "newest first: {seen:?}"
    );
    let failed = store
        .list_spans(
            SpanKind::Llm,
            SpanQuery {
                status: Some("error".into()),
                since_us: Some(50_000),
                limit: 5,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let ids: Vec<&str> = failed.items.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids, ["long-call", "c69"]);
    assert_eq!(
        store.last_failed_span().await.unwrap().unwrap().span_id,
        "long-call",
        "the failure that ended last"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_set_is_stored_once_by_its_hash() {
    on_every_backend!(tool_sets_on);
}

async fn tool_sets_on(store: Store) {
    assert_eq!(store.tool_set("abc").await.unwrap(), None);
    let first = r#"[{"name":"calculator"}]"#.to_string();
    store
        .put_tool_sets(vec![
            ("abc".into(), first.clone()),
            ("def".into(), "[]".into()),
        ])
        .await
        .unwrap();
    store
        .put_tool_sets(vec![("abc".into(), "changed".into())])
        .await
        .unwrap();
    assert_eq!(store.tool_set("abc").await.unwrap(), Some(first));
    assert_eq!(store.tool_set("def").await.unwrap().as_deref(), Some("[]"));
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM trace_tool_sets").await,
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_is_described() {
    on_every_backend!(schema_on);
}

async fn schema_on(store: Store) {
    let schema = store.describe_schema().await.unwrap();
    assert_eq!(schema["schema_version"], json!(schema_version()));
    let tables: Vec<&str> = schema["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for expected in [
        "conversations",
        "messages",
        "tasks",
        "embeddings",
        "memories",
        "tool_settings",
        "mcp_server_settings",
        "log_events",
        "mcp_ended_sessions",
        "mcp_tasks",
        "trace_spans",
        "task_runs",
    ] {
        assert!(tables.contains(&expected), "{expected} in {tables:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_query_maps_types_and_runs_the_design_queries() {
    on_every_backend!(db_query_on);
}

async fn db_query_on(store: Store) {
    let c = store.create_conversation("q").await.unwrap();
    store
        .append_message(&c.id, NewMessage::text(Role::User, "hi"))
        .await
        .unwrap();
    // The design documents' spellings, unquoted, as they are written there.
    for sql in [
        "SELECT * FROM messages ORDER BY createdAt DESC LIMIT 10",
        "SELECT conversationId, createdAt FROM messages",
        "SELECT * FROM messages WHERE conversationId NOT IN (SELECT id FROM conversations)",
    ] {
        store.run_sql(sql, vec![], 10, true, TIMEOUT).await.unwrap();
    }
    let placeholder = first_placeholder(&store);
    let typed = store
        .run_sql(
            &format!("SELECT 1 AS i, 2.5 AS f, 'x' AS t, NULL AS n, content FROM messages WHERE role = {placeholder}"),
            vec![json!("user")],
            10,
            true,
            TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(typed.columns, vec!["i", "f", "t", "n", "content"]);
    assert_eq!(
        typed.rows,
        vec![vec![
            json!(1),
            json!(2.5),
            json!("x"),
            json!(null),
            json!("hi")
        ]]
    );
    let limited = store
        .run_sql(
            "SELECT id FROM messages UNION ALL SELECT id FROM messages",
            vec![],
            1,
            true,
            TIMEOUT,
        )
        .await
        .unwrap();
    assert!(limited.truncated && limited.rows.len() == 1);
    let written = store
        .run_sql("DELETE FROM messages", vec![], 10, false, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(written.rows_affected, Some(1));
    let refused = store
        .run_sql("DELETE FROM conversations", vec![], 10, true, TIMEOUT)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("read") || refused.to_string().contains("not authorized"),
        "{refused}"
    );
    assert_eq!(store.list_conversations(5).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_hidden_in_a_with_is_named() {
    on_every_backend!(hidden_write_on);
}

async fn hidden_write_on(store: Store) {
    let hidden = store
        .describe_statement(
            "WITH gone AS (DELETE FROM messages RETURNING id) SELECT count(*) FROM gone",
        )
        .await;
    match hidden {
        Ok(hidden) => {
            assert!(!hidden.read_only, "{hidden:?}");
            assert_eq!(hidden.writes, vec!["DELETE on messages".to_string()]);
        }
        // SQLite has no data-modifying WITH: the statement cannot run at all.
        Err(e) => assert_eq!(store.backend_name(), "sqlite", "{e}"),
    }
    let dropped = store
        .describe_statement("DROP TABLE memories")
        .await
        .unwrap();
    assert!(
        !dropped.read_only && !dropped.writes.is_empty(),
        "{dropped:?}"
    );
}

/// One number a query returns (counts).
async fn count(store: &Store, sql: &str) -> i64 {
    let outcome = store.run_sql(sql, vec![], 1, true, TIMEOUT).await.unwrap();
    outcome.rows[0][0].as_i64().unwrap()
}

/// The ids of the conversations left, sorted.
async fn conversation_ids(store: &Store) -> Vec<String> {
    let mut ids: Vec<String> = store
        .list_conversations(1000)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    ids.sort();
    ids
}

fn sorted(ids: &[&String]) -> Vec<String> {
    let mut ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    ids.sort();
    ids
}

/// `n` conversations with two messages each, each later than the one before.
async fn chats(store: &Store, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let c = store
            .create_conversation(&format!("chat {i}"))
            .await
            .unwrap();
        for role in [Role::User, Role::Assistant] {
            store
                .append_message(&c.id, NewMessage::text(role, format!("{i}")))
                .await
                .unwrap();
        }
        ids.push(c.id);
        // Timestamps have millisecond precision: make "later" unambiguous.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    ids
}

const ORPHAN_MESSAGES: &str =
    "SELECT COUNT(*) FROM messages WHERE conversation_id NOT IN (SELECT id FROM conversations)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_beyond_the_count_go_with_their_messages() {
    on_every_backend!(prune_by_count_on);
}

async fn prune_by_count_on(store: Store) {
    let ids = chats(&store, 5).await;
    // A message makes the oldest conversation the most recently active one.
    store
        .append_message(&ids[0], NewMessage::text(Role::User, "back again"))
        .await
        .unwrap();
    assert_eq!(
        store
            .prune_conversations(ConversationLimits::default())
            .await
            .unwrap(),
        0,
        "no limit set: nothing goes"
    );
    assert_eq!(conversation_ids(&store).await.len(), 5);

    let three = ConversationLimits {
        max_count: Some(3),
        max_age: None,
    };
    assert_eq!(store.prune_conversations(three).await.unwrap(), 2);
    assert_eq!(
        conversation_ids(&store).await,
        sorted(&[&ids[0], &ids[3], &ids[4]]),
        "the newest three by last activity stay"
    );
    assert_eq!(count(&store, "SELECT COUNT(*) FROM messages").await, 7);
    assert_eq!(count(&store, ORPHAN_MESSAGES).await, 0);
    assert_eq!(
        store.prune_conversations(three).await.unwrap(),
        0,
        "within the limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_idle_too_long_go_with_their_messages() {
    on_every_backend!(prune_by_age_on);
}

async fn prune_by_age_on(store: Store) {
    let ids = chats(&store, 3).await;
    for old in [&ids[0], &ids[1]] {
        store
            .run_sql(
                &format!(
                    "UPDATE conversations SET updated_at = '2000-01-01T00:00:00.000Z' WHERE id = '{old}'"
                ),
                vec![],
                1,
                false,
                TIMEOUT,
            )
            .await
            .unwrap();
    }
    let a_day = ConversationLimits {
        max_count: None,
        max_age: Some(Duration::from_secs(24 * 3600)),
    };
    assert_eq!(store.prune_conversations(a_day).await.unwrap(), 2);
    assert_eq!(conversation_ids(&store).await, vec![ids[2].clone()]);
    assert_eq!(count(&store, "SELECT COUNT(*) FROM messages").await, 2);
    assert_eq!(count(&store, ORPHAN_MESSAGES).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_conversation_is_never_pruned() {
    on_every_backend!(held_conversation_on);
}

async fn held_conversation_on(store: Store) {
    let ids = chats(&store, 3).await;
    let only_one = ConversationLimits {
        max_count: Some(1),
        max_age: Some(Duration::from_secs(60)),
    };
    // The oldest, and idle too long as well: a turn holds it all the same.
    store
        .run_sql(
            &format!(
                "UPDATE conversations SET updated_at = '2000-01-01T00:00:00.000Z' WHERE id = '{}'",
                ids[0]
            ),
            vec![],
            1,
            false,
            TIMEOUT,
        )
        .await
        .unwrap();
    let held = store.hold_conversation(&ids[0]).await;
    let second_turn = store.hold_conversation(&ids[0]).await;
    let (new, new_held) = store
        .create_held_conversation("new turn", false)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let newest = chats(&store, 1).await;
    assert_eq!(store.prune_conversations(only_one).await.unwrap(), 2);
    assert_eq!(
        conversation_ids(&store).await,
        sorted(&[&ids[0], &new.id, &newest[0]]),
        "held conversations stay beyond both limits"
    );
    drop(held);
    drop(new_held);
    assert_eq!(store.prune_conversations(only_one).await.unwrap(), 1);
    assert!(
        store.get_conversation(&ids[0]).await.unwrap().is_some(),
        "another turn still holds it"
    );
    drop(second_turn);
    assert_eq!(store.prune_conversations(only_one).await.unwrap(), 1);
    assert_eq!(conversation_ids(&store).await, vec![newest[0].clone()]);
    assert_eq!(count(&store, ORPHAN_MESSAGES).await, 0);
}

/// Rows of large values stop at the answer's byte budget, long before the row limit:
/// memory holds a few MiB, not the thousand rows' hundreds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_rows_stop_at_the_byte_budget() {
    on_every_backend!(large_rows_stop_at_the_byte_budget_on);
}

async fn large_rows_stop_at_the_byte_budget_on(store: Store) {
    // 200 rows of a million characters each.
    let sql = if store.backend_name() == "postgres" {
        "SELECT repeat('x', 1000000) FROM generate_series(1, 200)"
    } else {
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) \
         SELECT hex(zeroblob(500000)) FROM n"
    };
    for read_only in [true, false] {
        let outcome = store
            .run_sql(sql, vec![], 1000, read_only, TIMEOUT)
            .await
            .unwrap();
        let bytes = console::MAX_ROW_BYTES;
        assert!(outcome.truncated, "read_only {read_only}");
        assert!(
            (1..=bytes / 1_000_000 + 1).contains(&outcome.rows.len()),
            "read_only {read_only}: {} rows",
            outcome.rows.len()
        );
    }
    // One row larger than the whole budget is not turned into JSON at all.
    let one_large_row = if store.backend_name() == "postgres" {
        "SELECT repeat('x', 3000000)"
    } else {
        "SELECT hex(zeroblob(1500000))"
    };
    let outcome = store
        .run_sql(one_large_row, vec![], 10, true, TIMEOUT)
        .await
        .unwrap();
    assert!(outcome.truncated && outcome.rows.is_empty(), "{outcome:?}");
}

/// Two replicas sharing the database create one caller's tasks at the same moment: the
/// limit of unfinished tasks holds across them (counted and written as one step, alone
/// among that caller's writers), on a SQLite file two stores open and on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_creating_tasks_at_once_keep_to_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shared.db").display().to_string();
    let mut replicas = vec![(Store::open(&file).unwrap(), Store::open(&file).unwrap())];
    if let Some(url) = crate::test_support::test_database_url() {
        let shared = postgres::fresh_schema_url(&url);
        replicas.push((Store::open(&shared).unwrap(), Store::open(&shared).unwrap()));
    }
    for (a, b) in replicas {
        let row = |n: usize| StoredTaskRow {
            id: format!("task-{n}"),
            owner: "caller".into(),
            session: None,
            finished: false,
            created_ms: 1,
            expires_ms: i64::MAX,
            record: "{}".into(),
            owner_replica: if n.is_multiple_of(2) { "a" } else { "b" }.into(),
            lease_until_ms: i64::MAX,
        };
        let created = futures::future::join_all((0..24usize).map(|n| {
            let store = if n.is_multiple_of(2) {
                a.clone()
            } else {
                b.clone()
            };
            async move { store.put_new_mcp_task(row(n), 3).await.unwrap() }
        }))
        .await;
        let name = a.backend_name();
        assert_eq!(created.iter().filter(|c| **c).count(), 3, "{name}");
        assert_eq!(
            a.count_unfinished_mcp_tasks("caller").await.unwrap(),
            3,
            "{name}"
        );
        // Another caller has a limit of its own.
        let mut other = row(99);
        other.owner = "another".into();
        assert!(b.put_new_mcp_task(other, 3).await.unwrap(), "{name}");

        // Scheduled tasks: at most 2 that run as a chat user, 3 in all.
        let limits = TaskLimits {
            all: 3,
            run_as_user: 2,
        };
        let create = |n: usize, run_as: &'static str| {
            let store = if n.is_multiple_of(2) {
                a.clone()
            } else {
                b.clone()
            };
            async move {
                let name = format!("{run_as}-{n}");
                let created = store
                    .create_task(&name, "", "0 3 * * *", json!({}), None, run_as, limits)
                    .await;
                created.unwrap().is_some()
            }
        };
        let users = futures::future::join_all((0..12).map(|n| create(n, "user"))).await;
        assert_eq!(users.iter().filter(|c| **c).count(), 2, "{name}");
        let admins = futures::future::join_all((0..12).map(|n| create(n, "admin"))).await;
        assert_eq!(admins.iter().filter(|c| **c).count(), 1, "{name}");
        assert_eq!(a.count_tasks().await.unwrap(), 3, "{name}");
    }
}
