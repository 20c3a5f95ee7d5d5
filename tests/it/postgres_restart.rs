//! A PostgreSQL restart under a running bot: requests in flight may fail, with an
//! error that says to retry; the pool reconnects by itself and later requests succeed.
//! Needs `PORTHOLE_TEST_DATABASE_URL` and `PORTHOLE_TEST_PG_RESTART` (a shell command
//! that restarts the server; `.ci/run` and `scripts/replicas.sh` set both), otherwise
//! skips saying why (fails under `PORTHOLE_REQUIRE_SERVICES=1`). It holds the test server
//! alone (`common::postgres_alone`), so the restart cannot cut the other tests' work.

use crate::common;

use common::*;
use serde_json::json;

/// A PostgreSQL restart: requests in flight may fail, with an error that says to
/// retry; the pool reconnects by itself and the next requests succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_restart_fails_only_requests_in_flight() {
    let _postgres = postgres_alone().await;
    let Some(base) = test_database_url() else {
        return;
    };
    let Some(restart) = service_var(
        "PORTHOLE_TEST_PG_RESTART",
        "set it to a shell command that restarts that server (`.ci/run` and \
         `scripts/replicas.sh` do)",
    ) else {
        return;
    };
    let url = porthole::bot::store::fresh_schema_url(&base);
    let app = start_bot(&[("DATABASE_URL", &url)]).await;
    let store = app.bot.store.clone();
    store.create_conversation("before").await.unwrap();
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&restart)
        .status()
        .await
        .unwrap();
    assert!(status.success(), "the restart command failed");
    // The first request after the restart finds the pooled connections closed; the
    // pool replaces them, so it succeeds.
    let after = store.list_conversations(10).await;
    let after = match after {
        Ok(list) => list,
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("retry"), "a clear error: {text}");
            store
                .list_conversations(10)
                .await
                .expect("the retry succeeds")
        }
    };
    assert_eq!(after.len(), 1);
    let health = call_tool(&app, "list_conversations", json!({})).await;
    assert!(!is_error(&health), "{health}");
}
