//! Taking locks in transactions (the default, `lock_acquire: 'transactions'`) against
//! mocked responses: one `TransactWriteItems` per 100 keys, and what a cancelled one means
//! for each key: held (its holder's record), taken over (asked alone, so that the old item
//! says so), or sent again.

use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::operation::update_item::UpdateItemOutput;
use aws_smithy_mocks::{Rule, RuleMode, mock};

use super::lock::{ACQUIRE_FRESH_CONDITION, ACQUIRE_UPDATE};
use super::tests::{
    ARN, NOW_MS, cancelled, held_item, keys, meta, mine, n, req, s, store_from, value,
};
use super::*;
use crate::kv_store::{Acquired, LockStore, Prior};

/// A store at its default settings (transactions) whose client answers with `rules`.
fn store(rules: &[&Rule], attempts: u32) -> DynamoDbStore {
    let settings = value(&format!(
        r#"{{"aws": {{"arn": "{ARN}"}}, "attributes": {{"partition_key": "PK"}}}}"#
    ));
    store_from(&settings, RuleMode::Sequential, rules, attempts)
}

/// The keys of a transaction's writes.
fn tx_keys(
    r: &aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput,
) -> Vec<String> {
    r.transact_items()
        .iter()
        .map(|i| i.update().unwrap().key()["PK"].as_s().unwrap().clone())
        .collect()
}

/// `held_item` for key `key`, its lease ending at `lease_until_ms`.
fn pending_item(owner: &str, key: &str, lease_until_ms: i64) -> HashMap<String, AttributeValue> {
    let mut item = held_item(owner, PENDING);
    item.insert("PK".into(), s(key));
    item.insert("lock_lease_until".into(), n(lease_until_ms));
    item.insert("lock_since".into(), n(NOW_MS - 9_000));
    item
}

#[tokio::test]
async fn locks_are_taken_in_one_transaction_per_hundred_keys() {
    let rule = mock!(Client::transact_write_items)
        .match_requests(|r| {
            let items = r.transact_items();
            let u = items[0].update().unwrap();
            let values = u.expression_attribute_values().unwrap();
            let names = u.expression_attribute_names().unwrap();
            (items.len() == 100 || items.len() == 30)
                && items.iter().all(|i| i.update().is_some())
                && u.table_name() == "locks"
                && u.update_expression() == ACQUIRE_UPDATE
                && u.condition_expression() == Some(ACQUIRE_FRESH_CONDITION)
                && values.get(":me") == Some(&s("me"))
                && values.get(":pending") == Some(&s("pending"))
                && values.get(":lease") == Some(&n(NOW_MS + 60_000))
                && values.get(":ttl") == Some(&n(NOW_MS / 1000 + 600))
                && values.get(":now_s") == Some(&n(NOW_MS / 1000))
                && values.get(":now_ms") == Some(&n(NOW_MS))
                && names.get("#pk").map(String::as_str) == Some("PK")
                && names.get("#status").map(String::as_str) == Some("lock_status")
                && u.return_values_on_condition_check_failure()
                    == Some(&ReturnValuesOnConditionCheckFailure::AllOld)
        })
        .sequence()
        .output(|| TransactWriteItemsOutput::builder().build())
        .times(3)
        .build();
    let store = store(&[&rule], 1);
    let reqs: Vec<_> = keys(230).iter().map(|k| req(k)).collect();
    let got = store.acquire("me", NOW_MS, &reqs, 4).await;
    assert_eq!(got.len(), 230);
    assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    assert_eq!(
        rule.num_calls(),
        3,
        "230 keys: transactions of 100, 100 and 30"
    );
}

#[tokio::test]
async fn a_cancelled_transaction_answers_held_keys_and_takes_over_the_rest() {
    // k0 is free, k1 committed by them, k2 pending under them with a live lease, k3 pending
    // under them with a lease that ended (a crashed owner), k4 free.
    let first = mock!(Client::transact_write_items)
        .match_requests(|r| tx_keys(r) == ["k0", "k1", "k2", "k3", "k4"])
        .then_error(|| {
            cancelled(&[
                ("None", None),
                ("ConditionalCheckFailed", Some(held_item("them", COMMITTED))),
                (
                    "ConditionalCheckFailed",
                    Some(pending_item("them", "k2", NOW_MS + 30_000)),
                ),
                (
                    "ConditionalCheckFailed",
                    Some(pending_item("them", "k3", NOW_MS - 1)),
                ),
                ("None", None),
            ])
        });
    // Sent again without the keys that cancelled it.
    let second = mock!(Client::transact_write_items)
        .match_requests(|r| tx_keys(r) == ["k0", "k4"])
        .then_output(|| TransactWriteItemsOutput::builder().build());
    // The lapsed lock is taken alone, with the whole condition, and its old item comes back.
    let takeover = mock!(Client::update_item)
        .match_requests(|r| {
            r.key().unwrap()["PK"] == s("k3")
                && r.condition_expression() == Some(super::lock::ACQUIRE_CONDITION)
        })
        .then_output(|| {
            UpdateItemOutput::builder()
                .set_attributes(Some(pending_item("them", "k3", NOW_MS - 1)))
                .build()
        });
    let store = store(&[&first, &second, &takeover], 1);
    let reqs: Vec<_> = keys(5).iter().map(|k| req(k)).collect();
    let got: Vec<Acquired> = store
        .acquire("me", NOW_MS, &reqs, 4)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(got[0], Acquired::FRESH);
    assert!(
        matches!(&got[1], Acquired::Held(Some(r)) if r.owner == "them" && r.status == LockStatus::Committed),
        "{:?}",
        got[1]
    );
    assert!(
        matches!(&got[2], Acquired::Held(Some(r)) if r.lease_until_ms() == Some(NOW_MS + 30_000)),
        "{:?}",
        got[2]
    );
    assert_eq!(
        got[3],
        Acquired::Taken {
            prior: Some(Prior {
                owner: "them".into(),
                since_ms: NOW_MS - 9_000,
                progress: Default::default(),
            })
        }
    );
    assert_eq!(got[4], Acquired::FRESH);
    assert_eq!(
        (first.num_calls(), second.num_calls(), takeover.num_calls()),
        (1, 1, 1)
    );
}

