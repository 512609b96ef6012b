//! The send's tests: building records, calls and their limits, partial failures and
//! acknowledgements, KPL aggregation.

use super::*;
use crate::registry;
use crate::send::aws_destination::AwsSend;
use aws_sdk_kinesis::config::retry::RetryConfig;
use aws_sdk_kinesis::operation::put_records::PutRecordsOutput;
use aws_sdk_kinesis::types::PutRecordsResultEntry;
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use sluice_engine::ack::{AckStatus, AckTracker};
use sluice_engine::batch::BatchLimits;
use sluice_engine::{StatefulTransform, Transform, json, testing};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ARN: &str = "arn:aws:kinesis:eu-west-1:123456789012:stream/events";

fn client(rules: &[&Rule]) -> Client {
    mock_client!(aws_sdk_kinesis, RuleMode::MatchAny, rules, |b| b
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(1))
        ))
}

const FAST: RetryPolicy = RetryPolicy {
    attempts: 3,
    base: Duration::from_millis(1),
    max: Duration::from_millis(2),
};

pub(super) fn kinesis(keys: PartitionKeys, aggregate: bool, rules: &[&Rule]) -> Kinesis {
    kinesis_on(keys, aggregate, client(rules))
}

/// The send to the stream `events` with `client`.
pub(super) fn kinesis_on(keys: PartitionKeys, aggregate: bool, client: Client) -> Kinesis {
    let (stream, name, region) = parse_stream(Some(ARN.into())).unwrap();
    Kinesis::new(
        stream,
        name,
        AwsTarget {
            region,
            ..Default::default()
        },
        keys,
        aggregate,
    )
    .with_client(client)
    .with_retry(FAST)
}

pub(super) fn batch(key: &str, items: &[&str]) -> Outgoing {
    Outgoing {
        key: key.into(),
        items: items.iter().map(|i| Bytes::from(i.to_string())).collect(),
        ..Default::default()
    }
}

fn ok(n: usize) -> PutRecordsOutput {
    results(&vec![None; n])
}

/// An answer with one result per record: `Some(code)` failed.
fn results(codes: &[Option<&str>]) -> PutRecordsOutput {
    let failed = codes.iter().filter(|c| c.is_some()).count() as i32;
    let records = codes
        .iter()
        .enumerate()
        .map(|(i, c)| match c {
            None => PutRecordsResultEntry::builder()
                .shard_id("shardId-000000000000")
                .sequence_number(format!("{i}"))
                .build(),
            Some(code) => PutRecordsResultEntry::builder()
                .error_code(*code)
                .error_message("Rate exceeded for shard shardId-000000000000")
                .build(),
        })
        .collect();
    PutRecordsOutput::builder()
        .failed_record_count(failed)
        .set_records(Some(records))
        .build()
        .unwrap()
}

/// The requests a rule saw: (stream ARN, [(partition key, data)]) per call.
type Seen = Arc<Mutex<Vec<(Option<String>, Vec<(String, Vec<u8>)>)>>>;

fn recorder() -> (
    Seen,
    impl Fn(&aws_sdk_kinesis::operation::put_records::PutRecordsInput) -> bool + Send + Sync + 'static,
) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    (
        seen,
        move |r: &aws_sdk_kinesis::operation::put_records::PutRecordsInput| {
            let recs = r
                .records()
                .iter()
                .map(|e| {
                    (
                        e.partition_key().unwrap_or_default().to_string(),
                        e.data().as_ref().to_vec(),
                    )
                })
                .collect();
            s.lock()
                .unwrap()
                .push((r.stream_arn().map(String::from), recs));
            true
        },
    )
}

fn datas(call: &[(String, Vec<u8>)]) -> Vec<String> {
    call.iter()
        .map(|(_, d)| String::from_utf8_lossy(d).into_owned())
        .collect()
}

