//! Tests of `aws_dynamodb_put`.

use super::*;
use crate::kv_store::LockStore;
use crate::kv_store::aws_dynamodb::DynamoDbStore;
use crate::registry;
use crate::send::aws_destination::{AwsSend, RetryPolicy};
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::operation::batch_write_item::{BatchWriteItemInput, BatchWriteItemOutput};
use aws_sdk_dynamodb::operation::describe_table::DescribeTableOutput;
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsInput, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::types::error::TransactionCanceledException;
use aws_sdk_dynamodb::types::{CancellationReason, KeySchemaElement, KeyType, TableDescription};
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use bytes::Bytes;
use sluice_engine::{Message, json, testing};
use std::sync::Mutex;
use std::time::Duration;

const ARN: &str = "arn:aws:dynamodb:eu-west-1:123456789012:table/events";

const FAST: RetryPolicy = RetryPolicy {
    attempts: 3,
    base: Duration::from_millis(1),
    max: Duration::from_millis(2),
};

fn client(rules: &[&Rule]) -> Client {
    mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, rules, |b| b
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(2)
                .with_initial_backoff(Duration::from_millis(1))
        ))
}

/// The sink table `events` has the key `pk` (+ `sk` with `sort`).
fn describe(sort: bool) -> Rule {
    mock!(Client::describe_table).then_output(move || {
        let mut keys = vec![
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        ];
        if sort {
            keys.insert(
                0,
                KeySchemaElement::builder()
                    .attribute_name("sk")
                    .key_type(KeyType::Range)
                    .build()
                    .unwrap(),
            );
        }
        DescribeTableOutput::builder()
            .table(
                TableDescription::builder()
                    .set_key_schema(Some(keys))
                    .build(),
            )
            .build()
    })
}

fn put(rules: &[&Rule]) -> DynamoDbPut {
    let (table, region) = parse_dynamodb_table(ARN).unwrap();
    DynamoDbPut::new(
        table,
        AwsTarget {
            region,
            ..Default::default()
        },
    )
    .with_client(client(rules))
    .with_retry(FAST)
}

