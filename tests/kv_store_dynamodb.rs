//! The `aws_dynamodb` lock store against a real DynamoDB API (the local emulator that
//! `scripts/emulators.sh install` provides; see `tests/common/dynamodb.rs`): the lock
//! store contract that every store passes, with the table named by ARN and by bare name
//! and with a sort key, the items it leaves in the table, and the SDK configuration taken
//! from the standard environment variables, as in production.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::dynamodb;
use serde_json::json;
use sluice_transforms::kv_store::aws_dynamodb::{DynamoDbStore, SORT_KEY_VALUE};
use sluice_transforms::kv_store::{AcquireRequest, Acquired, LockStore, Settled, contract};

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
    let store = DynamoDbStore::from_settings(&value(json!({
        "aws": {"arn": table},
        "attributes": {"partition_key": "id", "ttl": "expires_at", "value": "v"},
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
    assert_eq!(keys, ["PK", "SK", "exp", "state", "until", "who"]);
    assert_eq!(item["SK"], "substation:kv_store");
    // Every item of the table is under the constant sort key.
    assert!(
        dynamodb::scan(&endpoint, &table)
            .await
            .iter()
            .all(|i| i["SK"] == SORT_KEY_VALUE)
    );
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
    };
    let got = store.acquire("me", now, &[req], 1).await;
    let err = got[0].as_ref().unwrap_err().to_string();
    assert!(
        err.starts_with("aws_dynamodb table no-such-table: acquiring key \"k\": "),
        "{err}"
    );
    assert!(err.contains("ResourceNotFoundException"), "{err}");
    let err = store
        .commit("me", &["k".into()], 1)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("aws_dynamodb table no-such-table: committing 1 keys (\"k\", ...): "),
        "{err}"
    );
}

/// The environment variables of the child process in
/// [`the_sdk_configuration_comes_from_the_standard_environment`].
const CHILD_TABLE: &str = "SLUICE_TEST_CHILD_TABLE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_configuration_comes_from_the_standard_environment() {
    // The store as production makes it (no overrides): credentials, region and endpoint
    // from AWS_* variables. The environment is process-wide, so this runs the child test
    // below in a new process of this test binary with the variables set.
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table("locks-env");
    dynamodb::create_lock_table(&endpoint, &table, "PK", None, "ttl").await;
    let out = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "store_from_the_environment",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL_DYNAMODB", &endpoint)
        // Never ask an instance metadata service (there is none).
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env(CHILD_TABLE, &table)
        .output()
        .expect("running the child test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child test failed\n--- stdout:\n{stdout}\n--- stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let item = dynamodb::get_item(&endpoint, &table, &[("PK", "env-key")])
        .await
        .expect("the child's lock");
    assert_eq!(item["lock_status"], "committed");
    assert_eq!(item["lock_owner"], "child");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run in a child process by the_sdk_configuration_comes_from_the_standard_environment"]
async fn store_from_the_environment() {
    let table = std::env::var(CHILD_TABLE).expect("run by the parent test");
    let store = DynamoDbStore::from_settings(&value(json!({
        "aws": {"arn": table}, "attributes": {"partition_key": "PK"},
    })))
    .unwrap();
    let now = now_ms();
    let req = AcquireRequest {
        key: "env-key".into(),
        ttl: now / 1000 + 60,
        lease_until_ms: now + 60_000,
    };
    let got = store.acquire("child", now, &[req], 1).await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::Taken);
    assert_eq!(
        store.commit("child", &["env-key".into()], 1).await.unwrap(),
        vec![Settled::Ok]
    );
}
