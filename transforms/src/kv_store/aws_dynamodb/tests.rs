//! The DynamoDB lock store against mocked responses (aws-smithy-mocks): the requests it
//! makes and how it reads the answers, errors and retries included. The stores here take
//! locks one `UpdateItem` at a time (`lock_acquire: 'items'`); the default, transactions,
//! is in `acquire_tests.rs`. The same store against the emulator is in
//! `tests/kv_store_dynamodb.rs`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::lock::{ACQUIRE_CONDITION, ACQUIRE_UPDATE, STORE_ATTEMPTS, backoff};
use super::*;
use crate::kv_store::{
    AbandonRequest, AcquireRequest, Acquired, CommitRequest, LockStore, Prior, RenewRequest,
    Settled,
};
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::error::{
    ConditionalCheckFailedException, InternalServerError, TransactionCanceledException,
};
use aws_sdk_dynamodb::types::{CancellationReason, ReturnValue};
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};

pub(super) const NOW_MS: i64 = 1_800_000_000_123;
pub(super) const ARN: &str = "arn:aws:dynamodb:eu-west-1:123456789012:table/locks";

pub(super) fn value(json: &str) -> Value {
    serde_json::from_str(json).expect("test JSON")
}

pub(super) fn settings() -> Value {
    value(&format!(
        r#"{{"aws": {{"arn": "{ARN}"}}, "attributes": {{"partition_key": "PK"}}, "lock_acquire": "items"}}"#
    ))
}

/// A store whose client answers with `rules`, in order, retrying up to `attempts`
/// times per call without waiting long.
pub(super) fn store(rules: &[&Rule], attempts: u32) -> DynamoDbStore {
    store_with(RuleMode::Sequential, rules, attempts)
}

pub(super) fn store_with(mode: RuleMode, rules: &[&Rule], attempts: u32) -> DynamoDbStore {
    store_from(&settings(), mode, rules, attempts)
}

/// A store configured by `settings` whose client answers with `rules`.
pub(super) fn store_from(
    settings: &Value,
    mode: RuleMode,
    rules: &[&Rule],
    attempts: u32,
) -> DynamoDbStore {
    let client = mock_client!(aws_sdk_dynamodb, mode, rules, |b| b.retry_config(
        RetryConfig::standard()
            .with_max_attempts(attempts)
            .with_initial_backoff(Duration::from_millis(1))
    ));
    DynamoDbStore::from_settings(settings)
        .unwrap()
        .with_client(client)
}

pub(super) fn req(key: &str) -> AcquireRequest {
    AcquireRequest {
        key: key.into(),
        ttl: NOW_MS / 1000 + 600,
        lease_until_ms: NOW_MS + 60_000,
        skew_ms: 0,
        fresh_before_ms: None,
    }
}

pub(super) fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("k{i}")).collect()
}

pub(super) fn commits(n: usize) -> Vec<CommitRequest> {
    keys(n)
        .into_iter()
        .map(|key| CommitRequest {
            key,
            ttl: NOW_MS / 1000 + 600,
            note: None,
        })
        .collect()
}

pub(super) fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: i64) -> AttributeValue {
    number(v)
}

/// A lock item as another owner's store wrote it.
pub(super) fn held_item(owner: &str, status: &str) -> HashMap<String, AttributeValue> {
    let mut item = HashMap::new();
    item.insert("PK".to_string(), s("k1"));
    item.insert("ttl".to_string(), n(1_800_000_600));
    item.insert("lock_owner".to_string(), s(owner));
    item.insert("lock_status".to_string(), s(status));
    if status == PENDING {
        item.insert("lock_lease_until".to_string(), n(1_800_000_060_000));
    }
    item
}

pub(super) fn meta(code: &str) -> aws_sdk_dynamodb::error::ErrorMetadata {
    aws_sdk_dynamodb::error::ErrorMetadata::builder()
        .code(code)
        .message("from the mock")
        .build()
}

