//! The commits of `lock_acquire: 'epochs'`: a piece's delivered keys added to their epoch's
//! record with one `UpdateItem` conditional on `lock_v`; aborted slots, keys whose commit is
//! later than their item's TTL, and keys outside any epoch committed on their records; and
//! the renewals that keep a key item's TTL ahead of its window.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure};
use futures::stream::{self, StreamExt};
use sluice_lock_protocol::epoch::{KeyRecord, KeyState, key_state};
use sluice_lock_protocol::pending_ttl;

use super::super::super::lock::{CommitRequest, LockRecord, RenewRequest, Settled, StoreError};
use super::super::lock::{Op, STORE_ATTEMPTS};
use super::super::statements::{CallFailed, PIECE_KEYS};
use super::super::{DynamoDbStore, number};
use super::{COMMITTED_ATTRIBUTE, V_ATTRIBUTE, committed, epoch_key, number_set, seconds_up};

impl DynamoDbStore {
    /// Renews `requests` (`lock_acquire: 'epochs'`): per key, conditional on the owner's
    /// record where its ledger says it is ([`DynamoDbStore::owned`]).
    ///
    /// A renewal refused with this owner's own record pending in an epoch is told apart
    /// from a takeover: the keeper renews a delivered key until its commit call answers,
    /// and that call answers only once every epoch in it is done, so a renewal can reach a
    /// key whose epoch commit has landed (and taken it out of the ledger): its record still
    /// names the epoch (the commit writes only the epoch record), which the renewal's
    /// condition, on a pending record outside any epoch, refuses. Such a key committed in
    /// its epoch is answered as this owner's committed record, as a renewal that finds its
    /// owner's commit on the key record is in the other modes; one its epoch did not commit
    /// keeps the refusal as found. Reading the epochs is the only cost, on this path alone;
    /// a read that fails fails the renewal call, which is tried again, rather than report
    /// the owner's own key taken over.
    pub(crate) async fn renew_epochs(
        &self,
        owner: &str,
        requests: &[RenewRequest],
        now_ms: i64,
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        let renewals = self.epoch_renewals(owner, requests, now_ms);
        let mut settled = self
            .change(owner, renewals.iter().map(Op::Renew).collect(), concurrency)
            .await?;
        let own: Vec<&str> = renewals
            .iter()
            .zip(&settled)
            .filter(|(_, s)| matches!(s, Settled::NotOwner(Some(rec)) if rec.pending_for(owner)))
            .map(|(r, _)| r.key.as_str())
            .collect();
        if !own.is_empty() {
            let mut committed = self.committed_in_epochs(owner, &own).await.map_err(|e| {
                StoreError(format!(
                    "{e} (renewing {} keys found pending in an epoch of their owner, {:?}, ...)",
                    own.len(),
                    own[0]
                ))
            })?;
            for (r, s) in renewals.iter().zip(settled.iter_mut()) {
                if let Some(rec) = committed.remove(&r.key) {
                    *s = Settled::NotOwner(Some(rec));
                }
            }
        }
        for (r, s) in renewals.iter().zip(&settled) {
            match s {
                Settled::Ok => {
                    self.epochs
                        .renewed(owner, &r.key, pending_ttl(r.ttl, r.lease_until_ms))
                }
                // Another owner's now: this one will not commit it.
                Settled::NotOwner(Some(rec)) if rec.owner != owner => {
                    self.epochs.forget(owner, &r.key)
                }
                Settled::NotOwner(_) => {}
            }
        }
        Ok(settled)
    }

    /// `requests` as renewals of keys held in an epoch write them: the TTL moved on by the
    /// lease, as [`key_ttl`] sets it (a renewal's `ttl` is the request's, as at acquisition).
    pub(crate) fn epoch_renewals(
        &self,
        owner: &str,
        requests: &[RenewRequest],
        now_ms: i64,
    ) -> Vec<RenewRequest> {
        requests
            .iter()
            .map(|r| match self.epochs.slot_of(owner, &r.key) {
                Some(_) => RenewRequest {
                    ttl: r
                        .ttl
                        .saturating_add(seconds_up(r.lease_until_ms.saturating_sub(now_ms))),
                    ..r.clone()
                },
                None => r.clone(),
            })
            .collect()
    }

