//! The lock operations of the `aws_dynamodb` store: the protocol's rules
//! (`sluice_lock_protocol`) as DynamoDB condition and update expressions. Acquisitions are
//! `TransactWriteItems` of up to 100 conditional updates (or, with `lock_acquire: 'items'`,
//! one conditional `UpdateItem` per key; with `'statements'`, see `statements/`);
//! commits, renewals, releases and abandonments are `TransactWriteItems` of up to 100
//! conditional writes (commits with `'statements'` aside).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Delete, ReturnConsumedCapacity, ReturnValue,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use futures::stream::{self, StreamExt};
use sluice_lock_protocol::pending_ttl;
use sluice_platform::aws::describe_error;

use super::super::lock::{
    AbandonRequest, AcquireRequest, Acquired, ClockOffset, CommitRequest, LockRecord, LockStatus,
    LockStore, Prior, RenewRequest, Settled, StoreError,
};
use super::epochs::owned_by;
use super::{AcquireMode, COMMITTED, DynamoDbStore, EPOCH, PENDING, number, statements};

/// The most writes one `TransactWriteItems` call may hold.
const TRANSACTION_MAX: usize = 100;
/// Attempts of this store's own retry loops (cancelled transactions, transaction
/// conflicts on an update); the SDK's retries of each call come on top.
pub(super) const STORE_ATTEMPTS: u32 = 8;

/// The acquisition condition: `sluice_lock_protocol::LockRecord::takeable_by`.
/// `:takeover_ms` is now less the tolerated clock skew: a lease blocks until its end plus
/// the skew.
pub(super) const ACQUIRE_CONDITION: &str = "attribute_not_exists(#pk) \
     OR (#status = :pending AND (#lease < :takeover_ms OR #owner = :me)) \
     OR ((attribute_not_exists(#status) OR #status <> :pending) AND #ttl <= :now_s)";

/// The part of [`ACQUIRE_CONDITION`] a transaction takes keys under: nobody holds the key
/// pending (it is absent, or committed and past its TTL), so the acquisition replaces no
/// pending record and is fresh whatever the old item was; a transaction returns no old
/// items. A pending key whose lease ended, or ours, fails this condition and is then taken
/// alone with the whole condition, whose old item tells the takeover.
pub(super) const ACQUIRE_FRESH_CONDITION: &str = "attribute_not_exists(#pk) \
     OR ((attribute_not_exists(#status) OR #status <> :pending) AND #ttl <= :now_s)";

/// The acquisition's write: a pending record; `since` and `progress` are kept from a
/// pending record it replaces (commits remove them, releases delete the item).
pub(super) const ACQUIRE_UPDATE: &str = "SET #owner = :me, #status = :pending, #lease = :lease, \
     #ttl = :ttl, #since = if_not_exists(#since, :now_ms) REMOVE #note";

/// Another owner's pending record whose chain began before `:fresh_before`
/// (`LockRecord::chain_over`): taken as new, not over.
const CHAIN_OVER: &str = "(#status = :pending AND #owner <> :me AND #since < :fresh_before)";

