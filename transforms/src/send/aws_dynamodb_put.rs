//! `send_aws_dynamodb_put`: writes each item (a JSON object) to a DynamoDB table, with
//! `BatchWriteItem`, or, in `transactional` mode inside `meta_kv_store_lock`, with
//! `TransactWriteItems` that also record the delivery in the items' locks.
//!
//! Substation compatibility: the same type name and settings (`aws.arn`,
//! `aws.assume_role_arn`, `batch`, `auxiliary_transforms`, `object.batch_key`). `aws.arn` is
//! the table's ARN (`arn:aws:dynamodb:REGION:ACCOUNT:table/NAME`), whose region is used, or
//! its bare name (region from `AWS_REGION`). Each item must be a JSON object; it becomes a
//! DynamoDB item as Go's `attributevalue.MarshalMap` makes it (strings `S`, numbers `N`,
//! booleans `BOOL`, null `NULL`, arrays `L`, objects `M`). An item that is not a JSON
//! object, is larger than 400 KiB (409,600 bytes, Substation's check), or lacks one of the
//! table's key attributes is an error when it arrives, naming the rule, so it never blocks
//! a batch.
//!
//! Where sluice differs from Substation (`reference/substation.md` §2.1 row 51):
//!
//! - **Unprocessed items** of `BatchWriteItem` are sent again, only those, with exponential
//!   backoff and full jitter and a bound (`RetryPolicy::DEFAULT`); what is still
//!   unprocessed fails exactly those items' acknowledgements, with an error naming the
//!   table. Substation ignores `UnprocessedItems` (silent loss) and, on throttling, reads a
//!   response that is nil.
//! - Two items of one batch with the same primary key go in separate calls, in order (one
//!   `BatchWriteItem` may not hold both); the table's key schema is read once with
//!   `DescribeTable`.
//!
//! # Transactional mode (`transactional: true`, a sluice setting)
//!
//! Inside a `meta_kv_store_lock` whose `kv_store` is `aws_dynamodb`, each message's items
//! and the record of their delivery in its lock (`ADD` to the lock's progress, the copies
//! of the message this send writes) go in one `TransactWriteItems`: either the items are
//! written and the delivery recorded, or neither. A crash can then never leave an item
//! written that the lock does not know of (a redelivery skips this send), nor a record of
//! items that were not written: the sink is exactly-once across crashes (DESIGN.md, "The
//! lock", item 7), and a failure at another send of the same message never makes this one
//! write twice nor loses the message at the other. The lock is committed by the lock's
//! keeper once every send delivered the message, not by the transaction (which, when it did,
//! let another send's failure lose the message there). The send finds each item's lock in
//! its message's lock ticket ([`crate::kv_store::lock::ticket`]); the update is conditional
//! on the lock's owner: if another process took the lock over (our lease ran out), the
//! transaction is cancelled for that message, its items are not written and its
//! acknowledgement fails.
//!
//! A transaction holds whole messages (their items, de-duplicated by primary key, the last
//! one winning, plus one update per lock), at most 100 writes and 4 MB
//! (`aws-contracts.md`): a message with more than 99 items is an error. To keep a message's
//! items in one transaction, batches in this mode close only at the lock's checkpoints and
//! after `batch.duration`, never on `batch.count`/`batch.size`; transactions of a batch go
//! `concurrency` at a time (default 8), those touching the same item one after another.
//! The lock's table and the sink table must be in the same account and region. Auxiliary
//! transforms are not allowed in this mode (they lose which message an item came from).

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, PutRequest, TransactWriteItem, WriteRequest};
use futures::stream::{self, StreamExt};
use serde::Deserialize;
use sluice_engine::batch::BatchLimits;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, TransformError, Value, async_trait};
use tokio::sync::OnceCell;

use super::aws_destination::{AwsDestination, aws_send};
use super::aws_records::{
    AttemptWatch, AwsSettings, CallError, PutFailure, Stream, cannot_make, check_role, non_empty,
    put_with_retries,
};
use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender, progress_id};
use crate::kv_store::aws_dynamodb::{Cancel, table_of};
use crate::kv_store::lock::ticket::Copies;
use crate::kv_store::{LockTicket, Progress};
use sluice_platform::aws::AwsTarget;
use sluice_platform::aws::dynamodb_attributes::attribute_value_of_json;
use sluice_platform::aws::parse_dynamodb_table;

