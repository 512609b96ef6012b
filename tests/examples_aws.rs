//! The Kinesis pipelines of `examples/aws/` (→ Kinesis, → Firehose, → DynamoDB, each with
//! `meta_kv_store_lock` over DynamoDB) run by the real `sluice` binary against the emulators,
//! as a Kinesis consumer sees them: a batch of records arrives, then arrives again (a
//! redelivery: a Lambda retry, a replayed shard) followed by new records. The sink is read
//! back (GetRecords, the Firehose destination bucket, Scan) and holds each record once.
//!
//! The configs are the example files themselves, with the resource names they carry replaced
//! by names unique to this run (the emulators are shared by the tests).

use std::collections::BTreeMap;

use crate::common::{Dir, dynamodb, dynamodb::unique_table, moto, runtime, workspace_root};

/// Example `name`'s config with each `(from, to)` name replaced; every `from` must be there.
fn example(name: &str, renames: &[(&str, &str)]) -> String {
    let path = workspace_root().join(format!("examples/aws/{name}/config.jsonnet"));
    let mut text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    for (from, to) in renames {
        assert!(
            text.contains(from),
            "{} does not name {from}",
            path.display()
        );
        text = text.replace(from, to);
    }
    text
}

/// Events `ids` as the records' data: one JSON object per line, keyed by `id`.
fn events(ids: impl Iterator<Item = u32>) -> String {
    ids.map(|i| {
        format!(
            "{{\"id\":\"e{i}\",\"action\":\"login\",\"user\":\"u{}\",\"n\":{i}}}\n",
            i % 5
        )
    })
    .collect()
}

/// The environment that points `sluice` at both emulators.
fn env(moto: &str, dynamodb: &str) -> Vec<(String, String)> {
    let mut env = moto::process_env(moto);
    env.push(("AWS_ENDPOINT_URL_DYNAMODB".into(), dynamodb.into()));
    env
}

/// Runs `config` over the first batch, then over the same batch again followed by new
/// events; answers how many events each run let through to its stdout.
fn run_twice(config: &str, env: &[(String, String)], first: u32, total: u32) -> (usize, usize) {
    let d = Dir::new();
    d.write("cfg.jsonnet", config);
    let once = d.sluice_env(&["run", "-c", "cfg.jsonnet"], events(0..first), env);
    once.assert_clean_success();
    let again = d.sluice_env(&["run", "-c", "cfg.jsonnet"], events(0..total), env);
    again.assert_clean_success();
    (
        once.stdout_str().lines().count(),
        again.stdout_str().lines().count(),
    )
}

/// The `n` of each JSON event in `data` (one per line), counted.
fn count_ns<'a>(data: impl Iterator<Item = &'a [u8]>) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for chunk in data {
        for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(line).expect("a JSON event");
            *counts.entry(v["n"].as_u64().expect("n")).or_default() += 1;
        }
    }
    counts
}

/// Asserts that every event `0..total` is in `counts` exactly once.
#[track_caller]
fn each_once(counts: &BTreeMap<u64, usize>, total: u32) {
    let dupes: Vec<_> = counts.iter().filter(|(_, c)| **c != 1).collect();
    assert!(
        dupes.is_empty(),
        "events delivered more than once: {dupes:?}"
    );
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        (0..u64::from(total)).collect::<Vec<_>>(),
        "every event delivered"
    );
}

/// A fresh lock table on `dynamodb`, as the examples' `sluice-locks`.
fn lock_table(dynamodb: &str) -> String {
    let locks = unique_table("sluice-locks");
    runtime().block_on(dynamodb::create_lock_table(
        dynamodb, &locks, "PK", None, "ttl",
    ));
    locks
}

/// Asserts that table `locks` holds one committed lock per event, under `prefix`.
#[track_caller]
fn all_committed(dynamodb: &str, locks: &str, prefix: &str) {
    let held = runtime().block_on(dynamodb::scan(dynamodb, locks));
    assert_eq!(held.len(), TOTAL as usize, "one lock per event");
    for lock in &held {
        assert!(
            lock["PK"].starts_with(prefix),
            "a lock under {prefix}: {lock:?}"
        );
        assert_eq!(
            lock.get("lock_status").map(String::as_str),
            Some("committed"),
            "{lock:?}"
        );
    }
}