#[tokio::test]
async fn our_own_pending_lock_is_taken_alone_and_reported_as_a_retake() {
    // A key this owner holds pending (a release that failed): not fresh, the message may
    // have been delivered.
    let first = mock!(Client::transact_write_items)
        .then_error(|| cancelled(&[("ConditionalCheckFailed", Some(mine()))]));
    let retake = mock!(Client::update_item).then_output(|| {
        UpdateItemOutput::builder()
            .set_attributes(Some(mine()))
            .build()
    });
    let store = store(&[&first, &retake], 1);
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
async fn a_retried_transaction_that_finds_its_own_write_took_the_key() {
    // The first attempt was applied but answered with a 500; the SDK's retry finds the
    // record exactly as this request writes it.
    let rule = mock!(Client::transact_write_items)
        .sequence()
        .http_status(
            500,
            Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}"#.into()),
        )
        .error(|| cancelled(&[("ConditionalCheckFailed", Some(mine()))]))
        .build();
    let store = store(&[&rule], 2);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    assert_eq!(rule.num_calls(), 2);
}

#[tokio::test]
async fn conflicts_and_throttling_are_waited_out() {
    let rule = mock!(Client::transact_write_items)
        .sequence()
        .error(|| cancelled(&[("TransactionConflict", None), ("None", None)]))
        .error(|| cancelled(&[("None", None), ("ThrottlingError", None)]))
        .output(|| TransactWriteItemsOutput::builder().build())
        .build();
    let store = store(&[&rule], 1);
    let got = store
        .acquire("me", NOW_MS, &[req("k1"), req("k2")], 1)
        .await;
    assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    assert_eq!(rule.num_calls(), 3);
}

#[tokio::test]
async fn a_refused_transaction_is_split_so_that_only_the_bad_key_fails() {
    let refused = mock!(Client::transact_write_items)
        .then_error(|| TransactWriteItemsError::generic(meta("ValidationException")));
    let alone = mock!(Client::update_item).then_compute_response(|r| {
        if r.key().unwrap()["PK"] == s("k1") {
            aws_smithy_mocks::MockResponse::Error(
                aws_sdk_dynamodb::operation::update_item::UpdateItemError::generic(meta(
                    "ValidationException",
                )),
            )
        } else {
            aws_smithy_mocks::MockResponse::Output(UpdateItemOutput::builder().build())
        }
    });
    let store = store_from(
        &value(&format!(
            r#"{{"aws": {{"arn": "{ARN}"}}, "attributes": {{"partition_key": "PK"}}}}"#
        )),
        RuleMode::MatchAny,
        &[&refused, &alone],
        1,
    );
    let got = store
        .acquire("me", NOW_MS, &[req("k0"), req("k1"), req("k2")], 2)
        .await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    let e = got[1].as_ref().unwrap_err().to_string();
    assert!(
        e.starts_with("aws_dynamodb table locks: acquiring key \"k1\": "),
        "{e}"
    );
    assert_eq!(got[2].as_ref().unwrap(), &Acquired::FRESH);
    assert_eq!(alone.num_calls(), 3);
}

#[tokio::test]
async fn a_failed_transaction_fails_each_of_its_keys_naming_the_table() {
    let rule = mock!(Client::transact_write_items)
        .sequence()
        .http_status(
            500,
            Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"boom"}"#.into()),
        )
        .repeatedly()
        .build();
    let store = store(&[&rule], 2);
    let got = store
        .acquire("me", NOW_MS, &[req("k1"), req("k2")], 1)
        .await;
    for (r, key) in got.iter().zip(["k1", "k2"]) {
        let e = r.as_ref().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "aws_dynamodb table locks: acquiring key \"{key}\": "
            )),
            "{e}"
        );
        assert!(e.contains("InternalServerError"), "{e}");
    }
    assert_eq!(rule.num_calls(), 2, "the SDK's attempts");
}
