//! The session table: ids that survive restarts but not tampering, the cap, idle and
//! age limits, and the ledger of ended ids.

use super::*;
use std::time::Duration;

use futures::executor::block_on;
use serde_json::json;

/// The sealing secret of every table here (a restart keeps it, so ids survive).
const SECRET: Option<&str> = Some("0123456789abcdef0123456789abcdef");

fn config(max: usize) -> SessionConfig {
    SessionConfig {
        max_sessions: max,
        ..SessionConfig::default()
    }
}

/// Keeps ended ids in memory, as the bot's database does across processes.
#[derive(Default)]
struct KeptLedger(Mutex<Vec<String>>);

impl SessionLedger for KeptLedger {
    fn ended(&self) -> Vec<String> {
        lock(&self.0).clone()
    }
    fn record_end(&self, id: &str, _minted_ms: u64) {
        lock(&self.0).push(id.to_string());
    }
}

#[test]
fn an_ended_id_stays_ended_after_a_restart_and_no_id_outlives_its_max_age() {
    let ledger = Arc::new(KeptLedger::default());
    let with_ledger = |max_age| SessionConfig {
        max_age,
        ledger: Some(ledger.clone() as Arc<dyn SessionLedger>),
        ..config(10)
    };
    let first = Sessions::new(
        SECRET,
        with_ledger(Duration::from_secs(3600)),
        Notifier::default(),
    );
    let ended = first.create("2025-11-25", json!({}), Access::Full).unwrap();
    let kept = first.create("2025-11-25", json!({}), Access::Full).unwrap();
    assert!(first.end(&ended.id));
    std::thread::sleep(Duration::from_millis(2));
    let second = Sessions::new(
        SECRET,
        with_ledger(Duration::from_secs(3600)),
        Notifier::default(),
    );
    assert!(matches!(second.get(&ended.id), Lookup::Ended));
    assert!(matches!(second.get(&kept.id), Lookup::Found(_)));

    // Past its maximum age an id ends, live or restored.
    let strict = Sessions::new(
        SECRET,
        with_ledger(Duration::from_millis(1)),
        Notifier::default(),
    );
    let young = strict
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    assert!(matches!(strict.get(&young.id), Lookup::Ended));
    assert!(matches!(strict.get(&kept.id), Lookup::Ended));
}

/// Found by the `session_id` fuzz target: `short` sliced at byte 8, inside a
/// multi-byte character.
#[test]
fn short_cuts_at_a_character_boundary() {
    assert_eq!(short("abcdefghij"), "abcdefgh");
    assert_eq!(short("abc"), "abc");
    assert_eq!(short("ééééééééé"), "éééééééé");
    assert_eq!(short("abcdeféé"), "abcdeféé");
}

#[test]
fn an_id_minted_by_another_replica_is_restored_and_ends_there_for_good() {
    // Two processes with the same secret, started before either minted anything:
    // replicas behind a load balancer.
    let secret = Some("replica-secret-replica-secret-xx");
    let a = Sessions::new(secret, config(10), Notifier::default());
    let b = Sessions::new(secret, config(10), Notifier::default());
    let id = a
        .create("2025-11-25", json!({"elicitation": {}}), Access::Full)
        .unwrap()
        .id
        .clone();
    let Lookup::Found(restored) = b.get(&id) else {
        panic!("replica b does not know replica a's session");
    };
    assert!(restored.restored);
    assert_eq!(restored.client_capabilities, json!({"elicitation": {}}));
    // Ended on b, it stays ended on b.
    assert!(b.end(&id));
    assert!(matches!(b.get(&id), Lookup::Ended));
    // An id b minted itself and ended is not restored either.
    let own = b
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap()
        .id
        .clone();
    assert!(b.end(&own));
    assert!(matches!(b.get(&own), Lookup::Ended));
}

#[test]
fn ids_survive_a_restart_but_not_tampering_or_deletion() {
    let before = Sessions::new(SECRET, config(10), Notifier::default());
    let session = before
        .create("2025-06-18", json!({"sampling": {}}), Access::Full)
        .unwrap();
    assert!(session.id.bytes().all(|b| (0x21..=0x7e).contains(&b)));

    // A restart takes longer than the millisecond an id's mint time counts in.
    std::thread::sleep(Duration::from_millis(2));
    let after = Sessions::new(SECRET, config(10), Notifier::default());
    let Lookup::Found(restored) = after.get(&session.id) else {
        panic!("restart stranded the session");
    };
    assert_eq!(restored.version, "2025-06-18");
    assert!(restored.restored);
    assert_eq!(restored.client_capabilities, json!({"sampling": {}}));

    let mut forged = session.id.clone();
    forged.replace_range(0..1, if forged.starts_with('A') { "B" } else { "A" });
    assert!(matches!(after.get(&forged), Lookup::Unknown));
    assert!(matches!(after.get("not-a-session"), Lookup::Unknown));

    assert!(after.end(&session.id));
    assert!(matches!(after.get(&session.id), Lookup::Ended));

    let other_key = Sessions::new(
        Some("another-secret-another-secret-xx"),
        config(10),
        Notifier::default(),
    );
    assert!(matches!(other_key.get(&session.id), Lookup::Unknown));
}