/// One change of a transaction, on one key.
#[derive(Debug, Clone)]
pub(super) enum Op<'a> {
    Commit(&'a CommitRequest),
    Renew(&'a RenewRequest),
    Release(&'a str),
    Abandon(&'a AbandonRequest),
    Record(&'a AbandonRequest),
}

impl Op<'_> {
    fn key(&self) -> &str {
        match self {
            Op::Commit(r) => &r.key,
            Op::Renew(r) => &r.key,
            Op::Release(k) => k,
            Op::Abandon(r) | Op::Record(r) => &r.key,
        }
    }

    fn verb(&self) -> &'static str {
        match self {
            Op::Commit(_) => "committing",
            Op::Renew(_) => "renewing",
            Op::Release(_) => "releasing",
            Op::Abandon(_) => "abandoning",
            Op::Record(_) => "recording progress of",
        }
    }
}

impl DynamoDbStore {
    /// Takes `r`'s key with one conditional `UpdateItem`, whose old item tells a takeover.
    /// `retried`: an earlier call of this acquisition (an SDK-retried batch) may have
    /// written this very request's record, which is then fresh ([`Self::taken`]).
    pub(super) async fn acquire_one(
        &self,
        client: &Client,
        owner: &str,
        now_ms: i64,
        r: &AcquireRequest,
        retried: bool,
    ) -> Result<Acquired, StoreError> {
        let mut retries = Retries::default();
        // A pending chain older than the window is not taken over with its history: that
        // takes a write of its own (`acquire_over`).
        let (mut condition, mut values) = match r.fresh_before_ms {
            Some(before) => {
                let mut values = acquire_values(owner, now_ms, r, true);
                values.insert(":fresh_before".to_string(), number(before));
                (
                    format!("({ACQUIRE_CONDITION}) AND NOT {CHAIN_OVER}"),
                    values,
                )
            }
            None => (
                ACQUIRE_CONDITION.to_string(),
                acquire_values(owner, now_ms, r, true),
            ),
        };
        // `lock_acquire: 'epochs'`: a key pending in an epoch is never taken alone. Whether
        // it is committed, and its window, are in its epoch's record, which only a piece's
        // resolution reads (`epochs.rs`): past its own TTL, this condition would take it
        // over with its history, unaborted, committed or not. Held here, it is asked for
        // again.
        if self.table.acquire == AcquireMode::Epochs {
            condition =
                format!("({condition}) AND (attribute_not_exists(#status) OR #status <> :epoch)");
            values.insert(":epoch".to_string(), AttributeValue::S(EPOCH.into()));
        }
        loop {
            let attempts = AttemptCounter::default();
            let sent = client
                .update_item()
                .table_name(&self.table.name)
                .set_key(Some(self.key(&r.key)))
                .update_expression(ACQUIRE_UPDATE)
                .condition_expression(&condition)
                .set_expression_attribute_names(Some(self.acquire_names()))
                .set_expression_attribute_values(Some(values.clone()))
                .return_values(ReturnValue::AllOld)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .customize()
                .interceptor(attempts.clone())
                .send()
                .await;
            let err = match sent {
                Ok(out) => {
                    self.count_units("UpdateItem", true, out.consumed_capacity());
                    let old = out.attributes().filter(|i| !i.is_empty());
                    let retried = retried || attempts.get() > 1;
                    return Ok(self.taken(owner, now_ms, r, old, retried));
                }
                Err(err) => err,
            };
            if let Some(UpdateItemError::ConditionalCheckFailedException(failed)) =
                err.as_service_error()
            {
                let record = failed.item().map(|i| self.decode(i));
                if let Some(rec) = &record
                    && rec.chain_over(owner, r.fresh_before_ms)
                    && rec.takeable_by(owner, now_ms, r.skew_ms)
                {
                    return self.acquire_over(client, owner, now_ms, r).await;
                }
                self.log_held(r, record.as_ref());
                return Ok(Acquired::Held(record));
            }
            // A transaction on the same item is under way: wait for it.
            let conflict = matches!(
                err.as_service_error(),
                Some(UpdateItemError::TransactionConflictException(_))
            );
            if !(conflict && retries.wait_before_next().await) {
                return Err(self.sdk_fail(&format!("acquiring key {:?}", r.key), &err));
            }
        }
    }

    /// Takes a key whose pending chain began before the request's `fresh_before_ms`, whose
    /// lease is over, as new: its history is dropped (`sluice_lock_protocol::acquire`).
    async fn acquire_over(
        &self,
        client: &Client,
        owner: &str,
        now_ms: i64,
        r: &AcquireRequest,
    ) -> Result<Acquired, StoreError> {
        let a = &self.table.attributes;
        let names: HashMap<String, String> = [
            ("#ttl", &a.ttl),
            ("#status", &a.status),
            ("#lease", &a.lease_until),
            ("#owner", &a.owner),
            ("#since", &a.since),
            ("#note", &a.note),
            ("#progress", &a.progress),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
        let values: HashMap<String, AttributeValue> = [
            (":me", AttributeValue::S(owner.to_string())),
            (":pending", AttributeValue::S(PENDING.into())),
            (":lease", number(r.lease_until_ms)),
            (":ttl", number(pending_ttl(r.ttl, r.lease_until_ms))),
            (":now_ms", number(now_ms)),
            (
                ":takeover_ms",
                number(now_ms.saturating_sub(r.skew_ms.max(0))),
            ),
            (
                ":fresh_before",
                number(r.fresh_before_ms.unwrap_or(i64::MIN)),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let sent = client
            .update_item()
            .table_name(&self.table.name)
            .set_key(Some(self.key(&r.key)))
            .update_expression(
                "SET #owner = :me, #status = :pending, #lease = :lease, #ttl = :ttl, \
                 #since = :now_ms REMOVE #note, #progress",
            )
            .condition_expression(format!("{CHAIN_OVER} AND #lease < :takeover_ms"))
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match sent {
            Ok(out) => {
                self.count_units("UpdateItem", true, out.consumed_capacity());
                tracing::debug!(
                    table = %self.table.name,
                    key = %r.key,
                    "lock key of an earlier window taken as new"
                );
                Ok(Acquired::FRESH)
            }
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    let record = failed.item().map(|i| self.decode(i));
                    self.log_held(r, record.as_ref());
                    Ok(Acquired::Held(record))
                }
                _ => Err(self.sdk_fail(&format!("acquiring key {:?}", r.key), &err)),
            },
        }
    }

    /// The attribute names of an acquisition's condition and update, either condition.
    fn acquire_names(&self) -> HashMap<String, String> {
        let a = &self.table.attributes;
        [
            ("#pk", &a.partition_key),
            ("#ttl", &a.ttl),
            ("#status", &a.status),
            ("#lease", &a.lease_until),
            ("#owner", &a.owner),
            ("#since", &a.since),
            ("#note", &a.note),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
    }

    /// The transaction write that takes `r`'s key if nobody holds it pending
    /// ([`ACQUIRE_FRESH_CONDITION`]), with the same update as [`Self::acquire_one`].
    fn acquire_item(
        &self,
        owner: &str,
        now_ms: i64,
        r: &AcquireRequest,
    ) -> Result<TransactWriteItem, StoreError> {
        Update::builder()
            .table_name(&self.table.name)
            .set_key(Some(self.key(&r.key)))
            .update_expression(ACQUIRE_UPDATE)
            .condition_expression(ACQUIRE_FRESH_CONDITION)
            .set_expression_attribute_names(Some(self.acquire_names()))
            .set_expression_attribute_values(Some(acquire_values(owner, now_ms, r, false)))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map(|u| TransactWriteItem::builder().update(u).build())
            .map_err(|e| self.fail(&format!("acquiring key {:?}", r.key), e))
    }

    /// Takes up to [`TRANSACTION_MAX`] keys in one transaction. A cancelled transaction is
    /// sent again without the keys that cancelled it: held keys are answered with their
    /// holder's record, and conflicts and throttling are waited out, as in
    /// [`Self::change_chunk`]. Pending keys this owner may take (a lease that ended, or its
    /// own) are left to be taken one by one ([`Self::acquire_one`]), whose old item tells
    /// the takeover; so is every key of a request the service refuses as a whole (a key too
    /// long for the table, say), so that only the bad key's message fails.
    async fn acquire_chunk(
        &self,
        client: &Client,
        owner: &str,
        now_ms: i64,
        chunk: &[AcquireRequest],
    ) -> ChunkAnswer {
        let mut out: Vec<Option<Result<Acquired, StoreError>>> =
            (0..chunk.len()).map(|_| None).collect();
        let mut alone: Vec<(usize, bool)> = Vec::new();
        let mut left: Vec<usize> = (0..chunk.len()).collect();
        // Each key's error names that key, as its message's failure will.
        let acquiring = |i: usize| format!("acquiring key {:?}", chunk[i].key);
        let mut retries = Retries::default();
        while !left.is_empty() {
            let items = match left
                .iter()
                .map(|&i| self.acquire_item(owner, now_ms, &chunk[i]))
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(items) => items,
                Err(e) => {
                    for i in left.drain(..) {
                        out[i] = Some(Err(StoreError(e.0.clone())));
                    }
                    break;
                }
            };
            let attempts = AttemptCounter::default();
            let sent = client
                .transact_write_items()
                .set_transact_items(Some(items))
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .customize()
                .interceptor(attempts.clone())
                .send()
                .await;
            let err = match sent {
                Ok(done) => {
                    self.count_units("TransactWriteItems", true, done.consumed_capacity());
                    for i in left.drain(..) {
                        out[i] = Some(Ok(Acquired::FRESH));
                    }
                    break;
                }
                Err(err) => err,
            };
            let cancelled = match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(c)) => c,
                Some(e) if e.meta().code() == Some("ValidationException") => {
                    alone.extend(left.drain(..).map(|i| (i, false)));
                    break;
                }
                _ => {
                    for i in left.drain(..) {
                        out[i] = Some(Err(self.sdk_fail(&acquiring(i), &err)));
                    }
                    break;
                }
            };
            let reasons = cancelled.cancellation_reasons();
            if reasons.len() != left.len() {
                let why = format!(
                    "transaction cancelled with {} reasons for {} writes: {}",
                    reasons.len(),
                    left.len(),
                    describe_error(&err)
                );
                for i in left.drain(..) {
                    out[i] = Some(Err(self.fail(&acquiring(i), &why)));
                }
                break;
            }
            let retried = attempts.get() > 1;
            let mut again = Vec::with_capacity(left.len());
            let mut transient = false;
            for (&i, reason) in left.iter().zip(reasons) {
                let r = &chunk[i];
                match Cancel::of(reason) {
                    Cancel::NotOurs => {
                        let record = reason
                            .item()
                            .filter(|item| !item.is_empty())
                            .map(|item| self.decode(item));
                        match record {
                            // The SDK sent the transaction again and this is what it
                            // writes: an earlier attempt of this call took the key.
                            Some(rec)
                                if retried
                                    && rec.owner == owner
                                    && rec.lease_until_ms() == Some(r.lease_until_ms) =>
                            {
                                out[i] = Some(Ok(Acquired::FRESH));
                            }
                            Some(rec) if !rec.takeable_by(owner, now_ms, r.skew_ms) => {
                                self.log_held(r, Some(&rec));
                                out[i] = Some(Ok(Acquired::Held(Some(rec))));
                            }
                            _ => alone.push((i, false)),
                        }
                    }
                    Cancel::NotApplied => again.push(i),
                    Cancel::Transient => {
                        transient = true;
                        again.push(i);
                    }
                    Cancel::Failed => {
                        out[i] = Some(Err(self.fail(
                            &acquiring(i),
                            format!(
                                "transaction cancelled: {} {}",
                                reason.code().unwrap_or("?"),
                                reason.message().unwrap_or("")
                            ),
                        )));
                    }
                }
            }
            if (transient || again.len() == left.len()) && !retries.wait_before_next().await {
                let why = format!(
                    "transaction still cancelled after {STORE_ATTEMPTS} attempts: {}",
                    describe_error(&err)
                );
                for i in again.drain(..) {
                    out[i] = Some(Err(self.fail(&acquiring(i), &why)));
                }
            }
            left = again;
        }
        ChunkAnswer { out, alone }
    }

    /// What a successful acquisition took, given the item it replaced and whether the SDK
    /// sent the request (written at `now_ms`) more than once.
    pub(super) fn taken(
        &self,
        owner: &str,
        now_ms: i64,
        r: &AcquireRequest,
        old: Option<&HashMap<String, AttributeValue>>,
        retried: bool,
    ) -> Acquired {
        let Some(old) = old.map(|i| self.decode(i)) else {
            return Acquired::FRESH;
        };
        if old.status == LockStatus::Committed {
            return Acquired::FRESH;
        }
        // The SDK retried (after a timeout, a 5xx or a lost response) and the item is
        // exactly what this request writes (`written_by`).
        if retried {
            match written_by(owner, now_ms, r, &old) {
                Written::Fresh => {
                    tracing::debug!(
                        table = %self.table.name,
                        key = %r.key,
                        "lock key taken by an earlier attempt of the same request"
                    );
                    return Acquired::FRESH;
                }
                Written::Over => tracing::debug!(
                    table = %self.table.name,
                    key = %r.key,
                    since_ms = ?old.since_ms,
                    "lock key taken over by an earlier attempt of the same request"
                ),
                Written::Not => {}
            }
        }
        Acquired::Taken {
            prior: Some(Prior {
                owner: old.owner,
                since_ms: old.since_ms.unwrap_or(0),
                progress: old.progress,
            }),
        }
    }

    pub(super) fn log_held(&self, r: &AcquireRequest, record: Option<&LockRecord>) {
        match record {
            Some(rec) => {
                let (status, lease_until_ms) = match rec.status {
                    LockStatus::Committed => (COMMITTED, None),
                    LockStatus::Pending { lease_until_ms } => (PENDING, Some(lease_until_ms)),
                };
                tracing::debug!(
                    table = %self.table.name,
                    key = %r.key,
                    holder = %rec.owner,
                    status,
                    lease_until_ms = ?lease_until_ms,
                    ttl = rec.ttl,
                    "lock key already held"
                );
            }
            None => tracing::debug!(
                table = %self.table.name,
                key = %r.key,
                "lock key already held (the holder's item was not returned)"
            ),
        }
    }

    /// One transaction write of `op`, conditional on `owner`'s pending lock (in its epoch,
    /// when the owner holds the key in one: `epochs.rs`).
    fn transact_item(&self, op: &Op<'_>, owner: &str) -> Result<TransactWriteItem, StoreError> {
        let a = &self.table.attributes;
        let key = op.key();
        let owned = self.owned(owner, key);
        let in_epoch = !owned.names.is_empty();
        let update = |expression: &str| {
            owned_by!(
                Update::builder()
                    .table_name(&self.table.name)
                    .set_key(Some(self.key(key)))
                    .update_expression(expression),
                owned.clone()
            )
            .expression_attribute_names("#owner", &a.owner)
            .expression_attribute_names("#status", &a.status)
            .expression_attribute_values(":me", AttributeValue::S(owner.to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        };
        // The lease, for the changes that name it (DynamoDB refuses a name left unused).
        let lease = |u: aws_sdk_dynamodb::types::builders::UpdateBuilder| {
            u.expression_attribute_names("#lease", &a.lease_until)
        };
        // A commit or an abandonment of a key held in an epoch takes it out of the epoch
        // (the condition names `#epoch` and `#slot` already).
        let (remove_epoch, to_pending) = match in_epoch {
            true => (", #epoch, #slot", ", #status = :pending"),
            false => ("", ""),
        };
        let abandoned = |u: aws_sdk_dynamodb::types::builders::UpdateBuilder| match in_epoch {
            true => u.expression_attribute_values(":pending", AttributeValue::S(PENDING.into())),
            false => u,
        };
        let built = match op {
            Op::Commit(c) => {
                let set = match c.note {
                    Some(_) => "SET #status = :committed, #ttl = :ttl, #note = :note",
                    None => "SET #status = :committed, #ttl = :ttl",
                };
                let u = update(&format!(
                    "{set} REMOVE #lease, #since, #progress{remove_epoch}"
                ));
                let mut u = lease(u)
                    .expression_attribute_names("#ttl", &a.ttl)
                    .expression_attribute_names("#since", &a.since)
                    .expression_attribute_names("#progress", &a.progress)
                    .expression_attribute_values(":committed", AttributeValue::S(COMMITTED.into()))
                    .expression_attribute_values(":ttl", number(c.ttl));
                if let Some(note) = &c.note {
                    u = u
                        .expression_attribute_names("#note", &a.note)
                        .expression_attribute_values(":note", AttributeValue::S(note.clone()));
                }
                u.build()
                    .map(|u| TransactWriteItem::builder().update(u).build())
            }
            Op::Renew(r) => lease(update("SET #lease = :lease, #ttl = :ttl"))
                .expression_attribute_names("#ttl", &a.ttl)
                .expression_attribute_values(":lease", number(r.lease_until_ms))
                .expression_attribute_values(":ttl", number(pending_ttl(r.ttl, r.lease_until_ms)))
                .build()
                .map(|u| TransactWriteItem::builder().update(u).build()),
            Op::Abandon(r) if r.progress.is_empty() => {
                let expression = match in_epoch {
                    true => format!("SET #lease = :ended{to_pending} REMOVE #epoch, #slot"),
                    false => "SET #lease = :ended".to_string(),
                };
                abandoned(lease(update(&expression)))
                    .expression_attribute_values(":ended", number(0))
                    .build()
                    .map(|u| TransactWriteItem::builder().update(u).build())
            }
            Op::Abandon(r) => {
                let expression = match in_epoch {
                    true => format!(
                        "SET #lease = :ended{to_pending} ADD #progress :progress REMOVE #epoch, #slot"
                    ),
                    false => "SET #lease = :ended ADD #progress :progress".to_string(),
                };
                abandoned(lease(update(&expression)))
                    .expression_attribute_names("#progress", &a.progress)
                    .expression_attribute_values(":ended", number(0))
                    .expression_attribute_values(
                        ":progress",
                        AttributeValue::Ss(r.progress.entries()),
                    )
                    .build()
                    .map(|u| TransactWriteItem::builder().update(u).build())
            }
            Op::Record(r) => update("ADD #progress :progress")
                .expression_attribute_names("#progress", &a.progress)
                .expression_attribute_values(":progress", AttributeValue::Ss(r.progress.entries()))
                .build()
                .map(|u| TransactWriteItem::builder().update(u).build()),
            Op::Release(_) => owned_by!(
                Delete::builder()
                    .table_name(&self.table.name)
                    .set_key(Some(self.key(key))),
                owned.clone()
            )
            .expression_attribute_names("#owner", &a.owner)
            .expression_attribute_names("#status", &a.status)
            .expression_attribute_values(":me", AttributeValue::S(owner.to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map(|d| TransactWriteItem::builder().delete(d).build()),
        };
        built.map_err(|e| self.fail(&format!("{} key {key:?}", op.verb()), e))
    }

    /// Applies `ops` in transactions of up to 100, one result per key, in order.
    pub(super) async fn change(
        &self,
        owner: &str,
        ops: Vec<Op<'_>>,
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        // Made up front, as in `acquire` (a closure in the stream trips lifetime inference).
        let calls: Vec<_> = ops
            .chunks(TRANSACTION_MAX)
            .map(|chunk| self.change_chunk(client, owner, chunk))
            .collect();
        let parts: Vec<Result<Vec<Settled>, StoreError>> = stream::iter(calls)
            .buffered(concurrency.max(1))
            .collect()
            .await;
        let mut out = Vec::with_capacity(ops.len());
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    /// Applies up to [`TRANSACTION_MAX`] changes in one transaction, sent again without the
    /// keys that are not ours (and after a backoff when a conflict or throttling cancelled
    /// it) until every key is settled.
    async fn change_chunk(
        &self,
        client: &Client,
        owner: &str,
        chunk: &[Op<'_>],
    ) -> Result<Vec<Settled>, StoreError> {
        let mut out: Vec<Option<Settled>> = vec![None; chunk.len()];
        let what = |left: &[usize]| {
            format!(
                "{} {} keys ({:?}, ...)",
                chunk[left[0]].verb(),
                left.len(),
                chunk[left[0]].key()
            )
        };
        let mut left: Vec<usize> = (0..chunk.len()).collect();
        let mut retries = Retries::default();
        while !left.is_empty() {
            let items = left
                .iter()
                .map(|&i| self.transact_item(&chunk[i], owner))
                .collect::<Result<Vec<_>, _>>()?;
            let err = match client
                .transact_write_items()
                .set_transact_items(Some(items))
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await
            {
                Ok(done) => {
                    self.count_units("TransactWriteItems", true, done.consumed_capacity());
                    for i in left.drain(..) {
                        out[i] = Some(Settled::Ok);
                    }
                    break;
                }
                Err(err) => err,
            };
            let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
                err.as_service_error()
            else {
                return Err(self.sdk_fail(&what(&left), &err));
            };
            let reasons = cancelled.cancellation_reasons();
            if reasons.len() != left.len() {
                return Err(self.fail(
                    &what(&left),
                    format!(
                        "transaction cancelled with {} reasons for {} writes: {}",
                        reasons.len(),
                        left.len(),
                        describe_error(&err)
                    ),
                ));
            }
            let mut again = Vec::with_capacity(left.len());
            let mut transient = false;
            for (&i, reason) in left.iter().zip(reasons) {
                match Cancel::of(reason) {
                    Cancel::NotOurs => {
                        let record = reason.item().map(|item| self.decode(item));
                        // Committing what this owner committed already (a retry whose
                        // first answer was lost) is done, as the protocol says.
                        let done = matches!(chunk[i], Op::Commit(_))
                            && record.as_ref().is_some_and(|r| {
                                r.owner == owner && r.status == LockStatus::Committed
                            });
                        out[i] = Some(if done {
                            Settled::Ok
                        } else {
                            Settled::NotOwner(record)
                        });
                    }
                    Cancel::NotApplied => again.push(i),
                    Cancel::Transient => {
                        transient = true;
                        again.push(i);
                    }
                    Cancel::Failed => {
                        return Err(self.fail(
                            &format!("{} key {:?}", chunk[i].verb(), chunk[i].key()),
                            format!(
                                "transaction cancelled: {} {}",
                                reason.code().unwrap_or("?"),
                                reason.message().unwrap_or("")
                            ),
                        ));
                    }
                }
            }
            let progressed = again.len() < left.len();
            if (transient || !progressed) && !retries.wait_before_next().await {
                return Err(self.fail(
                    &what(&left),
                    format!(
                        "transaction still cancelled after {STORE_ATTEMPTS} attempts: {}",
                        describe_error(&err)
                    ),
                ));
            }
            left = again;
        }
        Ok(out
            .into_iter()
            .map(|s| s.unwrap_or(Settled::NotOwner(None)))
            .collect())
    }
}

impl DynamoDbStore {
    /// Puts the answers of `parts` (chunks of `requests`, in order) together, taking the keys
    /// they left alone one by one ([`Self::acquire_one`]).
    async fn acquire_alone(
        &self,
        client: &Client,
        owner: &str,
        now_ms: i64,
        requests: &[AcquireRequest],
        parts: Vec<ChunkAnswer>,
        concurrency: usize,
    ) -> Vec<Result<Acquired, StoreError>> {
        let mut out = Vec::with_capacity(requests.len());
        let mut alone = Vec::new();
        for part in parts {
            let base = out.len();
            alone.extend(
                part.alone
                    .into_iter()
                    .map(|(i, retried)| (base + i, retried)),
            );
            out.extend(part.out);
        }
        let singles: Vec<_> = alone
            .iter()
            .map(|&(i, retried)| self.acquire_one(client, owner, now_ms, &requests[i], retried))
            .collect();
        let taken: Vec<_> = stream::iter(singles)
            .buffered(concurrency.max(1))
            .collect()
            .await;
        for ((i, _), got) in alone.into_iter().zip(taken) {
            // Taken alone: pending outside any epoch, whatever the ledger said.
            if matches!(&got, Ok(a) if a.is_taken()) {
                self.epochs.forget(owner, &requests[i].key);
            }
            out[i] = Some(got);
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(self.fail("acquiring", "no answer for a key"))))
            .collect()
    }
}

/// What a record read after an acquisition's write is to that write, when an earlier
/// attempt of the call may have applied it unseen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// Not what the request writes: another owner's, or another lease's.
    Not,
    /// Exactly what the request writes, chain begun at its own instant: it took the key
    /// fresh.
    Fresh,
    /// The request's owner and lease, but a chain begun earlier: it took the key over.
    Over,
}

/// What `rec` is to the record `owner`'s request `r` writes at `now_ms`. An earlier
/// attempt of the very call took the key if the record is exactly what it writes (this
/// owner, this lease); it took it fresh only if it began the pending chain (`since` is the
/// request's own instant). An older `since` means that attempt took the key over from an
/// owner whose lease ran out, and that owner may have delivered the message: the takeover
/// must be told, or the message is sent again without a look (a duplicate after a crash,
/// seen in the fault campaign: the takeover's answer was lost, the retry found its own
/// record).
pub(super) fn written_by(
    owner: &str,
    now_ms: i64,
    r: &AcquireRequest,
    rec: &LockRecord,
) -> Written {
    if rec.owner != owner || rec.lease_until_ms() != Some(r.lease_until_ms) {
        return Written::Not;
    }
    match rec.since_ms.is_none_or(|since| since == now_ms) {
        true => Written::Fresh,
        false => Written::Over,
    }
}

/// The values of an acquisition's condition and update: [`ACQUIRE_CONDITION`]'s with
/// `takeover` (it alone compares leases), else [`ACQUIRE_FRESH_CONDITION`]'s (DynamoDB
/// refuses a value no expression uses).
fn acquire_values(
    owner: &str,
    now_ms: i64,
    r: &AcquireRequest,
    takeover: bool,
) -> HashMap<String, AttributeValue> {
    let takeover_ms = takeover.then(|| {
        (
            ":takeover_ms",
            number(now_ms.saturating_sub(r.skew_ms.max(0))),
        )
    });
    [
        (":me", AttributeValue::S(owner.to_string())),
        (":pending", AttributeValue::S(PENDING.into())),
        (":lease", number(r.lease_until_ms)),
        (":ttl", number(pending_ttl(r.ttl, r.lease_until_ms))),
        (":now_s", number(now_ms.div_euclid(1000))),
        (":now_ms", number(now_ms)),
    ]
    .into_iter()
    .chain(takeover_ms)
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The store's own retries of one call (cancelled transactions, transaction conflicts),
/// up to [`STORE_ATTEMPTS`] attempts, with [`backoff`] between them.
#[derive(Debug, Default)]
pub(super) struct Retries(u32);

impl Retries {
    /// After an attempt a conflict or throttling stopped: waits before the next one, or
    /// says `false` (without waiting) when that was the last.
    pub(super) async fn wait_before_next(&mut self) -> bool {
        self.0 += 1;
        if self.0 >= STORE_ATTEMPTS {
            return false;
        }
        tracing::debug!(
            attempt = self.0,
            "lock store call stopped by a conflict or throttling; retrying"
        );
        tokio::time::sleep(backoff(self.0 - 1)).await;
        true
    }
}

/// What one acquisition transaction (or piece of statements) settled: an answer per key of
/// its chunk, `None` for the keys (`alone`: indices into the chunk, and whether an earlier
/// call may have written the key's record, see [`DynamoDbStore::acquire_one`]) left to
/// take one by one.
pub(super) struct ChunkAnswer {
    pub(super) out: Vec<Option<Result<Acquired, StoreError>>>,
    pub(super) alone: Vec<(usize, bool)>,
}

/// Counts the attempts the SDK makes for one operation (its retries included).
#[derive(Debug, Clone, Default)]
pub(super) struct AttemptCounter(Arc<AtomicU32>);

impl AttemptCounter {
    pub(super) fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Intercept for AttemptCounter {
    fn name(&self) -> &'static str {
        "sluice-attempt-counter"
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// What one cancellation reason of a transaction means for its write.
#[derive(Debug, PartialEq, Eq)]
pub enum Cancel {
    /// The condition failed: the lock is not ours (or not pending).
    NotOurs,
    /// Another write cancelled the transaction; this one was fine.
    NotApplied,
    /// A conflict with another transaction or throttling: try again later.
    Transient,
    /// Anything else (validation, item size): an error.
    Failed,
}

impl Cancel {
    /// The meaning of `reason`.
    pub fn of(reason: &CancellationReason) -> Cancel {
        match reason.code() {
            Some("ConditionalCheckFailed") => Cancel::NotOurs,
            None | Some("None") => Cancel::NotApplied,
            Some(
                "TransactionConflict"
                | "ThrottlingError"
                | "ProvisionedThroughputExceeded"
                | "RequestLimitExceeded"
                | "ThrottlingException",
            ) => Cancel::Transient,
            Some(_) => Cancel::Failed,
        }
    }
}

/// The pause before retry `attempt` (0-based): exponential from 50 ms up to 2 s, with
/// jitter (half of it random), so that contending writers spread out.
pub(super) fn backoff(attempt: u32) -> Duration {
    let cap = (50u64 << attempt.min(6)).min(2_000);
    Duration::from_millis(cap / 2 + fastrand::u64(0..=cap / 2))
}

#[sluice_engine::async_trait]
impl LockStore for DynamoDbStore {
    fn describe(&self) -> String {
        match &self.table.region {
            Some(r) => format!("aws_dynamodb table {} ({r})", self.table.name),
            None => format!("aws_dynamodb table {}", self.table.name),
        }
    }

    async fn acquire(
        &self,
        owner: &str,
        now_ms: i64,
        requests: &[AcquireRequest],
        concurrency: usize,
    ) -> Vec<Result<Acquired, StoreError>> {
        let client = match self.client().await {
            Ok(c) => c,
            Err(e) => {
                return requests
                    .iter()
                    .map(|_| Err(StoreError(e.0.clone())))
                    .collect();
            }
        };
        // The futures are made up front (they do nothing until polled): a closure making
        // them inside the stream trips the compiler's higher-ranked lifetime inference in
        // this Send future.
        match self.table.acquire {
            AcquireMode::Items => {
                let calls: Vec<_> = requests
                    .iter()
                    .map(|r| self.acquire_one(client, owner, now_ms, r, false))
                    .collect();
                stream::iter(calls)
                    .buffered(concurrency.max(1))
                    .collect()
                    .await
            }
            AcquireMode::Transactions => {
                let calls: Vec<_> = requests
                    .chunks(TRANSACTION_MAX)
                    .map(|chunk| self.acquire_chunk(client, owner, now_ms, chunk))
                    .collect();
                let parts: Vec<ChunkAnswer> = stream::iter(calls)
                    .buffered(concurrency.max(1))
                    .collect()
                    .await;
                self.acquire_alone(client, owner, now_ms, requests, parts, concurrency)
                    .await
            }
            AcquireMode::Statements | AcquireMode::Epochs => {
                let epochs = self.table.acquire == AcquireMode::Epochs;
                // `concurrency` counts calls: as many pieces may be under way, each
                // making its calls when the gate lets it.
                let gate = statements::CallGate::new(concurrency);
                let calls: Vec<_> = requests
                    .chunks(statements::PIECE_KEYS)
                    .map(|chunk| {
                        let epoch = epochs.then(|| self.epochs.open(owner));
                        self.acquire_statements(client, owner, now_ms, chunk, epoch, &gate)
                    })
                    .collect();
                let parts: Vec<ChunkAnswer> = stream::iter(calls)
                    .buffered(concurrency.max(1))
                    .collect()
                    .await;
                self.acquire_alone(client, owner, now_ms, requests, parts, concurrency)
                    .await
            }
        }
    }

    async fn commit(
        &self,
        owner: &str,
        requests: &[CommitRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        match self.table.acquire {
            AcquireMode::Statements => {
                return self.commit_statements(owner, requests, concurrency).await;
            }
            AcquireMode::Epochs => return self.commit_epochs(owner, requests, concurrency).await,
            AcquireMode::Transactions | AcquireMode::Items => {}
        }
        self.change(
            owner,
            requests.iter().map(Op::Commit).collect(),
            concurrency,
        )
        .await
    }

    async fn renew(
        &self,
        owner: &str,
        requests: &[RenewRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        if self.table.acquire == AcquireMode::Epochs {
            let now_ms = super::clock::now_ms();
            return self
                .renew_epochs(owner, requests, now_ms, concurrency)
                .await;
        }
        self.change(owner, requests.iter().map(Op::Renew).collect(), concurrency)
            .await
    }

    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        let ops = keys.iter().map(|k| Op::Release(k)).collect();
        let settled = self.change(owner, ops, concurrency).await?;
        for k in keys {
            self.epochs.forget(owner, k);
        }
        Ok(settled)
    }

    async fn abandon(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        let ops = requests.iter().map(Op::Abandon).collect();
        let settled = self.change(owner, ops, concurrency).await?;
        for r in requests {
            self.epochs.forget(owner, &r.key);
        }
        Ok(settled)
    }

    async fn record(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        // A string set cannot be empty: a request that records nothing changes nothing.
        let ops = requests
            .iter()
            .filter(|r| !r.progress.is_empty())
            .map(Op::Record)
            .collect::<Vec<_>>();
        let mut settled = self.change(owner, ops, concurrency).await?.into_iter();
        Ok(requests
            .iter()
            .map(|r| match r.progress.is_empty() {
                true => Settled::Ok,
                false => settled.next().unwrap_or(Settled::NotOwner(None)),
            })
            .collect())
    }

    fn clock_offset(&self) -> Option<ClockOffset> {
        self.clock.offset()
    }

    /// `DescribeTable`, whatever it answers (an access denied included): every answer
    /// carries the time.
    async fn measure_clock(&self) {
        if self.clock.offset().is_some() {
            return;
        }
        if let Ok(client) = self.client().await {
            let _ = client
                .describe_table()
                .table_name(&self.table.name)
                .send()
                .await;
        }
    }
}