pub(super) fn cancelled(
    codes: &[(&str, Option<HashMap<String, AttributeValue>>)],
) -> TransactWriteItemsError {
    let reasons = codes
        .iter()
        .map(|(code, item)| {
            CancellationReason::builder()
                .code(*code)
                .set_item(item.clone())
                .build()
        })
        .collect();
    TransactWriteItemsError::TransactionCanceledException(
        TransactionCanceledException::builder()
            .set_cancellation_reasons(Some(reasons))
            .meta(meta("TransactionCanceledException"))
            .build(),
    )
}

#[tokio::test]
async fn a_throttled_acquire_is_retried_and_then_succeeds() {
    let throttled = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}"#;
    let rule = mock!(Client::update_item)
        .sequence()
        .http_status(400, Some(throttled.into()))
        .times(2)
        .output(|| UpdateItemOutput::builder().build())
        .build();
    let store = store(&[&rule], 3);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 4).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    assert_eq!(rule.num_calls(), 3);
}

#[tokio::test]
async fn the_acquire_request_is_a_conditional_update_of_the_whole_record() {
    let rule = mock!(Client::update_item)
        .match_requests(|r| {
            let names = r.expression_attribute_names().unwrap();
            let values = r.expression_attribute_values().unwrap();
            r.table_name() == Some("locks")
                && r.key().unwrap().get("PK") == Some(&s("k1"))
                && r.update_expression() == Some(ACQUIRE_UPDATE)
                && r.condition_expression() == Some(ACQUIRE_CONDITION)
                && values.get(":ttl") == Some(&n(NOW_MS / 1000 + 600))
                && values.get(":me") == Some(&s("me"))
                && values.get(":pending") == Some(&s("pending"))
                && values.get(":lease") == Some(&n(NOW_MS + 60_000))
                && values.get(":now_s") == Some(&n(NOW_MS / 1000))
                && values.get(":now_ms") == Some(&n(NOW_MS))
                && names.get("#ttl").map(String::as_str) == Some("ttl")
                && names.get("#status").map(String::as_str) == Some("lock_status")
                && names.get("#since").map(String::as_str) == Some("lock_since")
                && r.return_values() == Some(&ReturnValue::AllOld)
                && r.return_values_on_condition_check_failure()
                    == Some(&ReturnValuesOnConditionCheckFailure::AllOld)
        })
        .then_output(|| UpdateItemOutput::builder().build());
    let store = store(&[&rule], 1);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
}

#[tokio::test]
async fn the_record_an_acquisition_replaced_says_whether_it_was_a_takeover() {
    let mut theirs = held_item("them", PENDING);
    theirs.insert("lock_since".into(), n(NOW_MS - 9_000));
    let took_over = mock!(Client::update_item).then_output(move || {
        UpdateItemOutput::builder()
            .set_attributes(Some(theirs.clone()))
            .build()
    });
    let expired_commit = mock!(Client::update_item).then_output(|| {
        UpdateItemOutput::builder()
            .set_attributes(Some(held_item("them", COMMITTED)))
            .build()
    });
    let store = store(&[&took_over, &expired_commit], 1);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    assert_eq!(
        got[0].as_ref().unwrap(),
        &Acquired::Taken {
            prior: Some(Prior {
                owner: "them".into(),
                since_ms: NOW_MS - 9_000,
                progress: Default::default(),
            })
        }
    );
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
}

#[tokio::test]
async fn a_failed_condition_on_acquire_returns_the_holders_record() {
    let rule = mock!(Client::update_item).then_error(|| {
        UpdateItemError::ConditionalCheckFailedException(
            ConditionalCheckFailedException::builder()
                .set_item(Some(held_item("them", PENDING)))
                .meta(meta("ConditionalCheckFailedException"))
                .build(),
        )
    });
    let bare = mock!(Client::update_item).then_error(|| {
        UpdateItemError::ConditionalCheckFailedException(
            ConditionalCheckFailedException::builder()
                .meta(meta("ConditionalCheckFailedException"))
                .build(),
        )
    });
    let store = store(&[&rule, &bare], 1);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    assert_eq!(
        got[0].as_ref().unwrap(),
        &Acquired::Held(Some(LockRecord {
            owner: "them".into(),
            status: LockStatus::Pending {
                lease_until_ms: 1_800_000_060_000
            },
            ttl: 1_800_000_600,
            since_ms: None,
            progress: Default::default(),
        }))
    );
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::Held(None));
}

