//! `lock_acquire: 'epochs'`: the epoch protocol of `sluice_lock_protocol::epoch` over
//! DynamoDB, where a batch's keys are committed with one write instead of one each.
//!
//! Keys are taken as in `'statements'` (an eventually consistent `BatchGetItem` of a piece
//! of up to 100 keys, or none while few keys exist, then PartiQL `INSERT`s and `UPDATE`s),
//! but each piece opens an
//! **epoch** of its owner and each key is written pending in it: status `epoch`, with
//! `lock_epoch` (the epoch's number) and `lock_slot` (the key's index in the piece). The
//! key record is not written again when its message is delivered: the commit adds the
//! delivered slots to the **epoch record** (partition key `#epoch:OWNER:N`; `lock_committed`
//! and `lock_aborted`, number sets; `lock_v`, the abort counter; the table's TTL attribute)
//! with one `UpdateItem` on the condition that `lock_v` is still what the owner last saw.
//! A new message thus costs a read and a write to take, and a share of one write to commit.
//!
//! A key pending in an epoch is committed if its slot is in its epoch's `lock_committed`
//! (`key_state`). A taker that reads such a record of another epoch reads the epoch records
//! too (one eventually consistent `BatchGetItem`: a commit is never undone, so a stale read
//! can only miss one, which the abort's condition then decides): a committed slot is a
//! duplicate; a live lease holds the key; a lease that ended is taken over in two writes,
//! **abort** (`ADD lock_aborted :slot, lock_v 1`, unless the slot is committed) and the key
//! write, conditional on the record still naming the owner, epoch and slot read. The abort
//! fences the owner's commit: it either landed first (the abort fails: a duplicate) or fails
//! on `lock_v` afterwards, and then the owner commits those slots on their key records
//! (conditional on its ownership, which the takeover's write ends), never in the epoch
//! again: the set it learns is every aborted slot of the epoch, as the model check found it
//! must be.
//!
//! A key taken alone (a takeover of a plain pending record, a key refused in a statement)
//! is pending outside any epoch and committed on its record as in `'statements'`; so are
//! keys whose slots were aborted. Renewals, releases, abandonments and recorded progress are
//! the per-key transactions of the other modes, whose conditions accept a record pending in
//! an epoch; an abandonment takes the key out of its epoch.
//!
//! A key's window is its epoch record's TTL, which each commit sets to the largest TTL it
//! committed in the epoch (per-key TTLs from `ttl_key` are kept for the longest of a
//! piece's). A committed slot whose epoch's TTL passed is taken as new, whatever the key
//! record says. The key item's own TTL ([`key_ttl`]) outlives that window, so that DynamoDB's
//! TTL deletion does not remove a key inside it, and ends a key its epoch never committed.
//! A key pending in an epoch is never taken alone (`acquire_one`), which reads no epoch.
//!
//! What a process knows of its open epochs (the `lock_v` it last saw, the slots it learnt
//! were aborted, its keys' slots and TTLs) is in [`Ledger`], kept until each key is settled.

use std::collections::{BTreeSet, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnConsumedCapacity, ReturnValue, ReturnValuesOnConditionCheckFailure,
};
use futures::stream::{self, StreamExt};
use sluice_lock_protocol::epoch::{EpochRecord, EpochSlot, KeyRecord, KeyState, key_state};
use sluice_lock_protocol::pending_ttl;

use super::super::lock::{AcquireRequest, Acquired, LockRecord, LockStatus, Prior, StoreError};
use super::lock::AttemptCounter;
use super::statements::CallGate;
use super::{DynamoDbStore, EPOCH, PENDING, number, parse_number};

mod commit;
mod ledger;

pub(super) use ledger::Ledger;

/// A key record's epoch number.
pub(super) const EPOCH_ATTRIBUTE: &str = "lock_epoch";
/// A key record's slot in its epoch.
pub(super) const SLOT_ATTRIBUTE: &str = "lock_slot";
/// An epoch record's committed slots.
const COMMITTED_ATTRIBUTE: &str = "lock_committed";
/// An epoch record's aborted slots.
const ABORTED_ATTRIBUTE: &str = "lock_aborted";
/// An epoch record's abort counter.
const V_ATTRIBUTE: &str = "lock_v";

