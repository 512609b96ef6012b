//! Committing by epoch (`lock_acquire: 'epochs'`, `epochs.rs`) against mocked responses:
//! what a taker does with a key pending in another epoch (a duplicate, held, taken over
//! after an abort, taken fresh after its epoch's window), the epoch commit and its fence
//! (a commit that finds slots aborted commits them on their records, never in the epoch
//! again), the per-key changes' conditions on the owner's epoch and slot, and a takeover
//! the SDK sent twice. The same store against the emulator passes the contract in
//! `tests/kv_store_dynamodb_epochs.rs`.

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::batch_execute_statement::BatchExecuteStatementOutput;
use aws_sdk_dynamodb::operation::batch_get_item::{BatchGetItemError, BatchGetItemOutput};
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsInput, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::operation::update_item::{
    UpdateItemError, UpdateItemInput, UpdateItemOutput,
};
use aws_sdk_dynamodb::types::error::ConditionalCheckFailedException;
use aws_sdk_dynamodb::types::{BatchStatementResponse, TransactWriteItem};
use aws_smithy_mocks::{MockResponse, Rule, RuleMode, mock};
use sluice_lock_protocol::epoch::EpochSlot;

use super::tests::{ARN, NOW_MS, meta, n, req, s, store_from, value};
use super::*;
use crate::kv_store::{
    AbandonRequest, Acquired, CommitRequest, LockStore, LockTicket, Prior, Progress, RenewRequest,
    Settled,
};

type Item = HashMap<String, AttributeValue>;
type Log = Arc<Mutex<Vec<String>>>;

/// The other owner's epoch and the slot its key is pending in.
const THEIR_EPOCH: u64 = 7;
const THEIR_SLOT: u32 = 3;
/// Their record's `since`.
const THEIR_SINCE: i64 = NOW_MS - 9_000;
/// A TTL not reached yet, and one passed.
const LIVE_TTL: i64 = NOW_MS / 1000 + 600;
const PAST_TTL: i64 = NOW_MS / 1000 - 1;

/// A store taking locks by epoch whose client answers with `rules` (any order), the SDK
/// trying each call up to `attempts` times.
fn store(rules: &[&Rule], attempts: u32) -> DynamoDbStore {
    let settings = value(&format!(
        r#"{{"aws": {{"arn": "{ARN}"}}, "attributes": {{"partition_key": "PK"}}, "lock_acquire": "epochs"}}"#
    ));
    store_from(&settings, RuleMode::MatchAny, rules, attempts)
}

/// `owner`'s record of `key`, pending in `at` (`None`: outside any epoch), with a lease
/// ending at `lease`, a TTL and the progress `s0:0`.
fn key_item(key: &str, owner: &str, at: Option<(u64, u32)>, lease: i64, ttl: i64) -> Item {
    let mut item = HashMap::new();
    item.insert("PK".to_string(), s(key));
    item.insert("ttl".to_string(), n(ttl));
    item.insert("lock_owner".to_string(), s(owner));
    item.insert("lock_lease_until".to_string(), n(lease));
    item.insert("lock_since".to_string(), n(THEIR_SINCE));
    item.insert(
        "lock_progress".to_string(),
        AttributeValue::Ss(vec!["s0:0".into()]),
    );
    let status = match at {
        Some((epoch, slot)) => {
            item.insert("lock_epoch".to_string(), n(epoch as i64));
            item.insert("lock_slot".to_string(), n(i64::from(slot)));
            EPOCH
        }
        None => PENDING,
    };
    item.insert("lock_status".to_string(), s(status));
    item
}

/// Their record of `k1`, pending in their epoch, its lease ending at `lease`.
fn theirs(lease: i64) -> Item {
    key_item(
        "k1",
        "them",
        Some((THEIR_EPOCH, THEIR_SLOT)),
        lease,
        LIVE_TTL,
    )
}

fn slots(v: &[u32]) -> AttributeValue {
    AttributeValue::Ns(v.iter().map(|s| s.to_string()).collect())
}

/// `owner`'s epoch record.
fn epoch_item(
    owner: &str,
    epoch: u64,
    committed: &[u32],
    aborted: &[u32],
    v: i64,
    ttl: i64,
) -> Item {
    let mut item = HashMap::new();
    item.insert("PK".to_string(), s(&epochs::epoch_key(owner, epoch)));
    item.insert("ttl".to_string(), n(ttl));
    if !committed.is_empty() {
        item.insert("lock_committed".to_string(), slots(committed));
    }
    if !aborted.is_empty() {
        item.insert("lock_aborted".to_string(), slots(aborted));
    }
    item.insert("lock_v".to_string(), n(v));
    item
}

fn pk(item: &Item) -> String {
    item["PK"].as_s().unwrap().clone()
}

