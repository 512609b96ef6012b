//! Regression tests for issue 50's findings: pipelines with more than one send per lock,
//! more than one copy per message, clocks, and checkpoints. Each failed on the lock as it
//! was before the fix (noted per test).

use super::*;

fn send_failing(name: &str, flushes: u32) -> Value {
    json!({"type": "fixture_send", "settings": {"name": name, "fail_flushes": flushes}})
}

fn plain_send(name: &str) -> Value {
    json!({"type": "fixture_send", "settings": {"name": name}})
}

fn built(v: Value) -> Transform {
    testing::build(&registry(), v).unwrap()
}

/// Finding 1: a send inside the lock delivered, the send after the lock failed. The key
/// was committed (the inner send had accepted it), so the redelivery was a duplicate and
/// the later sink never got the message. Now the key is kept with what was delivered; the
/// redelivery skips the inner send and delivers to the one after.
#[test]
fn a_send_after_the_lock_that_failed_gets_the_message_on_redelivery() {
    let f = Fixture::new();
    let lock = f.lock(json!([plain_send("f1-audit")]), json!({}));
    let p = pipeline(vec![
        ("lock", lock),
        ("after", built(send_failing("f1-sink", 1))),
    ]);
    let (a, t_a) = tracked("a");
    assert!(apply_and_settle(&p, vec![a, ctrl()]).is_err());
    assert_status(&t_a, AckStatus::Failed, "the sink after the lock failed");
    let r = f.record(&hash("a")).unwrap();
    assert!(
        !r.committed && r.lease_until_ms == 0,
        "kept for the redelivery: {r:?}"
    );
    assert_eq!(r.progress.as_deref(), Some("f1-audit:0"));
    let (a, t_a) = tracked("a");
    apply_and_settle(&p, vec![a, ctrl()]).unwrap();
    assert_status(&t_a, AckStatus::Delivered, "the redelivery");
    assert_eq!(journal("f1-audit"), vec!["sent:a", "skipped:a"]);
    assert_eq!(journal("f1-sink"), vec!["aborted:a", "sent:a"]);
    assert!(f.record(&hash("a")).unwrap().committed);
}

/// Finding 5: two sends in one lock, the second failed: the key was released, and the
/// redelivery sent to the first again. Now only the second sends.
#[test]
fn two_sends_in_one_lock_each_deliver_once() {
    let f = Fixture::new();
    let lock = f.lock(
        json!([plain_send("f5-kinesis"), send_failing("f5-file", 1)]),
        json!({}),
    );
    let p = pipeline(vec![("lock", lock)]);
    assert!(apply_and_settle(&p, vec![msg("a"), msg("b"), ctrl()]).is_err());
    assert_eq!(journal("f5-kinesis"), vec!["sent:a", "sent:b"]);
    let (a, t_a) = tracked("a");
    let (b, t_b) = tracked("b");
    apply_and_settle(&p, vec![a, b, ctrl()]).unwrap();
    assert_status(&t_a, AckStatus::Delivered, "a");
    assert_status(&t_b, AckStatus::Delivered, "b");
    assert_eq!(
        journal("f5-kinesis"),
        vec!["sent:a", "sent:b", "skipped:a", "skipped:b"]
    );
    assert_eq!(
        journal("f5-file"),
        vec!["aborted:a", "aborted:b", "sent:a", "sent:b"]
    );
    assert_eq!(f.records().iter().filter(|r| r.committed).count(), 2);
}

/// Finding 5, one send: a message fanned out into several records, some accepted and one
/// refused for good: the key was released and every record put again. Now only the
/// refused one is.
#[test]
fn a_message_fanned_out_sends_only_the_copies_that_failed_again() {
    let f = Fixture::new();
    // The key is read from the message before it fans out into one record per event.
    let fan =
        json!({"type": "aggregate_from_array", "settings": {"object": {"source_key": "events"}}});
    let sink = json!({"type": "fixture_send", "settings": {
        "name": "f5-fan", "fail_flushes": 1, "fail_matching": "3"}});
    let lock = f.lock(json!([fan, sink]), json!({"object": {"source_key": "id"}}));
    let p = pipeline(vec![("lock", lock)]);
    let event = r#"{"id":"e","events":[{"n":1},{"n":2},{"n":3}]}"#;
    assert!(apply_and_settle(&p, vec![msg(event), ctrl()]).is_err());
    let r = f.record("e").unwrap();
    assert_eq!(r.progress.as_deref(), Some("f5-fan:0-1"), "{r:?}");
    let (m, t) = tracked(event);
    apply_and_settle(&p, vec![m, ctrl()]).unwrap();
    assert_status(&t, AckStatus::Delivered, "completed");
    assert_eq!(
        journal("f5-fan"),
        vec![
            r#"sent:{"id":"e","n":1}"#,
            r#"sent:{"id":"e","n":2}"#,
            r#"aborted:{"id":"e","n":3}"#,
            r#"skipped:{"id":"e","n":1}"#,
            r#"skipped:{"id":"e","n":2}"#,
            r#"sent:{"id":"e","n":3}"#,
        ],
        "each record once"
    );
}