/// What a change of `owner`'s (commit, renewal, release, abandonment, recorded progress)
/// requires of its key's record, and the names and values that uses beyond `#owner`,
/// `#status` and `:me`: the owner's pending record outside any epoch, or, when
/// its ledger says it holds the key in an epoch, its record in that very epoch and slot
/// (`change_in_epoch`). A key its owner committed in an epoch is in no ledger, so nothing
/// but a commit's retry applies to it any more.
#[derive(Debug, Clone)]
pub(super) struct Owned {
    pub(super) condition: &'static str,
    pub(super) names: Vec<(&'static str, &'static str)>,
    pub(super) values: Vec<(&'static str, AttributeValue)>,
}

/// Applies an [`Owned`] to an expression builder of any kind.
macro_rules! owned_by {
    ($builder:expr, $owned:expr) => {{
        let owned = $owned;
        let mut b = $builder.condition_expression(owned.condition);
        for (k, v) in owned.names {
            b = b.expression_attribute_names(k, v);
        }
        for (k, v) in owned.values {
            b = b.expression_attribute_values(k, v);
        }
        b
    }};
}
pub(super) use owned_by;

/// The partition key value of `owner`'s epoch `epoch`. No lock key can be it: a key's
/// text begins with `#` only when it is `#` and a JSON value, `##` (a string that began
/// with `#`) or `#sha256:`; with a prefix, it begins with the prefix.
pub(super) fn epoch_key(owner: &str, epoch: u64) -> String {
    format!("#epoch:{owner}:{epoch}")
}

/// The TTL a key taken in an epoch gets (its commit does not write the key): the request's
/// plus the lease still to run, so that the item outlives its epoch's TTL (a commit made
/// within the lease sets that to at most the commit's instant plus `ttl_offset`), and
/// DynamoDB's TTL deletion never removes a key inside its window. Renewals move it on
/// ([`DynamoDbStore::epoch_renewals`]).
pub(super) fn key_ttl(r: &AcquireRequest, now_ms: i64) -> i64 {
    let lease_s = seconds_up(r.lease_until_ms.saturating_sub(now_ms));
    pending_ttl(r.ttl, r.lease_until_ms).max(r.ttl.saturating_add(lease_s))
}

/// Milliseconds as whole seconds, rounded up (none when negative).
fn seconds_up(ms: i64) -> i64 {
    ms.max(0).saturating_add(999) / 1000
}

/// Whether a takeover's key is past its window ([`DynamoDbStore::take_over`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    /// Not past it: taken over with its history.
    Not,
    /// Never committed, and past its own TTL: taken as new once its lease is over.
    Pending,
    /// Committed, and past its epoch's TTL: taken as new whatever its lease.
    Committed,
}

/// A number set's members as slots (nonsense is skipped).
fn slots(v: Option<&AttributeValue>) -> BTreeSet<u32> {
    match v {
        Some(AttributeValue::Ns(ns)) => ns.iter().filter_map(|n| n.parse().ok()).collect(),
        _ => BTreeSet::new(),
    }
}

fn number_set(slots: impl IntoIterator<Item = u32>) -> AttributeValue {
    AttributeValue::Ns(slots.into_iter().map(|s| s.to_string()).collect())
}

/// A key record committed in its epoch, whose TTL is `ttl`, as a committed lock (what a
/// duplicate is told).
fn committed(key: &KeyRecord, ttl: i64) -> LockRecord {
    LockRecord {
        status: LockStatus::Committed,
        ttl,
        ..key.lock.clone()
    }
}

impl DynamoDbStore {
    /// What a change of `owner`'s to `key` requires ([`Owned`]).
    pub(super) fn owned(&self, owner: &str, key: &str) -> Owned {
        match self.epochs.slot_of(owner, key) {
            None => Owned {
                condition: "#owner = :me AND #status = :pending",
                names: Vec::new(),
                values: vec![(":pending", AttributeValue::S(PENDING.into()))],
            },
            Some(at) => Owned {
                condition: "#owner = :me AND #status = :epoch AND #epoch = :e AND #slot = :s",
                names: vec![("#epoch", EPOCH_ATTRIBUTE), ("#slot", SLOT_ATTRIBUTE)],
                values: vec![
                    (":epoch", AttributeValue::S(EPOCH.into())),
                    (":e", number(at.epoch as i64)),
                    (":s", number(i64::from(at.slot))),
                ],
            },
        }
    }

