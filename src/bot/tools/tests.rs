//! Tests of the tool runner: schema checks, timeouts, panics, roles and filters.

use super::*;
use crate::model::ToolSource;
use serde_json::json;

fn def(name: &str, schema: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        source: ToolSource::Native,
        description: "test".into(),
        input_schema: schema.into(),
        required_roles: vec![],
        internal: false,
        read_only: false,
    }
}

fn echo() -> Arc<dyn ToolHandler> {
    Arc::new(FnTool(|args: Value| async move { Ok(args) }))
}

#[tokio::test]
async fn schema_violations_name_the_field() {
    let runner = ToolRunner::new(Duration::from_secs(5));
    let schema = json!({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]});
    runner.register(def("echo", schema), echo()).unwrap();
    let user = ExecContext::new(&["user"]);
    let err = runner
        .call("echo", json!({"n": "five"}), &user)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("/n"), "{text}");
    let err = runner.call("echo", json!({}), &user).await.unwrap_err();
    assert!(
        err.to_string().contains("\"n\" is a required property"),
        "{err}"
    );
    assert_eq!(
        runner.call("echo", json!({"n": 5}), &user).await.unwrap(),
        json!({"n": 5})
    );
    let stats = runner.get("echo").unwrap().stats;
    assert_eq!(stats.invocations, 1, "rejected calls never ran the tool");
}

/// Registers `handler` as `name` and calls it once, expecting it to fail.
async fn failing_call(runner: &ToolRunner, name: &str, handler: Arc<dyn ToolHandler>) -> ToolError {
    runner
        .register(def(name, json!({"type":"object"})), handler)
        .unwrap();
    runner
        .call(name, json!({}), &ExecContext::new(&[]))
        .await
        .unwrap_err()
}

#[tokio::test]
async fn slow_tool_times_out_and_is_counted_as_error() {
    let runner = ToolRunner::new(Duration::from_millis(50));
    let slow = Arc::new(FnTool(|_args: Value| async move {
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok(Value::Null)
    }));
    let err = failing_call(&runner, "slow", slow).await;
    assert!(matches!(err, ToolError::Timeout { .. }));
    let stats = runner.get("slow").unwrap().stats;
    assert_eq!((stats.invocations, stats.errors), (1, 1));
}

#[tokio::test]
async fn panicking_tool_becomes_an_error() {
    let runner = ToolRunner::new(Duration::from_secs(5));
    let boom = Arc::new(FnTool(|_args: Value| async move {
        if true {
            panic!("boom");
        }
        Ok(Value::Null)
    }));
    let err = failing_call(&runner, "boom", boom).await;
    assert_eq!(err, ToolError::Panicked("boom".into()));
}

#[tokio::test]
async fn roles_and_internal_flags_filter_lists_and_calls() {
    let runner = ToolRunner::new(Duration::from_secs(5));
    let mut ops = def("ops_only", json!({"type":"object"}));
    ops.required_roles = vec!["ops".into()];
    let mut hidden = def("hidden", json!({"type":"object"}));
    hidden.internal = true;
    runner.register(ops, echo()).unwrap();
    runner.register(hidden, echo()).unwrap();
    runner
        .register(def("open", json!({"type":"object"})), echo())
        .unwrap();

    let user = ExecContext::new(&["user"]);
    let names = |defs: Vec<ToolDef>| defs.into_iter().map(|d| d.name).collect::<Vec<_>>();
    assert_eq!(names(runner.llm_tools(&user)), vec!["open"]);
    assert_eq!(
        names(runner.llm_tools(&ExecContext::new(&["ops"]))),
        vec!["open", "ops_only"]
    );
    let admin = ExecContext::new(&[ADMIN_ROLE]);
    assert_eq!(names(runner.llm_tools(&admin)), vec!["open", "ops_only"]);
    assert_eq!(runner.available_to(&admin).len(), 3);

    assert!(matches!(
        runner.call("ops_only", json!({}), &user).await,
        Err(ToolError::Forbidden { .. })
    ));
    assert!(matches!(
        runner.call("hidden", json!({}), &user).await,
        Err(ToolError::Internal(_))
    ));
    assert!(runner.call("hidden", json!({}), &admin).await.is_ok());

    runner.set_enabled("open", false);
    assert!(names(runner.llm_tools(&user)).is_empty());
    assert_eq!(
        runner.call("open", json!({}), &user).await,
        Err(ToolError::Disabled("open".into()))
    );
}

#[tokio::test]
async fn unknown_tool_suggests_close_names() {
    let runner = ToolRunner::new(Duration::from_secs(5));
    runner
        .register(def("calculator", json!({"type":"object"})), echo())
        .unwrap();
    let err = runner
        .call("calculater", json!({}), &ExecContext::new(&[]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("did you mean calculator"), "{err}");
}

/// A caller's typo is answered only with names it may know of: not with an internal
/// tool's, nor with one whose roles it lacks.
#[tokio::test]
async fn suggestions_name_only_the_callers_tools() {
    let runner = ToolRunner::new(Duration::from_secs(5));
    let mut ops = def("restart_service", json!({"type":"object"}));
    ops.required_roles = vec!["ops".into()];
    let mut hidden = def("restart_services", json!({"type":"object"}));
    hidden.internal = true;
    runner.register(ops, echo()).unwrap();
    runner.register(hidden, echo()).unwrap();
    let typo = |roles: &'static [&'static str]| {
        let runner = &runner;
        async move {
            runner
                .call("restart_servic", json!({}), &ExecContext::new(roles))
                .await
                .unwrap_err()
                .to_string()
        }
    };
    let user = typo(&["user"]).await;
    assert!(!user.contains("restart_service"), "{user}");
    let ops = typo(&["ops"]).await;
    assert!(ops.contains("did you mean restart_service?"), "{ops}");
    let admin = typo(&[ADMIN_ROLE]).await;
    assert!(
        admin.contains("restart_service") && admin.contains("restart_services"),
        "{admin}"
    );
}
