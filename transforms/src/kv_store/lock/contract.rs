//! The behaviour every lock store must have, as one check that each store's tests run
//! (the DynamoDB store's against the emulator). The rules themselves are
//! `sluice_lock_protocol`'s; this checks that a store applies them, per key and in
//! batches larger than one DynamoDB transaction, so that the stores cannot drift apart in
//! what "held", "expired", "taken over" and "not ours" mean.

// Compiled for tests only (`test-support`): it asserts, so it unwraps and panics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{
    AbandonRequest, AcquireRequest, Acquired, CommitRequest, LockRecord, LockStatus, LockStore,
    Prior, Progress, RenewRequest, Settled, StoreError,
};

fn req(key: &str, ttl: i64, lease_until_ms: i64) -> AcquireRequest {
    AcquireRequest {
        key: key.to_string(),
        ttl,
        lease_until_ms,
        skew_ms: 0,
        fresh_before_ms: None,
    }
}

fn commits(keys: &[String], ttl: i64) -> Vec<CommitRequest> {
    keys.iter()
        .map(|k| CommitRequest {
            key: k.clone(),
            ttl,
            note: None,
        })
        .collect()
}

fn abandons(keys: &[String], progress: &[&str]) -> Vec<AbandonRequest> {
    keys.iter()
        .map(|k| AbandonRequest {
            key: k.clone(),
            progress: Progress::from_entries(progress),
        })
        .collect()
}

fn one(r: Vec<Result<Acquired, StoreError>>) -> Acquired {
    assert_eq!(r.len(), 1, "one result per request");
    r.into_iter().next().unwrap().expect("store call failed")
}

fn holder(a: &Acquired) -> LockRecord {
    match a {
        Acquired::Held(Some(r)) => r.clone(),
        other => panic!("expected the key to be held with its record, got {other:?}"),
    }
}

fn prior(a: &Acquired) -> Option<Prior> {
    match a {
        Acquired::Taken { prior } => prior.clone(),
        other => panic!("expected the key to be taken, got {other:?}"),
    }
}

/// The two key-only changes, to check them alike.
#[derive(Clone, Copy)]
enum Op {
    Release,
    Abandon,
    Record,
}

impl Op {
    async fn run(self, store: &dyn LockStore, owner: &str, keys: &[String]) -> Vec<Settled> {
        let r = match self {
            Op::Release => store.release(owner, keys, 4).await,
            Op::Abandon => store.abandon(owner, &abandons(keys, &[]), 4).await,
            Op::Record => store.record(owner, &abandons(keys, &["s9:0>x"]), 4).await,
        };
        r.expect("store call failed")
    }
}

