//! # Epochs: committing a batch of keys with one write
//!
//! Today a new message costs two writes per key: one to take it, one to commit it. Under the
//! epoch protocol the keys a process takes together share an **epoch** (a counter per
//! owner), each key in its own **slot** (its index in the epoch), and the batch is committed
//! with one write to the epoch's record instead of one per key. A key's record then says
//! only that it is pending in `(epoch, slot)`; whether it is committed is in its epoch's
//! record. These are the rules of both records, without I/O, as the rest of this crate is
//! for today's records (which keep their rules: a record without an epoch is one).
//!
//! # The records
//!
//! - A key's [`KeyRecord`]: today's [`LockRecord`] plus, while it is pending in an epoch,
//!   its [`EpochSlot`]. A committed record (committed on its own, see below) has none.
//! - An epoch's [`EpochRecord`], one per `(owner, epoch)`: the `committed` slots, the
//!   `aborted` slots (taken over), `v` (how many aborts it saw) and a `ttl` at least the
//!   largest of its keys'. An absent epoch record is one with nothing committed or aborted
//!   and `v = 0`.
//!
//! # The rules
//!
//! - **A key's state** ([`key_state`]) is its record's, and for an epoch-pending record:
//!   committed iff its slot is in its epoch's `committed`.
//! - **Commit** ([`commit_epoch`]): the owner adds the delivered slots to `committed`, on
//!   the condition that `v` is the one it last saw. When `v` moved, nothing is written and
//!   the owner learns which slots were aborted: it commits those on their key
//!   records ([`change_in_epoch`], which applies only while the record is still its own in
//!   that epoch) and the others in the epoch again, with the new `v`.
//! - **Acquisition** ([`acquire_in_epoch`]) is what a store can decide from the key's record
//!   alone: it takes what today's rules take, and an epoch-pending record only when it is
//!   the taker's own in the same epoch (a retry whose answer was lost) or when both its
//!   lease (plus the skew) and its TTL are over (its window passed, committed or not).
//!   Another epoch-pending record whose lease is over is **not** taken: whether it is
//!   committed is in its epoch's record.
//! - **Takeover** of such a record: the taker reads the epoch; a committed slot means a
//!   duplicate. Otherwise it **aborts** the slot ([`abort_slot`]: adds it to `aborted` and
//!   moves `v`, unless the slot is committed, which then means a duplicate), then writes the
//!   key ([`take_over`]) on the condition that the record is still the one it read (owner,
//!   epoch and slot) with its lease over. The abort fences the slot: an owner's commit
//!   racing the takeover either landed before the abort (which then fails) or fails on `v`
//!   after it, and its own key commit and the taker's key write exclude each other. So
//!   exactly one of the commit and the takeover wins, as with today's per-key conditions.
//! - **Renew, record progress, release, abandon** stay per key ([`change_in_epoch`]), as
//!   today, conditional on the owner and the epoch. An abandonment leaves the record pending
//!   without an epoch (its owner will never commit that slot), so a taker needs no epoch.

use std::collections::BTreeSet;

use crate::{AcquireRequest, Acquired, Change, LockRecord, LockStatus, Settled, acquire, change};

/// Where an epoch-pending key's commit is recorded: its owner's epoch `epoch` (the epoch
/// record is named by the record's owner and this number), at index `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EpochSlot {
    /// The owner's epoch counter.
    pub epoch: u64,
    /// The key's index in its epoch.
    pub slot: u32,
}

/// A key's record under the epoch protocol.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyRecord {
    /// Today's record.
    pub lock: LockRecord,
    /// Pending in an epoch: which one, and the key's slot in it. `None` for committed
    /// records and for pending ones outside any epoch (older processes, abandoned keys).
    pub epoch: Option<EpochSlot>,
}

impl KeyRecord {
    /// Whether it is pending in an epoch.
    pub fn epoch_pending(&self) -> bool {
        self.epoch.is_some() && matches!(self.lock.status, LockStatus::Pending { .. })
    }

    /// Whether it is `owner`'s pending record in `epoch` (`None`: outside any epoch).
    pub fn pending_in(&self, owner: &str, epoch: Option<EpochSlot>) -> bool {
        self.lock.pending_for(owner) && self.epoch == epoch
    }
}

