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

mod duplicate_paths;
mod loss_paths;
mod multi_send;
mod objects;

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
    /// The progress entries, one per line.
    progress: Option<String>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("locks.sqlite");
        Fixture { _dir: dir, db }
    }

    fn settings(&self, inner: Value, extra: Value) -> Value {
        // The tests' "processes" share one clock: a small tolerated skew keeps takeovers
        // prompt (the clock tests set their own).
        let mut s = json!({
            "kv_store": {"type": "sqlite", "settings": {"file": self.db.to_str().unwrap()}},
            "ttl_offset": "1h",
            "clock_skew": "20ms",
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
            "SELECT key, owner, committed, lease_until_ms, since_ms, progress FROM sluice_locks ORDER BY key",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok(Rec {
            key: r.get(0)?,
            owner: r.get(1)?,
            committed: r.get::<_, i64>(2)? != 0,
            lease_until_ms: r.get(3)?,
            since_ms: r.get(4)?,
            progress: r.get(5)?,
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
            skew_ms: 0,
            fresh_before_ms: None,
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
    let ctx = sluice_engine::Context::new();
    let lock = testing::build_in(
        &registry(),
        &ctx,
        json!({"type": "meta_kv_store_lock", "settings": f.settings(record("lock-dup-2"), drop_settings)}),
    )
    .unwrap();
    let out = testing::run(lock, &[r#"{"id":2}"#, r#"{"id":3}"#]).unwrap();
    assert_eq!(out, vec![r#"{"id":3}"#]);
    assert_eq!(journal("lock-dup-2"), vec![r#"{"id":3}"#, "<ctrl>"]);
    // Counted in its build context's telemetry, by the name the Lambda function reads.
    assert_eq!(ctx.telemetry().get("duplicates_skipped"), 1);
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
    // A fraction of a second in the offset rounds the window up, never down.
    assert_eq!(
        ttl_of(
            json!({"object": {"source_key": "k", "ttl_key": "t"}, "ttl_offset": "28.75s", "lease": "3s"}),
            r#"{"k":"KEY","t":1700000000}"#
        ),
        1_700_000_000 + 29
    );
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
    // a1 was delivered by its send, but its copy leaving the lock was failed with the
    // pipeline: its key is left pending, its lease ended, with what was delivered; b1's
    // was released.
    let recs = f.records();
    assert_eq!(recs.len(), 1, "{recs:?}");
    let a1 = &recs[0];
    assert!(
        a1.key == hash("a1") && !a1.committed && a1.lease_until_ms == 0,
        "{recs:?}"
    );
    assert_eq!(a1.progress.as_deref(), Some("lock-fail-a:0"));
    // The redelivery of both: a1 is taken over and its send, which delivered it already,
    // skips it; b1 is processed (the send works now).
    let (a, t_a) = tracked("a1");
    let (b, t_b) = tracked("b1");
    assert_eq!(
        apply_and_settle(&p, vec![a, b, ctrl()]).unwrap(),
        vec!["a1", "b1"]
    );
    assert_status(&t_a, AckStatus::Delivered, "a1 completed on redelivery");
    assert_status(&t_b, AckStatus::Delivered, "b1 delivered on redelivery");
    assert_eq!(journal("lock-fail-b"), vec!["aborted:b1", "sent:b1"]);
    assert_eq!(
        journal("lock-fail-a"),
        vec!["sent:a1", "skipped:a1"],
        "a1 sent once"
    );
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
            skew_ms: 0,
            fresh_before_ms: None,
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
fn a_prefix_of_up_to_1975_bytes_builds_and_a_longer_one_is_refused_naming_it() {
    let f = Fixture::new();
    let value = "x".repeat(1000);
    for (len, ok) in [(1975, true), (1976, false), (3000, false)] {
        let prefix = "p".repeat(len);
        let settings = f.settings(
            record("lock-prefix"),
            json!({"prefix": prefix.clone(), "object": {"source_key": "id"}}),
        );
        let built = testing::build(
            &registry(),
            json!({"type": "meta_kv_store_lock", "settings": settings}),
        );
        match built {
            Ok(lock) => {
                assert!(ok, "{len}: built");
                // The longest prefix with a long value: the key fits DynamoDB's 2,048 bytes.
                testing::run(lock, &[&format!(r#"{{"id":"{value}"}}"#)]).unwrap();
                let key = super::keys::key_with_prefix(&prefix, value.clone());
                assert_eq!(key.len(), 2048);
                assert!(f.record(&key).unwrap().committed);
            }
            Err(e) => {
                assert!(!ok, "{len}: {e}");
                let e = e.to_string();
                assert!(
                    e.contains("(meta_kv_store_lock)")
                        && e.contains("prefix")
                        && e.contains(&format!(
                            "is {len} bytes long, over the limit of 1975 bytes"
                        )),
                    "{e}"
                );
            }
        }
    }
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