/// Finding 9: a ctrl within the input (`utility_control`) waited for every message whose
/// key another process held, stalling each checkpoint for `pending_wait`. Now it flushes
/// what was delivered and lets those messages wait.
#[test]
fn a_checkpoint_within_the_input_does_not_wait_for_other_owners_keys() {
    let f = Fixture::new();
    hold(&f.other(), "them", &hash("b"), 60_000);
    let lock = f.lock(send("f9"), json!({"pending_wait": "3s"}));
    let p = pipeline(vec![("lock", lock)]);
    let (a, t_a) = tracked("a");
    let (b, t_b) = tracked("b");
    let started = Instant::now();
    let out = testing::block_on(async {
        let out = p.apply(vec![a, b, Message::checkpoint()]).await.unwrap();
        (datas(&out), started.elapsed())
    });
    assert!(out.1 < Duration::from_secs(2), "returned after {:?}", out.1);
    assert_eq!(journal("f9"), vec!["sent:a"]);
    assert_status(&t_a, AckStatus::Delivered, "a, flushed at the checkpoint");
    assert_status(&t_b, AckStatus::Pending, "b waits on");
    // The end of the input settles it: still held, it fails after pending_wait.
    assert!(apply_and_settle(&p, vec![ctrl()]).is_ok());
    assert_status(&t_b, AckStatus::Failed, "b, held too long");
}

/// Finding 6: a process whose lease ran out (its renewals failed) was warned and sent
/// anyway. Now a send checks the lease first and fails the message unsent.
#[test]
fn a_message_whose_lease_lapsed_is_not_sent() {
    let f = Fixture::new();
    let t = f.faulty(
        json!({"fail": {"renew": 1000}}),
        send("f6-lapsed"),
        json!({"lease": "300ms", "ttl_offset": "1h"}),
    );
    let p = pipeline(vec![("lock", t)]);
    let (a, t_a) = tracked("a");
    testing::block_on(async {
        p.apply(vec![a]).await.unwrap();
        // More than two thirds of the lease, with every renewal failing.
        tokio::time::sleep(Duration::from_millis(260)).await;
        let r = p.apply(vec![ctrl()]).await;
        p.settle(Instant::now() + Duration::from_secs(5)).await;
        r
    })
    .unwrap();
    assert_eq!(journal("f6-lapsed"), vec!["refused:a"]);
    assert_status(&t_a, AckStatus::Failed, "not sent");
}

/// Finding 6: a host whose clock is off by more than half the tolerated skew takes no key.
#[test]
fn a_host_whose_clock_is_off_takes_no_keys() {
    let f = Fixture::new();
    let t = f.faulty(
        json!({"clock_offset_ms": 30_000}),
        send("f6-clock"),
        json!({"clock_skew": "10s"}),
    );
    let p = pipeline(vec![("lock", t)]);
    let (a, t_a) = tracked("a");
    let err = apply_and_settle(&p, vec![a, ctrl()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("clock is at least 29.9 s ahead"), "{err}");
    assert!(err.contains("10s clock_skew"), "{err}");
    assert_status(&t_a, AckStatus::Failed, "refused");
    assert!(journal("f6-clock").is_empty());
    assert!(f.records().is_empty(), "no key taken");
    // Within the bound: taken.
    let t = f.faulty(
        json!({"clock_offset_ms": 2_000}),
        send("f6-clock"),
        json!({"clock_skew": "10s"}),
    );
    let p = pipeline(vec![("lock", t)]);
    apply_and_settle(&p, vec![msg("a"), ctrl()]).unwrap();
    assert_eq!(journal("f6-clock"), vec!["sent:a"]);
}

/// Finding 8: every key owed a commit retried on its own backoff, so a store outage made
/// a call (and a warning) per key per round. Now the keys of a kind wait for one backoff
/// and go in one call.
#[test]
fn commits_owed_during_an_outage_are_retried_together() {
    let f = Fixture::new();
    let file = f.db.to_str().unwrap().to_string();
    let sink = json!([{"type": "fixture_send", "settings": {"name": "f8", "flush_at": 1}}]);
    let t = f.faulty(json!({"outage_ms": {"commit": 1500}}), sink, json!({}));
    let p = pipeline(vec![("lock", t)]);
    // 30 messages delivered one by one, 20 ms apart, with no ctrl: the keeper commits them
    // on its own, through a commit outage of 1.5 s (about 4 backoffs).
    testing::block_on(async {
        for i in 0..30 {
            p.apply(vec![msg(&format!("m{i}"))]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        p.apply(vec![ctrl()]).await.unwrap();
        p.settle(Instant::now() + Duration::from_secs(30)).await;
    });
    assert_eq!(f.records().iter().filter(|r| r.committed).count(), 30);
    let commits = crate::kv_store::lock::test_faulty::calls(&file, "commit");
    // One call per backoff, not one per key per backoff (over 100 before).
    assert!(commits <= 15, "{commits} commit calls for 30 keys");
}

/// The model check's finding 6: a copy of a message arriving while its key is owed an
/// abandonment (its first attempt delivered to one send and failed at another) cancels the
/// abandonment and takes the key again; the progress it carried must not be lost with it,
/// even when the store never heard of it.
#[test]
fn a_retake_keeps_the_progress_of_the_abandonment_it_cancels() {
    let f = Fixture::new();
    let t = f.faulty(
        json!({"fail": {"abandon": 1000}}),
        json!([plain_send("f6m-first"), send_failing("f6m-second", 1)]),
        json!({}),
    );
    let p = pipeline(vec![("lock", t)]);
    let (a, t_a) = tracked("a");
    let (again, t_again) = tracked("a");
    testing::block_on(async {
        let e = p.apply(vec![a, ctrl()]).await.unwrap_err();
        p.abort(&e.to_string()).await;
        // The abandonment keeps failing: the store knows nothing of what was delivered.
        p.apply(vec![again, ctrl()]).await.unwrap();
    });
    assert_status(&t_a, AckStatus::Failed, "the first copy");
    assert_status(&t_again, AckStatus::Delivered, "the retake");
    assert_eq!(journal("f6m-first"), vec!["sent:a", "skipped:a"]);
    assert_eq!(journal("f6m-second"), vec!["aborted:a", "sent:a"]);
}