/// The record of one epoch (see the module's documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct EpochRecord {
    /// Slots committed.
    pub committed: BTreeSet<u32>,
    /// Slots a taker aborted (never committed here afterwards).
    pub aborted: BTreeSet<u32>,
    /// How many aborts it saw: a commit names the value it last saw.
    pub v: u64,
    /// Epoch seconds: at least the largest TTL of its keys.
    pub ttl: i64,
}

/// A commit that found `v` moved: nothing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The epoch's `v` now.
    pub v: u64,
    /// Every slot of the epoch aborted so far, not only those being committed: the owner
    /// commits none of them in the epoch afterwards, including a slot it takes again in the
    /// same epoch later (the taker that aborted it may still write the key).
    pub aborted: BTreeSet<u32>,
}

/// An abort that found its slot committed: nothing was written (the key is a duplicate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadyCommitted;

/// A key's state, from its record and its epoch's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// Delivered: committed on its record, or its slot committed in its epoch.
    Committed,
    /// Pending, and its owner may still commit it.
    Pending,
    /// Pending in an epoch whose slot was aborted: a taker is on its way, or its owner
    /// commits it on the key record.
    Aborted,
}

/// The state of `key` given its epoch's record (`None`: absent, or the key has no epoch).
pub fn key_state(key: &KeyRecord, epoch: Option<&EpochRecord>) -> KeyState {
    match (key.lock.status, key.epoch) {
        (LockStatus::Committed, _) => KeyState::Committed,
        (LockStatus::Pending { .. }, None) => KeyState::Pending,
        (LockStatus::Pending { .. }, Some(at)) => match epoch {
            Some(e) if e.committed.contains(&at.slot) => KeyState::Committed,
            Some(e) if e.aborted.contains(&at.slot) => KeyState::Aborted,
            _ => KeyState::Pending,
        },
    }
}

/// The owner's commit of `slots` in its epoch, having last seen `seen_v`: the new epoch
/// record, or (when `v` moved) what moved. The caller leaves out every slot aborted at
/// `seen_v` (the last [`Moved`] listed them all) and commits those on their key records;
/// the condition is on `v` only, as a store writes it.
pub fn commit_epoch(
    current: Option<&EpochRecord>,
    slots: &BTreeSet<u32>,
    seen_v: u64,
    ttl: i64,
) -> Result<EpochRecord, Moved> {
    let mut next = current.cloned().unwrap_or_default();
    if next.v != seen_v {
        return Err(Moved {
            v: next.v,
            aborted: next.aborted,
        });
    }
    next.committed.extend(slots);
    next.ttl = next.ttl.max(ttl);
    Ok(next)
}

/// A taker's abort of `slot`: the new epoch record, unless the slot is committed.
pub fn abort_slot(
    current: Option<&EpochRecord>,
    slot: u32,
    ttl: i64,
) -> Result<EpochRecord, AlreadyCommitted> {
    let mut next = current.cloned().unwrap_or_default();
    if next.committed.contains(&slot) {
        return Err(AlreadyCommitted);
    }
    next.aborted.insert(slot);
    next.v += 1;
    next.ttl = next.ttl.max(ttl);
    Ok(next)
}

/// Acquisition of `req` by `owner` at `now_ms` into `at` (its epoch and slot), decided from
/// the key's record alone: the new record and what was taken, or the record that holds
/// the key. An epoch-pending record of another epoch whose lease is over is held too: the
/// taker resolves it through its epoch ([`abort_slot`], [`take_over`]).
pub fn acquire_in_epoch(
    current: Option<&KeyRecord>,
    owner: &str,
    now_ms: i64,
    req: &AcquireRequest,
    at: EpochSlot,
) -> Result<(KeyRecord, Acquired), Box<KeyRecord>> {
    let over = |key: &KeyRecord| {
        !key.lock.blocks(now_ms, req.skew_ms) && key.lock.ttl.saturating_mul(1000) <= now_ms
    };
    let taken = match current {
        Some(key) if key.epoch_pending() => {
            let retry = key.lock.owner == owner && key.epoch.is_some_and(|e| e.epoch == at.epoch);
            if retry {
                acquire(Some(&key.lock), owner, now_ms, req)
            } else if over(key) {
                // Committed or not, its window passed: taken as new.
                acquire(None, owner, now_ms, req)
            } else {
                return Err(Box::new(key.clone()));
            }
        }
        other => acquire(other.map(|k| &k.lock), owner, now_ms, req),
    };
    match taken {
        Ok((lock, acquired)) => Ok((
            KeyRecord {
                lock,
                epoch: Some(at),
            },
            acquired,
        )),
        // The holder `acquire` returns is the current record.
        Err(lock) => Err(Box::new(KeyRecord {
            lock,
            epoch: current.and_then(|k| k.epoch),
        })),
    }
}

