//! Exactly once into Kinesis across a crash, through the real `sluice` binary against moto's
//! Kinesis: `meta_kv_store_lock` (sqlite) around `send_aws_kinesis_data_stream`. A "crashed"
//! earlier owner is a lock record left pending with its lease ended, written with the
//! sqlite lock store's own API (as that owner's acquisition would have left it, since T0).
//! When the earlier owner's record is already in the stream, the rerun reads it back and
//! sends nothing new; when it is not, the rerun sends it once. Either way the lock ends
//! committed, noting where the record is (`shardId/sequenceNumber`).
//!
//! And ambiguous answers: the fault proxy of `tests/faults/` between sluice and moto
//! applies some `PutRecords` calls and answers 500 (`error_after`), refuses others before
//! forwarding them. Under a lock whose key the records carry, the send reads the stream
//! back after each ambiguous answer and every record lands exactly once; without a lock it
//! cannot tell its records from others', sends them again, and loses none.

use std::path::Path;

use aws_sdk_kinesis::primitives::Blob;
use sluice_transforms::kv_store::lock::sqlite::SqliteStore;
use sluice_transforms::kv_store::lock::{AcquireRequest, Acquired, LockStore};

use crate::common::{Dir, dynamodb::unique_table, moto, runtime};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn config(stream: &str) -> String {
    format!(
        r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.sqlite({{ file: 'state/locks.sqlite' }}),
      prefix: 'test',
      ttl_offset: '1h',
      object: {{ source_key: 'id' }},
      duplicates: 'drop',
      transforms: [
        sub.tf.send.aws.kinesis_data_stream({{
          aws: {{ arn: '{}' }},
          object: {{ partition_key: 'id' }},
        }}),
      ],
    }}),
    sub.tf.util.drop(),
  ],
}}
"#,
        moto::stream_arn(stream)
    )
}

/// Leaves `keys` as an owner that crashed leaves them: pending since `t0`, lease ended.
fn crashed_owner(db: &Path, keys: &[&str], t0: i64) {
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let store = SqliteStore::open(db.to_path_buf()).expect("opening the lock store");
    let requests: Vec<AcquireRequest> = keys
        .iter()
        .map(|k| AcquireRequest {
            key: k.to_string(),
            ttl: now_ms() / 1000 + 3600,
            lease_until_ms: t0 + 1,
            skew_ms: 0,
            fresh_before_ms: None,
        })
        .collect();
    let got = runtime().block_on(store.acquire("crashed-owner", t0, &requests, 4));
    for r in got {
        assert_eq!(r.expect("acquired"), Acquired::FRESH);
    }
}

/// (committed, note) of the lock on `key`.
fn lock(db: &Path, key: &str) -> (bool, Option<String>) {
    let c = rusqlite::Connection::open(db).expect("opening the lock store");
    c.query_row(
        "SELECT committed, note FROM sluice_locks WHERE key = ?1",
        [key],
        |r| Ok((r.get::<_, i64>(0)? == 1, r.get(1)?)),
    )
    .expect("the lock")
}

/// Every record of the stream: (shard id, sequence number, data).
fn records(endpoint: &str, stream: &str) -> Vec<(String, String, String)> {
    use aws_sdk_kinesis::types::ShardIteratorType;
    let c = moto::kinesis(endpoint);
    runtime().block_on(async {
        let shards = c.list_shards().stream_name(stream).send().await.unwrap();
        let mut out = Vec::new();
        for s in shards.shards() {
            let it = c
                .get_shard_iterator()
                .stream_name(stream)
                .shard_id(s.shard_id())
                .shard_iterator_type(ShardIteratorType::TrimHorizon)
                .send()
                .await
                .unwrap();
            let got = c
                .get_records()
                .shard_iterator(it.shard_iterator().unwrap())
                .send()
                .await
                .unwrap();
            for r in got.records() {
                out.push((
                    s.shard_id().to_string(),
                    r.sequence_number().to_string(),
                    String::from_utf8_lossy(r.data().as_ref()).into_owned(),
                ));
            }
        }
        out.sort_by(|a, b| a.2.cmp(&b.2));
        out
    })
}