/// Most items in one `BatchWriteItem` call.
pub(crate) const MAX_BATCH_ITEMS: usize = 25;
/// Most bytes in one `BatchWriteItem` call.
pub(crate) const MAX_BATCH_BYTES: usize = 16_000_000;
/// Most bytes of one item (Substation's check of the JSON; DynamoDB's limit is 400 KB).
pub(crate) const MAX_ITEM_BYTES: usize = 409_600;
/// Most writes in one `TransactWriteItems` call.
pub(crate) const MAX_TRANSACTION_WRITES: usize = 100;
/// Most bytes in one `TransactWriteItems` call.
pub(crate) const MAX_TRANSACTION_BYTES: usize = 4_000_000;
/// Transactions in flight at once, by default.
pub(crate) const DEFAULT_CONCURRENCY: usize = 8;

/// Settings of `send_aws_dynamodb_put`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The table and the role.
    pub aws: AwsSettings,
    /// Batch limits (capped at 25 items and 16 MB; ignored in transactional mode but for
    /// `duration`).
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is sent.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`.
    pub object: ObjectSettings,
    /// Write items and commit their locks in one transaction (sluice).
    pub transactional: bool,
    /// Transactions in flight at once (sluice; transactional mode).
    pub concurrency: Option<usize>,
}

/// A DynamoDB item.
type Item = HashMap<String, AttributeValue>;

/// An item's bytes as a DynamoDB item: a JSON object, at most [`MAX_ITEM_BYTES`].
pub(crate) fn parse_item(data: &[u8]) -> Result<Item, String> {
    if data.len() > MAX_ITEM_BYTES {
        return Err(format!(
            "an item of {} bytes exceeds DynamoDB's item size limit of {MAX_ITEM_BYTES} bytes",
            data.len()
        ));
    }
    match serde_json::from_slice::<serde_json::Value>(data) {
        Ok(serde_json::Value::Object(o)) => Ok(o
            .iter()
            .map(|(k, v)| (k.clone(), attribute_value_of_json(v)))
            .collect()),
        Ok(_) => Err("an item must be a JSON object (a DynamoDB item)".into()),
        Err(e) => Err(format!("an item must be a JSON object: {e}")),
    }
}

/// A DynamoDB table as a destination.
pub(crate) struct DynamoDbPut {
    aws: AwsDestination<Client>,
    /// The table's key attribute names (partition key, then sort key), read once.
    key_schema: OnceCell<Vec<String>>,
    transactional: bool,
    concurrency: usize,
}

impl DynamoDbPut {
    /// The table `table`, reached with `target`.
    pub(crate) fn new(table: String, target: AwsTarget) -> Self {
        DynamoDbPut {
            aws: AwsDestination::new(
                "dynamodb table",
                table,
                target,
                "give the table's ARN in aws.arn or set AWS_REGION",
            ),
            key_schema: OnceCell::new(),
            transactional: false,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }

    /// Writes in transactions that record the delivery in the items' locks (see the module
    /// documentation).
    pub(crate) fn transactional(mut self, concurrency: usize) -> Self {
        self.transactional = true;
        self.concurrency = concurrency.max(1);
        self
    }

    fn fail(&self, what: impl std::fmt::Display) -> TransformError {
        TransformError::failed(format!("dynamodb table {}: {what}", self.aws.name()))
    }

    async fn key_schema(&self, client: &Client) -> Result<&[String], TransformError> {
        self.key_schema
            .get_or_try_init(|| async {
                let out = client
                    .describe_table()
                    .table_name(self.aws.name())
                    .send()
                    .await
                    .map_err(|e| {
                        self.fail(format!(
                            "DescribeTable failed: {}",
                            sluice_platform::aws::describe_error(&e)
                        ))
                    })?;
                let mut keys: Vec<(bool, String)> = out
                    .table()
                    .map(|t| t.key_schema())
                    .unwrap_or_default()
                    .iter()
                    .map(|k| {
                        (
                            k.key_type().as_str() != "HASH",
                            k.attribute_name().to_string(),
                        )
                    })
                    .collect();
                keys.sort();
                if keys.is_empty() {
                    return Err(self.fail("DescribeTable answered no key schema"));
                }
                Ok(keys.into_iter().map(|(_, k)| k).collect())
            })
            .await
            .map(Vec::as_slice)
    }

    /// The primary key of `item` under `schema`, or which key attribute it lacks.
    fn primary_key<'i>(
        &self,
        item: &'i Item,
        schema: &[String],
    ) -> Result<Vec<&'i AttributeValue>, TransformError> {
        schema
            .iter()
            .map(|k| {
                item.get(k).ok_or_else(|| {
                    self.fail(format!(
                        "an item has no {k:?} attribute, part of the table's primary key"
                    ))
                })
            })
            .collect()
    }

    /// Parses `batch`'s items; the indexes that failed, with the first reason.
    fn parse_batch(&self, batch: &Outgoing, schema: &[String]) -> (Vec<(usize, Item)>, Failed) {
        let mut items = Vec::with_capacity(batch.items.len());
        let mut bad = Failed::default();
        for (i, data) in batch.items.iter().enumerate() {
            let parsed = parse_item(data).map_err(|m| self.fail(m)).and_then(|item| {
                self.primary_key(&item, schema)?;
                Ok(item)
            });
            match parsed {
                Ok(item) => items.push((i, item)),
                Err(e) => bad.add(vec![i], e),
            }
        }
        (items, bad)
    }

    /// Writes `items` (indexes into the batch, in order) with `BatchWriteItem`.
    async fn batch_write(
        &self,
        client: &Client,
        schema: &[String],
        items: &[(usize, Item)],
    ) -> Result<(), PutFailure> {
        for call in batch_calls(items, |it| self.primary_key(it, schema).ok()) {
            let chunk: Vec<&(usize, Item)> = call.iter().map(|&c| &items[c]).collect();
            let stream = Stream {
                kind: self.aws.kind(),
                name: self.aws.name(),
                operation: "BatchWriteItem",
                records: "items",
            };
            let result = put_with_retries(stream, self.aws.retry(), chunk.len(), |pending| {
                let sent: Vec<Item> = pending.iter().map(|&i| chunk[i].1.clone()).collect();
                let requests: Result<Vec<WriteRequest>, _> = sent
                    .iter()
                    .map(|item| {
                        let put = PutRequest::builder().set_item(Some(item.clone())).build()?;
                        Ok(WriteRequest::builder().put_request(put).build())
                    })
                    .collect();
                let requests = match requests {
                    Ok(requests) => requests,
                    Err(e) => {
                        let e: aws_sdk_dynamodb::error::BuildError = e;
                        let failed = cannot_make(&e);
                        return futures::future::Either::Left(std::future::ready(Err(failed)));
                    }
                };
                let watch = AttemptWatch::default();
                let req = client
                    .batch_write_item()
                    .request_items(self.aws.name(), requests)
                    .customize()
                    .interceptor(watch.clone())
                    .send();
                futures::future::Either::Right(async move {
                    let out = req.await.map_err(|e| CallError::sdk(&e, &watch))?;
                    let unprocessed: Vec<&Item> = out
                        .unprocessed_items()
                        .and_then(|u| u.values().next())
                        .map(|w| {
                            w.iter()
                                .filter_map(|r| r.put_request())
                                .map(|p| p.item())
                                .collect()
                        })
                        .unwrap_or_default();
                    Ok(sent
                        .iter()
                        .map(|item| {
                            unprocessed
                                .contains(&item)
                                .then(|| ("UnprocessedItems".to_string(), String::new()))
                        })
                        .collect())
                })
            })
            .await;
            if let Err(mut f) = result {
                // The failed items of this call and every item not sent yet.
                let later = items
                    .iter()
                    .map(|(i, _)| *i)
                    .filter(|&i| i > chunk[chunk.len() - 1].0);
                f.pending = f.pending.iter().map(|&p| chunk[p].0).chain(later).collect();
                return Err(f);
            }
        }
        Ok(())
    }

    /// Transactional mode: groups the items by the locks guarding them, writes each group
    /// with its commits in transactions; the indexes of items not written, with the first
    /// reason.
    async fn transact(
        &self,
        client: &Client,
        schema: &[String],
        items: Vec<(usize, Item, Vec<Arc<LockTicket>>, Copies)>,
        send: &str,
        bad: &mut Failed,
    ) {
        let mut groups: Vec<Group> = Vec::new();
        for (i, item, locks, copies) in items {
            if locks.is_empty() {
                bad.add(
                    vec![i],
                    self.fail(
                    "transactional: an item carries no DynamoDB lock; put this send inside a meta_kv_store_lock whose kv_store is aws_dynamodb",
                ));
                continue;
            }
            if let Some(lock) = locks.iter().find(|l| table_of(&*l.store).is_none()) {
                bad.add(
                    vec![i],
                    self.fail(format!(
                        "transactional: the lock on {:?} is in {}, not in DynamoDB",
                        lock.key,
                        lock.store.describe()
                    )),
                );
                continue;
            }
            let same = groups
                .last()
                .is_some_and(|g| g.locks.iter().any(|a| locks.iter().any(|b| a.key == b.key)));
            let mut g = match same {
                true => groups.pop().unwrap_or_default(),
                false => Group::default(),
            };
            let pk: Vec<AttributeValue> = self
                .primary_key(&item, schema)
                .map(|k| k.into_iter().cloned().collect())
                .unwrap_or_default();
            // The last item with a primary key wins, as consecutive puts would.
            if let Some(at) = g.puts.iter().position(|(_, k, _)| *k == pk) {
                let (old, _, _) = g.puts.remove(at);
                g.replaced.push(old);
            }
            g.bytes += item_bytes(&item);
            g.puts.push((i, pk, item));
            for (t, copy) in copies {
                g.delivers.push((t.key.clone(), copy));
            }
            for l in locks {
                if !g.locks.iter().any(|h| h.key == l.key) {
                    g.locks.push(l);
                }
            }
            groups.push(g);
        }
        let mut ok_groups = Vec::new();
        for g in groups {
            if g.writes() > MAX_TRANSACTION_WRITES || g.bytes > MAX_TRANSACTION_BYTES {
                bad.add(
                    g.indexes().collect(),
                    self.fail(format!(
                        "transactional: one message's {} items and {} lock update(s) ({} bytes) exceed a transaction's {MAX_TRANSACTION_WRITES} writes or {MAX_TRANSACTION_BYTES} bytes",
                        g.puts.len(),
                        g.locks.len(),
                        g.bytes
                    )),
);
            } else {
                ok_groups.push(g);
            }
        }
        let waves = plan_transactions(&ok_groups);
        for wave in waves {
            let calls: Vec<_> = wave
                .iter()
                .map(|tx| {
                    self.transact_one(client, tx.iter().map(|&g| &ok_groups[g]).collect(), send)
                })
                .collect();
            // In the order of the wave's transactions, one result per group of each.
            let results: Vec<Vec<GroupResult>> = stream::iter(calls)
                .buffered(self.concurrency)
                .collect()
                .await;
            for (tx, results) in wave.iter().zip(results) {
                for (&gi, r) in tx.iter().zip(results) {
                    if let Err((e, uncertain)) = r {
                        bad.add_maybe(ok_groups[gi].indexes().collect(), e, uncertain);
                    }
                }
            }
        }
    }

    /// One transaction of whole groups, sent again without the groups whose lock was taken
    /// over or whose write was refused, and after a backoff when a conflict or throttling
    /// cancelled it. One result per group.
    async fn transact_one(
        &self,
        client: &Client,
        groups: Vec<&Group>,
        send: &str,
    ) -> Vec<GroupResult> {
        let mut results: Vec<Option<GroupResult>> = groups.iter().map(|_| None).collect();
        let mut left: Vec<usize> = (0..groups.len()).collect();
        let mut attempt = 0;
        while !left.is_empty() {
            attempt += 1;
            // Each write's group, in the order they are sent.
            let mut owners = Vec::new();
            let mut writes = Vec::new();
            let mut build_error = None;
            for &gi in &left {
                let g = groups[gi];
                for (_, _, item) in &g.puts {
                    let put = Put::builder()
                        .table_name(self.aws.name())
                        .set_item(Some(item.clone()))
                        .build();
                    match put {
                        Ok(p) => {
                            writes.push(TransactWriteItem::builder().put(p).build());
                            owners.push((gi, None));
                        }
                        Err(e) => build_error = Some(self.fail(e)),
                    }
                }
                for l in &g.locks {
                    let Some(store) = table_of(&*l.store) else {
                        build_error = Some(self.fail(format!(
                            "transactional: the lock on {:?} is in {}, not in DynamoDB",
                            l.key,
                            l.store.describe()
                        )));
                        continue;
                    };
                    match store.co_progress_write(l, &g.progress_of(&l.key, send)) {
                        Ok(w) => {
                            writes.push(w);
                            owners.push((gi, Some(l)));
                        }
                        Err(e) => build_error = Some(self.fail(e)),
                    }
                }
            }
            if let Some(e) = build_error {
                for &gi in &left {
                    results[gi] = Some(Err((TransformError::failed(e.to_string()), false)));
                }
                break;
            }
            let watch = AttemptWatch::default();
            let sent = client
                .transact_write_items()
                .set_transact_items(Some(writes))
                .customize()
                .interceptor(watch.clone())
                .send()
                .await;
            let err = match sent {
                Ok(_) => {
                    for &gi in &left {
                        results[gi] = Some(Ok(()));
                    }
                    break;
                }
                Err(e) => e,
            };
            let reasons = match &err {
                SdkError::ServiceError(s) => match s.err() {
                    TransactWriteItemsError::TransactionCanceledException(c) => {
                        Some(c.cancellation_reasons().to_vec())
                    }
                    _ => None,
                },
                _ => None,
            };
            let Some(reasons) = reasons.filter(|r| r.len() == owners.len()) else {
                // A cancellation is a certain no; anything else may have been applied
                // (with the lock commits it holds).
                let e = CallError::sdk(&err, &watch);
                let text = format!("TransactWriteItems failed: {}", e.text);
                for &gi in &left {
                    results[gi] = Some(Err((self.fail(&text), e.uncertain)));
                }
                break;
            };
            let mut transient = false;
            for ((gi, lock), reason) in owners.iter().zip(&reasons) {
                if results[*gi].is_some() {
                    continue;
                }
                let why = match (Cancel::of(reason), lock) {
                    (Cancel::NotOurs, Some(l)) => {
                        let holder = reason
                            .item()
                            .zip(table_of(&*l.store))
                            .map(|(i, table)| table.holder(i).owner)
                            .unwrap_or_else(|| "nobody (the lock is gone)".into());
                        Some(format!(
                            "transactional: the lock on {:?} is held by {holder}, not by this process (its lease ran out): the message's items were not written",
                            l.key
                        ))
                    }
                    (Cancel::NotOurs | Cancel::Failed, _) => Some(format!(
                        "TransactWriteItems refused an item: {}: {}",
                        reason.code().unwrap_or("?"),
                        reason.message().unwrap_or("")
                    )),
                    (Cancel::Transient, _) => {
                        transient = true;
                        None
                    }
                    (Cancel::NotApplied, _) => None,
                };
                if let Some(why) = why {
                    results[*gi] = Some(Err((self.fail(why), false)));
                }
            }
            left.retain(|&gi| results[gi].is_none());
            if left.is_empty() {
                break;
            }
            if attempt >= self.aws.retry().attempts {
                let text = format!(
                    "TransactWriteItems cancelled after {attempt} attempts: {}",
                    err.code().unwrap_or("?")
                );
                for &gi in &left {
                    results[gi] = Some(Err((self.fail(&text), false)));
                }
                break;
            }
            if transient && !self.aws.retry().wait(attempt).await {
                let text = format!(
                    "TransactWriteItems cancelled ({}) and not tried again: the invocation ends",
                    err.code().unwrap_or("?")
                );
                for &gi in &left {
                    results[gi] = Some(Err((self.fail(&text), false)));
                }
                break;
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err((self.fail("transaction not attempted"), false))))
            .collect()
    }
}

/// A transaction's result for one group: why it failed and whether it may have been
/// applied.
type GroupResult = Result<(), (TransformError, bool)>;

/// The items of a batch that were not written, the first reason, and whether any may have
/// been written all the same.
#[derive(Default)]
struct Failed {
    indexes: Vec<usize>,
    first: Option<TransformError>,
    uncertain: bool,
}

impl Failed {
    fn add(&mut self, indexes: Vec<usize>, why: TransformError) {
        self.add_maybe(indexes, why, false);
    }

    fn add_maybe(&mut self, indexes: Vec<usize>, why: TransformError, uncertain: bool) {
        self.indexes.extend(indexes);
        self.first.get_or_insert(why);
        self.uncertain |= uncertain;
    }

    fn into_result(mut self) -> Result<(), SendError> {
        match self.first {
            None => Ok(()),
            Some(e) => {
                self.indexes.sort_unstable();
                Err(SendError::items(self.indexes, e).uncertain(self.uncertain))
            }
        }
    }
}

/// Items of one message (or of messages whose items are mixed), and their locks.
#[derive(Default)]
struct Group {
    /// (index in the batch, primary key, item), in order.
    puts: Vec<(usize, Vec<AttributeValue>, Item)>,
    /// Indexes of items a later item with the same primary key replaced.
    replaced: Vec<usize>,
    locks: Vec<Arc<LockTicket>>,
    /// Which copy of each locked message (by lock key) the group's items are at this send.
    delivers: Vec<(String, u32)>,
    bytes: usize,
}

impl Group {
    /// What writing the group delivers of the message locked on `key`, for `send`.
    fn progress_of(&self, key: &str, send: &str) -> Progress {
        let mut p = Progress::new();
        for (k, copy) in &self.delivers {
            if k == key {
                p.insert(send, *copy);
            }
        }
        p
    }

    fn writes(&self) -> usize {
        self.puts.len() + self.locks.len()
    }

    fn indexes(&self) -> impl Iterator<Item = usize> + '_ {
        self.puts
            .iter()
            .map(|(i, _, _)| *i)
            .chain(self.replaced.iter().copied())
    }
}

/// The size of an item as DynamoDB counts it, near enough: names and values.
fn item_bytes(item: &Item) -> usize {
    fn value(v: &AttributeValue) -> usize {
        match v {
            AttributeValue::S(s) | AttributeValue::N(s) => s.len(),
            AttributeValue::L(l) => 3 + l.iter().map(|v| 1 + value(v)).sum::<usize>(),
            AttributeValue::M(m) => {
                3 + m.iter().map(|(k, v)| 1 + k.len() + value(v)).sum::<usize>()
            }
            _ => 1,
        }
    }
    item.iter().map(|(k, v)| k.len() + value(v)).sum()
}

/// Packs groups into transactions (at most [`MAX_TRANSACTION_WRITES`] writes and
/// [`MAX_TRANSACTION_BYTES`], no item twice) and the transactions into waves that may run
/// at once (no item in two transactions of a wave). Group indexes, in order.
fn plan_transactions(groups: &[Group]) -> Vec<Vec<Vec<usize>>> {
    // Everything a group writes: its items' primary keys and its lock keys.
    let touched = |g: &Group| -> Vec<String> {
        g.puts
            .iter()
            .map(|(_, k, _)| format!("item:{k:?}"))
            .chain(g.locks.iter().map(|l| format!("lock:{}", l.key)))
            .collect()
    };
    let mut waves: Vec<Vec<Vec<usize>>> = Vec::new();
    let mut wave_touched: Vec<String> = Vec::new();
    let mut tx: Vec<usize> = Vec::new();
    let (mut tx_writes, mut tx_bytes) = (0, 0);
    let mut tx_touched: Vec<String> = Vec::new();
    let close = |waves: &mut Vec<Vec<Vec<usize>>>,
                 wave_touched: &mut Vec<String>,
                 tx: &mut Vec<usize>,
                 tx_touched: &mut Vec<String>| {
        if tx.is_empty() {
            return;
        }
        match waves.last_mut() {
            Some(wave) if !tx_touched.iter().any(|t| wave_touched.contains(t)) => {
                wave.push(std::mem::take(tx))
            }
            _ => {
                waves.push(vec![std::mem::take(tx)]);
                wave_touched.clear();
            }
        }
        wave_touched.append(tx_touched);
    };
    for (gi, g) in groups.iter().enumerate() {
        let t = touched(g);
        let full = tx_writes + g.writes() > MAX_TRANSACTION_WRITES
            || tx_bytes + g.bytes > MAX_TRANSACTION_BYTES
            || t.iter().any(|x| tx_touched.contains(x));
        if full {
            close(&mut waves, &mut wave_touched, &mut tx, &mut tx_touched);
            tx_writes = 0;
            tx_bytes = 0;
        }
        tx.push(gi);
        tx_writes += g.writes();
        tx_bytes += g.bytes;
        tx_touched.extend(t);
    }
    close(&mut waves, &mut wave_touched, &mut tx, &mut tx_touched);
    waves
}

/// Splits items into `BatchWriteItem` calls: at most [`MAX_BATCH_ITEMS`] and
/// [`MAX_BATCH_BYTES`], and a primary key at most once per call. Indexes into `items`.
fn batch_calls<'i>(
    items: &'i [(usize, Item)],
    key: impl Fn(&'i Item) -> Option<Vec<&'i AttributeValue>>,
) -> Vec<Vec<usize>> {
    let mut calls: Vec<Vec<usize>> = Vec::new();
    let mut keys: Vec<Vec<&AttributeValue>> = Vec::new();
    let mut bytes = 0;
    for (c, (_, item)) in items.iter().enumerate() {
        let k = key(item).unwrap_or_default();
        let n = item_bytes(item);
        let full = calls.last().is_none_or(|call| {
            call.len() == MAX_BATCH_ITEMS || bytes + n > MAX_BATCH_BYTES || keys.contains(&k)
        });
        if full {
            keys.clear();
            bytes = 0;
        }
        match calls.last_mut() {
            Some(call) if !full => call.push(c),
            _ => calls.push(vec![c]),
        }
        keys.push(k);
        bytes += n;
    }
    calls
}

#[async_trait]
impl Destination for DynamoDbPut {
    fn check(&self, item: &[u8]) -> Result<(), String> {
        parse_item(item).map(|_| ())
    }

    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let client = self.aws.client(Client::new).await?;
        let schema = self.key_schema(client).await?;
        let (items, mut bad) = self.parse_batch(batch, schema);
        if !self.transactional {
            if let Err(f) = self.batch_write(client, schema, &items).await {
                bad.add_maybe(f.pending, f.error, f.uncertain);
            }
            return bad.into_result();
        }
        let items: Vec<_> = items
            .into_iter()
            .map(|(i, it)| {
                let locks = batch.locks.of(i).map(<[_]>::to_vec).unwrap_or_default();
                let copies = batch.copies.get(i).cloned().unwrap_or_default();
                (i, it, locks, copies)
            })
            .collect();
        self.transact(client, schema, items, &batch.send, &mut bad)
            .await;
        bad.into_result()
    }
}

aws_send!(DynamoDbPut, Client);

/// The `send_aws_dynamodb_put` transform.
pub(crate) type SendAwsDynamodbPut = Sender<DynamoDbPut>;

impl Sender<DynamoDbPut> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let arn = non_empty(s.aws.arn).ok_or_else(|| {
            b.field_error(
                "aws.arn",
                "missing required option: the table's ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME) or its name",
            )
        })?;
        let (table, region) =
            parse_dynamodb_table(&arn).map_err(|m| b.field_error("aws.arn", m))?;
        let role = non_empty(s.aws.assume_role_arn);
        check_role(&role).map_err(|m| b.field_error("aws.assume_role_arn", m))?;
        let target = AwsTarget {
            region,
            assume_role_arn: role,
            ..Default::default()
        };
        let dest = DynamoDbPut::new(table, target);
        if !s.transactional {
            if s.concurrency.is_some() {
                return Err(b.field_error(
                    "concurrency",
                    "applies to transactional mode only (transactional: true)",
                ));
            }
            return Sender::new(
                b,
                SendOptions {
                    batch: s.batch,
                    auxiliary_transforms: s.auxiliary_transforms,
                    object: s.object,
                },
                Caps {
                    count: MAX_BATCH_ITEMS,
                    size: MAX_BATCH_BYTES,
                    item_size: MAX_ITEM_BYTES,
                },
                dest,
            );
        }
        if !matches!(&s.auxiliary_transforms, None | Some(Value::Null))
            && !matches!(&s.auxiliary_transforms, Some(Value::Array(a)) if a.is_empty())
        {
            return Err(b.field_error(
                "auxiliary_transforms",
                "not allowed with transactional: true (a transaction needs to know which message each item came from)",
            ));
        }
        let concurrency = s.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
        if concurrency == 0 {
            return Err(b.field_error("concurrency", "must be at least 1"));
        }
        let batch_key = b.opt_key("object.batch_key", &s.object.batch_key)?;
        // Batches close at checkpoints and by age only, so a message's items stay together.
        let limits = BatchLimits {
            count: usize::MAX,
            size: usize::MAX,
            max_age: BatchLimits::from(s.batch).max_age,
        };
        Ok(Sender::from_parts(
            dest.transactional(concurrency),
            limits,
            MAX_ITEM_BYTES,
            batch_key,
            None,
        )
        .with_progress_id(progress_id(b)))
    }
}

#[cfg(test)]
mod tests;