/// The item `req("k1")` by "me" writes.
pub(super) fn mine() -> HashMap<String, AttributeValue> {
    let mut mine = held_item("me", PENDING);
    mine.insert("ttl".into(), n(NOW_MS / 1000 + 600));
    mine.insert("lock_lease_until".into(), n(NOW_MS + 60_000));
    mine.insert("lock_since".into(), n(NOW_MS));
    mine
}

/// Acquires `k1` as "me" where the first UpdateItem was applied but answered with a 500 and
/// the SDK's retry found `item`, the record the first attempt wrote.
async fn acquire_after_a_lost_answer(item: HashMap<String, AttributeValue>) -> Acquired {
    let rule = mock!(Client::update_item)
        .sequence()
        .http_status(
            500,
            Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}"#.into()),
        )
        .output(move || {
            UpdateItemOutput::builder()
                .set_attributes(Some(item.clone()))
                .build()
        })
        .build();
    let store = store(&[&rule], 2);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    assert_eq!(rule.num_calls(), 2);
    got.into_iter().next().unwrap().unwrap()
}

#[tokio::test]
async fn our_own_earlier_attempt_is_fresh_unless_it_took_over_and_our_own_earlier_request_is_a_retake()
 {
    // The SDK retried an update whose first attempt was applied: the record it replaced is
    // exactly what this request writes, a pending chain this request began.
    assert_eq!(acquire_after_a_lost_answer(mine()).await, Acquired::FRESH);
    // The same, but the first attempt took the key over from a crashed owner (the pending
    // chain began before this request, at its `since`): still a takeover, so the send
    // looks for what that owner delivered before sending again.
    let mut taken_over = mine();
    taken_over.insert("lock_since".into(), n(NOW_MS - 9_000));
    assert_eq!(
        acquire_after_a_lost_answer(taken_over).await,
        Acquired::Taken {
            prior: Some(Prior {
                owner: "me".into(),
                since_ms: NOW_MS - 9_000,
                progress: Default::default(),
            })
        }
    );
    // Without a retry, the same record is an earlier request's (a key whose release
    // failed): taken again, and the message may have been delivered since.
    let rule = mock!(Client::update_item).then_output(|| {
        UpdateItemOutput::builder()
            .set_attributes(Some(mine()))
            .build()
    });
    let store = super::tests::store(&[&rule], 2);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    assert_eq!(
        got[0].as_ref().unwrap(),
        &Acquired::Taken {
            prior: Some(Prior {
                owner: "me".into(),
                since_ms: NOW_MS,
                progress: Default::default(),
            })
        }
    );
}

#[tokio::test]
async fn substations_own_locks_count_as_committed() {
    let mut item = HashMap::new();
    item.insert("PK".to_string(), s("k1"));
    item.insert("ttl".to_string(), n(1_800_000_600));
    let store = DynamoDbStore::from_settings(&settings()).unwrap();
    assert_eq!(
        store.decode(&item),
        LockRecord {
            owner: String::new(),
            status: LockStatus::Committed,
            ttl: 1_800_000_600,
            since_ms: None,
            progress: Default::default(),
        }
    );
    // No TTL, no lease: never expires, as in the conditions.
    let mut item = held_item("x", PENDING);
    item.remove("ttl");
    item.remove("lock_lease_until");
    let r = store.decode(&item);
    assert_eq!(r.ttl, i64::MAX);
    assert!(r.blocks(NOW_MS, 0));
}