/// A stream of 2 shards and a directory whose lock store holds `keys` pending since T0
/// (5 s ago) under a crashed owner.
fn setup(prefix: &str, keys: &[&str]) -> (String, String, Dir, i64) {
    let endpoint = moto::endpoint();
    let stream = unique_table(prefix);
    runtime().block_on(moto::create_stream(&endpoint, &stream, 2));
    let d = Dir::new();
    d.write("cfg.jsonnet", config(&stream));
    let t0 = now_ms() - 5_000;
    crashed_owner(&d.path().join("state/locks.sqlite"), keys, t0);
    (endpoint, stream, d, t0)
}

#[test]
fn a_record_the_crashed_owner_put_is_not_sent_again() {
    let (endpoint, stream, d, _) = setup("sluice-readback-found", &["test:a"]);
    // The crashed owner's send had gone through.
    let a = r#"{"id":"a","n":1}"#;
    let put = runtime()
        .block_on(
            moto::kinesis(&endpoint)
                .put_record()
                .stream_name(&stream)
                .partition_key("a")
                .data(Blob::new(a))
                .send(),
        )
        .expect("putting the earlier record");
    let landed = format!("{}/{}", put.shard_id(), put.sequence_number());

    let b = r#"{"id":"b","n":2}"#;
    d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        format!("{a}\n{b}\n"),
        &moto::process_env(&endpoint),
    )
    .assert_clean_success();

    let got = records(&endpoint, &stream);
    let datas: Vec<&str> = got.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(datas, [a, b], "a once (the earlier owner's), b sent");
    let db = d.path().join("state/locks.sqlite");
    assert_eq!(
        lock(&db, "test:a"),
        (true, Some(landed)),
        "committed, noting where"
    );
    let (committed, note) = lock(&db, "test:b");
    assert!(committed);
    assert_eq!(note, Some(format!("{}/{}", got[1].0, got[1].1)));
}

#[test]
fn a_record_the_crashed_owner_did_not_put_is_sent_once() {
    let (endpoint, stream, d, _) = setup("sluice-readback-missing", &["test:c"]);
    let c = r#"{"id":"c","n":3}"#;
    d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        format!("{c}\n"),
        &moto::process_env(&endpoint),
    )
    .assert_clean_success();
    let got = records(&endpoint, &stream);
    let datas: Vec<&str> = got.iter().map(|r| r.2.as_str()).collect();
    assert_eq!(datas, [c]);
    let db = d.path().join("state/locks.sqlite");
    assert_eq!(
        lock(&db, "test:c"),
        (true, Some(format!("{}/{}", got[0].0, got[0].1)))
    );
    // A redelivery now is a duplicate: dropped, nothing sent.
    d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        format!("{c}\n"),
        &moto::process_env(&endpoint),
    )
    .assert_clean_success();
    assert_eq!(records(&endpoint, &stream).len(), 1);
}