/// Runs the contract against `store`. Keys are prefixed with `prefix` so that runs against
/// a shared table do not meet. Times are fabricated around `now_ms`; `now_ms` must be close
/// to the real time for stores whose conditions use their own clock (none do today).
pub async fn check(store: &dyn LockStore, prefix: &str, now_ms: i64) {
    let now_s = now_ms / 1000;
    let k = |s: &str| format!("{prefix}{s}");
    let (a, b) = ("owner-a", "owner-b");

    // Absent keys are taken fresh; results come back in request order.
    let reqs: Vec<_> = (0..40)
        .map(|i| req(&k(&format!("many{i}")), now_s + 7200, now_ms + 60_000))
        .collect();
    let got = store.acquire(a, now_ms, &reqs, 8).await;
    assert_eq!(got.len(), 40);
    for (i, r) in got.into_iter().enumerate() {
        assert_eq!(r.expect("acquire"), Acquired::FRESH, "key {i}");
    }

    // A pending lock with a live lease blocks every other owner, and the record says who
    // holds it, until when, and since when; its TTL is kept past the lease.
    let first = k("pending");
    let short_ttl = now_s + 10; // shorter than the lease: must not free it
    assert_eq!(
        one(store
            .acquire(a, now_ms, &[req(&first, short_ttl, now_ms + 60_000)], 1)
            .await),
        Acquired::FRESH
    );
    let r = holder(&one(store
        .acquire(b, now_ms, &[req(&first, now_s + 600, now_ms + 60_000)], 1)
        .await));
    assert_eq!(r.owner, a);
    assert_eq!(
        r.status,
        LockStatus::Pending {
            lease_until_ms: now_ms + 60_000
        }
    );
    assert!(
        r.ttl > (now_ms + 60_000) / 1000,
        "a pending lock outlives its lease: {r:?}"
    );
    assert_eq!(r.since_ms, Some(now_ms));
    // Past its TTL but within its lease, it still blocks.
    let after_ttl = (short_ttl + 1) * 1000;
    assert!(matches!(
        one(store
            .acquire(
                b,
                after_ttl,
                &[req(&first, now_s + 600, after_ttl + 60_000)],
                1
            )
            .await),
        Acquired::Held(Some(_))
    ));
    // Its owner takes it again (an answer it lost, a key it could not give back), and is
    // told it was pending, since when.
    let again = one(store
        .acquire(
            a,
            now_ms + 5,
            &[req(&first, now_s + 600, now_ms + 60_000)],
            1,
        )
        .await);
    assert_eq!(
        prior(&again),
        Some(Prior {
            owner: a.into(),
            since_ms: now_ms,
            progress: Default::default(),
        })
    );

    // Another owner can neither commit, renew, release nor abandon it; nothing changes.
    let not_ours = store
        .commit(b, &commits(std::slice::from_ref(&first), now_s + 600), 4)
        .await
        .unwrap();
    assert!(matches!(&not_ours[0], Settled::NotOwner(Some(r)) if r.owner == a));
    let renewal = RenewRequest {
        key: first.clone(),
        ttl: now_s + 600,
        lease_until_ms: now_ms + 90_000,
    };
    let not_ours = store
        .renew(b, std::slice::from_ref(&renewal), 4)
        .await
        .unwrap();
    assert!(matches!(&not_ours[0], Settled::NotOwner(Some(r)) if r.owner == a));
    for op in [Op::Release, Op::Abandon, Op::Record] {
        let not_ours = op.run(store, b, std::slice::from_ref(&first)).await;
        assert!(matches!(&not_ours[0], Settled::NotOwner(Some(r)) if r.owner == a));
    }

    // The owner renews it: the lease moves.
    assert_eq!(
        store.renew(a, &[renewal], 4).await.unwrap(),
        vec![Settled::Ok]
    );
    let r = holder(&one(store
        .acquire(
            b,
            now_ms + 80_000,
            &[req(&first, now_s + 600, now_ms + 140_000)],
            1,
        )
        .await));
    assert_eq!(
        r.status,
        LockStatus::Pending {
            lease_until_ms: now_ms + 90_000
        }
    );

    // The owner commits it; committed locks block until their TTL, leases no longer count.
    assert_eq!(
        store
            .commit(a, &commits(std::slice::from_ref(&first), now_s + 600), 4)
            .await
            .unwrap(),
        vec![Settled::Ok]
    );
    let later = now_ms + 120_000;
    let r = holder(&one(store
        .acquire(b, later, &[req(&first, now_s + 900, later + 60_000)], 1)
        .await));
    assert_eq!((r.owner.as_str(), r.status), (a, LockStatus::Committed));
    assert_eq!(r.ttl, now_s + 600);
    // The owner cannot take its own committed lock either: its message was delivered.
    assert!(matches!(
        one(store
            .acquire(a, later, &[req(&first, now_s + 900, later + 60_000)], 1)
            .await),
        Acquired::Held(Some(_))
    ));
    // A committed lock cannot be released or abandoned (its message was delivered).
    for op in [Op::Release, Op::Abandon] {
        assert!(matches!(
            &op.run(store, a, std::slice::from_ref(&first)).await[0],
            Settled::NotOwner(Some(_))
        ));
    }
    // Committing twice succeeds for its owner (a retry whose first answer was lost).
    assert_eq!(
        store
            .commit(a, &commits(std::slice::from_ref(&first), now_s + 600), 4)
            .await
            .unwrap(),
        vec![Settled::Ok]
    );

    // Past its TTL, a committed lock is taken over, fresh.
    let after_ttl = (now_s + 601) * 1000;
    assert_eq!(
        one(store
            .acquire(
                b,
                after_ttl,
                &[req(&first, now_s + 1200, after_ttl + 60_000)],
                1
            )
            .await),
        Acquired::FRESH
    );

    // A pending lock whose lease expired is taken over, with its history; then the first
    // owner can no longer commit or release it: the takeover is never undone by the
    // crashed owner.
    let crashed = k("crashed");
    one(store
        .acquire(a, now_ms, &[req(&crashed, now_s + 600, now_ms + 1_000)], 1)
        .await);
    let after_lease = now_ms + 2_000;
    let took = one(store
        .acquire(
            b,
            after_lease,
            &[req(&crashed, now_s + 600, after_lease + 60_000)],
            1,
        )
        .await);
    assert_eq!(
        prior(&took),
        Some(Prior {
            owner: a.into(),
            since_ms: now_ms,
            progress: Default::default(),
        })
    );
    let late = store
        .commit(a, &commits(std::slice::from_ref(&crashed), now_s + 600), 4)
        .await
        .unwrap();
    assert!(matches!(&late[0], Settled::NotOwner(Some(r)) if r.owner == b));
    let late = store
        .release(a, std::slice::from_ref(&crashed), 4)
        .await
        .unwrap();
    assert!(matches!(&late[0], Settled::NotOwner(Some(r)) if r.owner == b));

    // Release deletes the owner's pending lock: the key is free again at once, fresh.
    let released = k("released");
    one(store
        .acquire(
            a,
            now_ms,
            &[req(&released, now_s + 600, now_ms + 60_000)],
            1,
        )
        .await);
    assert_eq!(
        store
            .release(a, std::slice::from_ref(&released), 4)
            .await
            .unwrap(),
        vec![Settled::Ok]
    );
    assert_eq!(
        one(store
            .acquire(
                b,
                now_ms,
                &[req(&released, now_s + 600, now_ms + 60_000)],
                1
            )
            .await),
        Acquired::FRESH
    );

    // Abandon ends the lease but keeps the history: the next owner takes it at once and
    // learns that an earlier attempt may have delivered the message.
    let unsure = k("abandoned");
    one(store
        .acquire(a, now_ms, &[req(&unsure, now_s + 600, now_ms + 60_000)], 1)
        .await);
    assert_eq!(
        store
            .abandon(a, &abandons(std::slice::from_ref(&unsure), &[]), 4)
            .await
            .unwrap(),
        vec![Settled::Ok]
    );
    let took = one(store
        .acquire(
            b,
            now_ms + 10,
            &[req(&unsure, now_s + 600, now_ms + 60_000)],
            1,
        )
        .await);
    assert_eq!(
        prior(&took),
        Some(Prior {
            owner: a.into(),
            since_ms: now_ms,
            progress: Default::default(),
        })
    );

    // Abandoning with progress keeps what the attempt delivered for the next taker, who
    // adds its own when it abandons in turn; the progress is merged, never replaced, and a
    // commit clears it.
    let partly = k("partly");
    one(store
        .acquire(a, now_ms, &[req(&partly, now_s + 600, now_ms + 60_000)], 1)
        .await);
    // Recording a placement keeps the lease (another owner cannot take the key) and adds
    // to the progress like an abandonment, names with any character but a line break.
    assert_eq!(
        store
            .record(
                a,
                &abandons(std::slice::from_ref(&partly), &["s2:3>out/a:b>c.json"]),
                4
            )
            .await
            .unwrap(),
        vec![Settled::Ok]
    );
    assert!(matches!(
        one(store
            .acquire(
                b,
                now_ms + 10,
                &[req(&partly, now_s + 600, now_ms + 60_000)],
                1
            )
            .await),
        Acquired::Held(_)
    ));
    assert_eq!(
        store
            .abandon(
                a,
                &abandons(std::slice::from_ref(&partly), &["s1:0", "s2:0-2"]),
                4
            )
            .await
            .unwrap(),
        vec![Settled::Ok]
    );
    let took = prior(&one(store
        .acquire(
            b,
            now_ms + 20,
            &[req(&partly, now_s + 600, now_ms + 60_000)],
            1,
        )
        .await))
    .expect("a prior holder");
    assert_eq!(
        (took.owner.as_str(), took.since_ms, took.progress.entries()),
        (
            a,
            now_ms,
            vec![
                "s1:0".to_string(),
                "s2:0-2".to_string(),
                "s2:3>out/a:b>c.json".to_string()
            ]
        )
    );
    assert_eq!(
        store
            .abandon(
                b,
                &abandons(std::slice::from_ref(&partly), &["s2:3", "s3:0"]),
                4
            )
            .await
            .unwrap(),
        vec![Settled::Ok]
    );
    let took = prior(&one(store
        .acquire(
            a,
            now_ms + 30,
            &[req(&partly, now_s + 600, now_ms + 60_000)],
            1,
        )
        .await))
    .expect("a prior holder");
    assert_eq!(
        took.progress,
        Progress::from_entries(["s1:0", "s2:0-3", "s3:0", "s2:3>out/a:b>c.json"]),
        "merged"
    );
    assert_eq!(
        store
            .commit(a, &commits(std::slice::from_ref(&partly), now_s + 600), 4)
            .await
            .unwrap(),
        vec![Settled::Ok]
    );
    let r = holder(&one(store
        .acquire(
            b,
            now_ms + 40,
            &[req(&partly, now_s + 600, now_ms + 60_000)],
            1,
        )
        .await));
    assert_eq!(
        (r.status, r.progress.is_empty()),
        (LockStatus::Committed, true)
    );

    // Windows: a pending chain that began before the taker's `fresh_before_ms` (its
    // message's window passed) is taken as new, its history dropped; a younger one is taken
    // over with it.
    for (case, fresh_before, inherits) in [("young", now_ms - 1, true), ("old", now_ms + 1, false)]
    {
        let key = k(&format!("window-{case}"));
        one(store
            .acquire(a, now_ms, &[req(&key, now_s + 600, now_ms + 1_000)], 1)
            .await);
        assert_eq!(
            store
                .abandon(
                    a,
                    &abandons(std::slice::from_ref(&key), &["s:0", "s:0>o"]),
                    4
                )
                .await
                .unwrap(),
            vec![Settled::Ok]
        );
        let later = now_ms + 5_000;
        let took = one(store
            .acquire(
                b,
                later,
                &[AcquireRequest {
                    fresh_before_ms: Some(fresh_before),
                    ..req(&key, now_s + 600, later + 60_000)
                }],
                1,
            )
            .await);
        match (inherits, prior(&took)) {
            (true, Some(p)) => assert_eq!(
                (p.since_ms, p.progress.entries()),
                (now_ms, vec!["s:0".to_string(), "s:0>o".to_string()]),
                "{case}"
            ),
            (false, None) => {}
            (_, other) => panic!("{case}: {other:?}"),
        }
        // What the store now holds says the same to the next taker.
        assert_eq!(
            store
                .abandon(b, &abandons(std::slice::from_ref(&key), &[]), 4)
                .await
                .unwrap(),
            vec![Settled::Ok]
        );
        let next = prior(&one(store
            .acquire(a, later + 10, &[req(&key, now_s + 600, later + 60_000)], 1)
            .await))
        .expect("a prior holder");
        let want_since = if inherits { now_ms } else { later };
        assert_eq!(next.since_ms, want_since, "{case}");
        assert_eq!(next.progress.is_empty(), !inherits, "{case}");
    }

    // Clocks: a lease blocks until its end plus the tolerated skew of the taker's request.
    let skewed = k("skewed");
    one(store
        .acquire(a, now_ms, &[req(&skewed, now_s + 600, now_ms + 1_000)], 1)
        .await);
    let skew = |at: i64| AcquireRequest {
        skew_ms: 5_000,
        fresh_before_ms: None,
        ..req(&skewed, now_s + 600, at + 60_000)
    };
    for at in [now_ms + 2_000, now_ms + 6_000] {
        assert!(
            matches!(
                one(store.acquire(b, at, &[skew(at)], 1).await),
                Acquired::Held(Some(_))
            ),
            "{} ms after the lease ended, within the 5 s skew",
            at - now_ms - 1_000
        );
    }
    let at = now_ms + 6_001;
    assert!(prior(&one(store.acquire(b, at, &[skew(at)], 1).await)).is_some());

    // Batched commit and release: per-key results in order, one foreign key among them
    // does not stop the others (more keys than one DynamoDB transaction holds).
    let mut keys: Vec<String> = (0..40).map(|i| k(&format!("many{i}"))).collect();
    keys.insert(17, crashed.clone());
    let committed = store
        .commit(a, &commits(&keys[..30], now_s + 7200), 4)
        .await
        .unwrap();
    assert_eq!(committed.len(), 30);
    for (i, s) in committed.iter().enumerate() {
        if i == 17 {
            assert!(
                matches!(s, Settled::NotOwner(Some(r)) if r.owner == b),
                "{s:?}"
            );
        } else {
            assert_eq!(s, &Settled::Ok, "key {}", keys[i]);
        }
    }
    let releases = store.release(a, &keys[30..], 4).await.unwrap();
    assert_eq!(releases, vec![Settled::Ok; keys.len() - 30]);
    let big: Vec<String> = (0..230).map(|i| k(&format!("big{i}"))).collect();
    let reqs: Vec<_> = big
        .iter()
        .map(|key| req(key, now_s + 600, now_ms + 60_000))
        .collect();
    assert!(
        store
            .acquire(a, now_ms, &reqs, 32)
            .await
            .into_iter()
            .all(|r| r.unwrap() == Acquired::FRESH)
    );
    let renewals: Vec<RenewRequest> = big
        .iter()
        .map(|key| RenewRequest {
            key: key.clone(),
            ttl: now_s + 600,
            lease_until_ms: now_ms + 120_000,
        })
        .collect();
    assert_eq!(
        store.renew(a, &renewals, 4).await.unwrap(),
        vec![Settled::Ok; big.len()]
    );
    assert_eq!(
        store
            .commit(a, &commits(&big, now_s + 600), 4)
            .await
            .unwrap(),
        vec![Settled::Ok; big.len()]
    );

    // One call over keys in every state, spread over more than one transaction's worth,
    // is sorted out key by key (a store that takes keys in batches must not let one key's
    // state decide another's): free keys, a lock committed by b and still live, one past
    // its TTL, b's pending lock with a live lease, b's with a lapsed lease, and a's own.
    let later = now_ms + 10_000;
    let state = |s: &str| k(&format!("mixed-{s}"));
    let (live, lapsed) = (later + 60_000, now_ms + 1_000);
    for (key, lease) in [
        ("committed", live),
        ("expired", live),
        ("pending", live),
        ("lapsed", lapsed),
    ] {
        assert_eq!(
            one(store
                .acquire(b, now_ms, &[req(&state(key), now_s + 600, lease)], 1)
                .await),
            Acquired::FRESH
        );
    }
    let done = [
        CommitRequest {
            key: state("committed"),
            ttl: now_s + 600,
            note: None,
        },
        CommitRequest {
            key: state("expired"),
            ttl: now_s,
            note: None,
        },
    ];
    assert_eq!(
        store.commit(b, &done, 4).await.unwrap(),
        vec![Settled::Ok; 2]
    );
    assert_eq!(
        one(store
            .acquire(a, now_ms, &[req(&state("own"), now_s + 600, live)], 1)
            .await),
        Acquired::FRESH
    );
    let mut mixed: Vec<String> = (0..150).map(|i| state(&format!("free{i}"))).collect();
    for (at, key) in [
        (3, "committed"),
        (50, "expired"),
        (99, "pending"),
        (100, "lapsed"),
        (149, "own"),
    ] {
        mixed[at] = state(key);
    }
    let reqs: Vec<_> = mixed
        .iter()
        .map(|key| req(key, now_s + 600, later + 60_000))
        .collect();
    let got = store.acquire(a, later, &reqs, 4).await;
    assert_eq!(got.len(), mixed.len());
    for (i, r) in got.into_iter().enumerate() {
        let r = r.expect("acquire");
        match i {
            3 => assert!(
                matches!(&r, Acquired::Held(Some(h)) if h.owner == b && h.status == LockStatus::Committed),
                "committed: {r:?}"
            ),
            99 => assert!(
                matches!(&r, Acquired::Held(Some(h)) if h.owner == b && h.lease_until_ms() == Some(live)),
                "pending: {r:?}"
            ),
            100 => assert_eq!(
                prior(&r),
                Some(Prior {
                    owner: b.into(),
                    since_ms: now_ms,
                    progress: Default::default(),
                }),
                "lapsed: {r:?}"
            ),
            149 => assert_eq!(
                prior(&r),
                Some(Prior {
                    owner: a.into(),
                    since_ms: now_ms,
                    progress: Default::default(),
                }),
                "own: {r:?}"
            ),
            // Free, and past its TTL.
            _ => assert_eq!(r, Acquired::FRESH, "key {}", mixed[i]),
        }
    }

    // Keys that were never taken are not ours.
    let ghost = store.release(a, &[k("ghost")], 4).await.unwrap();
    assert_eq!(ghost, vec![Settled::NotOwner(None)]);
}
