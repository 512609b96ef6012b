//! The duplicate paths: store failures, slow and idle stores, leases and crashes, where a
//! message could be delivered twice; each test fails on the lock as it was before its fix.

use super::*;

/// Tries, every 100 ms for `checks` times, to take `keys` as another owner: none may be
/// free while this process still answers for them.
async fn never_free_for_another_owner(f: &Fixture, keys: &[&str], checks: usize) {
    for _ in 0..checks {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = now_ms();
        let requests: Vec<AcquireRequest> = keys
            .iter()
            .map(|k| AcquireRequest {
                key: hash(k),
                ttl: now / 1000 + 60,
                lease_until_ms: now + 1000,
                skew_ms: 0,
                fresh_before_ms: None,
            })
            .collect();
        let got = f.other().acquire("them", now, &requests, 1).await;
        for (k, r) in keys.iter().zip(&got) {
            assert!(
                !r.as_ref().unwrap().is_taken(),
                "{k} taken over while this process answers for it: {:?}",
                f.records()
            );
        }
    }
}

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
        never_free_for_another_owner(&f, &["slow"], 9).await;
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
            skew_ms: 0,
            fresh_before_ms: None,
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
    drop(p); // and it settles nothing
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
fn a_delivered_key_keeps_its_lease_while_its_commit_keeps_failing() {
    // Before: a delivered key was no longer renewed, so a commit outage longer than the
    // lease let another worker take it over and send the message again (the `gcs` cell of
    // the fault campaign, whose commit windows last up to 8 s over a 3 s lease).
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"outage_ms": {"commit": 1500}}),
        json!([{"type": "fixture_send", "settings": {"name": "lock-commit-lease", "flush_at": 1}}]),
        json!({"lease": "300ms", "ttl_offset": "1h"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    testing::block_on(async {
        drop(p.apply(vec![msg("d")]).await.unwrap());
        never_free_for_another_owner(&f, &["d"], 12).await;
        p.apply(vec![ctrl()]).await.unwrap();
        p.settle(Instant::now() + Duration::from_secs(5)).await;
    });
    assert_eq!(journal("lock-commit-lease"), vec!["sent:d"]);
    let r = f.record(&hash("d")).unwrap();
    assert!(r.committed && r.owner != "them", "{r:?}");
}

#[test]
fn a_commit_held_for_seconds_does_not_hold_up_renewals() {
    // Before: store calls waited for one another, so one commit held until its attempt
    // timed out (5 s) stopped every renewal behind it, and the keys of messages still on
    // their way ran out of lease.
    let f = Fixture::new();
    let lock = f.faulty(
        json!({"slow_ms": {"commit": 1500}}),
        json!([{"type": "fixture_send", "settings": {"name": "lock-slow-commit", "flush_at": 2}}]),
        json!({"lease": "300ms", "ttl_offset": "1h"}),
    );
    let p = pipeline(vec![("lock", lock)]);
    testing::block_on(async {
        // a and b are sent at once (their commit hangs); c stays with the send.
        drop(p.apply(vec![msg("a"), msg("b")]).await.unwrap());
        drop(p.apply(vec![msg("c")]).await.unwrap());
        never_free_for_another_owner(&f, &["a", "b", "c"], 12).await;
        p.apply(vec![ctrl()]).await.unwrap();
        p.settle(Instant::now() + Duration::from_secs(10)).await;
    });
    assert_eq!(
        journal("lock-slow-commit"),
        vec!["sent:a", "sent:b", "sent:c"]
    );
    let recs = f.records();
    assert!(
        recs.len() == 3 && recs.iter().all(|r| r.committed && r.owner != "them"),
        "{recs:?}"
    );
}
