//! `lock_acquire: 'epochs'` against the DynamoDB emulator: the lock store contract, the
//! records it leaves (keys pending in their epoch, one epoch record committing them), and
//! the fence between an owner's epoch commit and a takeover (`epochs.rs`).

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::dynamodb;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::json;
use sluice_transforms::kv_store::aws_dynamodb::{DynamoDbStore, FirstReadRule};
use sluice_transforms::kv_store::{
    AcquireRequest, Acquired, CommitRequest, LockStatus, LockStore, RenewRequest, Settled, contract,
};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_millis() as i64
}

async fn store(table_prefix: &str, sort_key: bool) -> (String, String, DynamoDbStore) {
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table(table_prefix);
    let sk = sort_key.then_some("SK");
    dynamodb::create_lock_table(&endpoint, &table, "PK", sk, "ttl").await;
    let mut attributes = json!({"partition_key": "PK", "ttl": "ttl"});
    if sort_key {
        attributes["sort_key"] = json!("SK");
    }
    let settings: sluice_engine::Value = serde_json::from_value(json!({
        "aws": {"arn": table},
        "attributes": attributes,
        "lock_acquire": "epochs",
    }))
    .expect("settings as a sluice value");
    let store = DynamoDbStore::from_settings(&settings)
        .expect("valid settings")
        .with_local_endpoint(&endpoint);
    (endpoint, table, store)
}

fn req(key: &str, now: i64, lease_ms: i64) -> AcquireRequest {
    AcquireRequest {
        key: key.into(),
        ttl: now / 1000 + 600,
        lease_until_ms: now + lease_ms,
        skew_ms: 0,
        fresh_before_ms: None,
    }
}

fn commit(key: &str, now: i64) -> CommitRequest {
    CommitRequest {
        key: key.into(),
        ttl: now / 1000 + 600,
        note: None,
    }
}

