//! A DynamoDB endpoint for integration tests: the local emulator (dynoxide, installed by
//! `scripts/emulators.sh install`) started once per test binary on a free loopback port,
//! or the endpoint in `SLUICE_TEST_DYNAMODB_ENDPOINT` when that is set. A missing emulator
//! fails the test with instructions; it is never skipped.
//!
//! Tests share the one emulator and keep apart by table name ([`unique_table`]). Clients
//! are built with the endpoint, region and placeholder credentials given explicitly, so
//! nothing depends on (or changes) the process environment.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType, TableStatus, TimeToLiveSpecification,
};

use super::emulator::{self, Emulator, Spec};

/// The environment variable that names an already running endpoint to use instead.
pub const ENDPOINT_ENV: &str = "SLUICE_TEST_DYNAMODB_ENDPOINT";

/// Where the emulator lives once `scripts/emulators.sh install` ran.
pub fn emulator_binary() -> PathBuf {
    super::workspace_root().join(".emulators/node_modules/@dynoxide/linux-x64/dynoxide")
}

/// The endpoint URL (`http://127.0.0.1:PORT`) of a running DynamoDB: the one in
/// `SLUICE_TEST_DYNAMODB_ENDPOINT`, else this test binary's emulator, started on first use
/// and killed when the binary exits (statics are never dropped, so an exit hook does it).
pub fn endpoint() -> String {
    static EMULATOR: OnceLock<Emulator> = OnceLock::new();
    emulator::endpoint(&EMULATOR, || Spec {
        what: "the DynamoDB emulator",
        env: ENDPOINT_ENV,
        running: "DynamoDB endpoint",
        bin: emulator_binary(),
        flags: ["--host", "--port"],
        timeout: Duration::from_secs(10),
        poll: Duration::from_millis(20),
    })
}

/// A table name no other test in this run uses, starting with `prefix`.
pub fn unique_table(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// An SDK client for `endpoint` (region `us-east-1`, placeholder credentials).
pub fn client(endpoint: &str) -> Client {
    super::emulator_client!(aws_sdk_dynamodb, endpoint)
}

/// Creates an on-demand lock table `name` with partition key `pk` (and sort key `sk`, both
/// strings) and TTL on `ttl_attr`, and waits until it is active.
pub async fn create_lock_table(
    endpoint: &str,
    name: &str,
    pk: &str,
    sk: Option<&str>,
    ttl_attr: &str,
) {
    create_table(endpoint, name, pk, sk).await;
    client(endpoint)
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(ttl_attr)
                .build()
                .expect("a TTL specification"),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("enabling TTL on {name}: {e:?}"));
}

/// Creates an on-demand table `name` with partition key `pk` (and sort key `sk`, both
/// strings), and waits until it is active.
pub async fn create_table(endpoint: &str, name: &str, pk: &str, sk: Option<&str>) {
    let c = client(endpoint);
    let mut create = c
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(pk))
        .key_schema(key(pk, KeyType::Hash));
    if let Some(sk) = sk {
        create = create
            .attribute_definitions(attribute(sk))
            .key_schema(key(sk, KeyType::Range));
    }
    create
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating table {name}: {e:?}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = c
            .describe_table()
            .table_name(name)
            .send()
            .await
            .expect("describing the table");
        if d.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            break;
        }
        assert!(Instant::now() < deadline, "table {name} not active in 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Puts `item` into `table`.
pub async fn put_item(endpoint: &str, table: &str, item: HashMap<String, AttributeValue>) {
    client(endpoint)
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .send()
        .await
        .unwrap_or_else(|e| panic!("putting an item into {table}: {e:?}"));
}

fn attribute(name: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .expect("an attribute definition")
}

fn key(name: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .expect("a key schema element")
}

/// An item as plain strings: `S` and `N` values as their text, other types debug-printed.
pub type Item = HashMap<String, String>;

fn plain(item: &HashMap<String, AttributeValue>) -> Item {
    item.iter()
        .map(|(k, v)| {
            let text = match v {
                AttributeValue::S(s) | AttributeValue::N(s) => s.clone(),
                other => format!("{other:?}"),
            };
            (k.clone(), text)
        })
        .collect()
}

/// Reads the item with key `key` (strongly consistent), `None` when absent.
pub async fn get_item(endpoint: &str, table: &str, key: &[(&str, &str)]) -> Option<Item> {
    let mut get = client(endpoint)
        .get_item()
        .table_name(table)
        .consistent_read(true);
    for (name, value) in key {
        get = get.key(*name, AttributeValue::S(value.to_string()));
    }
    let out = get
        .send()
        .await
        .unwrap_or_else(|e| panic!("reading from {table}: {e:?}"));
    out.item().map(plain)
}

/// Every item of `table` (a full scan).
pub async fn scan(endpoint: &str, table: &str) -> Vec<Item> {
    let c = client(endpoint);
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let out = c
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap_or_else(|e| panic!("scanning {table}: {e:?}"));
        items.extend(out.items().iter().map(plain));
        start = out.last_evaluated_key().cloned();
        if start.is_none() {
            return items;
        }
    }
}

/// The environment that points a `sluice` process at `endpoint` (placeholder credentials,
/// region `us-east-1`, no instance metadata lookups).
pub fn process_env(endpoint: &str) -> Vec<(String, String)> {
    [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL_DYNAMODB", endpoint),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/dev/null"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}