#[test]
fn settings_table() {
    let r = registry();
    let ok = [
        json!({"aws": {"arn": ARN}}),
        json!({"aws": {"arn": "events"}}),
        json!({"aws": {"arn": ARN, "assume_role_arn": "arn:aws:iam::1:role/r"}}),
        json!({"aws": {"arn": ARN}, "object": {"partition_key": "user.id"}}),
        json!({"aws": {"arn": ARN}, "object": {"batch_key": "k"}, "use_batch_key_as_partition_key": true}),
        json!({"aws": {"arn": ARN}, "enable_record_aggregation": true, "batch": {"count": 5000}}),
    ];
    for s in ok {
        testing::build(
            &r,
            json!({"type": "send_aws_kinesis_data_stream", "settings": s}),
        )
        .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    testing::assert_config_errors(
        &r,
        "send_aws_kinesis_data_stream",
        &[
            (json!({}), "aws.arn: missing required option"),
            (
                json!({"aws": {"arn": ""}}),
                "aws.arn: missing required option",
            ),
            (
                json!({"aws": {"arn": "arn:aws:sqs:us-east-1:1:q"}}),
                "aws.arn: \"arn:aws:sqs:us-east-1:1:q\" is not a Kinesis data stream ARN",
            ),
            (
                json!({"aws": {"arn": "arn:aws:kinesis::1:stream/s"}}),
                "is not a Kinesis data stream ARN",
            ),
            (json!({"aws": {"arn": "bad name!"}}), "nor a stream name"),
            (
                json!({"aws": {"arn": ARN, "assume_role_arn": "nope"}}),
                "aws.assume_role_arn: \"nope\" is not an IAM role ARN",
            ),
            (
                json!({"aws": {"arn": ARN}, "object": {"partition_key": "meta k"}}),
                "object.partition_key: must be a key in the data",
            ),
            (
                json!({"aws": {"arn": ARN}, "object": {"partition_key": "a", "batch_key": "a"}, "use_batch_key_as_partition_key": true}),
                "object.partition_key: set either",
            ),
        ],
    );
    assert_eq!(
        parse_stream(Some(ARN.into())).unwrap(),
        (
            StreamRef::Arn(ARN.into()),
            "events".into(),
            Some("eu-west-1".into())
        )
    );
    assert_eq!(
        parse_stream(Some("events".into())).unwrap(),
        (StreamRef::Name("events".into()), "events".into(), None)
    );
}

#[test]
fn caps_bound_the_batch_settings() {
    let s = Sender::from_parts(
        kinesis(PartitionKeys::Random, false, &[]),
        BatchLimits::from(BatchSettings {
            count: 5000,
            size: 50_000_000,
            ..Default::default()
        })
        .capped(MAX_RECORDS, MAX_CALL_BYTES),
        MAX_DATA_BYTES,
        None,
        None,
    );
    assert_eq!(s.limits().count, 500);
    assert_eq!(s.limits().size, 5 * 1024 * 1024);
}

#[test]
fn partition_keys_per_record() {
    let k = kinesis(PartitionKeys::Random, false, &[]);
    let recs = k.records(&batch("b", &["1", "2", "3"]));
    let keys: std::collections::HashSet<_> = recs.iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys.len(), 3, "a random key per record, not per batch");

    let k = kinesis(PartitionKeys::Field(Key::parse("u").unwrap()), false, &[]);
    let long = "x".repeat(300);
    let items = [
        r#"{"u":"alice"}"#.to_string(),
        r#"{"u":7}"#.to_string(),
        r#"{"v":1}"#.to_string(),
        "not json".to_string(),
        format!(r#"{{"u":"{long}"}}"#),
    ];
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let recs = k.records(&batch("", &refs));
    assert_eq!(recs[0].key, "alice");
    assert_eq!(recs[1].key, "7");
    assert_eq!(recs[2].key.len(), 36, "missing value: random");
    assert_eq!(recs[3].key.len(), 36, "not JSON: random");
    assert_eq!(recs[4].key, hex::encode(Sha256::digest(long.as_bytes())));

    let k = kinesis(PartitionKeys::BatchKey, false, &[]);
    let recs = k.records(&batch("tenant-1", &["a", "b"]));
    assert!(recs.iter().all(|r| r.key == "tenant-1"));
    let recs = k.records(&batch("", &["a", "b"]));
    assert_ne!(recs[0].key, recs[1].key, "empty batch key: random");
}

#[tokio::test]
async fn the_501st_record_goes_to_the_next_call() {
    let (seen, m) = recorder();
    let rule = mock!(Client::put_records)
        .match_requests(m)
        .then_compute_output(|r| ok(r.records().len()));
    let k = kinesis(PartitionKeys::Random, false, &[&rule]);
    let items: Vec<String> = (0..501).map(|i| i.to_string()).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    k.send(&batch("", &refs)).await.unwrap();
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].0.as_deref(), Some(ARN), "sent as StreamARN");
        assert_eq!(seen[0].1.len(), 500);
        assert_eq!(datas(&seen[1].1), vec!["500"]);
    }
    // 5 MiB per call: 6 records of 1 MiB - 256 need two calls.
    let big = "x".repeat(MAX_DATA_BYTES);
    let (seen, m) = recorder();
    let rule = mock!(Client::put_records)
        .match_requests(m)
        .then_compute_output(|r| ok(r.records().len()));
    let k = kinesis(PartitionKeys::Random, false, &[&rule]);
    k.send(&batch("", &[big.as_str(); 6])).await.unwrap();
    let sizes: Vec<usize> = seen.lock().unwrap().iter().map(|c| c.1.len()).collect();
    assert_eq!(sizes, vec![5, 1]);
}