/// A `BatchGetItem` answered from `keys` when it asks for keys and from `epochs` when it
/// asks for epoch records (`None`: that read fails), each call logged as `read KEYS`,
/// `read-epochs KEYS` (eventually consistent) or `read-epochs! KEYS` (strongly). As
/// DynamoDB does, a call naming a key twice, or more than 100 keys, is refused.
fn reads(keys: Vec<Item>, epochs: Option<Vec<Item>>, log: &Log) -> Rule {
    let log = log.clone();
    mock!(Client::batch_get_item).then_compute_response(move |r| {
        let asked = r.request_items().unwrap()["locks"].clone();
        let wanted: Vec<String> = asked.keys().iter().map(pk).collect();
        let consistent = asked.consistent_read() == Some(true);
        let (what, from) = match (wanted.iter().all(|k| k.starts_with("#epoch:")), consistent) {
            (false, _) => ("read", Some(&keys)),
            (true, false) => ("read-epochs", epochs.as_ref()),
            (true, true) => ("read-epochs!", epochs.as_ref()),
        };
        log.lock()
            .unwrap()
            .push(format!("{what} {}", wanted.join(",")));
        let distinct: std::collections::HashSet<&String> = wanted.iter().collect();
        if distinct.len() != wanted.len() || wanted.len() > 100 {
            return MockResponse::Error(BatchGetItemError::generic(meta("ValidationException")));
        }
        match from {
            Some(items) => MockResponse::Output(
                BatchGetItemOutput::builder()
                    .responses(
                        "locks",
                        items
                            .iter()
                            .filter(|i| wanted.contains(&pk(i)))
                            .cloned()
                            .collect(),
                    )
                    .build(),
            ),
            None => MockResponse::Error(BatchGetItemError::generic(meta("AccessDeniedException"))),
        }
    })
}

/// `BatchExecuteStatement`s that all succeed, each logged as `statements N`.
fn statements(log: &Log) -> Rule {
    let log = log.clone();
    mock!(Client::batch_execute_statement).then_compute_output(move |r| {
        log.lock()
            .unwrap()
            .push(format!("statements {}", r.statements().len()));
        BatchExecuteStatementOutput::builder()
            .set_responses(Some(
                r.statements()
                    .iter()
                    .map(|_| BatchStatementResponse::builder().build())
                    .collect(),
            ))
            .build()
    })
}

/// `UpdateItem`s answered by `answer`, each logged as `update KEY` and kept in `seen`.
fn updates(
    log: &Log,
    seen: &Arc<Mutex<Vec<UpdateItemInput>>>,
    answer: impl Fn(&UpdateItemInput) -> MockResponse<UpdateItemOutput, UpdateItemError>
    + Send
    + Sync
    + 'static,
) -> Rule {
    let (log, seen) = (log.clone(), seen.clone());
    mock!(Client::update_item).then_compute_response(move |r| {
        log.lock()
            .unwrap()
            .push(format!("update {}", pk(r.key().unwrap())));
        seen.lock().unwrap().push(r.clone());
        answer(r)
    })
}

/// Transactions that succeed, each kept in `seen` and logged as `transaction KEYS`.
fn transactions(log: &Log, seen: &Arc<Mutex<Vec<TransactWriteItemsInput>>>) -> Rule {
    let (log, seen) = (log.clone(), seen.clone());
    mock!(Client::transact_write_items).then_compute_output(move |r| {
        let keys: Vec<String> = r.transact_items().iter().map(|i| pk(item_key(i))).collect();
        log.lock()
            .unwrap()
            .push(format!("transaction {}", keys.join(",")));
        seen.lock().unwrap().push(r.clone());
        TransactWriteItemsOutput::builder().build()
    })
}

/// The key a transaction's write names.
fn item_key(i: &TransactWriteItem) -> &Item {
    if let Some(u) = i.update() {
        return u.key();
    }
    if let Some(d) = i.delete() {
        return d.key();
    }
    i.condition_check().unwrap().key()
}

/// A transaction write's condition and values.
fn condition_of(i: &TransactWriteItem) -> (String, Item) {
    if let Some(u) = i.update() {
        return (
            u.condition_expression().unwrap_or("").to_string(),
            u.expression_attribute_values().cloned().unwrap_or_default(),
        );
    }
    if let Some(d) = i.delete() {
        return (
            d.condition_expression().unwrap_or("").to_string(),
            d.expression_attribute_values().cloned().unwrap_or_default(),
        );
    }
    let c = i.condition_check().unwrap();
    (
        c.condition_expression().to_string(),
        c.expression_attribute_values().cloned().unwrap_or_default(),
    )
}

fn ccf(item: Option<Item>) -> UpdateItemError {
    UpdateItemError::ConditionalCheckFailedException(
        ConditionalCheckFailedException::builder()
            .set_item(item)
            .meta(meta("ConditionalCheckFailedException"))
            .build(),
    )
}

fn updated() -> MockResponse<UpdateItemOutput, UpdateItemError> {
    MockResponse::Output(UpdateItemOutput::builder().build())
}

fn logged(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// Their record of `k1` as it was before a takeover: what `UpdateItem` returns with
/// `ALL_OLD`.
fn old(item: Item) -> MockResponse<UpdateItemOutput, UpdateItemError> {
    MockResponse::Output(
        UpdateItemOutput::builder()
            .set_attributes(Some(item))
            .build(),
    )
}

/// Acquires `k1` as `me` where the read finds `key` and the epoch read finds `epochs`
/// (`None`: it fails), `UpdateItem`s answered by `answer`: the answer, the calls in order
/// and the `UpdateItem`s sent.
async fn acquire_k1(
    key: Item,
    epochs: Option<Vec<Item>>,
    answer: impl Fn(&UpdateItemInput) -> MockResponse<UpdateItemOutput, UpdateItemError>
    + Send
    + Sync
    + 'static,
) -> (Acquired, Vec<String>, Vec<UpdateItemInput>) {
    let log = Log::default();
    let seen = Arc::default();
    let read = reads(vec![key], epochs, &log);
    let write = statements(&log);
    let update = updates(&log, &seen, answer);
    let store = store(&[&read, &write, &update], 1);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 4).await;
    let got = got.into_iter().next().unwrap().unwrap();
    let sent = seen.lock().unwrap().clone();
    (got, logged(&log), sent)
}

fn value_of(u: &UpdateItemInput, name: &str) -> AttributeValue {
    u.expression_attribute_values().unwrap()[name].clone()
}

mod acquire;
mod commit;
