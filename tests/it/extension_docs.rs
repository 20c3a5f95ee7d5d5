//! docs/tasks.md and docs/skills.md cannot drift: every curl example on them runs as
//! written (bash and curl, with docs/curl.md's set-up) against a live bot the test
//! starts, in the order the page tells the story, and the answer shown under it is
//! compared whole with what the bot sent (`tests/it/doc_examples`): a field the bot sends
//! and the page leaves out fails the test, as does a value that differs. Times and
//! random ids are compared by type only.

use crate::common;
use crate::doc_examples;
use crate::fake_llm;

use std::time::{Duration, Instant};

use common::*;
use doc_examples::*;
use fake_llm::Turn;
use serde_json::{Value, json};

/// Keys whose values change from run to run.
const VOLATILE: &[&str] = &[
    "createdAt",
    "lastUpdatedAt",
    "taskId",
    "conversation_id",
    "trace_id",
];

/// The task id the page uses in its examples (`T=…`), replaced by the live one.
const PAGE_TASK_ID: &str = "9f0c3d5e1b7a4c2e8d6f0a1b2c3d4e5f";

/// The page's examples, as many as `expected` (the walk below knows them one by one),
/// and a shell set up for them against the bot at `base`.
fn page(doc: &str, expected: usize, base: &str) -> (Shell, Vec<Example>) {
    let (setup, examples) = examples(doc);
    assert_eq!(
        examples.len(),
        expected,
        "the page's examples changed; walk them in this test"
    );
    let mut shell = Shell::new(base, TOKEN);
    shell.prelude.push_str(&setup);
    (shell, examples)
}

/// Runs `example` and compares its answer with the one shown under it (the example
/// must show one); returns the answer.
async fn check(shell: &Shell, example: &Example, problems: &mut Vec<String>) -> Value {
    let answered = answer_value(&shell.run(&example.command).await);
    compare_shown(example, &answered, problems);
    answered
}

fn compare_shown(example: &Example, answered: &Value, problems: &mut Vec<String>) {
    let shown = example
        .shown
        .as_deref()
        .unwrap_or_else(|| panic!("`{}` shows no answer", example.title()));
    for problem in whole_answer_differences(shown, answered, VOLATILE) {
        problems.push(format!("`{}`: {problem}", example.title()));
    }
}

