//! The behaviour every lock store must have, as one check that each store's tests run
//! (the DynamoDB store's against the emulator). Written once so that the three stores
//! cannot drift apart in what "held", "expired" and "not ours" mean.

use super::{AcquireRequest, Acquired, LockRecord, LockStatus, LockStore, Settled};

fn req(key: &str, ttl: i64, lease_until_ms: i64) -> AcquireRequest {
    AcquireRequest {
        key: key.to_string(),
        ttl,
        lease_until_ms,
    }
}

fn one(r: Vec<Result<Acquired, super::StoreError>>) -> Acquired {
    assert_eq!(r.len(), 1, "one result per request");
    r.into_iter().next().unwrap().expect("store call failed")
}

fn holder(a: &Acquired) -> LockRecord {
    match a {
        Acquired::Held(Some(r)) => r.clone(),
        other => panic!("expected the key to be held with its record, got {other:?}"),
    }
}

/// Runs the contract against `store`. Keys are prefixed with `prefix` so that runs against
/// a shared table do not meet. Times are fabricated around `now_ms`; `now_ms` must be close
/// to the real time for stores whose conditions use their own clock (none do today).
pub async fn check(store: &dyn LockStore, prefix: &str, now_ms: i64) {
    let now_s = now_ms / 1000;
    let k = |s: &str| format!("{prefix}{s}");
    let (a, b) = ("owner-a", "owner-b");

    // Absent keys are taken; results come back in request order.
    let reqs: Vec<_> = (0..40)
        // A TTL that outlives the time travel below, so the batched commit finds them.
        .map(|i| req(&k(&format!("many{i}")), now_s + 7200, now_ms + 60_000))
        .collect();
    let got = store.acquire(a, now_ms, &reqs, 8).await;
    assert_eq!(got.len(), 40);
    for (i, r) in got.into_iter().enumerate() {
        assert_eq!(r.expect("acquire"), Acquired::Taken, "key {i}");
    }

    // A pending lock with a live lease blocks everyone, its owner included, and the
    // record says who holds it and until when.
    let first = k("pending");
    assert_eq!(
        one(store
            .acquire(a, now_ms, &[req(&first, now_s + 600, now_ms + 60_000)], 1)
            .await),
        Acquired::Taken
    );
    for who in [a, b] {
        let r = holder(&one(store
            .acquire(who, now_ms, &[req(&first, now_s + 600, now_ms + 60_000)], 1)
            .await));
        assert_eq!(r.owner, a);
        assert_eq!(
            r.status,
            LockStatus::Pending {
                lease_until_ms: now_ms + 60_000
            }
        );
        assert_eq!(r.ttl, now_s + 600);
    }

    // Another owner can neither commit nor release it; nothing changes.
    let not_ours = store
        .commit(b, std::slice::from_ref(&first), 4)
        .await
        .unwrap();
    assert!(matches!(&not_ours[0], Settled::NotOwner(Some(r)) if r.owner == a));
    let not_ours = store
        .release(b, std::slice::from_ref(&first), 4)
        .await
        .unwrap();
    assert!(matches!(&not_ours[0], Settled::NotOwner(Some(r)) if r.owner == a));

    // The owner commits it; committed locks block until their TTL, leases no longer count.
    assert_eq!(
        store
            .commit(a, std::slice::from_ref(&first), 4)
            .await
            .unwrap(),
        vec![Settled::Ok]
    );
    let later = now_ms + 120_000;
    let r = holder(&one(store
        .acquire(b, later, &[req(&first, now_s + 900, later + 60_000)], 1)
        .await));
    assert_eq!((r.owner.as_str(), r.status), (a, LockStatus::Committed));
    // A committed lock cannot be released (its messages were delivered).
    assert!(matches!(
        &store
            .release(a, std::slice::from_ref(&first), 4)
            .await
            .unwrap()[0],
        Settled::NotOwner(Some(_))
    ));
    // Committing twice is not an error for the owner's bookkeeping: the key is not pending.
    assert!(matches!(
        &store
            .commit(a, std::slice::from_ref(&first), 4)
            .await
            .unwrap()[0],
        Settled::NotOwner(Some(_))
    ));

    // Past its TTL, a committed lock is taken over.
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
        Acquired::Taken
    );

    // A pending lock whose lease expired is taken over, and then the first owner can no
    // longer commit or release it: the takeover is never undone by the crashed owner.
    let crashed = k("crashed");
    assert_eq!(
        one(store
            .acquire(a, now_ms, &[req(&crashed, now_s + 600, now_ms + 1_000)], 1)
            .await),
        Acquired::Taken
    );
    let after_lease = now_ms + 2_000;
    assert_eq!(
        one(store
            .acquire(
                b,
                after_lease,
                &[req(&crashed, now_s + 600, after_lease + 60_000)],
                1
            )
            .await),
        Acquired::Taken
    );
    let late = store
        .commit(a, std::slice::from_ref(&crashed), 4)
        .await
        .unwrap();
    assert!(matches!(&late[0], Settled::NotOwner(Some(r)) if r.owner == b));
    let late = store
        .release(a, std::slice::from_ref(&crashed), 4)
        .await
        .unwrap();
    assert!(matches!(&late[0], Settled::NotOwner(Some(r)) if r.owner == b));

    // Release deletes the owner's pending lock: the key is free again at once.
    let released = k("released");
    store
        .acquire(
            a,
            now_ms,
            &[req(&released, now_s + 600, now_ms + 60_000)],
            1,
        )
        .await;
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
        Acquired::Taken
    );

    // Batched commit and release: per-key results in order, one foreign key among them
    // does not stop the others (more keys than one DynamoDB transaction holds).
    let mut keys: Vec<String> = (0..40).map(|i| k(&format!("many{i}"))).collect();
    keys.insert(17, crashed.clone());
    let commits = store.commit(a, &keys[..30], 4).await.unwrap();
    assert_eq!(commits.len(), 30);
    for (i, s) in commits.iter().enumerate() {
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
            .all(|r| r.unwrap() == Acquired::Taken)
    );
    assert_eq!(
        store.commit(a, &big, 4).await.unwrap(),
        vec![Settled::Ok; big.len()]
    );

    // Keys that were never taken are not ours.
    let ghost = store.release(a, &[k("ghost")], 4).await.unwrap();
    assert_eq!(ghost, vec![Settled::NotOwner(None)]);
}