#[test]
fn a_session_answers_only_to_the_token_it_was_opened_with_live_or_restored() {
    let sessions = Sessions::new(SECRET, config(10), Notifier::default());
    let read_only = sessions
        .create("2025-11-25", json!({}), Access::ReadOnly)
        .unwrap();
    // Live: found in the table without its seal checked again, and still held to its token.
    assert!(matches!(
        sessions.get_for(&read_only.id, Access::Full),
        Lookup::Unknown
    ));
    assert!(matches!(
        sessions.get_for(&read_only.id, Access::ReadOnly),
        Lookup::Found(_)
    ));

    // Restored from its id after a restart: the token it was minted for is in the id.
    std::thread::sleep(Duration::from_millis(2));
    let after = Sessions::new(SECRET, config(10), Notifier::default());
    assert!(matches!(
        after.get_for(&read_only.id, Access::Full),
        Lookup::Unknown
    ));
    assert_eq!(after.live_count(), 0, "a refused lookup restores nothing");
    assert!(matches!(
        after.get_for(&read_only.id, Access::ReadOnly),
        Lookup::Found(_)
    ));
    assert!(matches!(
        after.get_for(&read_only.id, Access::Full),
        Lookup::Unknown
    ));
}

#[test]
fn cap_evicts_the_longest_idle_session() {
    let sessions = Sessions::new(None, config(2), Notifier::default());
    let a = sessions
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let b = sessions
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    // Touch `a` so `b` becomes the longest idle.
    assert!(matches!(sessions.get(&a.id), Lookup::Found(_)));
    let _c = sessions
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap();
    assert_eq!(sessions.live_count(), 2);
    assert!(matches!(sessions.get(&b.id), Lookup::Ended));
}

#[test]
fn ended_ids_are_not_stored_unless_restored() {
    let before = Sessions::new(SECRET, config(10), Notifier::default());
    let old = before
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap();
    std::thread::sleep(Duration::from_millis(2));

    let sessions = Sessions::new(SECRET, config(10), Notifier::default());
    let first = sessions
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap();
    for _ in 0..1000 {
        sessions
            .create("2025-11-25", json!({}), Access::Full)
            .unwrap();
    }
    assert_eq!(sessions.live_count(), 10);
    assert!(matches!(sessions.get(&first.id), Lookup::Ended));
    assert!(lock(&sessions.ended).0.is_empty(), "own ids need no memory");

    // A restored session that ends is remembered, or it would be restored again.
    assert!(matches!(sessions.get(&old.id), Lookup::Found(_)));
    assert!(sessions.end(&old.id));
    assert!(matches!(sessions.get(&old.id), Lookup::Ended));
    assert_eq!(lock(&sessions.ended).0.len(), 1);
}

#[tokio::test]
async fn resume_replays_events_after_the_last_seen_id() {
    let sessions = Sessions::new(None, config(2), Notifier::default());
    let s = sessions
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap();
    let (stream, mut first) = s.open_stream(false);
    s.push(stream, &json!({"n": 1}));
    drop(first.recv().await); // priming event
    let seen = first.recv().await.unwrap();
    assert!(String::from_utf8_lossy(&seen).contains(&format!("id: {stream}-1")));
    drop(first);
    s.push(stream, &json!({"n": 2}));
    s.finish(stream);
    let mut resumed = s.resume(&format!("{stream}-1")).unwrap();
    let replayed = resumed.recv().await.unwrap();
    assert!(String::from_utf8_lossy(&replayed).contains("\"n\":2"));
    assert!(
        resumed.recv().await.is_none(),
        "a finished stream closes after replay"
    );
}

#[test]
fn a_session_holding_its_get_stream_open_is_not_idle() {
    let sessions = Sessions::new(
        SECRET,
        SessionConfig {
            idle_timeout: Duration::from_millis(1),
            ..config(10)
        },
        Notifier::default(),
    );
    let listening = sessions
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap();
    let quiet = sessions
        .create("2025-11-25", json!({}), Access::Full)
        .unwrap();
    let (_, receiver) = listening.open_stream(true);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(block_on(sessions.evict_idle()), 1, "only the quiet one");
    assert!(matches!(sessions.get(&listening.id), Lookup::Found(_)));
    assert!(!matches!(sessions.get(&quiet.id), Lookup::Found(_)));
    // Once the client lets go of the stream, the session is idle like any other.
    drop(receiver);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(block_on(sessions.evict_idle()), 1);
}

#[test]
fn a_read_only_session_never_ends_a_full_one() {
    let new = |access| ("2025-11-25", json!({}), access);
    // At the cap, a read-only newcomer evicts a read-only session, never a full one.
    let sessions = Sessions::new(SECRET, config(2), Notifier::default());
    let create = |(version, caps, access)| sessions.create(version, caps, access);
    let full = create(new(Access::Full)).unwrap();
    let first = create(new(Access::ReadOnly)).unwrap();
    let second = create(new(Access::ReadOnly)).unwrap();
    assert!(matches!(sessions.get(&full.id), Lookup::Found(_)));
    assert!(!matches!(sessions.get(&first.id), Lookup::Found(_)));
    assert!(matches!(sessions.get(&second.id), Lookup::Found(_)));
    // With only full sessions live, a read-only one is refused, saying why.
    let sessions = Sessions::new(SECRET, config(2), Notifier::default());
    let create = |(version, caps, access)| sessions.create(version, caps, access);
    let kept = [
        create(new(Access::Full)).unwrap(),
        create(new(Access::Full)).unwrap(),
    ];
    let Err(no_room) = create(new(Access::ReadOnly)) else {
        panic!("a read-only session took a full one's place");
    };
    assert!(
        no_room.to_string().contains("MCP_MAX_SESSIONS"),
        "{no_room}"
    );
    for session in &kept {
        assert!(matches!(sessions.get(&session.id), Lookup::Found(_)));
    }
}