/// Runs `example` (a `tasks/get`) until the task's status is `status`.
async fn poll_until(shell: &Shell, example: &Example, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answered = answer_value(&shell.run(&example.command).await);
        if answered["result"]["status"] == status {
            return answered;
        }
        assert!(Instant::now() < deadline, "never {status}: {answered}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Points the page's `$T` at the task `answered` started.
fn follow_task(shell: &mut Shell, answered: &Value) {
    let id = answered["result"]["taskId"]
        .as_str()
        .expect("a task handle");
    shell.prelude.push_str(&format!("\nT={id}\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tasks_md_example_answers_what_the_page_shows() {
    if !has_program("curl", "install curl (apt-get install curl)") {
        return;
    }
    let llm = fake_llm::start(vec![
        Turn::Slow(
            300,
            vec!["Three errors today: two timeouts and a full disk."],
        ),
        Turn::Hang,
        Turn::Text(vec!["hi"]),
    ])
    .await;
    let app = start_bot_on_llm(&llm.url(), &[]).await;
    let doc = include_str!("../../docs/tasks.md").replace(PAGE_TASK_ID, "$T");
    let (mut shell, examples) = page(&doc, 8, &app.url());
    let mut problems = Vec::new();

    // 2026-07-28: start, poll to the end; a second start (the model never answers)
    // is what the cancel stops.
    let started = check(&shell, &examples[0], &mut problems).await;
    follow_task(&mut shell, &started);
    let done = poll_until(&shell, &examples[1], "completed").await;
    compare_shown(&examples[1], &done, &mut problems);
    let hanging = answer_value(&shell.run(&examples[0].command).await);
    follow_task(&mut shell, &hanging);
    check(&shell, &examples[2], &mut problems).await;
    poll_until(&shell, &examples[1], "cancelled").await;

    // db_query's write waits for its confirmation, which tasks/update delivers.
    let write = check(&shell, &examples[3], &mut problems).await;
    follow_task(&mut shell, &write);
    let waiting = poll_until(&shell, &examples[4], "input_required").await;
    compare_shown(&examples[4], &waiting, &mut problems);
    check(&shell, &examples[5], &mut problems).await;
    poll_until(&shell, &examples[4], "completed").await;
    let listened = shell.run(&examples[6].command).await;
    let write_id = write["result"]["taskId"].as_str().unwrap();
    assert!(
        listened.contains("notifications/subscriptions/acknowledged")
            && listened.contains(write_id),
        "{listened}"
    );

    // 2025-11-25, in a session.
    let session = legacy_session(&app, "2025-11-25", json!({"tasks": {}})).await;
    shell.prelude.push_str(&format!(
        "\nS='Mcp-Session-Id: {session}'\nV='MCP-Protocol-Version: 2025-11-25'\n"
    ));
    check(&shell, &examples[7], &mut problems).await;
    assert!(
        problems.is_empty(),
        "docs/tasks.md differs from the live bot:\n{}",
        problems.join("\n")
    );
    app.shutdown().await;
}

/// The skill docs/skills.md shows, as files: its `SKILL.md` as the page has it, and
/// `steps/one.md`.
fn write_summarise_logs(doc: &str, skills: &std::path::Path) {
    let skill_md = fenced_blocks(doc)
        .into_iter()
        .find(|b| b.lang == "markdown")
        .expect("docs/skills.md shows its SKILL.md");
    let skill = skills.join("summarise-logs");
    std::fs::create_dir_all(skill.join("steps")).unwrap();
    std::fs::write(skill.join("SKILL.md"), skill_md.body).unwrap();
    std::fs::write(skill.join("steps/one.md"), "Step one.\n").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_skills_md_example_answers_what_the_page_shows() {
    if !has_program("curl", "install curl (apt-get install curl)") {
        return;
    }
    let doc = include_str!("../../docs/skills.md");
    let skills = tempfile::tempdir().unwrap();
    write_summarise_logs(doc, skills.path());
    let skills_dir = skills.path().display().to_string();
    let app = start_bot(&[("SKILLS_DIR", &skills_dir)]).await;
    let (shell, examples) = page(doc, 3, &app.url());
    let mut problems = Vec::new();
    for example in &examples {
        check(&shell, example, &mut problems).await;
    }
    assert!(
        problems.is_empty(),
        "docs/skills.md differs from the live bot:\n{}",
        problems.join("\n")
    );
    app.shutdown().await;
}
#[test]
fn the_whole_answer_comparison_catches_a_field_the_page_misses() {
    let answered: Value = serde_json::json!({"id": 1, "result": {"a": "abc", "b": [1, 2], "c": {"x": 1}, "t": "2026-01-01"}});
    let same = r#"{"id":1,"result":{"a":"ab…","b":[…],"c":{…},"t":"1999"}}"#;
    assert_eq!(
        whole_answer_differences(same, &answered, &["t"]),
        Vec::<String>::new()
    );
    let missing = r#"{"id":1,"result":{"a":"abc","b":[1,2],"t":"x"}}"#;
    assert_eq!(
        whole_answer_differences(missing, &answered, &["t"]).len(),
        1
    );
    let partial = r#"{"id":1,"result":{"a":"abc", …}}"#;
    assert_eq!(
        whole_answer_differences(partial, &answered, &[]),
        Vec::<String>::new()
    );
    let wrong = r#"{"id":1,"result":{"a":"abd","b":[1],"c":{"x":1},"t":1}}"#;
    assert_eq!(whole_answer_differences(wrong, &answered, &["t"]).len(), 3);
}