#[tokio::test]
async fn acquire_errors_name_the_table_and_key_after_the_sdks_retries() {
    let rule = mock!(Client::update_item)
        .sequence()
        .http_status(
            500,
            Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"boom"}"#.into()),
        )
        .repeatedly()
        .build();
    let store = store(&[&rule], 3);
    let got = store
        .acquire("me", NOW_MS, &[req("k1"), req("k2")], 2)
        .await;
    assert_eq!(got.len(), 2);
    for r in &got {
        let e = r.as_ref().unwrap_err().to_string();
        assert!(
            e.starts_with("aws_dynamodb table locks: acquiring key "),
            "{e}"
        );
        assert!(e.contains("InternalServerError"), "{e}");
    }
    assert!(got[0].as_ref().unwrap_err().0.contains("\"k1\""));
    assert!(got[1].as_ref().unwrap_err().0.contains("\"k2\""));
    assert_eq!(rule.num_calls(), 6, "3 attempts per key");
}

#[tokio::test]
async fn acquire_keeps_request_order_with_calls_in_flight() {
    // Answers depend on the key, and earlier keys answer later.
    let rule = mock!(Client::update_item).then_compute_response(|r| {
        let key = r.key().unwrap()["PK"].as_s().unwrap().clone();
        let i: u64 = key[1..].parse().unwrap();
        std::thread::sleep(Duration::from_millis(20u64.saturating_sub(i)));
        if i.is_multiple_of(3) {
            aws_smithy_mocks::MockResponse::Error(UpdateItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder()
                    .meta(meta("ConditionalCheckFailedException"))
                    .build(),
            ))
        } else {
            aws_smithy_mocks::MockResponse::Output(UpdateItemOutput::builder().build())
        }
    });
    let store = store_with(RuleMode::MatchAny, &[&rule], 1);
    let reqs: Vec<_> = keys(12).iter().map(|k| req(k)).collect();
    let got = store.acquire("me", NOW_MS, &reqs, 4).await;
    for (i, r) in got.iter().enumerate() {
        let want = if i.is_multiple_of(3) {
            Acquired::Held(None)
        } else {
            Acquired::FRESH
        };
        assert_eq!(r.as_ref().unwrap(), &want, "key {i}");
    }
}

#[tokio::test]
async fn commit_is_one_transaction_per_hundred_keys() {
    let rule = mock!(Client::transact_write_items)
        .match_requests(|r| {
            let items = r.transact_items();
            let u = items[0].update().unwrap();
            (items.len() == 100 || items.len() == 30)
                && items.iter().all(|i| i.update().is_some())
                && u.update_expression()
                    == "SET #status = :committed, #ttl = :ttl REMOVE #lease, #since, #progress"
                && u.condition_expression() == Some("#owner = :me AND #status = :pending")
                && u.expression_attribute_values().unwrap().get(":me") == Some(&s("me"))
                && u.return_values_on_condition_check_failure()
                    == Some(&ReturnValuesOnConditionCheckFailure::AllOld)
        })
        .sequence()
        .output(|| TransactWriteItemsOutput::builder().build())
        .times(3)
        .build();
    let store = store(&[&rule], 1);
    let got = store.commit("me", &commits(230), 4).await.unwrap();
    assert_eq!(got, vec![Settled::Ok; 230]);
    assert_eq!(rule.num_calls(), 3);
}