fn renewal(key: &str, now: i64, lease_ms: i64) -> RenewRequest {
    RenewRequest {
        key: key.into(),
        ttl: now / 1000 + 600,
        lease_until_ms: now + lease_ms,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_holds_committing_by_epoch() {
    for sort_key in [false, true] {
        let (_, _, store) = store("locks-epochs", sort_key).await;
        contract::check(&store, "ep/", now_ms()).await;
    }
    // Every piece read first, and every piece written unread (`FirstReadRule`).
    for rule in [FirstReadRule::Always, FirstReadRule::Never] {
        let (_, _, store) = store("locks-epochs", false).await;
        contract::check(&store.with_first_read(rule), "ep/", now_ms()).await;
    }
}

/// Two keys taken together are committed with one write to their epoch's record; their
/// own records stay pending in the epoch, and read as committed (duplicates) to another
/// owner, whose lease is long over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_write_commits_a_piece_and_its_keys_read_as_committed() {
    let (endpoint, table, store) = store("locks-epoch-records", false).await;
    let now = now_ms();
    let reqs = [req("a", now, 1_000), req("b", now, 1_000)];
    let got = store.acquire("owner-a", now, &reqs, 4).await;
    assert!(got.iter().all(|g| g.as_ref().expect("acquire").is_taken()));
    let before = store.consumed_units();
    let settled = store
        .commit("owner-a", &[commit("a", now), commit("b", now)], 4)
        .await
        .expect("commit");
    assert_eq!(settled, [Settled::Ok, Settled::Ok]);
    let after = store.consumed_units();
    assert_eq!(
        after.write - before.write,
        1.0,
        "one write commits both keys"
    );

    let a = dynamodb::get_item(&endpoint, &table, &[("PK", "a")])
        .await
        .expect("the key stays");
    assert_eq!(a["lock_status"], "epoch");
    assert_eq!(a["lock_slot"], "0");
    let epoch = format!("#epoch:owner-a:{}", a["lock_epoch"]);
    let record = dynamodb::get_item(&endpoint, &table, &[("PK", &epoch)])
        .await
        .expect("the epoch record");
    assert!(
        record["lock_committed"].contains("\"0\"") && record["lock_committed"].contains("\"1\""),
        "{record:?}"
    );
    let ttl: i64 = record["ttl"].parse().expect("a TTL");
    assert!(ttl >= now / 1000 + 600, "{ttl}");

    // Another owner, after the lease: both are duplicates, committed.
    let later = now + 5_000;
    let got = store
        .acquire(
            "owner-b",
            later,
            &[req("a", later, 60_000), req("b", later, 60_000)],
            4,
        )
        .await;
    for g in got {
        match g.expect("acquire") {
            Acquired::Held(Some(rec)) => assert_eq!(rec.status, LockStatus::Committed),
            other => panic!("{other:?}"),
        }
    }
}

/// A taker aborts the slot of a key whose lease ended before it writes the key; the
/// owner's late epoch commit then finds the abort counter moved and commits that key on
/// its record instead, conditional on still holding it. Here the owner comes first (the
/// abort is written as a taker would), so the key is committed and the taker finds it so;
/// and a key the taker did take over is not committed by the owner at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_slot_is_committed_on_its_record_or_not_at_all() {
    let (endpoint, table, store) = store("locks-epoch-abort", false).await;
    let now = now_ms();
    let reqs = [req("x", now, 1_000), req("y", now, 1_000)];
    let got = store.acquire("owner-a", now, &reqs, 4).await;
    assert!(got.iter().all(|g| g.as_ref().expect("acquire").is_taken()));
    let x = dynamodb::get_item(&endpoint, &table, &[("PK", "x")])
        .await
        .expect("x");
    let epoch = format!("#epoch:owner-a:{}", x["lock_epoch"]);
    // A taker aborted slot 0 (x), and has not written the key yet.
    let item: HashMap<String, AttributeValue> = [
        ("PK".to_string(), AttributeValue::S(epoch.clone())),
        (
            "lock_aborted".to_string(),
            AttributeValue::Ns(vec!["0".into()]),
        ),
        ("lock_v".to_string(), AttributeValue::N("1".into())),
        (
            "ttl".to_string(),
            AttributeValue::N((now / 1000 + 600).to_string()),
        ),
    ]
    .into_iter()
    .collect();
    dynamodb::put_item(&endpoint, &table, item).await;
    let settled = store
        .commit("owner-a", &[commit("x", now), commit("y", now)], 4)
        .await
        .expect("commit");
    assert_eq!(settled, [Settled::Ok, Settled::Ok]);
    let x = dynamodb::get_item(&endpoint, &table, &[("PK", "x")])
        .await
        .expect("x");
    assert_eq!(x["lock_status"], "committed", "x on its record: {x:?}");
    assert!(!x.contains_key("lock_epoch"), "{x:?}");
    let record = dynamodb::get_item(&endpoint, &table, &[("PK", &epoch)])
        .await
        .expect("the epoch record");
    assert!(
        !record["lock_committed"].contains("\"0\""),
        "x never in the epoch: {record:?}"
    );
    assert!(
        record["lock_committed"].contains("\"1\""),
        "y in the epoch: {record:?}"
    );

    // A key taken over after its lease: the owner's late commit is refused.
    let z = [req("z", now, 1_000)];
    assert!(
        store.acquire("owner-a", now, &z, 1).await[0]
            .as_ref()
            .expect("z")
            .is_taken()
    );
    let later = now + 5_000;
    let got = store
        .acquire("owner-b", later, &[req("z", later, 60_000)], 1)
        .await;
    match got[0].as_ref().expect("takeover") {
        Acquired::Taken { prior: Some(p) } => assert_eq!(p.owner, "owner-a"),
        other => panic!("{other:?}"),
    }
    let settled = store
        .commit("owner-a", &[commit("z", now)], 1)
        .await
        .expect("commit");
    assert!(matches!(settled[0], Settled::NotOwner(_)), "{settled:?}");
    let z = dynamodb::get_item(&endpoint, &table, &[("PK", "z")])
        .await
        .expect("z");
    assert_eq!(z["lock_owner"], "owner-b");
    assert_eq!(z["lock_status"], "epoch");
    // owner-b commits it; a third owner finds it committed.
    let settled = store
        .commit("owner-b", &[commit("z", later)], 1)
        .await
        .expect("commit");
    assert_eq!(settled, [Settled::Ok]);
    let last = later + 120_000;
    let got = store
        .acquire("owner-c", last, &[req("z", last, 60_000)], 1)
        .await;
    match got[0].as_ref().expect("acquire") {
        Acquired::Held(Some(rec)) => assert_eq!(rec.status, LockStatus::Committed),
        other => panic!("{other:?}"),
    }
}

