//! The `aws_dynamodb` lock store against a real DynamoDB API (the local emulator that
//! `scripts/emulators.sh install` provides; see `tests/common/dynamodb.rs`): the lock
//! store contract that every store passes, with the table named by ARN and by bare name
//! and with a sort key, taking locks in transactions and one item at a time, and the
//! items it leaves in the table. That the SDK configuration
//! comes from the standard environment variables, as in production, is proved through the
//! `sluice` binary in `tests/cli_lock.rs`, whose processes reach the emulator only by them.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::dynamodb;
use serde_json::json;
use sluice_transforms::kv_store::aws_dynamodb::{DynamoDbStore, FirstReadRule, SORT_KEY_VALUE};
use sluice_transforms::kv_store::{AcquireRequest, CommitRequest, LockStore, Settled, contract};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_millis() as i64
}

fn value(v: serde_json::Value) -> sluice_engine::Value {
    serde_json::from_value(v).expect("settings as a sluice value")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_holds_with_the_table_named_by_arn() {
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table("locks-arn");
    dynamodb::create_lock_table(&endpoint, &table, "PK", None, "ttl").await;
    let store = DynamoDbStore::from_settings(&value(json!({
        "aws": {"arn": format!("arn:aws:dynamodb:us-east-1:000000000000:table/{table}")},
        "attributes": {"partition_key": "PK", "ttl": "ttl"},
    })))
    .expect("valid settings")
    .with_local_endpoint(&endpoint);
    assert_eq!(
        store.describe(),
        format!("aws_dynamodb table {table} (us-east-1)")
    );
    let now = now_ms();
    contract::check(&store, "c/", now).await;

    // What the contract left: committed locks without a lease, released ones gone.
    let item = dynamodb::get_item(&endpoint, &table, &[("PK", "c/many0")])
        .await
        .expect("a committed lock stays until its TTL");
    let mut keys: Vec<_> = item.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["PK", "lock_owner", "lock_status", "ttl"]);
    assert_eq!(item["lock_owner"], "owner-a");
    assert_eq!(item["lock_status"], "committed");
    let ttl: i64 = item["ttl"]
        .parse()
        .expect("ttl is a whole number (epoch seconds)");
    assert!(ttl > now / 1000, "{ttl}");
    assert_eq!(
        dynamodb::get_item(&endpoint, &table, &[("PK", "c/many35")]).await,
        None,
        "released"
    );
    let pending = dynamodb::get_item(&endpoint, &table, &[("PK", "c/crashed")])
        .await
        .expect("taken over");
    assert_eq!(pending["lock_owner"], "owner-b");
    assert_eq!(pending["lock_status"], "pending");
    let lease: i64 = pending["lock_lease_until"]
        .parse()
        .expect("the lease is a whole number (epoch milliseconds)");
    assert!(lease > now, "{lease}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_holds_with_a_bare_table_name() {
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table("locks-name");
    dynamodb::create_lock_table(&endpoint, &table, "id", None, "expires_at").await;
    // Locks taken one UpdateItem at a time, here; the other tests take them in
    // transactions (the default).
    let store = DynamoDbStore::from_settings(&value(json!({
        "aws": {"arn": table},
        "attributes": {"partition_key": "id", "ttl": "expires_at", "value": "v"},
        "lock_acquire": "items",
        "consistent_read": true,
    })))
    .expect("valid settings")
    .with_local_endpoint(&endpoint);
    assert_eq!(store.describe(), format!("aws_dynamodb table {table}"));
    contract::check(&store, "", now_ms()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_holds_with_a_sort_key_and_renamed_attributes() {
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table("locks-sk");
    dynamodb::create_lock_table(&endpoint, &table, "PK", Some("SK"), "exp").await;
    let store = DynamoDbStore::from_settings(&value(json!({
        "aws": {"arn": format!("arn:aws:dynamodb:us-east-1:000000000000:table/{table}")},
        "attributes": {
            "partition_key": "PK", "sort_key": "SK", "ttl": "exp",
            "owner": "who", "status": "state", "lease_until": "until",
        },
    })))
    .expect("valid settings")
    .with_local_endpoint(&endpoint);
    let now = now_ms();
    contract::check(&store, "sk/", now).await;
    let item = dynamodb::get_item(
        &endpoint,
        &table,
        &[("PK", "sk/crashed"), ("SK", SORT_KEY_VALUE)],
    )
    .await
    .expect("the lock item under the constant sort key");
    let mut keys: Vec<_> = item.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["PK", "SK", "exp", "lock_since", "state", "until", "who"]
    );
    assert_eq!(item["SK"], "substation:kv_store");
    // Every item of the table is under the constant sort key.
    assert!(
        dynamodb::scan(&endpoint, &table)
            .await
            .iter()
            .all(|i| i["SK"] == SORT_KEY_VALUE)
    );
}

/// `lock_acquire: 'statements'` (a consistent read, then PartiQL statements), with a sort
/// key and attribute names that are PartiQL reserved words, which the statements quote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_holds_taking_locks_with_statements() {
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table("locks-stmt");
    dynamodb::create_lock_table(&endpoint, &table, "PK", Some("SK"), "ttl").await;
    let open = || {
        DynamoDbStore::from_settings(&value(json!({
            "aws": {"arn": format!("arn:aws:dynamodb:us-east-1:000000000000:table/{table}")},
            "attributes": {
                "partition_key": "PK", "sort_key": "SK", "ttl": "ttl",
                "owner": "owner", "status": "status", "lease_until": "lease",
                "since": "since", "note": "note", "progress": "progress",
            },
            "lock_acquire": "statements",
        })))
        .expect("valid settings")
        .with_local_endpoint(&endpoint)
    };
    let now = now_ms();
    // Every piece read first, every piece written unread, and as the store measures.
    contract::check(
        &open().with_first_read(FirstReadRule::Always),
        "st-read/",
        now,
    )
    .await;
    contract::check(
        &open().with_first_read(FirstReadRule::Never),
        "st-unread/",
        now,
    )
    .await;
    contract::check(&open(), "st/", now).await;
    // What the contract left: the same records as the other modes write.
    let item = dynamodb::get_item(
        &endpoint,
        &table,
        &[("PK", "st/many0"), ("SK", SORT_KEY_VALUE)],
    )
    .await
    .expect("a committed lock stays until its TTL");
    let mut keys: Vec<_> = item.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["PK", "SK", "owner", "status", "ttl"]);
    assert_eq!(item["status"], "committed");
    let pending = dynamodb::get_item(
        &endpoint,
        &table,
        &[("PK", "st/crashed"), ("SK", SORT_KEY_VALUE)],
    )
    .await
    .expect("taken over");
    let mut keys: Vec<_> = pending.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        ["PK", "SK", "lease", "owner", "since", "status", "ttl"]
    );
    assert_eq!(pending["owner"], "owner-b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_is_an_error_naming_it() {
    let endpoint = dynamodb::endpoint();
    let store = DynamoDbStore::from_settings(&value(json!({
        "aws": {"arn": "no-such-table"}, "attributes": {"partition_key": "PK"},
    })))
    .unwrap()
    .with_local_endpoint(&endpoint);
    let now = now_ms();
    let req = AcquireRequest {
        key: "k".into(),
        ttl: now / 1000 + 60,
        lease_until_ms: now + 1000,
        skew_ms: 0,
        fresh_before_ms: None,
    };
    let got = store.acquire("me", now, &[req], 1).await;
    let err = got[0].as_ref().unwrap_err().to_string();
    assert!(
        err.starts_with("aws_dynamodb table no-such-table: acquiring key \"k\": "),
        "{err}"
    );
    assert!(err.contains("ResourceNotFoundException"), "{err}");
    let commit = CommitRequest {
        key: "k".into(),
        ttl: now / 1000 + 60,
        note: None,
    };
    let err = store
        .commit("me", &[commit], 1)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("aws_dynamodb table no-such-table: committing 1 keys (\"k\", ...): "),
        "{err}"
    );
}