#[tokio::test]
async fn a_foreign_key_in_a_commit_is_reported_and_the_rest_retried() {
    let first = mock!(Client::transact_write_items)
        .match_requests(|r| r.transact_items().len() == 3)
        .then_error(|| {
            cancelled(&[
                ("None", None),
                ("ConditionalCheckFailed", Some(held_item("them", PENDING))),
                ("None", None),
            ])
        });
    let second = mock!(Client::transact_write_items)
        .match_requests(|r| {
            let pks: Vec<_> = r
                .transact_items()
                .iter()
                .map(|i| i.update().unwrap().key()["PK"].as_s().unwrap().clone())
                .collect();
            pks == ["k0", "k2"]
        })
        .then_output(|| TransactWriteItemsOutput::builder().build());
    let store = store(&[&first, &second], 1);
    let got = store.commit("me", &commits(3), 4).await.unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], Settled::Ok);
    assert!(
        matches!(&got[1], Settled::NotOwner(Some(r)) if r.owner == "them"),
        "{:?}",
        got[1]
    );
    assert_eq!(got[2], Settled::Ok);
    assert_eq!((first.num_calls(), second.num_calls()), (1, 1));
}

#[tokio::test]
async fn committing_what_we_committed_already_succeeds_and_notes_are_kept() {
    let rule = mock!(Client::transact_write_items)
        .match_requests(|r| {
            let u = r.transact_items()[0].update().unwrap();
            u.update_expression()
                == "SET #status = :committed, #ttl = :ttl, #note = :note REMOVE #lease, #since, #progress"
                && u.expression_attribute_values().unwrap().get(":note") == Some(&s("shard-1/42"))
        })
        .then_error(|| {
            cancelled(&[
                ("ConditionalCheckFailed", Some(held_item("me", COMMITTED))),
                ("ConditionalCheckFailed", Some(held_item("them", COMMITTED))),
            ])
        });
    let store = store(&[&rule], 1);
    let mut reqs = commits(2);
    reqs[0].note = Some("shard-1/42".into());
    let got = store.commit("me", &reqs, 4).await.unwrap();
    assert_eq!(got[0], Settled::Ok, "ours already");
    assert!(matches!(&got[1], Settled::NotOwner(Some(r)) if r.owner == "them"));
}

#[tokio::test]
async fn renewals_move_the_lease_and_abandonments_end_it() {
    let renew = mock!(Client::transact_write_items)
        .match_requests(|r| {
            let u = r.transact_items()[0].update().unwrap();
            let v = u.expression_attribute_values().unwrap();
            u.update_expression() == "SET #lease = :lease, #ttl = :ttl"
                && u.condition_expression() == Some("#owner = :me AND #status = :pending")
                && v.get(":lease") == Some(&n(NOW_MS + 90_000))
                // The TTL of a pending lock outlives its lease.
                && v.get(":ttl") == Some(&n((NOW_MS + 90_000) / 1000 + 1))
        })
        .then_output(|| TransactWriteItemsOutput::builder().build());
    let abandon = mock!(Client::transact_write_items)
        .match_requests(|r| {
            let u = r.transact_items()[0].update().unwrap();
            u.update_expression() == "SET #lease = :ended"
                && u.expression_attribute_values().unwrap().get(":ended") == Some(&n(0))
        })
        .then_output(|| TransactWriteItemsOutput::builder().build());
    let store = store(&[&renew, &abandon], 1);
    let got = store
        .renew(
            "me",
            &[RenewRequest {
                key: "k0".into(),
                ttl: NOW_MS / 1000,
                lease_until_ms: NOW_MS + 90_000,
            }],
            4,
        )
        .await
        .unwrap();
    assert_eq!(got, vec![Settled::Ok]);
    assert_eq!(
        store
            .abandon(
                "me",
                &[AbandonRequest {
                    key: "k0".into(),
                    progress: Default::default(),
                }],
                4
            )
            .await
            .unwrap(),
        vec![Settled::Ok]
    );
}

#[tokio::test]
async fn release_deletes_conditionally_and_reports_absent_keys() {
    let rule = mock!(Client::transact_write_items)
        .match_requests(|r| {
            let d = r.transact_items()[0].delete().unwrap();
            d.condition_expression() == Some("#owner = :me AND #status = :pending")
                && d.key().len() == 1
        })
        .then_error(|| cancelled(&[("ConditionalCheckFailed", None)]));
    let store = store(&[&rule], 1);
    let got = store.release("me", &keys(1), 4).await.unwrap();
    assert_eq!(got, vec![Settled::NotOwner(None)]);
}