/// A key taken with a TTL that ends before the one its commit counts from the commit
/// (`ttl_offset` counts from when a key is taken, then at least that long after its
/// commit): the commit writes its TTL on the epoch record only, and the key is a
/// duplicate until then, whatever its own record's TTL says, asked for once or twice in
/// one call (the second is taken alone, which must not take a key pending in an epoch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_key_is_a_duplicate_until_its_commits_ttl() {
    let (_, _, store) = store("locks-epoch-window", false).await;
    let now = now_ms();
    let mut taken = req("w", now, 1_000);
    taken.ttl = now / 1000 + 30;
    let got = store.acquire("owner-a", now, &[taken], 1).await;
    assert!(got[0].as_ref().expect("acquire").is_taken());
    let settled = store
        .commit("owner-a", &[commit("w", now)], 1)
        .await
        .expect("commit");
    assert_eq!(settled, [Settled::Ok]);
    // Past the key's own TTL, inside the commit's.
    let later = now + 60_000;
    for asked in [1, 2] {
        let reqs = vec![req("w", later, 60_000); asked];
        for got in store.acquire("owner-b", later, &reqs, 4).await {
            // Held by owner-a: committed, or (the copy asked for alone, which does not
            // read epochs) pending, to be asked for again.
            match got.expect("acquire") {
                Acquired::Held(Some(rec)) => {
                    assert_eq!(rec.owner, "owner-a", "asked {asked} times");
                    if asked == 1 {
                        assert_eq!(rec.status, LockStatus::Committed);
                    }
                }
                other => panic!("asked {asked} times: {other:?}"),
            }
        }
    }
}

/// A commit whose TTL is beyond the key item's own (a commit made after the lease, or a
/// long-delayed retry) is made on the key's record, which then keeps the key for the whole
/// window: in the epoch alone, DynamoDB's TTL deletion could remove the key item first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_later_than_the_keys_own_ttl_is_made_on_its_record() {
    let (endpoint, table, store) = store("locks-epoch-late", false).await;
    let now = now_ms();
    let reqs = [req("early", now, 1_000), req("late", now, 1_000)];
    let got = store.acquire("owner-a", now, &reqs, 4).await;
    assert!(got.iter().all(|g| g.as_ref().expect("acquire").is_taken()));
    let late = CommitRequest {
        key: "late".into(),
        ttl: now / 1000 + 10_000,
        note: None,
    };
    let settled = store
        .commit("owner-a", &[commit("early", now), late], 4)
        .await
        .expect("commit");
    assert_eq!(settled, [Settled::Ok, Settled::Ok]);
    let early = dynamodb::get_item(&endpoint, &table, &[("PK", "early")])
        .await
        .expect("early");
    assert_eq!(early["lock_status"], "epoch", "{early:?}");
    let late = dynamodb::get_item(&endpoint, &table, &[("PK", "late")])
        .await
        .expect("late");
    assert_eq!(late["lock_status"], "committed", "{late:?}");
    assert_eq!(late["ttl"], (now / 1000 + 10_000).to_string());
    assert!(!late.contains_key("lock_epoch"), "{late:?}");

    // Past that TTL, the record committed on its own is taken fresh by a statement, into
    // the taker's epoch.
    let after = now + 10_001_000;
    let got = store
        .acquire("owner-b", after, &[req("late", after, 60_000)], 1)
        .await;
    assert_eq!(got[0].as_ref().expect("acquire"), &Acquired::FRESH);
    let late = dynamodb::get_item(&endpoint, &table, &[("PK", "late")])
        .await
        .expect("late");
    assert_eq!(
        (late["lock_owner"].as_str(), late["lock_status"].as_str()),
        ("owner-b", "epoch"),
        "{late:?}"
    );
}

