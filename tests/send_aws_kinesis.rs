//! `send_aws_kinesis_data_stream` through the real `sluice` binary against moto's Kinesis:
//! a few thousand lines go in, every record is read back from every shard, and the records
//! are spread over the shards (a partition key per record). With aggregation and keys from
//! the data, the KPL records are decoded and each key stays on one shard.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::{Dir, dynamodb::unique_table, moto, runtime};

fn lines(n: usize) -> String {
    (0..n)
        .map(|i| format!("{{\"n\":{i},\"user\":\"u{}\"}}\n", i % 7))
        .collect()
}

fn config(settings: &str) -> String {
    format!(
        r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.send.aws.kinesis_data_stream({settings}),
    sub.tf.util.drop(),
  ],
}}
"#
    )
}

/// The `n` of a record's JSON data.
fn n_of(data: &[u8]) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(data).expect("JSON data");
    v["n"].as_u64().expect("a number n")
}

/// Every record of a stream, per shard: (shard id, [(partition key, data)]).
type Shards = Vec<(String, Vec<(String, Vec<u8>)>)>;

/// Creates a stream of `shards` shards named from `prefix`, runs `total` lines through the
/// send with the settings `settings(stream name)`, and reads every record back, per shard.
fn send_and_read(
    prefix: &str,
    shards: i32,
    settings: impl FnOnce(&str) -> String,
    total: usize,
) -> Shards {
    let endpoint = moto::endpoint();
    let stream = unique_table(prefix);
    runtime().block_on(moto::create_stream(&endpoint, &stream, shards));
    let d = Dir::new();
    d.write("cfg.jsonnet", config(&settings(&stream)));
    d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        lines(total),
        &moto::process_env(&endpoint),
    )
    .assert_clean_success();
    runtime().block_on(moto::read_stream(&endpoint, &stream))
}

#[test]
fn records_arrive_once_each_spread_over_shards() {
    let total = 3000;
    let shards = send_and_read(
        "sluice-kinesis",
        4,
        |stream| format!("{{ aws: {{ arn: '{}' }} }}", moto::stream_arn(stream)),
        total,
    );
    let mut seen = BTreeSet::new();
    let mut count = 0;
    let mut used = 0;
    for (_, records) in &shards {
        if !records.is_empty() {
            used += 1;
        }
        for (key, data) in records {
            assert_eq!(key.len(), 36, "a random UUID key: {key}");
            seen.insert(n_of(data));
            count += 1;
        }
    }
    assert_eq!(count, total, "every record exactly once");
    assert_eq!(seen, (0..total as u64).collect());
    assert!(used > 1, "records spread over {used} of 4 shards");
}

#[test]
fn a_bare_stream_name_and_keys_from_the_data() {
    let total = 2000;
    let shards = send_and_read(
        "sluice-kinesis-name",
        4,
        |stream| {
            format!(
                "{{ aws: {{ arn: '{stream}' }}, object: {{ partition_key: 'user' }}, batch: {{ count: 100 }} }}"
            )
        },
        total,
    );
    let mut shard_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut per_key: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (shard, records) in &shards {
        for (key, data) in records {
            let v: serde_json::Value = serde_json::from_slice(data).unwrap();
            assert_eq!(
                v["user"].as_str(),
                Some(key.as_str()),
                "the key is the data's user"
            );
            shard_of
                .entry(key.clone())
                .or_default()
                .insert(shard.clone());
            per_key.entry(key.clone()).or_default().push(n_of(data));
        }
    }
    assert_eq!(per_key.values().map(Vec::len).sum::<usize>(), total);
    for (key, shards) in &shard_of {
        assert_eq!(shards.len(), 1, "key {key} on one shard");
    }
    for (key, ns) in &per_key {
        assert!(ns.windows(2).all(|w| w[0] < w[1]), "key {key} in order");
    }
    let used: BTreeSet<_> = shard_of.values().flatten().collect();
    assert!(used.len() > 1, "7 keys over {} shards", used.len());
}

/// A KPL aggregated record's user records: (partition key, data).
fn deaggregate(blob: &[u8]) -> Vec<(String, Vec<u8>)> {
    use md5::{Digest, Md5};
    assert_eq!(&blob[..4], &[0xF3, 0x89, 0x9A, 0xC2], "KPL magic");
    let (pb, digest) = blob[4..].split_at(blob.len() - 4 - 16);
    assert_eq!(digest, Md5::digest(pb).as_slice(), "KPL MD5");
    fn varint(b: &[u8], p: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = b[*p];
            *p += 1;
            v |= u64::from(byte & 0x7F) << shift;
            if byte < 0x80 {
                return v;
            }
            shift += 7;
        }
    }
    let (mut keys, mut records) = (Vec::new(), Vec::new());
    let mut p = 0;
    while p < pb.len() {
        let tag = varint(pb, &mut p);
        let len = varint(pb, &mut p) as usize;
        let body = &pb[p..p + len];
        p += len;
        match tag >> 3 {
            1 => keys.push(String::from_utf8(body.to_vec()).unwrap()),
            3 => {
                let (mut q, mut index, mut data) = (0, 0, Vec::new());
                while q < body.len() {
                    let t = varint(body, &mut q);
                    if t >> 3 == 1 {
                        index = varint(body, &mut q) as usize;
                    } else {
                        let l = varint(body, &mut q) as usize;
                        if t >> 3 == 3 {
                            data = body[q..q + l].to_vec();
                        }
                        q += l;
                    }
                }
                records.push((index, data));
            }
            _ => {}
        }
    }
    records
        .into_iter()
        .map(|(i, d)| (keys[i].clone(), d))
        .collect()
}

#[test]
fn aggregated_records_decode_to_every_input() {
    let total = 3000;
    let shards = send_and_read(
        "sluice-kinesis-kpl",
        2,
        |stream| {
            format!(
                "{{ aws: {{ arn: '{}' }}, object: {{ partition_key: 'user' }}, enable_record_aggregation: true }}",
                moto::stream_arn(stream)
            )
        },
        total,
    );
    let mut kinesis_records = 0;
    let mut seen = Vec::new();
    for (_, records) in &shards {
        for (key, blob) in records {
            kinesis_records += 1;
            for (inner_key, data) in deaggregate(blob) {
                assert_eq!(&inner_key, key, "one key per aggregate");
                let v: serde_json::Value = serde_json::from_slice(&data).unwrap();
                assert_eq!(v["user"].as_str(), Some(key.as_str()));
                seen.push(n_of(&data));
            }
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..total as u64).collect::<Vec<_>>());
    // Batches of 500 records (the library's 1000, capped), 7 keys: 7 aggregates per batch.
    assert_eq!(kinesis_records, 6 * 7, "Kinesis records");
}