#[tokio::test]
async fn conflicting_or_throttled_transactions_are_retried() {
    let rule = mock!(Client::transact_write_items)
        .sequence()
        .error(|| cancelled(&[("TransactionConflict", None), ("None", None)]))
        .error(|| cancelled(&[("None", None), ("ThrottlingError", None)]))
        .output(|| TransactWriteItemsOutput::builder().build())
        .build();
    let throttled = mock!(Client::transact_write_items)
        .sequence()
        .http_status(
            400,
            Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}"#.into()),
        )
        .output(|| TransactWriteItemsOutput::builder().build())
        .build();
    let store = store(&[&rule, &throttled], 2);
    assert_eq!(
        store.release("me", &keys(2), 4).await.unwrap(),
        vec![Settled::Ok; 2]
    );
    assert_eq!(rule.num_calls(), 3);
    assert_eq!(
        store.commit("me", &commits(2), 4).await.unwrap(),
        vec![Settled::Ok; 2]
    );
    assert_eq!(
        throttled.num_calls(),
        2,
        "the SDK retried the throttled call"
    );
}

#[tokio::test]
async fn a_transaction_that_keeps_conflicting_fails_naming_the_table() {
    let rule = mock!(Client::transact_write_items)
        .sequence()
        .error(|| cancelled(&[("TransactionConflict", None)]))
        .repeatedly()
        .build();
    let store = store(&[&rule], 1);
    tokio::time::pause();
    let err = store
        .commit("me", &commits(1), 4)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("aws_dynamodb table locks: committing 1 keys (\"k0\", ...): transaction still cancelled after 8 attempts"),
        "{err}"
    );
    assert_eq!(rule.num_calls(), STORE_ATTEMPTS as usize);
}