/// The keeper renews a delivered key while its commit is under way, and a commit call
/// answers only once every epoch in it is done: a renewal can reach a key whose epoch
/// commit has landed. The key's record still names its epoch (the commit writes only the
/// epoch record), so the renewal is refused; it is answered as this owner's commit, which
/// the keeper takes for "committed meanwhile" (not reported), while a key another owner
/// took over is answered with that owner's record (reported). Before, the refusal came
/// back with this owner's record read as pending, and the keeper warned that the key was
/// taken over, naming the process itself as the holder (the fault campaign's `*_epoch`
/// cells: hundreds of such warnings a run, none in the other modes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_after_the_owners_own_epoch_commit_is_answered_as_committed() {
    let (_, _, store) = store("locks-epoch-renew", false).await;
    let now = now_ms();
    let reqs = [
        req("c", now, 1_000),
        req("d", now, 1_000),
        req("t", now, 1_000),
    ];
    let got = store.acquire("owner-a", now, &reqs, 4).await;
    assert!(got.iter().all(|g| g.as_ref().expect("acquire").is_taken()));
    let settled = store
        .commit("owner-a", &[commit("c", now), commit("d", now)], 4)
        .await
        .expect("commit");
    assert_eq!(settled, [Settled::Ok, Settled::Ok]);
    // t's lease ran out and owner-b took it over.
    let later = now + 5_000;
    let got = store
        .acquire("owner-b", later, &[req("t", later, 60_000)], 1)
        .await;
    match got[0].as_ref().expect("takeover") {
        Acquired::Taken { prior: Some(p) } => assert_eq!(p.owner, "owner-a"),
        other => panic!("{other:?}"),
    }
    let asked = [
        renewal("c", now, 3_000),
        renewal("d", now, 3_000),
        renewal("t", now, 3_000),
    ];
    let settled = store.renew("owner-a", &asked, 4).await.expect("renew");
    for (key, got) in ["c", "d"].into_iter().zip(&settled) {
        match got {
            Settled::NotOwner(Some(rec)) => assert!(
                rec.owner == "owner-a" && rec.status == LockStatus::Committed,
                "{key}: answered as this owner's commit: {rec:?}"
            ),
            other => panic!("{key}: {other:?}"),
        }
    }
    match &settled[2] {
        Settled::NotOwner(Some(rec)) => assert_eq!(rec.owner, "owner-b", "{rec:?}"),
        other => panic!("t: {other:?}"),
    }
    // owner-b's own renewal of t, held in its epoch, goes through.
    let settled = store
        .renew("owner-b", &[renewal("t", later, 60_000)], 1)
        .await
        .expect("renew");
    assert_eq!(settled, [Settled::Ok]);
}

/// The keeper sends a commit call again as a whole when part of it failed: the keys of an
/// epoch whose commit went through are in no ledger by then, their statements find them
/// pending in the epoch, and a strongly consistent read of that epoch says they are
/// committed there. Several keys of one epoch name it once in that read: a read naming a
/// key twice is refused, and every key of the epoch would be reported taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_sent_again_after_its_epoch_committed_is_ok_for_every_key() {
    let (_, _, store) = store("locks-epoch-again", false).await;
    let now = now_ms();
    let keys = ["e", "f", "g"];
    let reqs: Vec<_> = keys.iter().map(|k| req(k, now, 1_000)).collect();
    let got = store.acquire("owner-a", now, &reqs, 4).await;
    assert!(got.iter().all(|g| g.as_ref().expect("acquire").is_taken()));
    let commits: Vec<_> = keys.iter().map(|k| commit(k, now)).collect();
    for attempt in ["first", "again"] {
        let settled = store.commit("owner-a", &commits, 4).await.expect("commit");
        assert_eq!(
            settled,
            [Settled::Ok, Settled::Ok, Settled::Ok],
            "{attempt}"
        );
    }
}