    /// Reads a key record with its epoch (see `decode` for the rest).
    pub(super) fn decode_key(&self, item: &HashMap<String, AttributeValue>) -> KeyRecord {
        let mut lock = self.decode(item);
        let a = &self.table.attributes;
        let text = item.get(&a.status).and_then(|v| v.as_s().ok());
        let n = |name: &str| item.get(name).and_then(|v| v.as_n().ok());
        let epoch = match (
            text.map(String::as_str),
            n(EPOCH_ATTRIBUTE),
            n(SLOT_ATTRIBUTE),
        ) {
            (Some(EPOCH), Some(e), Some(s)) => match (e.parse::<u64>(), s.parse::<u32>()) {
                (Ok(epoch), Ok(slot)) => Some(EpochSlot { epoch, slot }),
                _ => None,
            },
            _ => None,
        };
        if epoch.is_some() {
            // `decode` reads it as blocking for ever; here its lease is what it says.
            lock.status = LockStatus::Pending {
                lease_until_ms: n(&a.lease_until).map_or(i64::MAX, |l| parse_number(l)),
            };
        }
        KeyRecord { lock, epoch }
    }

    /// Reads an epoch record.
    fn decode_epoch(&self, item: &HashMap<String, AttributeValue>) -> EpochRecord {
        let n = |name: &str| item.get(name).and_then(|v| v.as_n().ok());
        EpochRecord {
            committed: slots(item.get(COMMITTED_ATTRIBUTE)),
            aborted: slots(item.get(ABORTED_ATTRIBUTE)),
            v: n(V_ATTRIBUTE).map_or(0, |v| parse_number(v).max(0) as u64),
            ttl: n(&self.table.attributes.ttl).map_or(i64::MAX, |t| parse_number(t)),
        }
    }