/// Takes and commits `reqs` as new keys at `now`: the (write, read) units that cost.
async fn take_new(store: &DynamoDbStore, reqs: Vec<AcquireRequest>, now: i64) -> (f64, f64) {
    let before = store.consumed_units();
    let got = store.acquire("owner-a", now, &reqs, 32).await;
    assert!(got.iter().all(|r| r.as_ref().expect("acquire").is_taken()));
    let commits: Vec<CommitRequest> = reqs
        .iter()
        .map(|r| CommitRequest {
            key: r.key.clone(),
            ttl: r.ttl,
            note: None,
        })
        .collect();
    let settled = store.commit("owner-a", &commits, 32).await.expect("commit");
    assert!(settled.iter().all(|s| *s == Settled::Ok));
    let after = store.consumed_units();
    (after.write - before.write, after.read - before.read)
}

/// The capacity units DynamoDB (the emulator) reports for 1,000 new keys taken and
/// committed, 1,000 more in the same store, then the first 1,000 asked for again (all
/// duplicates) by another process's store, in each `lock_acquire` mode. Printed
/// (`--nocapture`); checked for the statements mode: 2 write units and 1 read unit per new
/// key while the store reads first (a store that has not seen keys yet), 2 write units and
/// no read once it has seen that keys are new (`first_read.rs`), 1 read unit per duplicate;
/// and for the epochs mode: at most 1.25 write units and half a read unit per new key (its
/// first read is eventually consistent), none once keys are known new, and about half a
/// read unit per duplicate (the key, and half a unit per epoch of 100 keys). Errors report
/// no units (a failed `UpdateItem` condition, a cancelled transaction), although DynamoDB
/// bills them: the other modes' duplicates read 0 here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_per_key_in_each_mode() {
    const KEYS: usize = 1_000;
    let endpoint = dynamodb::endpoint();
    for mode in ["transactions", "items", "statements", "epochs"] {
        let table = dynamodb::unique_table(&format!("units-{mode}"));
        dynamodb::create_lock_table(&endpoint, &table, "PK", None, "ttl").await;
        let open = || {
            DynamoDbStore::from_settings(&value(json!({
                "aws": {"arn": table},
                "attributes": {"partition_key": "PK", "ttl": "ttl"},
                "lock_acquire": mode,
            })))
            .expect("valid settings")
            .with_local_endpoint(&endpoint)
        };
        let store = open();
        let now = now_ms();
        let requests = |prefix: &str| -> Vec<AcquireRequest> {
            (0..KEYS)
                .map(|i| AcquireRequest {
                    key: format!("{prefix}/{i}"),
                    ttl: now / 1000 + 3600,
                    lease_until_ms: now + 60_000,
                    skew_ms: 0,
                    fresh_before_ms: None,
                })
                .collect()
        };
        let per = |u: f64| u / KEYS as f64;
        let first = take_new(&store, requests("u"), now).await;
        let then = take_new(&store, requests("v"), now).await;
        let other = open();
        let got = other
            .acquire("owner-b", now + 1_000, &requests("u"), 32)
            .await;
        assert!(got.iter().all(|r| !r.as_ref().expect("acquire").is_taken()));
        let dup = other.consumed_units();
        let (new, known, dup) = (
            (per(first.0), per(first.1)),
            (per(then.0), per(then.1)),
            (per(dup.write), per(dup.read)),
        );
        eprintln!(
            "{mode}: per new key {:.2} W + {:.2} R; once keys are known new {:.2} W + {:.2} R; \
             per duplicate {:.2} W + {:.2} R (reported)",
            new.0, new.1, known.0, known.1, dup.0, dup.1,
        );
        if mode == "statements" {
            assert_eq!(new, (2.0, 1.0), "a new key: a read, an insert and a commit");
            assert_eq!(
                known,
                (2.0, 0.0),
                "a new key written unread: an insert and a commit"
            );
            assert_eq!(dup, (0.0, 1.0), "a duplicate: a read");
        }
        if mode == "epochs" {
            assert!(
                new.0 <= 1.25 && new.1 <= 0.5,
                "a new key: a read, an insert and a share of its epoch's commit: {new:?}"
            );
            assert!(
                known.0 <= 1.25 && known.1 == 0.0,
                "a new key written unread: an insert and a share of its epoch's commit: {known:?}"
            );
            assert!(
                dup.0 == 0.0 && dup.1 <= 0.51,
                "a duplicate: a read, and a share of its epoch's: {dup:?}"
            );
        }
    }
}