const FIRST: u32 = 600;
const TOTAL: u32 = 750;

#[test]
fn kinesis_to_kinesis_puts_each_record_once_across_a_redelivery() {
    let (m, d) = (moto::endpoint(), dynamodb::endpoint());
    let locks = lock_table(&d);
    let stream = unique_table("sluice-example-enriched");
    runtime().block_on(moto::create_stream(&m, &stream, 2));
    let config = example(
        "kinesis_to_kinesis",
        &[
            ("table/sluice-locks", &format!("table/{locks}")),
            (
                "stream/sluice-example-enriched",
                &format!("stream/{stream}"),
            ),
        ],
    );

    let (once, again) = run_twice(&config, &env(&m, &d), FIRST, TOTAL);
    assert_eq!((once, again), (FIRST as usize, (TOTAL - FIRST) as usize));

    let shards = runtime().block_on(moto::read_stream(&m, &stream));
    let records: Vec<&(String, Vec<u8>)> = shards.iter().flat_map(|(_, r)| r).collect();
    for (key, data) in &records {
        let v: serde_json::Value = serde_json::from_slice(data).expect("JSON data");
        assert_eq!(v["user"].as_str(), Some(key.as_str()), "keyed by user");
        assert_eq!(v["pipeline"], "kinesis_to_kinesis", "enriched");
    }
    each_once(&count_ns(records.iter().map(|(_, d)| d.as_slice())), TOTAL);
    all_committed(&d, &locks, "kinesis_to_kinesis");
}

#[test]
fn kinesis_to_firehose_delivers_each_record_once_across_a_redelivery() {
    let (m, d) = (moto::endpoint(), dynamodb::endpoint());
    let locks = lock_table(&d);
    let delivery = unique_table("sluice-example-archive");
    runtime().block_on(moto::create_delivery_stream(&m, &delivery, &delivery));
    let config = example(
        "kinesis_to_firehose",
        &[
            ("table/sluice-locks", &format!("table/{locks}")),
            (
                "deliverystream/sluice-example-archive",
                &format!("deliverystream/{delivery}"),
            ),
        ],
    );

    let (once, again) = run_twice(&config, &env(&m, &d), FIRST, TOTAL);
    assert_eq!((once, again), (FIRST as usize, (TOTAL - FIRST) as usize));

    let objects = moto::bucket_objects(&m, &delivery);
    for object in &objects {
        assert!(object.ends_with(b"\n"), "records end in a newline");
    }
    each_once(&count_ns(objects.iter().map(Vec::as_slice)), TOTAL);
    all_committed(&d, &locks, "kinesis_to_firehose");
}

#[test]
fn kinesis_to_dynamodb_writes_each_item_once_across_a_redelivery() {
    let (m, d) = (moto::endpoint(), dynamodb::endpoint());
    let locks = lock_table(&d);
    let events_table = unique_table("sluice-example-events");
    runtime().block_on(dynamodb::create_table(&d, &events_table, "event_id", None));
    let config = example(
        "kinesis_to_dynamodb",
        &[
            ("'sluice-locks'", &format!("'{locks}'")),
            ("'sluice-example-events'", &format!("'{events_table}'")),
        ],
    );

    let (once, again) = run_twice(&config, &env(&m, &d), FIRST, TOTAL);
    assert_eq!((once, again), (FIRST as usize, (TOTAL - FIRST) as usize));

    let items = runtime().block_on(dynamodb::scan(&d, &events_table));
    assert_eq!(items.len(), TOTAL as usize, "one item per event");
    let mut counts = BTreeMap::new();
    for item in &items {
        assert_eq!(
            item.get("event_id").map(String::as_str),
            Some(format!("e{}", item["n"]).as_str()),
            "keyed by the event's id"
        );
        assert!(!item.contains_key("id"), "the id moved to event_id");
        *counts
            .entry(item["n"].parse::<u64>().expect("n"))
            .or_insert(0) += 1;
    }
    each_once(&counts, TOTAL);
    all_committed(&d, &locks, "events");
}
