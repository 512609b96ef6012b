//! The lock's cases: each behaviour of the module documentation, and a regression test for
//! every loss and duplicate path the review of the lock found (they fail on the lock as it
//! was before them). The store is an SQLite file (and the faulty store of
//! `kv_store::lock::test_faulty` where the store must misbehave); the same lock over
//! DynamoDB runs in `tests/cli_lock.rs` and the fault campaign.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::Digest;
use sluice_engine::ack::AckStatus;
use sluice_engine::context::{Clock, SystemClock};
use sluice_engine::{Message, Pipeline, Transform, Value, json, testing};

use crate::kv_store::sqlite::SqliteStore;
use crate::kv_store::{AcquireRequest, LockStore};
use crate::meta::test_support::{assert_status, datas, journal, registry, tracked};

fn now_ms() -> i64 {
    SystemClock.now_ms()
}

/// A lock over a fresh sqlite file, around `inner`, with extra settings merged in.
struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
}

/// A lock record as the file holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    key: String,
    owner: String,
    committed: bool,
    lease_until_ms: i64,
    since_ms: Option<i64>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("locks.sqlite");
        Fixture { _dir: dir, db }
    }

    fn settings(&self, inner: Value, extra: Value) -> Value {
        let mut s = json!({
            "kv_store": {"type": "sqlite", "settings": {"file": self.db.to_str().unwrap()}},
            "ttl_offset": "1h",
            "transforms": inner,
        });
        merge(&mut s, extra);
        s
    }

    fn lock(&self, inner: Value, extra: Value) -> Transform {
        build(self.settings(inner, extra))
    }

    /// A lock whose store is the faulty SQLite store over the same file.
    fn faulty(&self, faults: Value, inner: Value, extra: Value) -> Transform {
        let mut store = json!({"file": self.db.to_str().unwrap()});
        merge(&mut store, faults);
        let mut s = self.settings(inner, extra);
        s.as_object_mut().unwrap().insert(
            "kv_store",
            json!({"type": "test_faulty_sqlite", "settings": store}),
        );
        build(s)
    }

    /// Another process's view of the same file.
    fn other(&self) -> SqliteStore {
        SqliteStore::open(self.db.clone()).unwrap()
    }

    fn records(&self) -> Vec<Rec> {
        records(&self.db)
    }

    fn record(&self, key: &str) -> Option<Rec> {
        self.records().into_iter().find(|r| r.key == key)
    }
}