#[tokio::test]
async fn other_transaction_failures_are_errors() {
    let rule =
        mock!(Client::transact_write_items).then_error(|| cancelled(&[("ValidationError", None)]));
    let store = store(&[&rule], 1);
    let err = store
        .commit("me", &commits(1), 4)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("aws_dynamodb table locks: committing key \"k0\": transaction cancelled: ValidationError"),
        "{err}"
    );
    let rule = mock!(Client::transact_write_items).then_error(|| {
        TransactWriteItemsError::InternalServerError(
            InternalServerError::builder()
                .message("boom")
                .meta(meta("InternalServerError"))
                .build(),
        )
    });
    let store = super::tests::store(&[&rule], 1);
    let err = store
        .release("me", &keys(2), 4)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("aws_dynamodb table locks: releasing 2 keys (\"k0\", ...): "),
        "{err}"
    );
    assert!(store.commit("me", &[], 4).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_silent_endpoint_times_out_as_an_error_naming_the_table() {
    // A loopback server that accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::for_tests())
        .http_client(sluice_platform::aws::https_client())
        .endpoint_url(format!("http://{addr}"))
        .retry_config(RetryConfig::standard().with_max_attempts(2))
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .operation_attempt_timeout(Duration::from_millis(200))
                .operation_timeout(Duration::from_millis(300))
                .build(),
        )
        .build();
    let store = DynamoDbStore::from_settings(&settings())
        .unwrap()
        .with_client(Client::from_conf(conf));
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    let e = got[0].as_ref().unwrap_err().to_string();
    assert!(
        e.starts_with("aws_dynamodb table locks: acquiring key \"k1\": "),
        "{e}"
    );
    assert!(e.contains("timeout") || e.contains("timed out"), "{e}");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_are_concurrent_up_to_the_bound() {
    let delay = Duration::from_millis(20);
    for (concurrency, want_most) in [(1usize, 1usize), (8, 8), (32, 32)] {
        let (endpoint, most, server) = sluice_platform::aws::test_support::slow_endpoint(
            delay,
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: 2\r\n\r\n{}",
        )
        .await;
        let store = DynamoDbStore::from_settings(&settings())
            .unwrap()
            .with_local_endpoint(endpoint);
        let reqs: Vec<_> = keys(64).iter().map(|k| req(k)).collect();
        let started = std::time::Instant::now();
        let got = store.acquire("me", NOW_MS, &reqs, concurrency).await;
        let took = started.elapsed();
        assert!(got.iter().all(|r| r.as_ref().unwrap().is_taken()));
        assert_eq!(
            most.load(Ordering::SeqCst),
            want_most,
            "requests in flight at concurrency {concurrency}"
        );
        // 64 requests in waves of `concurrency`, each wave at least `delay`.
        let waves = 64 / concurrency as u32;
        assert!(took >= delay * waves, "{concurrency}: {took:?}");
        server.abort();
    }
}

fn config_error(json: &str) -> String {
    DynamoDbStore::from_settings(&value(json)).unwrap_err()
}

#[test]
fn settings_name_the_table_by_arn_or_by_name() {
    let s = DynamoDbStore::from_settings(&settings()).unwrap();
    assert_eq!(s.table.name, "locks");
    assert_eq!(s.table.region.as_deref(), Some("eu-west-1"));
    assert_eq!(s.describe(), "aws_dynamodb table locks (eu-west-1)");
    assert_eq!(
        s.table.attributes,
        Attributes {
            partition_key: "PK".into(),
            sort_key: None,
            ttl: "ttl".into(),
            value: None,
            owner: "lock_owner".into(),
            status: "lock_status".into(),
            lease_until: "lock_lease_until".into(),
            since: "lock_since".into(),
            note: "lock_note".into(),
            progress: "lock_progress".into(),
        }
    );
    let s = DynamoDbStore::from_settings(&value(
        r#"{"aws": {"arn": "my-locks.v2", "assume_role_arn": "arn:aws:iam::123456789012:role/sluice"},
            "attributes": {"partition_key": "pk", "sort_key": "sk", "ttl": "expires", "value": "v",
                           "owner": "o", "status": "st", "lease_until": "lu"},
            "consistent_read": true}"#,
    ))
    .unwrap();
    assert_eq!(s.table.name, "my-locks.v2");
    assert_eq!(s.table.region, None);
    assert_eq!(
        s.table.assume_role_arn.as_deref(),
        Some("arn:aws:iam::123456789012:role/sluice")
    );
    assert_eq!(s.describe(), "aws_dynamodb table my-locks.v2");
    let key = s.key("x");
    assert_eq!(key.get("pk"), Some(&s_("x")));
    assert_eq!(key.get("sk"), Some(&s_(SORT_KEY_VALUE)));
    assert_eq!(
        (
            s.table.attributes.ttl.as_str(),
            s.table.attributes.owner.as_str(),
            s.table.attributes.status.as_str(),
            s.table.attributes.lease_until.as_str()
        ),
        ("expires", "o", "st", "lu")
    );
    // Empty strings (Substation's library defaults) are absent.
    let s = DynamoDbStore::from_settings(&value(
        r#"{"aws": {"arn": "locks", "assume_role_arn": ""},
            "attributes": {"partition_key": "PK", "sort_key": "", "ttl": null}}"#,
    ))
    .unwrap();
    assert_eq!(s.table.attributes.sort_key, None);
    assert_eq!(s.table.attributes.ttl, "ttl");
    assert_eq!(s.table.assume_role_arn, None);
}

fn s_(v: &str) -> AttributeValue {
    s(v)
}