#[test]
fn a_record_over_the_limit_is_an_error_naming_it() {
    let t = testing::build(
        &registry(),
        json!({"type": "send_aws_kinesis_data_stream", "settings": {"aws": {"arn": ARN}}}),
    )
    .unwrap();
    let big = vec![b'x'; MAX_DATA_BYTES + 1];
    let e = testing::block_on(t.transform(Message::new(big), &mut Vec::new()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("exceeds the destination's item size limit of 1048320 bytes"),
        "{e}"
    );
    // Nothing is held: a lone ctrl has nothing to send (and no client is made).
    testing::block_on(t.transform(Message::ctrl(), &mut Vec::new())).unwrap();
}

#[tokio::test]
async fn partial_failures_resend_only_the_failed_records() {
    let (seen, m) = recorder();
    let rule = mock!(Client::put_records)
        .match_requests(m)
        .sequence()
        .output(|| {
            results(&[
                None,
                Some("ProvisionedThroughputExceededException"),
                None,
                Some("InternalFailure"),
            ])
        })
        .output(|| ok(2))
        .build();
    let k = kinesis(PartitionKeys::Random, false, &[&rule]);
    k.send(&batch("", &["a", "b", "c", "d"])).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(datas(&seen[1].1), vec!["b", "d"]);
    // The same partition keys as in the first call.
    assert_eq!(seen[1].1[0].0, seen[0].1[1].0);
    assert_eq!(seen[1].1[1].0, seen[0].1[3].0);
}

#[tokio::test]
async fn a_throttled_call_is_retried() {
    let throttled =
        r#"{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded"}"#;
    let rule = mock!(Client::put_records)
        .sequence()
        .http_status(400, Some(throttled.into()))
        .times(2)
        .output(|| ok(2))
        .build();
    let k = kinesis(PartitionKeys::Random, false, &[&rule]);
    k.send(&batch("", &["a", "b"])).await.unwrap();
    assert_eq!(rule.num_calls(), 3);
}

#[tokio::test]
async fn persistent_throttling_of_the_call_fails_every_record() {
    let throttled =
        r#"{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded"}"#;
    let rule = mock!(Client::put_records)
        .sequence()
        .http_status(400, Some(throttled.into()))
        .times(3)
        .build();
    let k = kinesis(PartitionKeys::Random, false, &[&rule]);
    let e = k.send(&batch("", &["a", "b"])).await.unwrap_err();
    assert_eq!(
        e.undelivered,
        super::super::batcher::Undelivered::Items(vec![0, 1])
    );
    let text = e.error.to_string();
    assert!(
        text.contains("kinesis stream events: PutRecords failed"),
        "{text}"
    );
    assert!(
        text.contains("ProvisionedThroughputExceededException"),
        "{text}"
    );
}

#[tokio::test]
async fn persistent_record_failures_are_undelivered_items() {
    let rule = mock!(Client::put_records).then_compute_output(|r| {
        // Records "b" and "d" always fail.
        let codes: Vec<Option<&str>> = r
            .records()
            .iter()
            .map(|e| match e.data().as_ref() {
                b"b" | b"d" => Some("ProvisionedThroughputExceededException"),
                _ => None,
            })
            .collect();
        results(&codes)
    });
    let k = kinesis(PartitionKeys::Random, false, &[&rule]);
    let e = k.send(&batch("", &["a", "b", "c", "d"])).await.unwrap_err();
    assert_eq!(
        e.undelivered,
        super::super::batcher::Undelivered::Items(vec![1, 3])
    );
    let text = e.error.to_string();
    assert!(text.contains("kinesis stream events"), "{text}");
    assert!(
        text.contains("2 of 4 records not accepted after 3 PutRecords attempts"),
        "{text}"
    );
    assert!(
        text.contains("2 × ProvisionedThroughputExceededException"),
        "{text}"
    );
    assert_eq!(rule.num_calls(), 3);
}

#[tokio::test(flavor = "current_thread")]
async fn acks_fail_for_exactly_the_undelivered_messages() {
    let rule = mock!(Client::put_records).then_compute_output(|r| {
        let codes: Vec<Option<&str>> = r
            .records()
            .iter()
            .map(|e| (e.data().as_ref() == b"b").then_some("InternalFailure"))
            .collect();
        results(&codes)
    });
    let s = Sender::from_parts(
        kinesis(PartitionKeys::Random, false, &[&rule]),
        BatchLimits::from(BatchSettings::default()),
        MAX_DATA_BYTES,
        None,
        None,
    );
    let mut trackers = Vec::new();
    let mut out = Vec::new();
    for d in ["a", "b", "c"] {
        let (t, tok) = AckTracker::new();
        let mut m = Message::new(d.as_bytes().to_vec());
        m.add_ack(tok);
        s.transform(m, &mut out).await.unwrap();
        trackers.push(t);
    }
    drop(out);
    let e = s
        .transform(Message::ctrl(), &mut Vec::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("InternalFailure"), "{e}");
    assert_eq!(trackers[0].status(), AckStatus::Delivered);
    assert_eq!(trackers[1].status(), AckStatus::Pending);
    assert_eq!(trackers[2].status(), AckStatus::Delivered);
    assert_eq!(s.undelivered(), 1);
    s.abort("gave up").await;
    assert_eq!(trackers[1].status(), AckStatus::Failed);
}

/// Decodes a KPL aggregated record: (partition key table in order of use, [(key index,
/// data)]), checked by `sluice_platform::kpl`.
fn decode_kpl(blob: &Bytes) -> (Vec<String>, Vec<(u64, Vec<u8>)>) {
    let users = sluice_platform::kpl::deaggregate(blob)
        .expect("well formed")
        .expect("an aggregate");
    let mut keys: Vec<String> = Vec::new();
    let records = users
        .into_iter()
        .map(|u| {
            let i = match keys.iter().position(|k| *k == u.partition_key) {
                Some(i) => i,
                None => {
                    keys.push(u.partition_key);
                    keys.len() - 1
                }
            };
            (i as u64, u.data.to_vec())
        })
        .collect();
    (keys, records)
}

#[test]
fn aggregation_round_trips_and_groups_by_key() {
    let k = kinesis(PartitionKeys::Field(Key::parse("u").unwrap()), true, &[]);
    let items = [
        r#"{"u":"a","n":1}"#,
        r#"{"u":"b","n":2}"#,
        r#"{"u":"a","n":3}"#,
        r#"{"u":"a","n":4}"#,
    ];
    let recs = k.records(&batch("", &items));
    assert_eq!(recs.len(), 2, "one aggregate for a, b alone (plain)");
    assert_eq!(recs[0].key, "a");
    assert_eq!(recs[0].items, vec![0, 2, 3]);
    let (keys, inner) = decode_kpl(&recs[0].data);
    assert_eq!(keys, vec!["a"]);
    let datas: Vec<String> = inner
        .iter()
        .map(|(i, d)| {
            assert_eq!(*i, 0);
            String::from_utf8(d.clone()).unwrap()
        })
        .collect();
    assert_eq!(datas, vec![items[0], items[2], items[3]]);
    assert_eq!(recs[1].key, "b");
    assert_eq!(
        &recs[1].data[..],
        items[1].as_bytes(),
        "a lone record is plain"
    );
}

#[test]
fn aggregates_stay_within_one_mib() {
    let k = kinesis(PartitionKeys::Random, true, &[]);
    let item = "y".repeat(300_000);
    let items = vec![item.as_str(); 7];
    let recs = k.records(&batch("", &items));
    // Three 300 kB records fit in 1 MiB, a fourth does not.
    let counts: Vec<usize> = recs.iter().map(|r| r.items.len()).collect();
    assert_eq!(counts, vec![3, 3, 1]);
    for r in &recs {
        assert!(r.size() <= MAX_RECORD_BYTES, "{}", r.size());
    }
    let (keys, inner) = decode_kpl(&recs[0].data);
    assert_eq!(keys, vec![recs[0].key.clone()]);
    assert_eq!(inner.len(), 3);
    assert!(inner.iter().all(|(_, d)| d == item.as_bytes()));
    assert_ne!(recs[0].key, recs[1].key, "a random key per aggregate");
    // A record too large to aggregate with its (long) key is sent plain, after what
    // was aggregated before it (order is kept).
    let k = kinesis(PartitionKeys::Field(Key::parse("u").unwrap()), true, &[]);
    let key = "k".repeat(MAX_PARTITION_KEY);
    let small = format!(r#"{{"u":"{key}"}}"#);
    let head = format!(r#"{{"u":"{key}","p":""#);
    let huge = format!("{head}{}\"}}", "z".repeat(MAX_DATA_BYTES - head.len() - 2));
    assert_eq!(huge.len(), MAX_DATA_BYTES);
    let recs = k.records(&batch("", &[&small, &small, &huge, &small]));
    let items: Vec<Vec<usize>> = recs.iter().map(|r| r.items.clone()).collect();
    assert_eq!(items, vec![vec![0, 1], vec![2], vec![3]]);
    assert_eq!(&recs[1].data[..], huge.as_bytes(), "sent plain");
    for r in &recs {
        assert_eq!(r.key, key);
        assert!(r.size() <= MAX_RECORD_BYTES, "{}", r.size());
    }
}

#[tokio::test]
async fn a_failed_aggregate_fails_every_message_in_it() {
    let rule = mock!(Client::put_records).then_compute_output(|r| {
        let codes: Vec<Option<&str>> = r
            .records()
            .iter()
            .map(|e| (e.partition_key() == Some("a")).then_some("InternalFailure"))
            .collect();
        results(&codes)
    });
    let k = kinesis(
        PartitionKeys::Field(Key::parse("u").unwrap()),
        true,
        &[&rule],
    );
    let items = [r#"{"u":"a"}"#, r#"{"u":"b"}"#, r#"{"u":"a","x":1}"#];
    let e = k.send(&batch("", &items)).await.unwrap_err();
    assert_eq!(
        e.undelivered,
        super::super::batcher::Undelivered::Items(vec![0, 2])
    );
}

#[test]
fn compliance() {
    let rule = mock!(Client::put_records).then_compute_output(|r| ok(r.records().len()));
    let t = Transform::stateful(Sender::from_parts(
        kinesis(PartitionKeys::Random, false, &[&rule]),
        BatchLimits::from(BatchSettings::default()),
        MAX_DATA_BYTES,
        None,
        None,
    ));
    testing::check_compliance(t);
}
