//! The loss paths the review of the lock found: each test fails on the lock as it was
//! before its fix (a message the lock acknowledged although no sink had it, or one it
//! blocked for good).

use super::*;

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