/// The taker's key write after it aborted the slot of `read` (the epoch-pending record it
/// read): applies only while the record is still `read`'s owner's in the same epoch and
/// slot, with its lease over for the taker; it then takes the key as today's takeover does
/// (keeping `since` and `progress`), into `at`. `Err`: the record as it is now (the owner
/// renewed, committed the key on its record, or someone else took it).
pub fn take_over(
    current: Option<&KeyRecord>,
    read: &KeyRecord,
    owner: &str,
    now_ms: i64,
    req: &AcquireRequest,
    at: EpochSlot,
) -> Result<(KeyRecord, Acquired), Option<Box<KeyRecord>>> {
    let Some(key) = current else {
        return Err(None);
    };
    let same = key.epoch_pending()
        && key.lock.owner == read.lock.owner
        && key.epoch == read.epoch
        && !key.lock.blocks(now_ms, req.skew_ms);
    if !same {
        return Err(Some(Box::new(key.clone())));
    }
    match acquire(Some(&key.lock), owner, now_ms, req) {
        Ok((lock, acquired)) => Ok((
            KeyRecord {
                lock,
                epoch: Some(at),
            },
            acquired,
        )),
        Err(_) => Err(Some(Box::new(key.clone()))),
    }
}

/// A per-key change by `owner` to its record in `epoch` (`None`: outside any epoch), as
/// [`change`] does, and only while the record is pending in that epoch (or, for a commit,
/// already committed by the owner: a retry). A commit or an abandonment leaves the record
/// without an epoch; a release deletes it.
pub fn change_in_epoch(
    current: Option<&KeyRecord>,
    owner: &str,
    epoch: Option<EpochSlot>,
    c: &Change,
) -> (Option<KeyRecord>, Settled) {
    let Some(key) = current else {
        return (None, Settled::NotOwner(None));
    };
    if key.lock.pending_for(owner) && key.epoch != epoch {
        return (Some(key.clone()), Settled::NotOwner(Some(key.lock.clone())));
    }
    let (next, settled) = change(Some(&key.lock), owner, c);
    let epoch = match c {
        Change::Commit { .. } | Change::Abandon { .. } => None,
        _ => key.epoch,
    };
    let next = next.map(|lock| KeyRecord {
        epoch: if settled == Settled::Ok {
            epoch
        } else {
            key.epoch
        },
        lock,
    });
    (next, settled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Progress;

    const NOW: i64 = 1_800_000_000_000;
    const SKEW: i64 = 10_000;
    const TTL: i64 = NOW / 1000 + 3600;

    fn set(slots: &[u32]) -> BTreeSet<u32> {
        slots.iter().copied().collect()
    }

    fn epoch(committed: &[u32], aborted: &[u32], v: u64) -> EpochRecord {
        EpochRecord {
            committed: set(committed),
            aborted: set(aborted),
            v,
            ttl: TTL,
        }
    }

    fn at(epoch: u64, slot: u32) -> EpochSlot {
        EpochSlot { epoch, slot }
    }

    fn req() -> AcquireRequest {
        AcquireRequest {
            key: "k".into(),
            ttl: TTL,
            lease_until_ms: NOW + 60_000,
            skew_ms: SKEW,
            fresh_before_ms: None,
        }
    }

    /// `owner`'s pending record in `e` (`None`: outside any epoch), its lease ending at
    /// `lease`, its TTL `ttl`.
    fn pending(owner: &str, e: Option<EpochSlot>, lease: i64, ttl: i64) -> KeyRecord {
        KeyRecord {
            lock: LockRecord {
                owner: owner.into(),
                status: LockStatus::Pending {
                    lease_until_ms: lease,
                },
                ttl,
                since_ms: Some(NOW - 5_000),
                progress: Progress::from_entries(["s0:0"]),
            },
            epoch: e,
        }
    }

    fn committed(owner: &str, ttl: i64) -> KeyRecord {
        KeyRecord {
            lock: LockRecord {
                owner: owner.into(),
                status: LockStatus::Committed,
                ttl,
                since_ms: None,
                progress: Progress::default(),
            },
            epoch: None,
        }
    }

    #[test]
    fn commit_table() {
        // (epoch record, slots, seen v, committed after, or (v, aborted) when v moved)
        type Case = (
            Option<EpochRecord>,
            &'static [u32],
            u64,
            Result<&'static [u32], (u64, &'static [u32])>,
        );
        let cases: Vec<Case> = vec![
            (None, &[0, 1], 0, Ok(&[0, 1])),
            // A retry whose first answer was lost: the same again.
            (Some(epoch(&[0, 1], &[], 0)), &[0, 1], 0, Ok(&[0, 1])),
            (Some(epoch(&[0], &[], 0)), &[1], 0, Ok(&[0, 1])),
            // A taker aborted slot 1: nothing is written, and the owner learns which.
            (Some(epoch(&[], &[1], 1)), &[0, 1], 0, Err((1, &[1]))),
            // ... it commits the others with the new v (slot 1 on its key record).
            (Some(epoch(&[], &[1], 1)), &[0], 1, Ok(&[0])),
            // An abort of a slot it does not commit moves v all the same, and is reported:
            // the owner must not commit that slot here later (if it takes the key again).
            (Some(epoch(&[], &[2], 1)), &[0, 1], 0, Err((1, &[2]))),
            (None, &[0], 1, Err((0, &[]))),
        ];
        for (i, (current, slots, seen, want)) in cases.into_iter().enumerate() {
            let got = commit_epoch(current.as_ref(), &set(slots), seen, TTL + 5);
            match (got, want) {
                (Ok(next), Ok(c)) => {
                    assert_eq!(next.committed, set(c), "case {i}");
                    assert_eq!(next.ttl, TTL + 5, "case {i}: the largest TTL");
                    assert_eq!(next.v, current.map_or(0, |e| e.v), "case {i}");
                }
                (Err(moved), Err((v, aborted))) => {
                    assert_eq!(
                        moved,
                        Moved {
                            v,
                            aborted: set(aborted)
                        },
                        "case {i}"
                    );
                }
                (got, want) => panic!("case {i}: {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn abort_table() {
        // (epoch record, slot, aborted: v after)
        let cases: Vec<(Option<EpochRecord>, u32, Option<u64>)> = vec![
            (None, 0, Some(1)),
            (Some(epoch(&[1], &[], 0)), 0, Some(1)),
            (Some(epoch(&[0], &[], 0)), 0, None),
            // Aborted twice (two takers, or a retry): v moves again; harmless.
            (Some(epoch(&[], &[0], 1)), 0, Some(2)),
        ];
        for (i, (current, slot, want)) in cases.into_iter().enumerate() {
            match (abort_slot(current.as_ref(), slot, TTL), want) {
                (Ok(next), Some(v)) => {
                    assert_eq!(next.v, v, "case {i}");
                    assert!(next.aborted.contains(&slot), "case {i}");
                    assert!(!next.committed.contains(&slot), "case {i}");
                }
                (Err(AlreadyCommitted), None) => {}
                (got, want) => panic!("case {i}: {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn key_state_table() {
        let mine = pending("a", Some(at(3, 1)), NOW, TTL);
        let cases: Vec<(KeyRecord, Option<EpochRecord>, KeyState)> = vec![
            (committed("a", TTL), None, KeyState::Committed),
            (pending("a", None, NOW, TTL), None, KeyState::Pending),
            (mine.clone(), None, KeyState::Pending),
            (mine.clone(), Some(epoch(&[0], &[2], 1)), KeyState::Pending),
            (mine.clone(), Some(epoch(&[1], &[], 0)), KeyState::Committed),
            (mine.clone(), Some(epoch(&[], &[1], 1)), KeyState::Aborted),
            // An abandoned key (its lease ended at 0) keeps no epoch: plain pending.
            (
                pending("a", None, 0, TTL),
                Some(epoch(&[1], &[], 0)),
                KeyState::Pending,
            ),
        ];
        for (i, (key, e, want)) in cases.into_iter().enumerate() {
            assert_eq!(key_state(&key, e.as_ref()), want, "case {i}");
        }
    }

    /// What a store decides from the key's record alone.
    #[test]
    fn acquisition_table() {
        let over = NOW - SKEW - 1;
        let live = NOW + 1_000;
        let past = NOW / 1000 - 1;
        let mine = at(7, 2);
        // (current, taker, taken: with a prior holder?)
        let cases: Vec<(Option<KeyRecord>, &str, Option<bool>)> = vec![
            (None, "a", Some(false)),
            (Some(committed("b", TTL)), "a", None),
            (Some(committed("b", past)), "a", Some(false)),
            // Outside any epoch: today's rules.
            (Some(pending("b", None, live, TTL)), "a", None),
            (Some(pending("b", None, over, TTL)), "a", Some(true)),
            (Some(pending("a", None, live, TTL)), "a", Some(true)),
            // Epoch-pending: a live lease holds, and so does an ended one (its epoch says
            // whether it is committed).
            (Some(pending("b", Some(at(1, 0)), live, TTL)), "a", None),
            (Some(pending("b", Some(at(1, 0)), over, TTL)), "a", None),
            // ... unless its window passed too: taken as new.
            (
                Some(pending("b", Some(at(1, 0)), over, past)),
                "a",
                Some(false),
            ),
            (Some(pending("b", Some(at(1, 0)), live, past)), "a", None),
            // Its own in the same epoch: a retry whose answer was lost.
            (
                Some(pending("a", Some(at(7, 2)), live, TTL)),
                "a",
                Some(true),
            ),
            // Its own in an earlier epoch (maybe committed there): as anyone's.
            (Some(pending("a", Some(at(6, 0)), live, TTL)), "a", None),
            (Some(pending("a", Some(at(6, 0)), over, TTL)), "a", None),
        ];
        for (i, (current, who, want)) in cases.into_iter().enumerate() {
            match (
                acquire_in_epoch(current.as_ref(), who, NOW, &req(), mine),
                want,
            ) {
                (Ok((rec, Acquired::Taken { prior })), Some(with_prior)) => {
                    assert_eq!(prior.is_some(), with_prior, "case {i}");
                    assert_eq!(rec.epoch, Some(mine), "case {i}");
                    assert_eq!(rec.lock.owner, who, "case {i}");
                    assert!(rec.epoch_pending(), "case {i}");
                }
                (Err(held), None) => assert_eq!(Some(*held), current, "case {i}"),
                (got, want) => panic!("case {i}: {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn takeover_table() {
        let over = NOW - SKEW - 1;
        let read = pending("b", Some(at(1, 0)), over, TTL);
        let mine = at(4, 0);
        // (current, taken?)
        let cases: Vec<(Option<KeyRecord>, bool)> = vec![
            (Some(read.clone()), true),
            // The owner renewed meanwhile: its lease is live again.
            (Some(pending("b", Some(at(1, 0)), NOW + 1_000, TTL)), false),
            // The owner committed it on its record (its epoch commit failed on v).
            (Some(committed("b", TTL)), false),
            // Someone else took it, or the owner took it again in another epoch.
            (Some(pending("c", Some(at(1, 0)), over, TTL)), false),
            (Some(pending("b", Some(at(2, 0)), over, TTL)), false),
            (Some(pending("b", None, 0, TTL)), false),
            (None, false),
        ];
        for (i, (current, taken)) in cases.into_iter().enumerate() {
            match take_over(current.as_ref(), &read, "a", NOW, &req(), mine) {
                Ok((rec, Acquired::Taken { prior: Some(prior) })) => {
                    assert!(taken, "case {i}");
                    // As today's takeover: since and progress carried over.
                    assert_eq!((prior.owner.as_str(), prior.since_ms), ("b", NOW - 5_000));
                    assert_eq!(rec.lock.progress, read.lock.progress);
                    assert_eq!((rec.lock.owner.as_str(), rec.epoch), ("a", Some(mine)));
                }
                Ok(other) => panic!("case {i}: {other:?}"),
                Err(now) => {
                    assert!(!taken, "case {i}");
                    assert_eq!(now.map(|k| *k), current, "case {i}");
                }
            }
        }
    }

    #[test]
    fn per_key_changes_need_the_owner_and_the_epoch() {
        let e = Some(at(1, 0));
        let mine = pending("a", e, NOW + 1_000, TTL);
        let commit = Change::Commit { ttl: TTL };
        // Committed on its record: no epoch any more; again (a lost answer) is still Ok.
        let (next, s) = change_in_epoch(Some(&mine), "a", e, &commit);
        assert_eq!(s, Settled::Ok);
        let next = next.unwrap();
        assert_eq!(
            (next.lock.status, next.epoch),
            (LockStatus::Committed, None)
        );
        assert_eq!(change_in_epoch(Some(&next), "a", e, &commit).1, Settled::Ok);
        // Another epoch of the same owner, or another owner: left alone.
        for (who, epoch) in [("a", Some(at(2, 0))), ("a", None), ("b", e)] {
            let (same, s) = change_in_epoch(Some(&mine), who, epoch, &commit);
            assert_eq!(same.as_ref(), Some(&mine));
            assert!(matches!(s, Settled::NotOwner(Some(_))), "{who} {epoch:?}");
        }
        // Renewing keeps the epoch; abandoning leaves it (a taker needs no epoch then);
        // releasing deletes.
        let renew = Change::Renew {
            ttl: TTL,
            lease_until_ms: NOW + 9_000,
        };
        let (renewed, _) = change_in_epoch(Some(&mine), "a", e, &renew);
        assert_eq!(renewed.unwrap().epoch, e);
        let abandon = Change::Abandon {
            progress: Progress::from_entries(["s1:0"]),
        };
        let (abandoned, _) = change_in_epoch(Some(&mine), "a", e, &abandon);
        let abandoned = abandoned.unwrap();
        assert_eq!(
            (abandoned.epoch, abandoned.lock.lease_until_ms()),
            (None, Some(0))
        );
        assert!(acquire_in_epoch(Some(&abandoned), "b", NOW, &req(), at(1, 0)).is_ok());
        assert_eq!(
            change_in_epoch(Some(&mine), "a", e, &Change::Release).0,
            None
        );
        // Outside any epoch: today's rules.
        let plain = pending("a", None, NOW + 1_000, TTL);
        assert_eq!(
            change_in_epoch(Some(&plain), "a", None, &commit).1,
            Settled::Ok
        );
    }

    /// The race the abort fences: an owner's late commit against a taker that read the
    /// epoch before it. Whichever order the four writes land in, exactly one side wins.
    #[test]
    fn a_late_commit_and_a_takeover_exclude_each_other() {
        let e = at(1, 0);
        let over = NOW - SKEW - 1;
        let key = pending("b", Some(e), over, TTL);
        // The commit lands first: the abort fails, the taker has a duplicate.
        let committed_first = commit_epoch(None, &set(&[0]), 0, TTL).unwrap();
        assert_eq!(
            abort_slot(Some(&committed_first), 0, TTL),
            Err(AlreadyCommitted)
        );
        assert_eq!(key_state(&key, Some(&committed_first)), KeyState::Committed);
        // The abort lands first: the commit fails on v and names the slot; the owner's
        // key commit and the taker's key write then exclude each other.
        let aborted = abort_slot(None, 0, TTL).unwrap();
        let moved = commit_epoch(Some(&aborted), &set(&[0]), 0, TTL).unwrap_err();
        assert_eq!(moved.aborted, set(&[0]));
        let commit = Change::Commit { ttl: TTL };
        let (owner_first, s) = change_in_epoch(Some(&key), "b", Some(e), &commit);
        assert_eq!(s, Settled::Ok);
        assert!(take_over(owner_first.as_ref(), &key, "a", NOW, &req(), at(9, 0)).is_err());
        let (taker_first, _) = take_over(Some(&key), &key, "a", NOW, &req(), at(9, 0)).unwrap();
        let (_, s) = change_in_epoch(Some(&taker_first), "b", Some(e), &commit);
        assert!(matches!(s, Settled::NotOwner(_)));
    }
}