    /// Commits `requests` (`lock_acquire: 'epochs'`): the keys held in an epoch with one
    /// write per epoch, the others (and slots aborted) on their records.
    pub(crate) async fn commit_epochs(
        &self,
        owner: &str,
        requests: &[CommitRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        let mut by_epoch: HashMap<u64, Vec<(usize, u32)>> = HashMap::new();
        let mut plain = Vec::new();
        for (i, c) in requests.iter().enumerate() {
            match self.epochs.slot_of(owner, &c.key) {
                Some(at) => by_epoch.entry(at.epoch).or_default().push((i, at.slot)),
                None => plain.push(i),
            }
        }
        let mut out: Vec<Option<Settled>> = vec![None; requests.len()];
        if !plain.is_empty() {
            let asked: Vec<CommitRequest> = plain.iter().map(|&i| requests[i].clone()).collect();
            let settled = self.commit_statements(owner, &asked, concurrency).await?;
            let mut recheck = Vec::new();
            for (i, s) in plain.into_iter().zip(settled) {
                if let Settled::NotOwner(Some(rec)) = &s
                    && rec.pending_for(owner)
                {
                    recheck.push(i);
                }
                out[i] = Some(s);
            }
            // The owner's record pending in an epoch that is in no ledger: committed there
            // already (a retry whose first answer was lost, or a call sent again after
            // another of its epochs failed) is done. A read that fails fails the call,
            // which is tried again: answered `NotOwner`, the keeper would report the key
            // taken over and give up its commit.
            if !recheck.is_empty() {
                let keys: Vec<&str> = recheck.iter().map(|&i| requests[i].key.as_str()).collect();
                let done = self.committed_in_epochs(owner, &keys).await?;
                for i in recheck {
                    if done.contains_key(&requests[i].key) {
                        out[i] = Some(Settled::Ok);
                    }
                }
            }
        }
        let calls: Vec<_> = by_epoch
            .into_iter()
            .map(|(epoch, keys)| self.commit_epoch(owner, requests, epoch, keys))
            .collect();
        let parts: Vec<Result<Vec<(usize, Settled)>, StoreError>> = stream::iter(calls)
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
        for part in parts {
            for (i, s) in part? {
                out[i] = Some(s);
            }
        }
        Ok(out
            .into_iter()
            .map(|s| s.unwrap_or(Settled::NotOwner(None)))
            .collect())
    }

    /// `owner`'s records among `keys` (distinct) that are pending in an epoch that
    /// committed them, each as the committed record a duplicate is told: strongly
    /// consistent reads of the keys, then of their epochs (each named once), up to
    /// [`PIECE_KEYS`] a call, as `BatchGetItem` takes them.
    async fn committed_in_epochs(
        &self,
        owner: &str,
        keys: &[&str],
    ) -> Result<HashMap<String, LockRecord>, StoreError> {
        let client = self.client().await?;
        let read_failed = |e: CallFailed| {
            let why = match e {
                CallFailed::Refused => "the request was refused".to_string(),
                CallFailed::Failed(why) => why,
            };
            self.fail("reading whether keys are committed in their epochs", why)
        };
        let mut items = HashMap::new();
        for chunk in keys.chunks(PIECE_KEYS) {
            items.extend(
                self.read_items(client, chunk, true)
                    .await
                    .map_err(read_failed)?,
            );
        }
        let mine: Vec<(&str, KeyRecord)> = keys
            .iter()
            .filter_map(|&k| {
                let key = self.decode_key(items.get(k)?);
                (key.epoch_pending() && key.lock.owner == owner).then_some((k, key))
            })
            .collect();
        let mut names: Vec<String> = mine
            .iter()
            .filter_map(|(_, k)| k.epoch.map(|at| epoch_key(owner, at.epoch)))
            .collect();
        names.sort_unstable();
        names.dedup();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut epochs = HashMap::new();
        for chunk in refs.chunks(PIECE_KEYS) {
            epochs.extend(
                self.read_items(client, chunk, true)
                    .await
                    .map_err(read_failed)?,
            );
        }
        Ok(mine
            .into_iter()
            .filter_map(|(k, key)| {
                let record = key.epoch.and_then(|at| {
                    epochs
                        .get(&epoch_key(owner, at.epoch))
                        .map(|item| self.decode_epoch(item))
                })?;
                (key_state(&key, Some(&record)) == KeyState::Committed)
                    .then(|| (k.to_string(), committed(&key, record.ttl)))
            })
            .collect())
    }

    /// Commits `keys` (indices into `requests`, with their slots) of `owner`'s `epoch`.
    async fn commit_epoch(
        &self,
        owner: &str,
        requests: &[CommitRequest],
        epoch: u64,
        keys: Vec<(usize, u32)>,
    ) -> Result<Vec<(usize, Settled)>, StoreError> {
        let client = self.client().await?;
        let a = &self.table.attributes;
        let name = epoch_key(owner, epoch);
        let mut out = Vec::with_capacity(keys.len());
        let mut left = keys;
        let mut on_records = Vec::new();
        for _ in 0..STORE_ATTEMPTS {
            let (v, aborted, held_ttl) = self.epochs.seen(owner, epoch);
            // Aborted slots, and keys whose commit's TTL is beyond their item's (a commit
            // later than the lease: DynamoDB could delete the item inside its window), are
            // committed on their records.
            let (gone, rest): (Vec<_>, Vec<_>) = left.into_iter().partition(|&(i, s)| {
                aborted.contains(&s)
                    || self
                        .epochs
                        .item_ttl(owner, &requests[i].key)
                        .is_some_and(|ttl| requests[i].ttl > ttl)
            });
            on_records.extend(gone.into_iter().map(|(i, _)| i));
            left = rest;
            if left.is_empty() {
                break;
            }
            let ttl = left
                .iter()
                .map(|&(i, _)| requests[i].ttl)
                .fold(held_ttl, i64::max);
            let condition = match v {
                0 => "attribute_not_exists(#v) OR #v = :v",
                _ => "#v = :v",
            };
            let sent = client
                .update_item()
                .table_name(&self.table.name)
                .set_key(Some(self.key(&name)))
                .update_expression("ADD #committed :slots SET #ttl = :ttl")
                .condition_expression(condition)
                .expression_attribute_names("#committed", COMMITTED_ATTRIBUTE)
                .expression_attribute_names("#v", V_ATTRIBUTE)
                .expression_attribute_names("#ttl", &a.ttl)
                .expression_attribute_values(":slots", number_set(left.iter().map(|&(_, s)| s)))
                .expression_attribute_values(":v", number(v as i64))
                .expression_attribute_values(":ttl", number(ttl))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            match sent {
                Ok(done) => {
                    self.count_units("UpdateItem", true, done.consumed_capacity());
                    self.epochs.committed_until(owner, epoch, ttl);
                    for (i, _) in left.drain(..) {
                        self.epochs.forget(owner, &requests[i].key);
                        out.push((i, Settled::Ok));
                    }
                    break;
                }
                Err(err) => match err.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                        // `lock_v` moved: every slot aborted so far is committed on its key
                        // record, never in the epoch again.
                        let Some(now) = failed.item().map(|i| self.decode_epoch(i)) else {
                            // The record is gone (its TTL passed) although this owner saw
                            // it: what was aborted is unknown, so every key goes on its record.
                            on_records.extend(left.drain(..).map(|(i, _)| i));
                            break;
                        };
                        tracing::debug!(table = %self.table.name, epoch = %name, v = now.v,
                            aborted = now.aborted.len(), "epoch commit found slots aborted");
                        self.epochs.moved(owner, epoch, now.v, now.aborted);
                    }
                    _ => {
                        return Err(self.sdk_fail(
                            &format!("committing {} keys of epoch {name:?}", left.len()),
                            &err,
                        ));
                    }
                },
            }
        }
        if !left.is_empty() {
            return Err(self.fail(
                &format!("committing {} keys of epoch {name:?}", left.len()),
                format!("its abort counter moved at each of {STORE_ATTEMPTS} attempts"),
            ));
        }
        if !on_records.is_empty() {
            on_records.sort_unstable();
            let ops = on_records
                .iter()
                .map(|&i| Op::Commit(&requests[i]))
                .collect();
            let settled = self.change(owner, ops, 1).await?;
            for (i, s) in on_records.into_iter().zip(settled) {
                self.epochs.forget(owner, &requests[i].key);
                out.push((i, s));
            }
        }
        Ok(out)
    }
}