/// A running fault proxy, stopped when dropped.
struct Proxy(std::process::Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The fault proxy (`tests/faults/proxy.py`) in front of `upstream` with `faults`, logging
/// to `proxy.jsonl` in `dir`: the process and its URL.
fn proxy(upstream: &str, faults: &str, dir: &Dir) -> (Proxy, String) {
    use std::io::BufRead;
    let root = crate::common::workspace_root();
    dir.write("faults.json", faults);
    let mut child = std::process::Command::new(root.join(".emulators/venv/bin/python"))
        .arg(root.join("tests/faults/proxy.py"))
        .args(["--upstream", upstream, "--faults"])
        .arg(dir.path().join("faults.json"))
        .arg("--log")
        .arg(dir.path().join("proxy.jsonl"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("starting the fault proxy (scripts/emulators.sh install)");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("the proxy's first line");
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("unexpected proxy output {line:?}"))
        .to_string();
    (Proxy(child), format!("http://{addr}"))
}

/// The records of a run over `total` lines through `cfg` (a Kinesis send into `stream`)
/// behind the fault proxy, which applies some `PutRecords` calls and answers 500, refuses
/// others before forwarding them, and throttles some: their `n`, sorted, and how many calls
/// were ambiguous.
fn run_behind_faults(endpoint: &str, stream: &str, cfg: &str, total: u64) -> (Vec<u64>, usize) {
    let d = Dir::new();
    // A fixed sequence (the seed), one call at a time.
    let (px, url) = proxy(
        endpoint,
        r#"{"sink": {"error_after": 0.3, "error_before": 0.1, "throttle": 0.1}, "seed": 14}"#,
        &d,
    );
    d.write("cfg.jsonnet", cfg);
    let input: String = (0..total).map(|i| format!("{{\"n\":{i}}}\n")).collect();
    let out = d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        input,
        &moto::process_env(&url),
    );
    drop(px);
    out.assert_clean_success();
    let log = d.read("proxy.jsonl");
    let ambiguous = log
        .lines()
        .filter(|l| l.contains(r#""fault":"error_after""#))
        .count();
    assert!(
        ambiguous >= 3,
        "the run met ambiguous answers: {ambiguous}\n{log}"
    );
    let mut seen: Vec<u64> = records(endpoint, stream)
        .iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.2).unwrap();
            v["n"].as_u64().unwrap()
        })
        .collect();
    seen.sort_unstable();
    (seen, ambiguous)
}

/// Under a lock whose key the records carry, an ambiguous answer is resolved by reading the
/// stream back: each record lands exactly once.
#[test]
fn ambiguous_answers_put_each_locked_record_once() {
    let endpoint = moto::endpoint();
    let stream = unique_table("sluice-readback-ambiguous");
    runtime().block_on(moto::create_stream(&endpoint, &stream, 2));
    let cfg = format!(
        r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.sqlite({{ file: 'state/locks.sqlite' }}),
      prefix: 'test',
      object: {{ source_key: 'n' }},
      transforms: [
        sub.tf.send.aws.kinesis_data_stream({{ aws: {{ arn: '{}' }}, batch: {{ count: 20 }} }}),
      ],
    }}),
    sub.tf.util.drop(),
  ],
}}
"#,
        moto::stream_arn(&stream)
    );
    let total = 300;
    let (seen, _) = run_behind_faults(&endpoint, &stream, &cfg, total);
    assert_eq!(
        seen,
        (0..total).collect::<Vec<u64>>(),
        "each record exactly once"
    );
}

/// Without a lock nothing tells one message's record from another's identical one, so an
/// ambiguous answer's records are sent again rather than looked for: none is lost, and a
/// record is twice in the stream only when an ambiguous call had applied it.
#[test]
fn without_a_lock_ambiguous_answers_lose_nothing() {
    let endpoint = moto::endpoint();
    let stream = unique_table("sluice-readback-unlocked");
    runtime().block_on(moto::create_stream(&endpoint, &stream, 2));
    let cfg = format!(
        r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.send.aws.kinesis_data_stream({{ aws: {{ arn: '{}' }}, batch: {{ count: 20 }} }}),
    sub.tf.util.drop(),
  ],
}}
"#,
        moto::stream_arn(&stream)
    );
    let total = 300;
    let (seen, ambiguous) = run_behind_faults(&endpoint, &stream, &cfg, total);
    let mut distinct = seen.clone();
    distinct.dedup();
    assert_eq!(distinct, (0..total).collect::<Vec<u64>>(), "none lost");
    let extra = seen.len() - distinct.len();
    assert!(
        extra <= ambiguous * 20,
        "{extra} extra copies from {ambiguous} ambiguous calls of 20 records"
    );
}