#[test]
fn bad_settings_name_the_field() {
    let cases = [
        (
            r#"{}"#,
            "kv_store.settings.aws.arn: missing required option",
        ),
        (
            r#"{"aws": {"arn": ""}, "attributes": {"partition_key": "PK"}}"#,
            "kv_store.settings.aws.arn: missing required option",
        ),
        (
            r#"{"aws": {"arn": "locks"}}"#,
            "kv_store.settings.attributes.partition_key: missing required option",
        ),
        (
            r#"{"aws": {"arn": "arn:aws:s3:::bucket"}, "attributes": {"partition_key": "PK"}}"#,
            "kv_store.settings.aws.arn: \"arn:aws:s3:::bucket\" is not a DynamoDB table ARN",
        ),
        (
            r#"{"aws": {"arn": "arn:aws:dynamodb:us-east-1:1:table/t/stream/x"}, "attributes": {"partition_key": "PK"}}"#,
            "kv_store.settings.aws.arn: \"arn:aws:dynamodb:us-east-1:1:table/t/stream/x\" is not a DynamoDB table ARN",
        ),
        (
            r#"{"aws": {"arn": "arn:aws:dynamodb::1:table/locks"}, "attributes": {"partition_key": "PK"}}"#,
            "kv_store.settings.aws.arn: \"arn:aws:dynamodb::1:table/locks\" is not a DynamoDB table ARN",
        ),
        (
            r#"{"aws": {"arn": "arn:nope"}, "attributes": {"partition_key": "PK"}}"#,
            "kv_store.settings.aws.arn: \"arn:nope\" is not an ARN",
        ),
        (
            r#"{"aws": {"arn": "my table"}, "attributes": {"partition_key": "PK"}}"#,
            "kv_store.settings.aws.arn: \"my table\" is neither a DynamoDB table ARN",
        ),
        (
            r#"{"aws": {"arn": "locks", "assume_role_arn": "sluice"}, "attributes": {"partition_key": "PK"}}"#,
            "kv_store.settings.aws.assume_role_arn: \"sluice\" is not an IAM role ARN",
        ),
        (
            r#"{"aws": {"arn": "locks"}, "attributes": {"partition_key": "ttl"}}"#,
            "kv_store.settings.attributes.ttl: attribute name \"ttl\" is also used by attributes.partition_key",
        ),
        (
            r#"{"aws": {"arn": "locks"}, "attributes": {"partition_key": "PK", "status": "lock_owner"}}"#,
            "kv_store.settings.attributes.status: attribute name \"lock_owner\" is also used by attributes.owner",
        ),
        (
            r#"{"aws": {"arn": 7}, "attributes": {"partition_key": "PK"}}"#,
            "kv_store.settings.aws.arn: invalid type",
        ),
        (
            r#"{"aws": {"arn": "locks"}, "attributes": {"partition_key": "PK"}, "lock_acquire": "batch"}"#,
            "kv_store.settings.lock_acquire: \"batch\" is not a way to take locks: use \"transactions\"",
        ),
    ];
    for (json, want) in cases {
        let got = config_error(json);
        assert!(
            got.starts_with(want),
            "{json}\n got: {got}\nwant: {want}..."
        );
    }
}

#[test]
fn backoff_grows_and_stays_bounded() {
    for attempt in 0..20 {
        let cap = (50u64 << attempt.min(6)).min(2_000);
        let d = backoff(attempt).as_millis() as u64;
        assert!((cap / 2..=cap).contains(&d), "attempt {attempt}: {d} ms");
    }
}

#[test]
fn cancellation_reasons_are_classified() {
    let r = |c: &str| CancellationReason::builder().code(c).build();
    assert_eq!(Cancel::of(&r("ConditionalCheckFailed")), Cancel::NotOurs);
    assert_eq!(Cancel::of(&r("None")), Cancel::NotApplied);
    assert_eq!(
        Cancel::of(&CancellationReason::builder().build()),
        Cancel::NotApplied
    );
    for c in [
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
    ] {
        assert_eq!(Cancel::of(&r(c)), Cancel::Transient, "{c}");
    }
    assert_eq!(
        Cancel::of(&r("ItemCollectionSizeLimitExceeded")),
        Cancel::Failed
    );
    assert_eq!(parse_number("17"), 17);
    assert_eq!(parse_number("17.9"), 17);
    assert_eq!(parse_number("x"), 0);
}