    /// Settles the keys of one piece whose records are pending in another epoch (`read`,
    /// by index into `chunk`): reads their epochs, then answers each as a duplicate, held,
    /// or taken over into `epoch` at its index.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn resolve_epochs(
        &self,
        client: &Client,
        owner: &str,
        now_ms: i64,
        chunk: &[AcquireRequest],
        read: Vec<(usize, KeyRecord)>,
        epoch: u64,
        gate: &CallGate,
    ) -> Vec<(usize, Result<Acquired, StoreError>)> {
        let mut names: Vec<String> = read
            .iter()
            .filter_map(|(_, k)| k.epoch.map(|at| epoch_key(&k.lock.owner, at.epoch)))
            .collect();
        names.sort_unstable();
        names.dedup();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        // No answer: as if nothing were committed; the abort's condition decides.
        let epochs = gate
            .run(self.read_items(client, &refs, false))
            .await
            .unwrap_or_default();
        let calls = read.into_iter().map(|(i, key)| {
            let record = key.epoch.and_then(|at| {
                epochs
                    .get(&epoch_key(&key.lock.owner, at.epoch))
                    .map(|item| self.decode_epoch(item))
            });
            let at = EpochSlot {
                epoch,
                slot: i as u32,
            };
            async move {
                // Its abort and takeover, one after the other: one call in flight.
                let got = gate
                    .run(self.resolve_one(client, owner, now_ms, &chunk[i], key, record, at))
                    .await;
                (i, got)
            }
        });
        // As many in flight as the piece's statement calls, within the acquisition's.
        stream::iter(calls)
            .buffer_unordered(super::statements::CALLS_PER_PIECE)
            .collect()
            .await
    }

    /// One key pending in another epoch whose epoch record reads `record`.
    #[allow(clippy::too_many_arguments)]
    async fn resolve_one(
        &self,
        client: &Client,
        owner: &str,
        now_ms: i64,
        r: &AcquireRequest,
        key: KeyRecord,
        record: Option<EpochRecord>,
        at: EpochSlot,
    ) -> Result<Acquired, StoreError> {
        let Some(theirs) = key.epoch else {
            return Ok(Acquired::Held(Some(key.lock)));
        };
        if let (KeyState::Committed, Some(record)) = (key_state(&key, record.as_ref()), &record) {
            if record.ttl.saturating_mul(1000) <= now_ms {
                // Its window passed: taken as new.
                return self
                    .take_over(client, owner, now_ms, r, &key, theirs, at, Over::Committed)
                    .await;
            }
            let rec = committed(&key, record.ttl);
            self.log_held(r, Some(&rec));
            return Ok(Acquired::Held(Some(rec)));
        }
        // The owner's own record of an earlier epoch (an acquisition whose answer was
        // lost, or a key taken again) is taken back whatever its lease, as today's rules
        // take an owner's own pending record; its slot is aborted all the same, so that
        // whatever the owner still believes of that epoch, it is not committed there.
        let mine = key.lock.owner == owner;
        if !mine && key.lock.blocks(now_ms, r.skew_ms) {
            self.log_held(r, Some(&key.lock));
            return Ok(Acquired::Held(Some(key.lock)));
        }
        if !self
            .abort_slot(client, &key.lock.owner, theirs, key.lock.ttl)
            .await
            .map_err(|e| StoreError(format!("acquiring key {:?}: {}", r.key, e.0)))?
        {
            // Committed since the read: a duplicate (asked again, it reads the TTL too).
            let rec = committed(&key, key.lock.ttl);
            self.log_held(r, Some(&rec));
            return Ok(Acquired::Held(Some(rec)));
        }
        // Never committed, and past its own TTL: its window passed, taken as new.
        let over = match key.lock.ttl.saturating_mul(1000) <= now_ms {
            true => Over::Pending,
            false => Over::Not,
        };
        self.take_over(client, owner, now_ms, r, &key, theirs, at, over)
            .await
    }

    /// Aborts `slot` of `holder`'s epoch: `false` if it is committed.
    async fn abort_slot(
        &self,
        client: &Client,
        holder: &str,
        at: EpochSlot,
        ttl: i64,
    ) -> Result<bool, StoreError> {
        let a = &self.table.attributes;
        let sent = client
            .update_item()
            .table_name(&self.table.name)
            .set_key(Some(self.key(&epoch_key(holder, at.epoch))))
            .update_expression("ADD #aborted :slot, #v :one SET #ttl = if_not_exists(#ttl, :ttl)")
            .condition_expression("NOT contains(#committed, :slot_n)")
            .expression_attribute_names("#aborted", ABORTED_ATTRIBUTE)
            .expression_attribute_names("#committed", COMMITTED_ATTRIBUTE)
            .expression_attribute_names("#v", V_ATTRIBUTE)
            .expression_attribute_names("#ttl", &a.ttl)
            .expression_attribute_values(":slot", number_set([at.slot]))
            .expression_attribute_values(":slot_n", number(i64::from(at.slot)))
            .expression_attribute_values(":one", number(1))
            .expression_attribute_values(":ttl", number(ttl))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match sent {
            Ok(out) => {
                self.count_units("UpdateItem", true, out.consumed_capacity());
                tracing::debug!(table = %self.table.name, holder, epoch = at.epoch, slot = at.slot,
                    "epoch slot aborted for a takeover");
                Ok(true)
            }
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(_)) => Ok(false),
                _ => Err(self.sdk_fail(
                    &format!(
                        "aborting slot {} of epoch {:?}",
                        at.slot,
                        epoch_key(holder, at.epoch)
                    ),
                    &err,
                )),
            },
        }
    }

    /// The key write of a takeover, after the abort: on the condition that the record is
    /// still `read`'s owner's, in its epoch and slot, with its lease over for this taker.
    /// `over`: the key's window passed, so it is taken as new, without its history; when it
    /// was committed, whatever its lease (as a committed record past its TTL is).
    #[allow(clippy::too_many_arguments)]
    async fn take_over(
        &self,
        client: &Client,
        owner: &str,
        now_ms: i64,
        r: &AcquireRequest,
        read: &KeyRecord,
        theirs: EpochSlot,
        at: EpochSlot,
        over: Over,
    ) -> Result<Acquired, StoreError> {
        let expired = over == Over::Committed;
        let a = &self.table.attributes;
        let ttl = key_ttl(r, now_ms);
        // A chain older than the window is taken as new, without its history.
        let fresh = over != Over::Not || read.lock.chain_over(owner, r.fresh_before_ms);
        let update = match fresh {
            true => {
                "SET #owner = :me, #status = :epoch, #lease = :lease, #ttl = :ttl, \
                     #epoch = :e, #slot = :s, #since = :now_ms REMOVE #note, #progress"
            }
            false => {
                "SET #owner = :me, #status = :epoch, #lease = :lease, #ttl = :ttl, \
                      #epoch = :e, #slot = :s, #since = if_not_exists(#since, :now_ms) REMOVE #note"
            }
        };
        let condition = match expired {
            true => {
                "#owner = :them AND #status = :epoch AND #epoch = :their_e \
                     AND #slot = :their_s"
            }
            false => {
                "#owner = :them AND #status = :epoch AND #epoch = :their_e \
                      AND #slot = :their_s AND (#lease < :takeover_ms OR #owner = :me)"
            }
        };
        let mut u = client
            .update_item()
            .table_name(&self.table.name)
            .set_key(Some(self.key(&r.key)))
            .update_expression(update)
            .condition_expression(condition)
            .expression_attribute_names("#owner", &a.owner)
            .expression_attribute_names("#status", &a.status)
            .expression_attribute_names("#lease", &a.lease_until)
            .expression_attribute_names("#ttl", &a.ttl)
            .expression_attribute_names("#since", &a.since)
            .expression_attribute_names("#note", &a.note)
            .expression_attribute_names("#epoch", EPOCH_ATTRIBUTE)
            .expression_attribute_names("#slot", SLOT_ATTRIBUTE)
            .expression_attribute_values(":me", AttributeValue::S(owner.to_string()))
            .expression_attribute_values(":them", AttributeValue::S(read.lock.owner.clone()))
            .expression_attribute_values(":epoch", AttributeValue::S(EPOCH.into()))
            .expression_attribute_values(":lease", number(r.lease_until_ms))
            .expression_attribute_values(":ttl", number(ttl))
            .expression_attribute_values(":e", number(at.epoch as i64))
            .expression_attribute_values(":s", number(i64::from(at.slot)))
            .expression_attribute_values(":their_e", number(theirs.epoch as i64))
            .expression_attribute_values(":their_s", number(i64::from(theirs.slot)))
            .expression_attribute_values(":now_ms", number(now_ms))
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        if fresh {
            u = u.expression_attribute_names("#progress", &a.progress);
        }
        if !expired {
            u = u.expression_attribute_values(
                ":takeover_ms",
                number(now_ms.saturating_sub(r.skew_ms.max(0))),
            );
        }
        let attempts = AttemptCounter::default();
        match u.customize().interceptor(attempts.clone()).send().await {
            Ok(out) => {
                self.count_units("UpdateItem", true, out.consumed_capacity());
                self.epochs.taken(owner, &r.key, at, ttl);
                if fresh {
                    return Ok(Acquired::FRESH);
                }
                let old = out.attributes().filter(|i| !i.is_empty());
                Ok(self.taken(owner, now_ms, r, old, false))
            }
            Err(err) => match err.as_service_error() {
                // The owner renewed or committed the key on its record, or another taker
                // came first: held as it is now (asked again once its lease is over).
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    let now = failed.item().map(|i| self.decode_key(i));
                    // The SDK sent the write again and found what its first attempt wrote:
                    // taken, with the history the write kept (`since`, `progress`).
                    let ours = attempts.get() > 1
                        && now.as_ref().is_some_and(|k| {
                            k.epoch == Some(at)
                                && k.lock.owner == owner
                                && k.lock.lease_until_ms() == Some(r.lease_until_ms)
                        });
                    if let (true, Some(k)) = (ours, &now) {
                        self.epochs.taken(owner, &r.key, at, ttl);
                        if fresh {
                            return Ok(Acquired::FRESH);
                        }
                        return Ok(Acquired::Taken {
                            prior: Some(Prior {
                                owner: read.lock.owner.clone(),
                                since_ms: k.lock.since_ms.unwrap_or(0),
                                progress: k.lock.progress.clone(),
                            }),
                        });
                    }
                    let now = now.map(|k| k.lock);
                    self.log_held(r, now.as_ref());
                    Ok(Acquired::Held(now))
                }
                _ => Err(self.sdk_fail(&format!("taking over key {:?}", r.key), &err)),
            },
        }
    }
}

/// The status a key's statement writes: pending in an epoch or not.
pub(super) fn status(at: Option<EpochSlot>) -> &'static str {
    match at {
        Some(_) => EPOCH,
        None => PENDING,
    }
}