fn batch(items: &[&str]) -> Outgoing {
    Outgoing {
        key: String::new(),
        items: items.iter().map(|i| Bytes::from(i.to_string())).collect(),
        ..Default::default()
    }
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// The `pk`s of the items of each call.
type Seen = Arc<Mutex<Vec<Vec<String>>>>;

fn pks(items: impl Iterator<Item = Item>) -> Vec<String> {
    items
        .map(|i| match i.get("pk") {
            Some(AttributeValue::S(s)) => s.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn batch_recorder() -> (Seen, impl Fn(&BatchWriteItemInput) -> bool + Send + Sync) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    (seen, move |r: &BatchWriteItemInput| {
        let items = r.request_items().unwrap()["events"]
            .iter()
            .map(|w| w.put_request().unwrap().item().clone());
        s.lock().unwrap().push(pks(items));
        true
    })
}

fn unprocessed(items: Vec<Item>) -> BatchWriteItemOutput {
    let reqs = items
        .into_iter()
        .map(|i| {
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(i)).build().unwrap())
                .build()
        })
        .collect();
    BatchWriteItemOutput::builder()
        .unprocessed_items("events", reqs)
        .build()
}

#[test]
fn json_becomes_dynamodb_attribute_values() {
    let table: &[(&str, AttributeValue)] = &[
        ("null", AttributeValue::Null(true)),
        ("true", AttributeValue::Bool(true)),
        (
            "12345678901234567890",
            AttributeValue::N("12345678901234567890".into()),
        ),
        ("-1.5", AttributeValue::N("-1.5".into())),
        ("\"\"", s("")),
        (
            "[1,\"a\"]",
            AttributeValue::L(vec![AttributeValue::N("1".into()), s("a")]),
        ),
        (
            "{\"m\":{\"x\":null}}",
            AttributeValue::M(
                [(
                    "m".to_string(),
                    AttributeValue::M([("x".to_string(), AttributeValue::Null(true))].into()),
                )]
                .into(),
            ),
        ),
    ];
    for (json, want) in table {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(&attribute_value_of_json(&v), want, "{json}");
    }
}

#[test]
fn items_must_be_objects_within_the_size_limit() {
    assert!(parse_item(br#"{"pk":"a"}"#).is_ok());
    for (data, want) in [
        (b"[1]".to_vec(), "must be a JSON object"),
        (b"nope".to_vec(), "must be a JSON object"),
        (
            vec![b' '; MAX_ITEM_BYTES + 1],
            "item size limit of 409600 bytes",
        ),
    ] {
        let e = parse_item(&data).unwrap_err();
        assert!(e.contains(want), "{e}");
    }
    // Through the transform: an error when the message arrives, naming the rule.
    let t = testing::build(
        &registry(),
        json!({"type": "send_aws_dynamodb_put", "settings": {"aws": {"arn": ARN}}}),
    )
    .unwrap();
    let e = testing::block_on(t.transform(Message::new(&b"[1]"[..]), &mut Vec::new()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("data could not be sent: an item must be a JSON object"),
        "{e}"
    );
}

#[test]
fn settings_table() {
    let r = registry();
    for s in [
        json!({"aws": {"arn": ARN}}),
        json!({"aws": {"arn": "events"}}),
        json!({"aws": {"arn": ARN}, "transactional": true, "concurrency": 2}),
    ] {
        testing::build(&r, json!({"type": "send_aws_dynamodb_put", "settings": s}))
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    testing::assert_config_errors(
        &r,
        "send_aws_dynamodb_put",
        &[
            (json!({}), "aws.arn: missing required option"),
            (
                json!({"aws": {"arn": "arn:aws:kinesis:us-east-1:1:stream/s"}}),
                "is not a DynamoDB table ARN",
            ),
            (json!({"aws": {"arn": "a b"}}), "nor a table name"),
            (
                json!({"aws": {"arn": ARN}, "concurrency": 2}),
                "concurrency: applies to transactional mode only",
            ),
            (
                json!({"aws": {"arn": ARN}, "transactional": true, "concurrency": 0}),
                "concurrency: must be at least 1",
            ),
            (
                json!({"aws": {"arn": ARN}, "transactional": true,
                       "auxiliary_transforms": [{"type": "format_to_gzip"}]}),
                "auxiliary_transforms: not allowed with transactional: true",
            ),
        ],
    );
}

#[tokio::test]
async fn calls_hold_25_items_and_a_primary_key_once() {
    let (seen, m) = batch_recorder();
    let rule = mock!(Client::batch_write_item)
        .match_requests(m)
        .then_output(|| BatchWriteItemOutput::builder().build());
    let d = describe(false);
    let p = put(&[&rule, &d]);
    let mut items: Vec<String> = (0..26).map(|i| format!(r#"{{"pk":"{i}"}}"#)).collect();
    items[3] = r#"{"pk":"1","v":2}"#.into();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    p.send(&batch(&refs)).await.unwrap();
    let seen = seen.lock().unwrap();
    let sizes: Vec<usize> = seen.iter().map(Vec::len).collect();
    // "1" again at index 3 starts a second call; 25 per call after that.
    assert_eq!(sizes, vec![3, 23]);
    assert_eq!(seen[1][0], "1");
    assert_eq!(d.num_calls(), 1, "the key schema is read once");
}

#[tokio::test]
async fn unprocessed_items_are_sent_again_and_only_they() {
    let (seen, m) = batch_recorder();
    let rule = mock!(Client::batch_write_item)
        .match_requests(m)
        .sequence()
        .output(|| unprocessed(vec![[("pk".to_string(), s("b"))].into()]))
        .output(|| BatchWriteItemOutput::builder().build())
        .build();
    let d = describe(false);
    let p = put(&[&rule, &d]);
    p.send(&batch(&[r#"{"pk":"a"}"#, r#"{"pk":"b"}"#, r#"{"pk":"c"}"#]))
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![vec!["a", "b", "c"], vec!["b"]]);
}

#[tokio::test]
async fn items_still_unprocessed_fail_alone_and_items_without_a_key_fail() {
    let rule = mock!(Client::batch_write_item)
        .then_output(|| unprocessed(vec![[("pk".to_string(), s("b"))].into()]));
    let d = describe(false);
    let p = put(&[&rule, &d]);
    let e = p
        .send(&batch(&[
            r#"{"pk":"a"}"#,
            r#"{"pk":"b"}"#,
            r#"{"other":1}"#,
        ]))
        .await
        .unwrap_err();
    assert_eq!(
        e.undelivered,
        super::super::batcher::Undelivered::Items(vec![1, 2])
    );
    let text = e.error.to_string();
    assert!(text.contains("no \"pk\" attribute"), "{text}");
    assert_eq!(rule.num_calls(), 3, "retried up to the policy's attempts");
    let e = p.send(&batch(&[r#"{"pk":"b"}"#])).await.unwrap_err();
    let text = e.error.to_string();
    assert!(
        text.contains("dynamodb table events: 1 of 1 items not accepted after 3 BatchWriteItem attempts: 1 × UnprocessedItems"),
        "{text}"
    );
}

// --- transactional mode -------------------------------------------------------

fn lock_store() -> Arc<dyn LockStore> {
    let settings: Value = serde_json::from_str(
        r#"{"aws":{"arn":"arn:aws:dynamodb:eu-west-1:123456789012:table/locks"},"attributes":{"partition_key":"PK"}}"#,
    )
    .unwrap();
    Arc::new(DynamoDbStore::from_settings(&settings).unwrap())
}

/// A lock ticket for "me"'s lock on `key`.
fn lock(key: &str) -> Arc<LockTicket> {
    Arc::new(LockTicket::new(
        key.into(),
        2_000_000_000,
        0,
        None,
        lock_store(),
        "me".into(),
        std::time::Instant::now(),
        None,
    ))
}

/// A batch whose item `i` carries the locks `locks[i]`, each item a copy of its locks'
/// messages at send `put`, numbered from 0 per lock.
fn locked(items: &[&str], locks: Vec<Vec<Arc<LockTicket>>>) -> Outgoing {
    let copies = locks
        .iter()
        .map(|ls| ls.iter().map(|l| (l.clone(), l.next_copy("put"))).collect())
        .collect();
    Outgoing {
        locks: super::super::batcher::ItemLocks::PerItem(locks),
        send: "put".into(),
        copies,
        ..batch(items)
    }
}

/// Each transaction as (sink pks, the lock keys whose progress it records, each with the
/// entries it adds).
type SeenTx = Arc<Mutex<Vec<(Vec<String>, Vec<String>)>>>;

fn tx_recorder() -> (
    SeenTx,
    impl Fn(&TransactWriteItemsInput) -> bool + Send + Sync,
) {
    let seen: SeenTx = Arc::default();
    let s = seen.clone();
    (seen, move |r: &TransactWriteItemsInput| {
        let mut puts = Vec::new();
        let mut commits = Vec::new();
        for w in r.transact_items() {
            if let Some(p) = w.put() {
                assert_eq!(p.table_name(), "events");
                puts.push(p.item().clone());
            }
            if let Some(u) = w.update() {
                assert_eq!(u.table_name(), "locks");
                assert_eq!(
                    u.condition_expression(),
                    Some("#owner = :me AND #status = :pending")
                );
                assert_eq!(u.update_expression(), "ADD #progress :progress");
                let Some(AttributeValue::Ss(entries)) = u
                    .expression_attribute_values()
                    .and_then(|v| v.get(":progress"))
                else {
                    panic!("no progress in {u:?}")
                };
                if let Some(AttributeValue::S(k)) = u.key().get("PK") {
                    commits.push(format!("{k}={}", entries.join(",")));
                }
            }
        }
        s.lock().unwrap().push((pks(puts.into_iter()), commits));
        true
    })
}

#[tokio::test]
async fn a_transaction_writes_the_items_and_commits_their_locks() {
    let (seen, m) = tx_recorder();
    let rule = mock!(Client::transact_write_items)
        .match_requests(m)
        .then_output(|| TransactWriteItemsOutput::builder().build());
    let d = describe(false);
    let p = put(&[&rule, &d]).transactional(4);
    let (la, lb) = (lock("A"), lock("B"));
    // A has two items (the second "x" replaces the first), B one.
    p.send(&locked(
        &[
            r#"{"pk":"x"}"#,
            r#"{"pk":"y"}"#,
            r#"{"pk":"x","v":2}"#,
            r#"{"pk":"z"}"#,
        ],
        vec![
            vec![la.clone()],
            vec![la.clone()],
            vec![la.clone()],
            vec![lb.clone()],
        ],
    ))
    .await
    .unwrap();
    // The locks are not committed here (another send of the message may still fail): the
    // transaction records that this send delivered A's three copies and B's one.
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(
            vec!["y".into(), "x".into(), "z".into()],
            vec!["A=put:0-2".into(), "B=put:0".into()]
        )]
    );
}

#[tokio::test]
async fn a_lock_taken_over_cancels_only_its_message() {
    let (seen, m) = tx_recorder();
    let rule = mock!(Client::transact_write_items)
        .match_requests(m)
        .sequence()
        .error(|| {
            let reason = |code: &str| CancellationReason::builder().code(code).build();
            let mut old = HashMap::new();
            old.insert("lock_owner".to_string(), s("other"));
            old.insert("lock_status".to_string(), s("pending"));
            TransactWriteItemsError::TransactionCanceledException(
                TransactionCanceledException::builder()
                    .cancellation_reasons(reason("None"))
                    .cancellation_reasons(
                        CancellationReason::builder()
                            .code("ConditionalCheckFailed")
                            .set_item(Some(old))
                            .build(),
                    )
                    .cancellation_reasons(reason("None"))
                    .cancellation_reasons(reason("None"))
                    .build(),
            )
        })
        .output(|| TransactWriteItemsOutput::builder().build())
        .build();
    let d = describe(false);
    let p = put(&[&rule, &d]).transactional(4);
    let (la, lb) = (lock("A"), lock("B"));
    let e = p
        .send(&locked(
            &[r#"{"pk":"x"}"#, r#"{"pk":"z"}"#],
            vec![vec![la.clone()], vec![lb.clone()]],
        ))
        .await
        .unwrap_err();
    assert_eq!(
        e.undelivered,
        super::super::batcher::Undelivered::Items(vec![0])
    );
    let text = e.error.to_string();
    assert!(
        text.contains("the lock on \"A\" is held by other"),
        "{text}"
    );
    // The retry holds B's message only.
    assert_eq!(
        seen.lock().unwrap()[1],
        (vec!["z".to_string()], vec!["B=put:0".to_string()])
    );
}

#[tokio::test]
async fn items_without_a_dynamodb_lock_fail_and_big_messages_are_refused() {
    let rule = mock!(Client::transact_write_items)
        .then_output(|| TransactWriteItemsOutput::builder().build());
    let d = describe(false);
    let p = put(&[&rule, &d]).transactional(4);
    let e = p
        .send(&locked(&[r#"{"pk":"x"}"#], vec![vec![]]))
        .await
        .unwrap_err();
    assert!(
        e.error.to_string().contains("carries no DynamoDB lock"),
        "{}",
        e.error
    );
    let a = lock("A");
    let items: Vec<String> = (0..100).map(|i| format!(r#"{{"pk":"{i}"}}"#)).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let e = p
        .send(&locked(&refs, vec![vec![a]; 100]))
        .await
        .unwrap_err();
    assert!(
        e.error
            .to_string()
            .contains("exceed a transaction's 100 writes"),
        "{}",
        e.error
    );
    assert_eq!(rule.num_calls(), 0);
}

#[tokio::test]
async fn transactions_hold_100_writes_and_touch_an_item_once_per_wave() {
    let (seen, m) = tx_recorder();
    let rule = mock!(Client::transact_write_items)
        .match_requests(m)
        .then_output(|| TransactWriteItemsOutput::builder().build());
    let d = describe(false);
    let p = put(&[&rule, &d]).transactional(1);
    // 60 messages of one item each: 50 fit in a transaction (100 writes).
    let locks: Vec<Arc<LockTicket>> = (0..60).map(|i| lock(&format!("k{i}"))).collect();
    let items: Vec<String> = (0..60)
        .map(|i| format!(r#"{{"pk":"{}"}}"#, i % 55))
        .collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let per_item: Vec<Vec<Arc<LockTicket>>> = locks.iter().map(|l| vec![l.clone()]).collect();
    p.send(&locked(&refs, per_item)).await.unwrap();
    let seen = seen.lock().unwrap();
    let sizes: Vec<(usize, usize)> = seen.iter().map(|(p, c)| (p.len(), c.len())).collect();
    assert_eq!(sizes, vec![(50, 50), (10, 10)]);
    // Waves: the second transaction rewrites pk "0".."4", so it waits for the first.
    let groups: Vec<Group> = (0..60)
        .map(|i| Group {
            puts: vec![(i, vec![s(&(i % 55).to_string())], Item::new())],
            locks: vec![lock(&format!("w{i}"))],
            ..Default::default()
        })
        .collect();
    assert_eq!(
        plan_transactions(&groups),
        vec![vec![(0..50).collect::<Vec<_>>()], vec![(50..60).collect()]]
    );
    let disjoint: Vec<Group> = (0..60)
        .map(|i| Group {
            puts: vec![(i, vec![s(&i.to_string())], Item::new())],
            locks: vec![lock(&format!("d{i}"))],
            ..Default::default()
        })
        .collect();
    assert_eq!(
        plan_transactions(&disjoint),
        vec![vec![(0..50).collect::<Vec<_>>(), (50..60).collect()]]
    );
}

#[tokio::test]
async fn failures_say_whether_they_may_have_been_applied() {
    for (answers, want) in sluice_platform::aws::outcome::ANSWERS_TABLE {
        let (last, first) = answers.split_last().unwrap();
        let mut seq = mock!(Client::batch_write_item).sequence();
        for status in first {
            seq = seq.http_status(*status, None);
        }
        let rule = seq.http_status(*last, None).repeatedly().build();
        let describe = describe(false);
        let d = put(&[&describe, &rule]);
        let e = d.send(&batch(&[r#"{"pk":"a"}"#])).await.unwrap_err();
        assert_eq!(e.uncertain, *want, "{answers:?}: {}", e.error);
    }
}