fn merge(into: &mut Value, extra: Value) {
    if let (Some(m), Some(e)) = (into.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
}

fn build(settings: Value) -> Transform {
    testing::build(
        &registry(),
        json!({"type": "meta_kv_store_lock", "settings": settings}),
    )
    .unwrap()
}

fn records(db: &Path) -> Vec<Rec> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare(
            "SELECT key, owner, committed, lease_until_ms, since_ms FROM sluice_locks ORDER BY key",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok(Rec {
            key: r.get(0)?,
            owner: r.get(1)?,
            committed: r.get::<_, i64>(2)? != 0,
            lease_until_ms: r.get(3)?,
            since_ms: r.get(4)?,
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn record(name: &str) -> Value {
    json!([{"type": "fixture_record", "settings": {"name": name}}])
}

fn send(name: &str) -> Value {
    json!([{"type": "fixture_send", "settings": {"name": name}}])
}

fn suffix_and_send(name: &str) -> Value {
    json!([
        {"type": "fixture_suffix", "settings": {"suffix": "+"}},
        {"type": "fixture_send", "settings": {"name": name}},
    ])
}

fn hash(data: &str) -> String {
    hex::encode(sha2::Sha256::digest(data.as_bytes()))
}

fn hold(store: &SqliteStore, owner: &str, key: &str, lease_ms: i64) {
    let now = now_ms();
    let r = testing::block_on(store.acquire(
        owner,
        now,
        &[AcquireRequest {
            key: key.into(),
            ttl: now / 1000 + 3600,
            lease_until_ms: now + lease_ms,
        }],
        1,
    ));
    assert!(r[0].as_ref().unwrap().is_taken());
}

fn pipeline(steps: Vec<(&str, Transform)>) -> Pipeline {
    Pipeline::new(
        steps
            .into_iter()
            .map(|(id, t)| (Arc::from(id), t))
            .collect(),
    )
}

/// Applies `msgs` then drops what came out, aborts after an error, and settles, as an
/// input adapter does.
fn apply_and_settle(
    p: &Pipeline,
    msgs: Vec<Message>,
) -> Result<Vec<String>, sluice_engine::TransformError> {
    testing::block_on(async {
        let r = p.apply(msgs).await.map(|out| datas(&out));
        if let Err(e) = &r {
            p.abort(&e.to_string()).await;
        }
        p.settle(Instant::now() + Duration::from_secs(30)).await;
        r
    })
}

fn ctrl() -> Message {
    Message::ctrl()
}

fn msg(d: &str) -> Message {
    Message::new(d.as_bytes().to_vec())
}

// ------------------------------------------------------------------ the protocol's cases

#[test]
fn duplicates_skip_the_inner_list_and_continue_or_drop() {
    let f = Fixture::new();
    let by_id = json!({"object": {"source_key": "id"}});
    let lock = f.lock(record("lock-dup-1"), by_id.clone());
    let out = testing::run(
        lock,
        &[r#"{"id":1}"#, r#"{"id":2}"#, r#"{"id":1,"again":true}"#],
    )
    .unwrap();
    // The repeat of id 1 continues unchanged, in its place, without the inner list.
    assert_eq!(
        out,
        vec![r#"{"id":1}"#, r#"{"id":2}"#, r#"{"id":1,"again":true}"#]
    );
    assert_eq!(
        journal("lock-dup-1"),
        vec![r#"{"id":1}"#, r#"{"id":2}"#, "<ctrl>"]
    );
    // A later run (a new process) sees the committed locks.
    let mut drop_settings = by_id;
    merge(&mut drop_settings, json!({"duplicates": "drop"}));
    let lock = f.lock(record("lock-dup-2"), drop_settings);
    let out = testing::run(lock, &[r#"{"id":2}"#, r#"{"id":3}"#]).unwrap();
    assert_eq!(out, vec![r#"{"id":3}"#]);
    assert_eq!(journal("lock-dup-2"), vec![r#"{"id":3}"#, "<ctrl>"]);
    let recs = f.records();
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.committed), "{recs:?}");
}

#[test]
fn keys_keep_their_type_and_take_the_prefix() {
    let f = Fixture::new();
    let lock = f.lock(
        record("lock-keys"),
        json!({"prefix": "pre", "object": {"source_key": "user.id"}}),
    );
    let out = testing::run(
        lock,
        &[
            r#"{"user":{"id":"u1"}}"#,
            r#"{"user":{"id":7}}"#,
            r#"{"user":{"id":"7"}}"#,
            r#"{"user":{"id":true}}"#,
            r#"{"user":{"id":"true"}}"#,
            r##"{"user":{"id":"#7"}}"##,
        ],
    )
    .unwrap();
    assert_eq!(out.len(), 6, "six distinct keys: {out:?}");
    let keys: Vec<String> = f.records().into_iter().map(|r| r.key).collect();
    let mut want = vec![
        "pre:u1",
        "pre:#7",
        "pre:7",
        "pre:#true",
        "pre:true",
        "pre:##7",
    ];
    want.sort_unstable();
    assert_eq!(keys, want);
    // Without a source key: the data's hash.
    let lock = f.lock(record("lock-keys-hash"), json!({"prefix": "h"}));
    testing::run(lock, &["raw"]).unwrap();
    assert!(f.record(&format!("h:{}", hash("raw"))).is_some());
}

#[test]
fn a_message_without_a_key_fails_alone() {
    // Substation shares one key among empty values (later ones silently dropped) and falls
    // back to the data's hash for a missing one; DynamoDB refuses an empty key, failing the
    // whole batch forever.
    let f = Fixture::new();
    let lock = f.lock(
        send("lock-nokey"),
        json!({"object": {"source_key": "id"}, "duplicates": "drop"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (empty, t_empty) = tracked(r#"{"id":""}"#);
    let (missing, t_missing) = tracked(r#"{"other":1}"#);
    let (null, t_null) = tracked(r#"{"id":null}"#);
    let (ok, t_ok) = tracked(r#"{"id":"a"}"#);
    let (empty2, t_empty2) = tracked(r#"{"id":"","n":2}"#);
    let out = apply_and_settle(&p, vec![empty, missing, null, ok, empty2, ctrl()]).unwrap();
    assert_eq!(out, vec![r#"{"id":"a"}"#]);
    for (t, what) in [
        (&t_empty, "empty"),
        (&t_missing, "missing"),
        (&t_null, "null"),
        (&t_empty2, "empty again"),
    ] {
        assert_status(t, AckStatus::Failed, what);
        let why = t.failure_reason().unwrap();
        assert!(why.contains(r#"object.source_key "id""#), "{why}");
    }
    assert_status(&t_ok, AckStatus::Delivered, "the keyed message");
    assert_eq!(journal("lock-nokey"), vec![r#"sent:{"id":"a"}"#]);
    assert_eq!(f.records().len(), 1);
}

#[test]
fn the_ttl_counts_from_the_event_time_or_now_and_a_bad_event_time_fails_its_message() {
    let f = Fixture::new();
    let ttl_of = |settings: Value, data: &str| -> i64 {
        let lock = f.lock(record("lock-ttl"), settings);
        let key = format!("k{}", fastrand::u64(..));
        testing::run(lock, &[&data.replace("KEY", &key)]).unwrap();
        let c = rusqlite::Connection::open(&f.db).unwrap();
        c.query_row("SELECT ttl FROM sluice_locks WHERE key = ?1", [&key], |r| {
            r.get(0)
        })
        .unwrap()
    };
    let by_key = json!({"object": {"source_key": "k", "ttl_key": "t"}});
    assert_eq!(
        ttl_of(by_key.clone(), r#"{"k":"KEY","t":1700000000}"#),
        1_700_000_000 + 3600
    );
    assert_eq!(
        ttl_of(by_key.clone(), r#"{"k":"KEY","t":"1700000000123"}"#),
        1_700_000_000 + 3600
    );
    let before = now_ms() / 1000;
    let t = ttl_of(json!({"object": {"source_key": "k"}}), r#"{"k":"KEY"}"#);
    assert!((before + 3600..=before + 3602).contains(&t), "{t}");
    // Neither: 24 hours, never 0.
    let mut neither = f.settings(record("lock-ttl"), json!({"object": {"source_key": "k"}}));
    neither.as_object_mut().unwrap().shift_remove("ttl_offset");
    testing::run(build(neither), &[r#"{"k":"day"}"#]).unwrap();
    let c = rusqlite::Connection::open(&f.db).unwrap();
    let t: i64 = c
        .query_row("SELECT ttl FROM sluice_locks WHERE key = 'day'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!((before + 86_400..=before + 86_402).contains(&t), "{t}");
    // A missing or non-numeric event time fails that message alone, naming ttl_key.
    let lock = f.lock(record("lock-ttl-bad"), by_key);
    let p = pipeline(vec![("lock", lock)]);
    let (bad, t_bad) = tracked(r#"{"k":"x","t":"yesterday"}"#);
    let (good, t_good) = tracked(r#"{"k":"y","t":1700000000}"#);
    apply_and_settle(&p, vec![bad, good, ctrl()]).unwrap();
    assert_status(&t_bad, AckStatus::Failed, "bad event time");
    assert!(
        t_bad
            .failure_reason()
            .unwrap()
            .contains(r#"object.ttl_key "t""#)
    );
    assert_status(&t_good, AckStatus::Delivered, "the other message");
}

#[test]
fn outputs_keep_input_order_across_duplicates_and_pieces() {
    let f = Fixture::new();
    // concurrency 1: pieces of 4 keys, so the batch is taken in many pieces.
    let lock = f.lock(
        suffix_and_send("lock-order"),
        json!({"object": {"source_key": "id"}, "concurrency": 1}),
    );
    let inputs: Vec<String> = (0..200)
        .map(|i| format!(r#"{{"id":{}}}"#, if i % 7 == 3 { i - 1 } else { i }))
        .collect();
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let out = testing::run(lock, &refs).unwrap();
    let want: Vec<String> = (0..200)
        .map(|i| {
            if i % 7 == 3 {
                format!(r#"{{"id":{}}}"#, i - 1)
            } else {
                format!(r#"{{"id":{i}}}+"#)
            }
        })
        .collect();
    assert_eq!(out, want);
    assert_eq!(journal("lock-order").len(), 200 - 29);
}

#[test]
fn a_checkpoint_commits_delivered_keys_and_a_failed_send_releases_the_rest() {
    let f = Fixture::new();
    // "a…" goes to a send that delivers, "b…" to one whose flush fails once.
    let inner = json!([{"type": "meta_switch", "settings": {"cases": [
        {"condition": {"type": "fixture_contains", "settings": {"value": "a"}},
         "transforms": [{"type": "fixture_send", "settings": {"name": "lock-fail-a"}}]},
        {"transforms": [{"type": "fixture_send", "settings": {"name": "lock-fail-b", "fail_flushes": 1}}]},
    ]}}]);
    let lock = f.lock(inner, json!({}));
    let p = pipeline(vec![("lock", lock)]);
    let (a, t_a) = tracked("a1");
    let (b, t_b) = tracked("b1");
    let err = apply_and_settle(&p, vec![a, b, ctrl()]).unwrap_err();
    assert!(err.to_string().contains("delivery failed"), "{err}");
    assert_status(&t_a, AckStatus::Failed, "the pipeline failed");
    assert_status(&t_b, AckStatus::Failed, "b1 was not sent");
    assert_eq!(journal("lock-fail-a"), vec!["sent:a1"]);
    // Only a1's lock is left, committed; b1's was released.
    let recs = f.records();
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert!(recs[0].committed && recs[0].key == hash("a1"), "{recs:?}");
    // The redelivery of both: a1 is a duplicate, b1 is processed (the send works now).
    let (a, _) = tracked("a1");
    let (b, t_b) = tracked("b1");
    assert_eq!(
        apply_and_settle(&p, vec![a, b, ctrl()]).unwrap(),
        vec!["a1", "b1"]
    );
    assert_status(&t_b, AckStatus::Delivered, "b1 delivered on redelivery");
    assert_eq!(journal("lock-fail-b"), vec!["aborted:b1", "sent:b1"]);
    assert_eq!(journal("lock-fail-a"), vec!["sent:a1"], "a1 sent once");
    assert_eq!(f.records().iter().filter(|r| r.committed).count(), 2);
}

#[test]
fn meta_err_around_the_lock_swallows_but_keys_are_still_released() {
    let f = Fixture::new();
    let inner =
        json!([{"type": "fixture_send", "settings": {"name": "lock-err", "fail_flushes": 1}}]);
    let lock_cfg = json!({"type": "meta_kv_store_lock", "settings": f.settings(inner, json!({}))});
    let t = testing::build(
        &registry(),
        json!({"type": "meta_err", "settings": {"transforms": [lock_cfg], "error_messages": [".*"]}}),
    )
    .unwrap();
    let p = pipeline(vec![("err", t)]);
    let (m, tracker) = tracked("x");
    apply_and_settle(&p, vec![m, ctrl()]).unwrap();
    assert_status(&tracker, AckStatus::Failed, "still failed for the source");
    assert!(
        f.records().is_empty(),
        "released: a redelivery processes it"
    );
}

#[test]
fn an_own_key_on_its_way_is_a_duplicate_without_asking_the_store() {
    let f = Fixture::new();
    let lock = f.lock(suffix_and_send("lock-own"), json!({}));
    let p = pipeline(vec![("lock", lock)]);
    let out = testing::block_on(async {
        let o1 = datas(&p.apply(vec![msg("x")]).await.unwrap());
        let o2 = datas(&p.apply(vec![msg("x")]).await.unwrap());
        p.apply(vec![ctrl()]).await.unwrap();
        p.settle(Instant::now() + Duration::from_secs(5)).await;
        (o1, o2)
    });
    assert_eq!(out, (vec!["x+".to_string()], vec!["x".to_string()]));
    assert_eq!(journal("lock-own"), vec!["sent:x+"]);
}

#[test]
fn another_owners_pending_lock_is_skipped_waited_for_or_taken_over() {
    let f = Fixture::new();
    let other = f.other();
    // skip: a duplicate at once.
    hold(&other, "them", &hash("m"), 60_000);
    let lock = f.lock(record("lock-skip"), json!({"pending": "skip"}));
    assert_eq!(testing::run(lock, &["m"]).unwrap(), vec!["m"]);
    assert_eq!(journal("lock-skip"), vec!["<ctrl>"]);

    // wait: they commit meanwhile, so it is a duplicate.
    let lock = f.lock(record("lock-wait-commit"), json!({"pending_wait": "5s"}));
    let store = f.other();
    let committer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        let c = crate::kv_store::CommitRequest {
            key: hash("m"),
            ttl: 2_000_000_000,
            note: None,
        };
        testing::block_on(store.commit("them", &[c], 1)).unwrap();
    });
    assert_eq!(testing::run(lock, &["m"]).unwrap(), vec!["m"]);
    committer.join().unwrap();
    assert_eq!(journal("lock-wait-commit"), vec!["<ctrl>"]);

    // wait: they release (their send failed), so we process it.
    hold(&other, "them", &hash("n"), 60_000);
    let lock = f.lock(record("lock-wait-release"), json!({"pending_wait": "5s"}));
    let store = f.other();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        testing::block_on(store.release("them", &[hash("n")], 1)).unwrap();
    });
    testing::run(lock, &["n"]).unwrap();
    releaser.join().unwrap();
    assert_eq!(journal("lock-wait-release"), vec!["n", "<ctrl>"]);

    // Their lease ran out (they crashed): taken over, processed, committed as ours, and the
    // taker was told since when an earlier attempt may have delivered it.
    hold(&other, "them", &hash("q"), 100);
    let since = f.record(&hash("q")).unwrap().since_ms;
    std::thread::sleep(Duration::from_millis(150));
    let lock = f.lock(record("lock-takeover"), json!({"pending": "skip"}));
    testing::run(lock, &["q"]).unwrap();
    assert_eq!(journal("lock-takeover"), vec!["q", "<ctrl>"]);
    let q = f.record(&hash("q")).unwrap();
    assert!(
        q.owner != "them" && q.committed && since.is_some(),
        "ours now, committed: {q:?}"
    );
}

#[test]
fn a_key_pending_elsewhere_delays_only_its_own_message() {
    // Before: the whole batch was given back and retried, and failed after pending_wait,
    // so one crashed owner's key stalled the shard for a lease (13x the write units).
    let f = Fixture::new();
    hold(&f.other(), "crashed", &hash("b"), 60_000);
    let lock = f.lock(
        send("lock-stall"),
        json!({"pending_wait": "300ms", "duplicates": "drop"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (a, t_a) = tracked("a");
    let (b, t_b) = tracked("b");
    let (c, t_c) = tracked("c");
    let started = Instant::now();
    let out = apply_and_settle(&p, vec![a, b, c, ctrl()]).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out, vec!["a", "c"]);
    assert_eq!(journal("lock-stall"), vec!["sent:a", "sent:c"]);
    assert_status(&t_a, AckStatus::Delivered, "a");
    assert_status(&t_c, AckStatus::Delivered, "c");
    assert_status(
        &t_b,
        AckStatus::Failed,
        "b waits for the crashed owner's lease",
    );
    let why = t_b.failure_reason().unwrap();
    assert!(why.contains("pending under crashed"), "{why}");
    assert!(f.record(&hash("a")).unwrap().committed && f.record(&hash("c")).unwrap().committed);
}

#[test]
fn a_pending_lock_whose_ttl_passed_blocks_until_its_lease_ends() {
    // Before: a pending lock past its TTL was free, so with an event-time TTL near the
    // window's edge two processes both sent the message.
    let f = Fixture::new();
    let other = f.other();
    let now = now_ms();
    testing::block_on(other.acquire(
        "them",
        now,
        &[AcquireRequest {
            key: "k".into(),
            ttl: now / 1000 - 10,
            lease_until_ms: now + 60_000,
        }],
        1,
    ));
    let lock = f.lock(
        record("lock-ttl-pending"),
        json!({"object": {"source_key": "id"}, "pending": "skip"}),
    );
    testing::run(lock, &[r#"{"id":"k"}"#]).unwrap();
    assert_eq!(journal("lock-ttl-pending"), vec!["<ctrl>"], "not taken");
    assert_eq!(f.record("k").unwrap().owner, "them");
}

// ------------------------------------------------------------------ loss paths (regressions)

#[test]
fn a_failed_release_never_makes_its_keys_duplicates() {
    // Before: a key given back after a failed batch whose release failed stayed pending
    // under our own owner; the retry found it "held" and dropped the message: lost.
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"fail": {"release": 1000}}),
        json!([{"type": "fixture_send", "settings": {"name": "lock-relfail", "fail_flushes": 1}}]),
        json!({"duplicates": "drop"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (a, t_a) = tracked("a");
    let err = testing::block_on(p.apply(vec![a, ctrl()])).unwrap_err();
    assert!(err.to_string().contains("delivery failed"), "{err}");
    assert_status(&t_a, AckStatus::Failed, "first attempt");
    assert!(
        !f.record(&hash("a")).unwrap().committed,
        "still pending: the release failed"
    );
    // The same process retries (meta_retry, a warm Lambda container): processed, not dropped.
    let (a, t_a) = tracked("a");
    let out = testing::block_on(async {
        let out = datas(&p.apply(vec![a, ctrl()]).await.unwrap());
        p.settle(Instant::now() + Duration::from_secs(5)).await;
        out
    });
    assert_eq!(out, vec!["a"]);
    assert_status(&t_a, AckStatus::Delivered, "retry");
    assert_eq!(journal("lock-relfail"), vec!["aborted:a", "sent:a"]);
    assert!(f.record(&hash("a")).unwrap().committed);
}

#[test]
fn a_failed_release_while_waiting_for_another_owner_loses_nothing() {
    // The review's reproduction: another owner's live pending lock on b, releases failing
    // at the store, input a, b, c: before, only b came out (a and c were dropped as
    // "duplicates" of our own unreleased keys) and the run succeeded.
    let f = Fixture::new();
    hold(&f.other(), "them", &hash("b"), 60_000);
    let lock = f.faulty(
        json!({"fail": {"release": 1000}}),
        send("lock-relfail-wait"),
        json!({"duplicates": "drop", "pending_wait": "300ms"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (a, t_a) = tracked("a");
    let (b, t_b) = tracked("b");
    let (c, t_c) = tracked("c");
    let out = apply_and_settle(&p, vec![a, b, c, ctrl()]).unwrap();
    assert_eq!(out, vec!["a", "c"]);
    assert_eq!(journal("lock-relfail-wait"), vec!["sent:a", "sent:c"]);
    assert_status(&t_a, AckStatus::Delivered, "a");
    assert_status(&t_c, AckStatus::Delivered, "c");
    assert_status(&t_b, AckStatus::Failed, "b: redelivered later");
}

#[test]
fn a_message_held_back_fails_with_the_run_that_held_it() {
    // Found by the fault campaign (kinesis, `all` mix): b's key pending under a crashed
    // owner, a taken; the flush before waiting for b failed (the sink was out), and b was
    // dropped unfailed, so `sluice run --undelivered` reported it delivered: lost.
    let f = Fixture::new();
    hold(&f.other(), "them", &hash("b"), 60_000);
    let inner = json!([{"type": "fixture_send", "settings": {"name": "lock-held-back", "fail_flushes": 1}}]);
    let lock = f.lock(
        inner,
        json!({"duplicates": "drop", "pending_wait": "300ms"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (a, t_a) = tracked("a");
    let (b, t_b) = tracked("b");
    assert!(apply_and_settle(&p, vec![a, b, ctrl()]).is_err());
    assert_status(&t_a, AckStatus::Failed, "a: its send failed");
    assert_status(&t_b, AckStatus::Failed, "b: held back when the run failed");
    assert!(f.record(&hash("a")).is_none(), "a's key released");
}

#[test]
fn messages_still_waiting_fail_with_a_retry_that_failed() {
    // b's holder goes away and b runs, c's holder stays; b's inner list fails: c, still
    // waiting, must fail too, not vanish.
    let f = Fixture::new();
    hold(&f.other(), "them", &hash("b"), 150);
    hold(&f.other(), "them", &hash("c"), 60_000);
    let inner =
        json!([{"type": "fixture_fail", "settings": {"message": "inner failed", "times": 1}}]);
    let lock = f.lock(inner, json!({"duplicates": "drop", "pending_wait": "2s"}));
    let p = pipeline(vec![("lock", lock)]);
    let (b, t_b) = tracked("b");
    let (c, t_c) = tracked("c");
    let err = apply_and_settle(&p, vec![b, c, ctrl()]).unwrap_err();
    assert!(err.to_string().contains("inner failed"), "{err}");
    assert_status(&t_b, AckStatus::Failed, "b: its inner list failed");
    assert_status(
        &t_c,
        AckStatus::Failed,
        "c: still waiting when the run failed",
    );
}

#[test]
fn a_later_copy_of_a_message_held_back_follows_it() {
    // Found by the fault campaign (kinesis_after under meta_retry, which hands the lock one
    // message at a time): b's key pending under a killed run, b held back; a second copy
    // of b came in a later call, after that run's lease had ended, took the key over and
    // ran; then the first copy, asked again, found the key ours and ran too: b sent twice.
    let f = Fixture::new();
    hold(&f.other(), "them", &hash("b"), 150);
    let lock = f.lock(
        send("lock-held-back-copy"),
        json!({"duplicates": "drop", "pending_wait": "5s"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (b1, t_b1) = tracked("b");
    let (b2, t_b2) = tracked("b");
    let out = testing::block_on(async {
        let mut out = datas(&p.apply(vec![b1]).await.unwrap());
        tokio::time::sleep(Duration::from_millis(300)).await;
        out.extend(datas(&p.apply(vec![b2, ctrl()]).await.unwrap()));
        p.settle(Instant::now() + Duration::from_secs(5)).await;
        out
    });
    assert_eq!(out, vec!["b"]);
    assert_eq!(journal("lock-held-back-copy"), vec!["sent:b"]);
    assert_status(&t_b1, AckStatus::Delivered, "the first copy");
    assert_status(
        &t_b2,
        AckStatus::Delivered,
        "the later copy shares its fate",
    );
}

#[test]
fn commits_at_the_end_outlast_a_store_outage_longer_than_the_lease() {
    // Found by the fault campaign (file_after under the retry mix, commit outages of 1-8 s,
    // a 3 s lease): the run gave up settling after one lease and exited with its delivered
    // messages' locks pending; a redelivery of them took them over and wrote them again.
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"outage_ms": {"commit": 2500}}),
        send("lock-commit-outage"),
        json!({"duplicates": "drop", "lease": "1s"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (a, t_a) = tracked("a");
    assert_eq!(apply_and_settle(&p, vec![a, ctrl()]).unwrap(), vec!["a"]);
    assert_status(&t_a, AckStatus::Delivered, "a");
    assert!(
        f.record(&hash("a")).unwrap().committed,
        "committed after the outage, past the lease: {:?}",
        f.records()
    );
}

#[test]
fn an_acquisition_whose_answer_was_lost_is_ours() {
    // The write applied, the answer was lost, the call is tried again: before, our own
    // pending record made the message a duplicate (lost).
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"fail_after": {"acquire": 1}}),
        send("lock-lost-answer"),
        json!({"duplicates": "drop"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (a, t_a) = tracked("a");
    assert_eq!(apply_and_settle(&p, vec![a, ctrl()]).unwrap(), vec!["a"]);
    assert_status(&t_a, AckStatus::Delivered, "a");
    assert_eq!(journal("lock-lost-answer"), vec!["sent:a"]);
    assert!(f.record(&hash("a")).unwrap().committed);
}

#[test]
fn a_send_after_the_lock_decides_the_commit() {
    // Substation's consumer pattern: lock, then the send outside it. Before, the lock
    // committed at its own checkpoint, so when the later send failed, the redelivery
    // dropped everything (5 of 5 lines lost).
    let f = Fixture::new();
    let lock = f.lock(
        json!([{"type": "fixture_suffix", "settings": {"suffix": "+"}}]),
        json!({"duplicates": "drop"}),
    );
    let after: Transform = testing::build(
        &registry(),
        json!({"type": "fixture_send", "settings": {"name": "lock-after", "fail_flushes": 1}}),
    )
    .unwrap();
    let p = pipeline(vec![("lock", lock), ("send", after)]);
    let batch = || {
        (0..5)
            .map(|i| msg(&format!("m{i}")))
            .chain([ctrl()])
            .collect::<Vec<_>>()
    };
    assert!(apply_and_settle(&p, batch()).is_err(), "the send failed");
    assert!(
        f.records().is_empty(),
        "every key released: {:?}",
        f.records()
    );
    let out = apply_and_settle(&p, batch()).unwrap();
    assert_eq!(out.len(), 5, "the redelivery is processed: {out:?}");
    let sent: Vec<String> = journal("lock-after")
        .into_iter()
        .filter(|j| j.starts_with("sent:"))
        .collect();
    assert_eq!(sent.len(), 5, "{sent:?}");
    assert!(f.records().iter().all(|r| r.committed) && f.records().len() == 5);
}

#[test]
fn what_leaves_the_lock_carries_its_token_and_commits_when_dropped() {
    let f = Fixture::new();
    let lock = f.lock(
        json!([{"type": "fixture_suffix", "settings": {"suffix": "+"}}]),
        json!({}),
    );
    let p = pipeline(vec![("lock", lock)]);
    testing::block_on(async {
        let out = p.apply(vec![msg("t"), ctrl()]).await.unwrap();
        assert_eq!(out[0].acks().len(), 1, "the lock's token travels on");
        p.settle(Instant::now() + Duration::from_millis(200)).await;
        assert!(!f.record(&hash("t")).unwrap().committed, "still on its way");
        drop(out);
        p.settle(Instant::now() + Duration::from_secs(5)).await;
    });
    assert!(f.record(&hash("t")).unwrap().committed);
}

#[test]
fn a_copy_of_a_message_on_its_way_shares_its_fate() {
    // The model check found it: a later copy acknowledged at once as a duplicate, while the
    // first is still on its way, loses the record with a source that acknowledges each
    // copy (an SQS message received again: deleting the newer receipt deletes it) when the
    // first copy then fails.
    let f = Fixture::new();
    let lock = f.lock(
        json!([{"type": "fixture_send", "settings": {"name": "lock-follow", "fail_flushes": 1}}]),
        json!({"object": {"source_key": "id"}, "duplicates": "drop"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (first, t_first) = tracked(r#"{"id":"x"}"#);
    let (same_batch, t_same) = tracked(r#"{"id":"x","copy":1}"#);
    let (later, t_later) = tracked(r#"{"id":"x","copy":2}"#);
    let err = testing::block_on(async {
        p.apply(vec![first, same_batch]).await.unwrap();
        // Still held by the send: another copy arrives in the next batch.
        p.apply(vec![later]).await.unwrap();
        assert_eq!(t_same.status(), AckStatus::Pending, "waits for the first");
        assert_eq!(t_later.status(), AckStatus::Pending, "waits for the first");
        let e = p.apply(vec![ctrl()]).await.unwrap_err();
        p.abort(&e.to_string()).await;
        p.settle(Instant::now() + Duration::from_secs(5)).await;
        e
    });
    assert!(err.to_string().contains("delivery failed"), "{err}");
    for (t, what) in [
        (&t_first, "first"),
        (&t_same, "same batch"),
        (&t_later, "later batch"),
    ] {
        assert_status(t, AckStatus::Failed, what);
    }
    // Delivered this time: every copy is delivered with it.
    let (first, t_first) = tracked(r#"{"id":"x"}"#);
    let (copy, t_copy) = tracked(r#"{"id":"x","copy":1}"#);
    apply_and_settle(&p, vec![first, copy, ctrl()]).unwrap();
    assert_status(&t_first, AckStatus::Delivered, "first");
    assert_status(&t_copy, AckStatus::Delivered, "copy");
    assert_eq!(
        journal("lock-follow"),
        vec![r#"aborted:{"id":"x"}"#, r#"sent:{"id":"x"}"#]
    );
}

#[test]
fn a_taken_over_key_keeps_its_history_when_this_attempt_fails() {
    // The model check's third finding: a taker told of an earlier attempt, whose own send
    // then fails for certain, must not delete the history (the earlier attempt may have
    // delivered the message, and the next taker must look).
    let f = Fixture::new();
    hold(&f.other(), "crashed", &hash("h"), 50);
    let since = f.record(&hash("h")).unwrap().since_ms;
    std::thread::sleep(Duration::from_millis(80));
    let lock = f.lock(
        json!([{"type": "fixture_send", "settings": {"name": "lock-history", "fail_flushes": 1}}]),
        json!({}),
    );
    let p = pipeline(vec![("lock", lock)]);
    assert!(apply_and_settle(&p, vec![msg("h"), ctrl()]).is_err());
    let r = f.record(&hash("h")).unwrap();
    assert!(
        !r.committed && r.lease_until_ms == 0 && r.since_ms == since,
        "{r:?}"
    );
}

// ------------------------------------------------------------------ duplicate paths

#[test]
fn a_commit_that_fails_after_delivery_is_retried_and_never_fails_the_batch() {
    // Before: the commit's failure failed the run after delivery, the keys stayed pending,
    // and the redelivery after the lease sent every message again.
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"fail": {"commit": 3}}),
        send("lock-commit-fails"),
        json!({}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (a, t_a) = tracked("a");
    let (b, t_b) = tracked("b");
    assert_eq!(
        apply_and_settle(&p, vec![a, b, ctrl()]).unwrap(),
        vec!["a", "b"]
    );
    assert_status(&t_a, AckStatus::Delivered, "a");
    assert_status(&t_b, AckStatus::Delivered, "b");
    let recs = f.records();
    assert!(
        recs.len() == 2 && recs.iter().all(|r| r.committed),
        "{recs:?}"
    );
}

#[test]
fn a_commit_outage_of_seconds_is_waited_out() {
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"outage_ms": {"commit": 1500}}),
        send("lock-commit-outage"),
        json!({}),
    );
    let p = pipeline(vec![("lock", lock)]);
    assert_eq!(
        apply_and_settle(&p, vec![msg("a"), ctrl()]).unwrap(),
        vec!["a"]
    );
    assert!(f.record(&hash("a")).unwrap().committed);
}

#[test]
fn an_acquire_outage_of_seconds_is_waited_out() {
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"outage_ms": {"acquire": 1200}}),
        send("lock-acquire-outage"),
        json!({}),
    );
    let p = pipeline(vec![("lock", lock)]);
    assert_eq!(
        apply_and_settle(&p, vec![msg("a"), ctrl()]).unwrap(),
        vec!["a"]
    );
    assert_eq!(journal("lock-acquire-outage"), vec!["sent:a"]);
    assert!(f.record(&hash("a")).unwrap().committed);
}

#[test]
fn delivered_keys_are_committed_while_the_input_is_idle() {
    // Before: nothing committed between ctrls but a half-lease self-checkpoint that ran
    // only when a batch arrived, so on an idle input a healthy process's keys outlived
    // their lease and another worker sent the messages again.
    let f = Fixture::new();
    let lock = f.lock(
        json!([{"type": "fixture_send", "settings": {"name": "lock-idle", "flush_at": 2}}]),
        json!({"lease": "2s", "ttl_offset": "1h"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    testing::block_on(async {
        let out = p.apply(vec![msg("i1"), msg("i2")]).await.unwrap();
        drop(out);
        // No ctrl, no more input: the keeper commits on its own.
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until && !f.records().iter().all(|r| r.committed) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let recs = f.records();
    assert!(
        recs.len() == 2 && recs.iter().all(|r| r.committed),
        "{recs:?}"
    );
}

#[test]
fn leases_are_renewed_while_messages_are_on_their_way() {
    let f = Fixture::new();
    let lock = f.lock(
        send("lock-renew"),
        json!({"lease": "300ms", "ttl_offset": "1h"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    testing::block_on(async {
        drop(p.apply(vec![msg("slow")]).await.unwrap());
        let first = f.record(&hash("slow")).unwrap().lease_until_ms;
        // Held by the send for three leases: renewed, never free for another owner.
        for _ in 0..9 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let other = f.other();
            let now = now_ms();
            let r = other
                .acquire(
                    "them",
                    now,
                    &[AcquireRequest {
                        key: hash("slow"),
                        ttl: now / 1000 + 60,
                        lease_until_ms: now + 1000,
                    }],
                    1,
                )
                .await;
            assert!(
                !r[0].as_ref().unwrap().is_taken(),
                "taken over while on its way: {r:?} {:?}",
                f.records()
            );
        }
        assert!(f.record(&hash("slow")).unwrap().lease_until_ms > first + 500);
        p.apply(vec![ctrl()]).await.unwrap();
        p.settle(Instant::now() + Duration::from_secs(5)).await;
    });
    assert_eq!(journal("lock-renew"), vec!["sent:slow"]);
    assert!(f.record(&hash("slow")).unwrap().committed);
}

#[test]
fn an_uncertain_failure_leaves_the_key_for_the_next_attempt_to_check() {
    let f = Fixture::new();
    let lock = f.lock(
        json!([{"type": "fixture_send", "settings": {"name": "lock-unsure", "fail_flushes": 1, "uncertain": true}}]),
        json!({}),
    );
    let p = pipeline(vec![("lock", lock)]);
    assert!(apply_and_settle(&p, vec![msg("u"), ctrl()]).is_err());
    let r = f.record(&hash("u")).unwrap();
    assert!(
        !r.committed && r.lease_until_ms == 0 && r.since_ms.is_some(),
        "abandoned: {r:?}"
    );
    // Another process takes it at once, told since when it may have been delivered.
    let other = f.other();
    let now = now_ms();
    let got = testing::block_on(other.acquire(
        "them",
        now,
        &[AcquireRequest {
            key: hash("u"),
            ttl: now / 1000 + 60,
            lease_until_ms: now + 1000,
        }],
        1,
    ));
    match got[0].as_ref().unwrap() {
        crate::kv_store::Acquired::Taken { prior: Some(p) } => {
            assert_eq!(Some(p.since_ms), r.since_ms)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_slow_store_slows_the_lock_down_and_a_hopeless_one_fails_the_messages_alone() {
    // The store answers after the leases ran out and another owner took the key: the
    // renewal finds it held, so the message is not processed twice.
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"takeover_by": "them"}),
        record("lock-slow-takeover"),
        json!({"lease": "200ms", "pending": "skip"}),
    );
    assert_eq!(testing::run(lock, &["m"]).unwrap(), vec!["m"]);
    assert_eq!(
        journal("lock-slow-takeover"),
        vec!["<ctrl>"],
        "not processed"
    );
    assert_eq!(f.record(&hash("m")).unwrap().owner, "them");

    // Every call takes more than half the lease: the keys are given back and the messages
    // fail alone, with an error that says what to change. The batch itself goes on.
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"delay_ms": 60}),
        record("lock-slow-always"),
        json!({"lease": "100ms", "ttl_offset": "1h"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    let (m, t_m) = tracked("m");
    apply_and_settle(&p, vec![m, ctrl()]).unwrap();
    assert_status(&t_m, AckStatus::Failed, "m");
    assert!(t_m.failure_reason().unwrap().contains("raise `lease`"));
    assert_eq!(journal("lock-slow-always"), vec!["<ctrl>"]);
    assert!(f.records().is_empty(), "the key was given back");

    // A store slow enough to need a renewal, but not hopeless: processed.
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"delay_ms": 60}),
        record("lock-slow-ok"),
        json!({"lease": "200ms", "ttl_offset": "1h"}),
    );
    assert_eq!(testing::run(lock, &["ok"]).unwrap(), vec!["ok"]);
    assert_eq!(journal("lock-slow-ok"), vec!["ok", "<ctrl>"]);
}

#[test]
fn two_owners_with_crossed_overlapping_batches_do_not_wait_on_each_other() {
    let f = Fixture::new();
    let ids = |r: std::ops::Range<u32>| -> Vec<Message> {
        r.map(|i| msg(&format!(r#"{{"id":{i}}}"#))).collect()
    };
    let run = |name: &'static str, order: [std::ops::Range<u32>; 2]| {
        let lock = f.lock(
            json!([{"type": "fixture_send", "settings": {"name": name}}]),
            json!({"object": {"source_key": "id"}, "pending_wait": "20s"}),
        );
        std::thread::spawn(move || {
            let p = pipeline(vec![("lock", lock)]);
            testing::block_on(async {
                for r in order {
                    p.apply(ids(r)).await?;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let r = p.apply(vec![ctrl()]).await.map(drop);
                p.settle(Instant::now() + Duration::from_secs(10)).await;
                r
            })
        })
    };
    let started = Instant::now();
    let a = run("dl-a", [0..50, 50..100]);
    let b = run("dl-b", [50..100, 0..50]);
    a.join().unwrap().unwrap();
    b.join().unwrap().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let mut sent: Vec<String> = journal("dl-a");
    sent.extend(journal("dl-b"));
    sent.sort();
    let mut want: Vec<String> = (0..100).map(|i| format!(r#"sent:{{"id":{i}}}"#)).collect();
    want.sort();
    assert_eq!(sent, want, "every id sent exactly once");
}

#[test]
fn a_crash_before_the_checkpoint_leaves_pending_locks_that_a_rerun_takes_over() {
    let f = Fixture::new();
    let extra = json!({"lease": "200ms", "pending_wait": "2s", "ttl_offset": "1h"});
    // "Crash": the data went through, no ctrl ever came, the process is gone.
    let crashed = f.lock(suffix_and_send("lock-crash-1"), extra.clone());
    let p = pipeline(vec![("lock", crashed)]);
    let out = testing::block_on(p.apply(vec![msg("c1"), msg("c2")])).unwrap();
    std::mem::forget(out); // its tokens never resolve, as in a killed process
    std::mem::forget(p);
    assert!(journal("lock-crash-1").is_empty(), "never delivered");
    assert!(f.records().iter().all(|r| !r.committed), "pending");
    // The rerun waits for the lease and processes both.
    let rerun = f.lock(suffix_and_send("lock-crash-2"), extra.clone());
    assert_eq!(
        testing::run(rerun, &["c1", "c2"]).unwrap(),
        vec!["c1+", "c2+"]
    );
    assert_eq!(journal("lock-crash-2"), vec!["sent:c1+", "sent:c2+"]);
    // A crash after the checkpoint: the rerun skips them.
    let again = f.lock(suffix_and_send("lock-crash-3"), extra);
    assert_eq!(
        testing::run(again, &["c1", "c2"]).unwrap(),
        vec!["c1", "c2"]
    );
    assert!(journal("lock-crash-3").is_empty());
}

#[test]
fn the_lease_ends_with_the_invocation() {
    let f = Fixture::new();
    let lock = f.lock(send("lock-invocation"), json!({}));
    let p = pipeline(vec![("lock", lock)]);
    let deadline = Instant::now() + Duration::from_secs(4);
    let before = now_ms();
    testing::block_on(sluice_engine::invocation::with_deadline(deadline, async {
        drop(p.apply(vec![msg("inv")]).await.unwrap());
    }));
    let lease = f.record(&hash("inv")).unwrap().lease_until_ms;
    assert!(
        (before + 3_500..=before + 4_500).contains(&lease),
        "{lease} vs {before}"
    );
}

#[test]
fn config_errors_name_the_field() {
    let f = Fixture::new();
    let inner = record("unused");
    let with = |extra: Value| f.settings(inner.clone(), extra);
    let mut no_store = with(json!({}));
    no_store.as_object_mut().unwrap().shift_remove("kv_store");
    let mut no_inner = with(json!({}));
    no_inner.as_object_mut().unwrap().shift_remove("transforms");
    testing::assert_config_errors(
        &registry(),
        "meta_kv_store_lock",
        &[
            (no_store, "kv_store"),
            (no_inner, "transforms"),
            (with(json!({"kv_store": {"type": "csv_file"}})), "read-only"),
            (
                with(json!({"kv_store": {"type": "sqlit"}})),
                "did you mean \"sqlite\"",
            ),
            (
                with(json!({"kv_store": {"type": "aws_dynamodb", "settings": {}}})),
                if cfg!(feature = "aws") {
                    "aws.arn"
                } else {
                    "the aws_dynamodb kv store calls AWS"
                },
            ),
            (with(json!({"concurrency": 0})), "concurrency"),
            (with(json!({"ttl_offset": "0s"})), "ttl_offset"),
            (with(json!({"ttl_offset": "soon"})), "ttl_offset"),
            (with(json!({"ttl_offset": "30s"})), "shorter than the lease"),
            (
                with(json!({"ttl_offset": "5m", "lease": "10m"})),
                "shorter than the lease",
            ),
            (with(json!({"lease": "0s"})), "lease"),
            (with(json!({"duplicates": "keep"})), "duplicates"),
            (with(json!({"pending": "hope"})), "pending"),
        ],
    );
}

#[test]
fn compliance() {
    let f = Fixture::new();
    testing::check_type_compliance(
        &registry(),
        "meta_kv_store_lock",
        f.settings(record("lock-compliance"), json!({})),
    );
}
