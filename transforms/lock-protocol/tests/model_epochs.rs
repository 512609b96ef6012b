//! Exhaustive model check of the epoch protocol (`src/epoch.rs`; see `../MODEL.md`,
//! "Commits by epoch").
//!
//! The same world as `tests/model.rs` (two processes on two hosts with skewed clocks, a
//! source that redelivers, sends of each kind, crashes, lost answers, failed and uncertain
//! sends, leases that run out), with keys committed by epoch: the keys a process takes
//! while its epoch is open share it, each in its own slot, and the epoch is committed with
//! one `commit_epoch` write, conditional on the abort counter `v` the process last saw.
//! Another process meets such a key pending with its lease over and resolves it through
//! the epoch: it reads the epoch (a committed slot is a duplicate), aborts the slot, then
//! writes the key naming the record it read. An owner whose epoch commit fails on `v`
//! commits its aborted slots on their key records and the rest in the epoch again. Every
//! change goes through the crate's rules ([`acquire_in_epoch`], [`take_over`],
//! [`abort_slot`], [`commit_epoch`], [`change_in_epoch`], [`key_state`]).

// Test code: its items need not say `pub(crate)`, and it may unwrap and panic (the
// workspace's lints).
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use sluice_lock_protocol::epoch::{
    EpochRecord, EpochSlot, KeyRecord, KeyState, abort_slot, acquire_in_epoch, change_in_epoch,
    commit_epoch, key_state, take_over,
};
use sluice_lock_protocol::{AcquireRequest, Acquired, Change, LockStatus, Progress, Settled};
use stateright::{Checker, Model, Property};

use common::*;

/// Broken takers and committers the check must catch. All `false` is the protocol.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Variant {
    /// (a) The epoch commit is not conditional on `v`: it lands after a taker's abort, so
    /// the owner's commit and the takeover both win.
    commit_without_v: bool,
    /// (b) The taker that read "not committed" writes the key without aborting the slot:
    /// nothing stops the owner's commit landing between its read and its write.
    takeover_without_abort: bool,
    /// (c) A taker whose epoch read gave no answer (failed, or an eventually consistent
    /// read that saw no record) treats the slot as not committed and skips the abort.
    unreadable_epoch_not_committed: bool,
}

/// What a process owes the store for a key once its message resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Owed {
    /// Every unit delivered: its slot goes into the epoch's commit.
    Commit,
    /// Every unit delivered, and the epoch commit found its slot aborted: commit it on the
    /// key record (conditional on the owner and the epoch).
    CommitKey,
    /// Certainly not delivered, no prior holder: release (delete).
    Release,
    /// Delivered in part (the mask), uncertain, or taken with a prior holder: abandon.
    Abandon(u8),
}

/// Where a takeover of another epoch's pending key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Step {
    /// Read the epoch record.
    ReadEpoch,
    /// Abort the slot.
    Abort,
    /// Write the key, naming the record read.
    Write,
}

/// What a process knows of one record.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Slot {
    Idle,
    /// Received; an acquisition is due.
    Acquiring,
    /// Resolving the epoch-pending record `read` (its lease over).
    Taking {
        read: KeyRecord,
        step: Step,
    },
    /// Taken in `at`; its units are on their way.
    Working {
        work: Work,
        at: EpochSlot,
    },
    /// Resolved; what it owes for the key taken in `at`.
    Owes {
        owed: Owed,
        at: EpochSlot,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Proc {
    incarnation: u8,
    slots: Vec<Slot>,
    /// The open epoch: keys taken now join it.
    epoch: u8,
    /// The epoch's `v` as the process last saw it.
    seen_v: u8,
    /// The open epoch's slots aborted at `seen_v` (a mask of records): committed on their
    /// key records, never in the epoch.
    aborted: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    /// One key per record (record `i` is key `r{i+1}`, slot `i` in any epoch).
    store: Vec<Option<KeyRecord>>,
    /// Epoch records by (owner, epoch), those that something may still read or write.
    epochs: BTreeMap<(String, u64), EpochRecord>,
    sink: Vec<u8>,
    explained: Vec<u8>,
    acked: Vec<bool>,
    procs: Vec<Proc>,
    faults: u8,
}

/// How a per-key store change went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Answer {
    Ok,
    /// Applied, answer lost: retried.
    Lost,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Deliver {
        p: usize,
        r: usize,
    },
    Acquire {
        p: usize,
        r: usize,
        lost: bool,
    },
    StoreOutage {
        p: usize,
        r: usize,
    },
    /// The taker reads the epoch of the record it met; `unreadable`: no answer (a fault).
    ReadEpoch {
        p: usize,
        r: usize,
        unreadable: bool,
    },
    AbortSlot {
        p: usize,
        r: usize,
    },
    TakeOver {
        p: usize,
        r: usize,
    },
    ReadBack {
        p: usize,
        r: usize,
        fails: bool,
    },
    Renew {
        p: usize,
        r: usize,
    },
    Check {
        p: usize,
        r: usize,
    },
    Send {
        p: usize,
        r: usize,
        outcome: SendOutcome,
        ack_lost: bool,
    },
    /// A per-key change owed for `r`.
    Settle {
        p: usize,
        r: usize,
        answer: Answer,
    },
    /// `p` commits its open epoch's delivered slots with one write; `lost`: applied, answer
    /// lost.
    CommitEpoch {
        p: usize,
        lost: bool,
    },
    Crash {
        p: usize,
    },
    LeaseLapses {
        r: usize,
    },
    TtlPasses {
        r: usize,
    },
}

impl Action {
    fn rank(&self) -> u8 {
        match self {
            Action::Settle { .. } | Action::CommitEpoch { .. } => 0,
            Action::Send { .. } => 1,
            Action::ReadBack { .. } => 2,
            Action::Check { .. } => 3,
            Action::Renew { .. } => 4,
            Action::TakeOver { .. } | Action::AbortSlot { .. } | Action::ReadEpoch { .. } => 5,
            Action::Acquire { .. } => 6,
            Action::LeaseLapses { .. } => 7,
            Action::Deliver { .. } => 8,
            Action::StoreOutage { .. } | Action::Crash { .. } | Action::TtlPasses { .. } => 9,
        }
    }
}

#[derive(Clone)]
struct Epochs {
    units: Vec<Unit>,
    records: usize,
    processes: usize,
    faults: u8,
    clocks: Vec<i64>,
    variant: Variant,
    /// Epoch reads may give no answer (a fault). Off only to make variant (b) show the
    /// race itself, not the unreadable read it shares with (c).
    unreadable_reads: bool,
    completes: Arc<Mutex<HashSet<u64>>>,
}

fn in_flight(slot: &Slot) -> bool {
    matches!(
        slot,
        Slot::Acquiring | Slot::Taking { .. } | Slot::Working { .. }
    )
}

impl Epochs {
    fn new(sends: &[(Sink, u32)], records: usize, faults: u8, variant: Variant) -> Epochs {
        Epochs {
            units: units(sends),
            records,
            processes: 2,
            faults,
            clocks: vec![1, -1],
            variant,
            unreadable_reads: true,
            completes: Arc::default(),
        }
    }

    fn n(&self) -> usize {
        self.units.len()
    }

    fn all(&self) -> u8 {
        u8::try_from((1u16 << self.n()) - 1).unwrap()
    }

    fn me(&self, s: &State, p: usize) -> String {
        owner(p, s.procs[p].incarnation)
    }

    fn clock(&self, p: usize) -> i64 {
        NOW + self.clocks[p] * CLOCK_UNIT
    }

    fn request(&self, p: usize, r: usize) -> AcquireRequest {
        AcquireRequest {
            key: format!("r{}", r + 1),
            ttl: TTL,
            lease_until_ms: self.clock(p) + LEASE,
            skew_ms: SKEW,
            fresh_before_ms: None,
        }
    }

    /// Where `p` takes `r` now: its open epoch, slot `r`.
    fn at(&self, s: &State, p: usize, r: usize) -> EpochSlot {
        EpochSlot {
            epoch: u64::from(s.procs[p].epoch),
            slot: u32::try_from(r).unwrap(),
        }
    }

    fn epoch_of<'a>(&self, s: &'a State, key: &KeyRecord) -> Option<&'a EpochRecord> {
        let at = key.epoch?;
        s.epochs.get(&(key.lock.owner.clone(), at.epoch))
    }

    fn state_of(&self, s: &State, r: usize) -> Option<KeyState> {
        let key = s.store[r].as_ref()?;
        Some(key_state(key, self.epoch_of(s, key)))
    }

    fn committed(&self, s: &State, r: usize) -> bool {
        self.state_of(s, r) == Some(KeyState::Committed)
    }

    fn live_holder(&self, s: &State, name: &str) -> Option<usize> {
        (0..self.processes).find(|&p| self.me(s, p) == name)
    }

    fn takeable_from(&self, key: &KeyRecord, q: usize) -> bool {
        !key.lock.blocks(self.clock(q), SKEW)
    }

    fn progress(&self, mask: u8) -> Progress {
        let mut p = Progress::new();
        for (u, unit) in self.units.iter().enumerate() {
            if mask & bit(u) != 0 {
                p.insert(&unit.send_id(), unit.copy);
            }
        }
        p
    }

    fn mask(&self, progress: &Progress) -> u8 {
        (0..self.n())
            .filter(|&u| progress.contains(&self.units[u].send_id(), self.units[u].copy))
            .fold(0, |m, u| m | bit(u))
    }

    fn copies(&self, s: &State, r: usize, u: usize) -> u8 {
        s.sink[r * self.n() + u]
    }

    fn delivered_all(&self, s: &State, r: usize) -> bool {
        (0..self.n()).all(|u| self.copies(s, r, u) >= 1)
    }

    fn remembered(&self, slot: &Slot) -> u8 {
        match slot {
            Slot::Working { work, .. } => work.done,
            Slot::Owes {
                owed: Owed::Commit | Owed::CommitKey,
                ..
            } => self.all(),
            Slot::Owes {
                owed: Owed::Abandon(m),
                ..
            } => *m,
            _ => 0,
        }
    }

    /// As in `tests/model.rs`: plain units `p` delivered while `r`'s key is its pending (and
    /// not committed) key, unlisted in the progress, are sent again if `p` stops now or its
    /// lease lapses to a takeover; each explains one extra copy.
    fn explain_unrecorded(&self, s: &mut State, p: usize, r: usize) {
        let me = self.me(s, p);
        let Some(key) = s.store[r].as_ref().filter(|k| k.lock.pending_for(&me)) else {
            return;
        };
        if self.committed(s, r) {
            return;
        }
        let unrecorded = self.remembered(&s.procs[p].slots[r]) & !self.mask(&key.lock.progress);
        for u in 0..self.n() {
            if unrecorded & bit(u) != 0 && self.units[u].kind == Sink::Plain {
                let e = &mut s.explained[r * self.n() + u];
                *e = e.saturating_add(1);
            }
        }
    }

    /// As in `tests/model.rs`: the next instant at which some clock's view of the lease
    /// changes.
    fn next_lease(&self, key: &KeyRecord) -> Option<i64> {
        let lease = key.lock.lease_until_ms()?;
        let own = self.clock(host_of(&key.lock.owner));
        let delta = lease - own;
        let mut candidates = vec![MARGIN];
        for q in 0..self.processes {
            candidates.push(self.clock(q) - own - SKEW - 1);
        }
        candidates
            .into_iter()
            .filter(|&c| c < delta)
            .max()
            .map(|c| own + c)
    }

    /// Whether `p` may commit its open epoch now: some key owes its slot to it, and none
    /// of the epoch's keys is still on its way.
    fn may_commit(&self, s: &State, p: usize) -> bool {
        let open = u64::from(s.procs[p].epoch);
        let slots = &s.procs[p].slots;
        slots
            .iter()
            .any(|x| matches!(x, Slot::Owes { owed: Owed::Commit, at } if at.epoch == open))
            && !slots
                .iter()
                .any(|x| matches!(x, Slot::Working { at, .. } if at.epoch == open))
    }

    fn cost(&self, s: &State, a: &Action) -> Option<u8> {
        Some(match *a {
            Action::Deliver { .. }
            | Action::Check { .. }
            | Action::Renew { .. }
            | Action::AbortSlot { .. }
            | Action::TakeOver { .. }
            | Action::Acquire { lost: false, .. }
            | Action::ReadEpoch {
                unreadable: false, ..
            }
            | Action::ReadBack { fails: false, .. }
            | Action::CommitEpoch { lost: false, .. }
            | Action::Settle {
                answer: Answer::Ok, ..
            } => 0,
            Action::Acquire { lost: true, .. }
            | Action::StoreOutage { .. }
            | Action::ReadEpoch {
                unreadable: true, ..
            }
            | Action::ReadBack { fails: true, .. }
            | Action::Settle { .. }
            | Action::CommitEpoch { lost: true, .. }
            | Action::Crash { .. }
            | Action::TtlPasses { .. } => 1,
            Action::Send {
                outcome, ack_lost, ..
            } => {
                let o = match outcome {
                    SendOutcome::Ok => 0,
                    SendOutcome::FailBefore => 1,
                    SendOutcome::FailAfter { read_fails } | SendOutcome::Timeout { read_fails } => {
                        1 + u8::from(read_fails)
                    }
                };
                o + u8::from(ack_lost)
            }
            Action::LeaseLapses { r } => {
                let key = s.store[r].as_ref()?;
                let next = self.next_lease(key)?;
                match self.live_holder(s, &key.lock.owner) {
                    None => 0,
                    Some(p) => match &s.procs[p].slots[r] {
                        Slot::Idle | Slot::Acquiring | Slot::Taking { .. } => 0,
                        // The design's assumption, as in `tests/model.rs`.
                        Slot::Working { work, .. } if work.checked && next < self.clock(p) => {
                            return None;
                        }
                        Slot::Working { .. } | Slot::Owes { .. } => {
                            let live = key.lock.lease_until_ms()? - self.clock(p) > MARGIN;
                            u8::from(live)
                        }
                    },
                }
            }
        })
    }

    fn send_outcomes(&self, kind: Sink) -> Vec<(SendOutcome, bool)> {
        let mut v = vec![
            (SendOutcome::Ok, false),
            (SendOutcome::Ok, true),
            (SendOutcome::FailBefore, false),
            (SendOutcome::FailAfter { read_fails: false }, false),
            (SendOutcome::Timeout { read_fails: false }, false),
        ];
        if kind == Sink::Readable {
            v.push((SendOutcome::FailAfter { read_fails: false }, true));
            v.push((SendOutcome::FailAfter { read_fails: true }, false));
            v.push((SendOutcome::Timeout { read_fails: true }, false));
        }
        v
    }

    fn done(&self, s: &State) -> bool {
        s.procs
            .iter()
            .all(|p| p.slots.iter().all(|x| *x == Slot::Idle))
            && (0..self.records).all(|r| {
                s.acked[r]
                    && self.delivered_all(s, r)
                    && (self.committed(s, r) || self.leftover(s, r))
            })
    }

    /// As in `tests/model.rs`: a key pending (not committed, in its epoch or on its record)
    /// on a delivered and acknowledged record that no process holds, its lease over for
    /// every host.
    fn leftover(&self, s: &State, r: usize) -> bool {
        s.store[r].as_ref().is_some_and(|key| {
            key.lock.lease_until_ms().is_some()
                && !self.committed(s, r)
                && (0..self.processes).all(|q| self.takeable_from(key, q))
        }) && s.acked[r]
            && self.delivered_all(s, r)
            && (0..self.processes).all(|p| s.procs[p].slots[r] == Slot::Idle)
    }

    fn lost_for_good(&self, s: &State, r: usize) -> bool {
        s.acked[r] && !self.delivered_all(s, r) && s.procs.iter().all(|p| !in_flight(&p.slots[r]))
    }

    /// As in `tests/model.rs`: from `s`, one fixed fault-free schedule reaches a done state.
    fn completes(&self, s: &State) -> bool {
        let mut path = Vec::new();
        let mut cur = s.clone();
        let ok = 'walk: {
            for _ in 0..COMPLETION_STEPS {
                let fp = fingerprint(&cur);
                if self.completes.lock().unwrap().contains(&fp) {
                    break 'walk true;
                }
                path.push(fp);
                if self.done(&cur) {
                    break 'walk true;
                }
                let mut actions = Vec::new();
                self.actions(&cur, &mut actions);
                actions.retain(|a| self.cost(&cur, a) == Some(0));
                actions.sort_by_key(Action::rank);
                let next = actions
                    .into_iter()
                    .find_map(|a| self.next_state(&cur, a).filter(|n| *n != cur));
                match next {
                    Some(n) => cur = n,
                    None => break 'walk false,
                }
            }
            false
        };
        if ok {
            self.completes.lock().unwrap().extend(path);
        }
        ok
    }

    fn crash(&self, s: &mut State, p: usize) {
        for r in 0..self.records {
            self.explain_unrecorded(s, p, r);
        }
        let proc = &mut s.procs[p];
        proc.incarnation += 1;
        proc.slots.iter_mut().for_each(|x| *x = Slot::Idle);
        proc.epoch = 0;
        proc.seen_v = 0;
        proc.aborted = 0;
    }

    /// `p`'s open epoch is done with: the next keys it takes join a new one.
    fn close_epoch(&self, s: &mut State, p: usize) {
        let proc = &mut s.procs[p];
        proc.epoch += 1;
        proc.seen_v = 0;
        proc.aborted = 0;
    }

    /// A key taken in `at` (with a prior holder or not): its attempt starts.
    fn start(&self, s: &mut State, p: usize, r: usize, at: EpochSlot, prior: Option<&Progress>) {
        let done = prior.map_or(0, |p| self.mask(p));
        let read = prior.is_some()
            && (0..self.n()).any(|u| self.units[u].kind == Sink::Readable && done & bit(u) == 0);
        let w = Work {
            prior: prior.is_some(),
            lease_ok: true,
            read,
            checked: false,
            next: 0,
            done,
            uncertain: false,
        };
        self.advance(s, p, r, w, at, false);
    }

    /// As in `tests/model.rs` (the protocol's rules, no variant).
    fn advance(
        &self,
        s: &mut State,
        p: usize,
        r: usize,
        mut w: Work,
        at: EpochSlot,
        ack_lost: bool,
    ) -> bool {
        while usize::from(w.next) < self.n() && w.done & bit(usize::from(w.next)) != 0 {
            w.next += 1;
        }
        if w.read || usize::from(w.next) < self.n() {
            s.procs[p].slots[r] = Slot::Working { work: w, at };
            return !ack_lost;
        }
        let all = w.done == self.all();
        let known_aborted =
            at.epoch == u64::from(s.procs[p].epoch) && s.procs[p].aborted & bit(r) != 0;
        let owed = if all && known_aborted {
            Owed::CommitKey
        } else if all {
            Owed::Commit
        } else if w.uncertain || w.prior || w.done != 0 {
            Owed::Abandon(w.done)
        } else {
            Owed::Release
        };
        if all && !ack_lost {
            s.acked[r] = true;
        }
        s.procs[p].slots[r] = Slot::Owes { owed, at };
        all || !ack_lost
    }

    /// As in `tests/model.rs`; the transactional send's progress goes through
    /// `change_in_epoch`.
    fn send(
        &self,
        s: &mut State,
        p: usize,
        r: usize,
        u: usize,
        at: EpochSlot,
        outcome: SendOutcome,
    ) -> Option<(bool, bool, bool)> {
        let kind = self.units[u].kind;
        let readable = kind == Sink::Readable;
        Some(match (kind, outcome) {
            (Sink::Readable | Sink::Plain, SendOutcome::Ok) => (true, true, false),
            (Sink::Readable | Sink::Plain, SendOutcome::FailBefore) => (false, false, false),
            (Sink::Readable | Sink::Plain, SendOutcome::FailAfter { read_fails }) => {
                let found = readable && !read_fails;
                (true, found, !found)
            }
            (Sink::Readable | Sink::Plain, SendOutcome::Timeout { read_fails }) => {
                (false, false, !readable || read_fails)
            }
            (Sink::Transactional, _) => {
                let me = self.me(s, p);
                let record = Change::Record {
                    progress: self.progress(bit(u)),
                };
                let (next, settled) = change_in_epoch(s.store[r].as_ref(), &me, Some(at), &record);
                if settled != Settled::Ok {
                    return (outcome == SendOutcome::Ok).then_some((false, false, false));
                }
                if matches!(outcome, SendOutcome::Ok | SendOutcome::FailAfter { .. }) {
                    s.store[r] = next;
                }
                match outcome {
                    SendOutcome::Ok => (true, true, false),
                    SendOutcome::FailBefore => (false, false, false),
                    SendOutcome::FailAfter { .. } => (true, false, true),
                    SendOutcome::Timeout { .. } => (false, false, true),
                }
            }
        })
    }

    /// Drops the epoch records nothing will read or write again: named by no key record,
    /// no taker's read, and not a live owner's open epoch. (A closed epoch is written again
    /// only by an abort, which follows a read of a key naming it.)
    fn forget_epochs(&self, s: &mut State) {
        let mut keep: BTreeSet<(String, u64)> = BTreeSet::new();
        for key in s.store.iter().flatten() {
            if let Some(at) = key.epoch {
                keep.insert((key.lock.owner.clone(), at.epoch));
            }
        }
        for p in 0..self.processes {
            keep.insert((self.me(s, p), u64::from(s.procs[p].epoch)));
            for x in &s.procs[p].slots {
                if let Slot::Taking { read, .. } = x
                    && let Some(at) = read.epoch
                {
                    keep.insert((read.lock.owner.clone(), at.epoch));
                }
            }
        }
        s.epochs.retain(|k, _| keep.contains(k));
    }

    fn checked_properties(&self) -> Vec<Property<Self>> {
        let mut v = vec![
            Property::<Self>::always("no loss", |m, s| {
                (0..m.records).all(|r| !s.acked[r] || m.delivered_all(s, r))
            }),
            Property::<Self>::always("no record lost for good", |m, s| {
                (0..m.records).all(|r| !m.lost_for_good(s, r))
            }),
            Property::<Self>::always("no unexplained duplicate", |m, s| {
                (0..m.records * m.n()).all(|i| match m.units[i % m.n()].kind {
                    Sink::Readable | Sink::Transactional => s.sink[i] <= 1,
                    Sink::Plain => s.sink[i] <= 1 + s.explained[i],
                })
            }),
            Property::<Self>::always("commit implies delivered", |m, s| {
                (0..m.records).all(|r| !m.committed(s, r) || m.delivered_all(s, r))
            }),
            Property::<Self>::always("recorded progress was delivered", |m, s| {
                (0..m.records).all(|r| {
                    s.store[r].as_ref().is_none_or(|key| {
                        let listed = m.mask(&key.lock.progress);
                        (0..m.n()).all(|u| listed & bit(u) == 0 || m.copies(s, r, u) >= 1)
                    })
                })
            }),
            Property::<Self>::always("a delivered record keeps its lock", |m, s| {
                (0..m.records)
                    .all(|r| s.store[r].is_some() || (0..m.n()).all(|u| m.copies(s, r, u) == 0))
            }),
            // The fence itself: exactly one of a commit and a takeover wins a slot.
            Property::<Self>::always("no slot both committed and aborted", |_, s| {
                s.epochs
                    .values()
                    .all(|e| e.committed.is_disjoint(&e.aborted))
            }),
            Property::<Self>::always("completes without faults", |m, s| m.completes(s)),
            Property::<Self>::sometimes("all delivered and committed", |m, s| {
                m.done(s) && (0..m.records).all(|r| m.committed(s, r))
            }),
            Property::<Self>::sometimes("a slot committed in its epoch", |_, s| {
                s.epochs.values().any(|e| !e.committed.is_empty())
            }),
            Property::<Self>::sometimes(
                "an epoch-pending key taken over by the other host",
                |m, s| {
                    s.store.iter().flatten().any(|key| {
                        key.epoch_pending()
                            && key.lock.since_ms != Some(m.clock(host_of(&key.lock.owner)))
                    })
                },
            ),
            // Only `CommitKey` commits a key on its record in this mode: after an epoch
            // commit that failed on `v`.
            Property::<Self>::sometimes("a key committed on its record", |_, s| {
                s.store
                    .iter()
                    .flatten()
                    .any(|key| key.lock.status == LockStatus::Committed)
            }),
            Property::<Self>::sometimes("a slot aborted", |_, s| {
                s.epochs.values().any(|e| !e.aborted.is_empty())
            }),
        ];
        if self.records > 1 {
            v.push(Property::<Self>::sometimes(
                "one epoch write commits two keys",
                |_, s| s.epochs.values().any(|e| e.committed.len() >= 2),
            ));
        }
        if self.units.iter().any(|u| u.kind == Sink::Plain) {
            v.push(Property::<Self>::sometimes(
                "an explained duplicate",
                |_, s| s.sink.iter().any(|&c| c >= 2),
            ));
        }
        v
    }
}

impl Model for Epochs {
    type State = State;
    type Action = Action;

    fn properties(&self) -> Vec<Property<Self>> {
        self.checked_properties()
    }

    fn init_states(&self) -> Vec<State> {
        vec![State {
            store: vec![None; self.records],
            epochs: BTreeMap::new(),
            sink: vec![0; self.records * self.n()],
            explained: vec![0; self.records * self.n()],
            acked: vec![false; self.records],
            procs: vec![
                Proc {
                    incarnation: 0,
                    slots: vec![Slot::Idle; self.records],
                    epoch: 0,
                    seen_v: 0,
                    aborted: 0,
                };
                self.processes
            ],
            faults: self.faults,
        }]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let mut candidates = Vec::new();
        for p in 0..self.processes {
            for r in 0..self.records {
                let slot = &s.procs[p].slots[r];
                let deliverable = match slot {
                    Slot::Idle => true,
                    Slot::Owes { owed, .. } => !matches!(owed, Owed::Abandon(m) if *m != 0),
                    _ => false,
                };
                if !s.acked[r] && deliverable {
                    candidates.push(Action::Deliver { p, r });
                }
                match slot {
                    Slot::Idle => {}
                    Slot::Acquiring => {
                        candidates.push(Action::Acquire { p, r, lost: false });
                        candidates.push(Action::Acquire { p, r, lost: true });
                        candidates.push(Action::StoreOutage { p, r });
                    }
                    Slot::Taking { step, .. } => match step {
                        Step::ReadEpoch => {
                            candidates.push(Action::ReadEpoch {
                                p,
                                r,
                                unreadable: false,
                            });
                            if self.unreadable_reads {
                                candidates.push(Action::ReadEpoch {
                                    p,
                                    r,
                                    unreadable: true,
                                });
                            }
                        }
                        Step::Abort => candidates.push(Action::AbortSlot { p, r }),
                        Step::Write => candidates.push(Action::TakeOver { p, r }),
                    },
                    Slot::Working { work, .. } if work.read => {
                        candidates.push(Action::ReadBack { p, r, fails: false });
                        candidates.push(Action::ReadBack { p, r, fails: true });
                    }
                    Slot::Working { work, .. } if work.checked => {
                        let kind = self.units[usize::from(work.next)].kind;
                        for (outcome, ack_lost) in self.send_outcomes(kind) {
                            candidates.push(Action::Send {
                                p,
                                r,
                                outcome,
                                ack_lost,
                            });
                        }
                    }
                    Slot::Working { work, .. } => {
                        if work.lease_ok {
                            candidates.push(Action::Check { p, r });
                        }
                        candidates.push(Action::Renew { p, r });
                    }
                    Slot::Owes {
                        owed: Owed::Commit, ..
                    } => {}
                    Slot::Owes { .. } => {
                        for answer in [Answer::Ok, Answer::Lost] {
                            candidates.push(Action::Settle { p, r, answer });
                        }
                    }
                }
            }
            if self.may_commit(s, p) {
                for lost in [false, true] {
                    candidates.push(Action::CommitEpoch { p, lost });
                }
            }
            if s.procs[p].slots.iter().any(|x| *x != Slot::Idle) {
                candidates.push(Action::Crash { p });
            }
        }
        for r in 0..self.records {
            if let Some(key) = &s.store[r] {
                let pending = key.lock.lease_until_ms().is_some();
                if pending && self.next_lease(key).is_some() {
                    candidates.push(Action::LeaseLapses { r });
                }
                // An epoch-pending key's TTL passing is its window passing (committed or
                // not): outside the promise, as a committed key's is.
                if pending && key.epoch.is_none() && key.lock.ttl > TTL_OVER {
                    candidates.push(Action::TtlPasses { r });
                }
            }
        }
        out.extend(
            candidates
                .into_iter()
                .filter(|a| self.cost(s, a).is_some_and(|c| c <= s.faults)),
        );
    }

    fn next_state(&self, last: &State, a: Action) -> Option<State> {
        let mut s = last.clone();
        s.faults -= self.cost(last, &a)?;
        match a {
            Action::Deliver { p, r } => match s.procs[p].slots[r] {
                Slot::Owes {
                    owed: Owed::Commit | Owed::CommitKey,
                    ..
                } => s.acked[r] = true,
                _ => s.procs[p].slots[r] = Slot::Acquiring,
            },
            Action::Acquire { p, r, lost } => {
                let me = self.me(&s, p);
                let at = self.at(&s, p, r);
                let now = self.clock(p);
                match acquire_in_epoch(s.store[r].as_ref(), &me, now, &self.request(p, r), at) {
                    Ok((key, Acquired::Taken { prior })) => {
                        s.store[r] = Some(key);
                        if !lost {
                            self.start(&mut s, p, r, at, prior.as_ref().map(|p| &p.progress));
                        }
                    }
                    Ok((_, Acquired::Held(_))) => unreachable!("held is an Err"),
                    Err(_) if lost => return None,
                    Err(held) => {
                        s.procs[p].slots[r] = if held.lock.status == LockStatus::Committed {
                            s.acked[r] = true;
                            Slot::Idle
                        } else if held.epoch_pending() && !held.lock.blocks(now, SKEW) {
                            Slot::Taking {
                                read: *held,
                                step: Step::ReadEpoch,
                            }
                        } else {
                            // A live lease: waiting is this action not being taken yet;
                            // taking it is giving up for now.
                            Slot::Idle
                        };
                    }
                }
            }
            Action::StoreOutage { p, r } => s.procs[p].slots[r] = Slot::Idle,
            Action::ReadEpoch { p, r, unreadable } => {
                let Slot::Taking { read, .. } = &s.procs[p].slots[r] else {
                    unreachable!()
                };
                let at = read.epoch?;
                let committed = self
                    .epoch_of(&s, read)
                    .is_some_and(|e| e.committed.contains(&at.slot));
                let read = read.clone();
                if committed && !unreadable {
                    s.acked[r] = true;
                    s.procs[p].slots[r] = Slot::Idle;
                } else {
                    let skip = self.variant.takeover_without_abort
                        || (unreadable && self.variant.unreadable_epoch_not_committed);
                    let step = if skip { Step::Write } else { Step::Abort };
                    s.procs[p].slots[r] = Slot::Taking { read, step };
                }
            }
            Action::AbortSlot { p, r } => {
                let Slot::Taking { read, .. } = &s.procs[p].slots[r] else {
                    unreachable!()
                };
                let at = read.epoch?;
                let name = (read.lock.owner.clone(), at.epoch);
                let read = read.clone();
                match abort_slot(s.epochs.get(&name), at.slot, TTL) {
                    Ok(next) => {
                        s.epochs.insert(name, next);
                        s.procs[p].slots[r] = Slot::Taking {
                            read,
                            step: Step::Write,
                        };
                    }
                    // Committed meanwhile: a duplicate.
                    Err(_) => {
                        s.acked[r] = true;
                        s.procs[p].slots[r] = Slot::Idle;
                    }
                }
            }
            Action::TakeOver { p, r } => {
                let Slot::Taking { read, .. } = &s.procs[p].slots[r] else {
                    unreachable!()
                };
                let me = self.me(&s, p);
                let at = self.at(&s, p, r);
                let req = self.request(p, r);
                match take_over(s.store[r].as_ref(), read, &me, self.clock(p), &req, at) {
                    Ok((key, Acquired::Taken { prior })) => {
                        s.store[r] = Some(key);
                        self.start(&mut s, p, r, at, prior.as_ref().map(|p| &p.progress));
                    }
                    Ok((_, Acquired::Held(_))) => unreachable!("held is an Err"),
                    // The record changed: acquire again from what it is now.
                    Err(_) => s.procs[p].slots[r] = Slot::Acquiring,
                }
            }
            Action::ReadBack { p, r, fails } => {
                let Slot::Working { work: mut w, at } = s.procs[p].slots[r].clone() else {
                    unreachable!()
                };
                if fails {
                    s.procs[p].slots[r] = Slot::Owes {
                        owed: Owed::Abandon(w.done),
                        at,
                    };
                } else {
                    for u in 0..self.n() {
                        if self.units[u].kind == Sink::Readable && self.copies(&s, r, u) > 0 {
                            w.done |= bit(u);
                        }
                    }
                    w.read = false;
                    self.advance(&mut s, p, r, w, at, false);
                }
            }
            Action::Renew { p, r } => {
                let me = self.me(&s, p);
                let Slot::Working { work: w, at } = s.procs[p].slots[r].clone() else {
                    unreachable!()
                };
                let renew = Change::Renew {
                    ttl: TTL,
                    lease_until_ms: self.clock(p) + LEASE,
                };
                let (next, settled) = change_in_epoch(s.store[r].as_ref(), &me, Some(at), &renew);
                if settled == Settled::Ok {
                    s.store[r] = next;
                    s.procs[p].slots[r] = Slot::Working {
                        work: Work {
                            lease_ok: true,
                            ..w
                        },
                        at,
                    };
                } else {
                    s.procs[p].slots[r] = Slot::Idle;
                }
            }
            Action::Check { p, r } => {
                let Slot::Working { work: w, at } = s.procs[p].slots[r].clone() else {
                    unreachable!()
                };
                s.procs[p].slots[r] = Slot::Working {
                    work: Work { checked: true, ..w },
                    at,
                };
            }
            Action::Send {
                p,
                r,
                outcome,
                ack_lost,
            } => {
                let Slot::Working { work: mut w, at } = s.procs[p].slots[r].clone() else {
                    unreachable!()
                };
                let u = usize::from(w.next);
                let (applied, delivered, uncertain) = self.send(&mut s, p, r, u, at, outcome)?;
                let i = r * self.n() + u;
                if applied {
                    s.sink[i] = (s.sink[i] + 1).min(COPIES_CAP);
                    if self.units[u].kind == Sink::Plain && !delivered {
                        s.explained[i] = s.explained[i].saturating_add(1);
                    }
                }
                if delivered {
                    w.done |= bit(u);
                }
                w.uncertain |= uncertain;
                w.checked = false;
                w.next += 1;
                if !self.advance(&mut s, p, r, w, at, ack_lost) {
                    return None;
                }
            }
            Action::Settle { p, r, answer } => {
                let me = self.me(&s, p);
                let Slot::Owes { owed, at } = s.procs[p].slots[r].clone() else {
                    unreachable!()
                };
                let c = match owed {
                    Owed::Commit => unreachable!("committed by its epoch"),
                    Owed::CommitKey => Change::Commit { ttl: TTL },
                    Owed::Release => Change::Release,
                    Owed::Abandon(m) => Change::Abandon {
                        progress: self.progress(m),
                    },
                };
                let (next, settled) = change_in_epoch(s.store[r].as_ref(), &me, Some(at), &c);
                match answer {
                    Answer::Ok => {
                        s.store[r] = next;
                        s.procs[p].slots[r] = Slot::Idle;
                    }
                    Answer::Lost if settled == Settled::Ok => s.store[r] = next,
                    Answer::Lost => return None,
                }
            }
            Action::CommitEpoch { p, lost } => {
                let name = (self.me(&s, p), u64::from(s.procs[p].epoch));
                let open = name.1;
                let slots: BTreeSet<u32> = (0..self.records)
                    .filter(|&r| {
                        matches!(s.procs[p].slots[r],
                            Slot::Owes { owed: Owed::Commit, at } if at.epoch == open)
                    })
                    .map(|r| u32::try_from(r).unwrap())
                    .collect();
                let current = s.epochs.get(&name);
                let seen = if self.variant.commit_without_v {
                    current.map_or(0, |e| e.v)
                } else {
                    u64::from(s.procs[p].seen_v)
                };
                match commit_epoch(current, &slots, seen, TTL) {
                    Ok(next) => {
                        s.epochs.insert(name, next);
                        if !lost {
                            for &slot in &slots {
                                s.procs[p].slots[slot as usize] = Slot::Idle;
                            }
                            self.close_epoch(&mut s, p);
                        }
                    }
                    Err(_) if lost => return None,
                    Err(moved) => {
                        // Its aborted slots go on their key records; the rest are
                        // committed in the epoch again with the new `v`.
                        let proc = &mut s.procs[p];
                        proc.seen_v = u8::try_from(moved.v).unwrap();
                        for &slot in &moved.aborted {
                            proc.aborted |= bit(slot as usize);
                            if let Slot::Owes { owed, at } = &mut proc.slots[slot as usize]
                                && *owed == Owed::Commit
                                && at.epoch == open
                            {
                                *owed = Owed::CommitKey;
                            }
                        }
                        if !self.may_commit(&s, p) {
                            self.close_epoch(&mut s, p);
                        }
                    }
                }
            }
            Action::Crash { p } => self.crash(&mut s, p),
            Action::LeaseLapses { r } => {
                let key = s.store[r].as_ref()?;
                let next = self.next_lease(key)?;
                let name = key.lock.owner.clone();
                let before = key.clone();
                let key = s.store[r].as_mut()?;
                key.lock.status = LockStatus::Pending {
                    lease_until_ms: next,
                };
                let after = key.clone();
                if let Some(p) = self.live_holder(&s, &name) {
                    if let Slot::Working { work, at } = s.procs[p].slots[r].clone()
                        && next - self.clock(p) <= MARGIN
                    {
                        s.procs[p].slots[r] = Slot::Working {
                            work: Work {
                                lease_ok: false,
                                ..work
                            },
                            at,
                        };
                    }
                    if !self.takeable_from(&before, 1 - p) && self.takeable_from(&after, 1 - p) {
                        self.explain_unrecorded(&mut s, p, r);
                    }
                }
            }
            Action::TtlPasses { r } => s.store[r].as_mut()?.lock.ttl = TTL_OVER,
        }
        self.forget_epochs(&mut s);
        Some(s)
    }
}

/// Runs the epoch mode to the end and asserts every property and example.
fn holds(sends: &[(Sink, u32)], records: usize, faults: u8, label: &str) {
    check(
        Epochs::new(sends, records, faults, Variant::default()),
        &format!("epochs, {label}, {records} records, {faults} faults"),
    )
    .assert_properties();
}

/// Two keys in one epoch: one write commits both; a takeover of one aborts its slot, and
/// the owner's commit of the other fails on `v` and is made again.
#[test]
fn epochs_two_keys_plain() {
    holds(PLAIN, 2, 1, "plain");
}

#[test]
fn epochs_two_keys_readable() {
    holds(READABLE, 2, 1, "readable");
}

/// The same with 2 faults: about 6 million states, over 3 minutes; run by hand.
#[test]
#[ignore]
fn epochs_two_keys_readable_two_faults() {
    holds(READABLE, 2, 2, "readable");
}

#[test]
fn epochs_readable_then_plain() {
    holds(READABLE_PLAIN, 1, 3, "readable+plain");
}

#[test]
fn epochs_transactional_then_plain() {
    holds(TRANSACTIONAL_PLAIN, 1, 3, "transactional+plain");
}

/// Whether a step of `steps` is a key write by a taker over a slot its epoch does not
/// list as aborted.
fn takes_an_unaborted_slot(steps: &[(State, Action)]) -> bool {
    steps.iter().any(|(s, a)| match *a {
        Action::TakeOver { p, r } => match &s.procs[p].slots[r] {
            Slot::Taking { read, .. } => {
                let at = read.epoch.unwrap();
                let epoch = s.epochs.get(&(read.lock.owner.clone(), at.epoch));
                !epoch.is_some_and(|e| e.aborted.contains(&at.slot))
                    && s.store[r].as_ref() == Some(read)
            }
            _ => false,
        },
        _ => false,
    })
}

/// (a) A commit not conditional on `v` lands after a taker aborted the slot: the owner
/// has delivered and committed, the taker takes the key (its lease ran out after the
/// commit, when the owner held nothing) and sends again.
#[test]
fn finds_an_epoch_commit_without_v_duplicating() {
    let variant = Variant {
        commit_without_v: true,
        ..Variant::default()
    };
    let m = Epochs::new(PLAIN, 1, 1, variant);
    let steps = counterexample(m, "no unexplained duplicate", "(a) epoch commit without v");
    // The culprit: a commit over an abort it did not see.
    assert!(steps.iter().any(|(s, a)| {
        match *a {
            Action::CommitEpoch { p, .. } => s
                .epochs
                .get(&(
                    owner(p, s.procs[p].incarnation),
                    u64::from(s.procs[p].epoch),
                ))
                .is_some_and(|e| e.v != u64::from(s.procs[p].seen_v)),
            _ => false,
        }
    }));
}

/// (b) A takeover that writes the key without aborting the slot: the owner's commit lands
/// between the taker's read and its write, and both win.
#[test]
fn finds_a_takeover_without_the_abort_duplicating() {
    let variant = Variant {
        takeover_without_abort: true,
        ..Variant::default()
    };
    let mut m = Epochs::new(PLAIN, 1, 1, variant);
    m.unreadable_reads = false;
    let steps = counterexample(m, "no unexplained duplicate", "(b) takeover without abort");
    assert!(takes_an_unaborted_slot(&steps));
    // The race: the taker read the slot not committed, and the owner committed it before
    // the taker's key write.
    let read_uncommitted = steps.iter().position(|(_, a)| {
        matches!(
            a,
            Action::ReadEpoch {
                unreadable: false,
                ..
            }
        )
    });
    let committed = steps
        .iter()
        .position(|(_, a)| matches!(a, Action::CommitEpoch { .. }));
    assert!(read_uncommitted.unwrap() < committed.unwrap());
}

/// (c) A taker that trusts an unreadable epoch as "not committed" and skips the abort
/// takes over a committed key.
#[test]
fn finds_an_unreadable_epoch_trusted_duplicating() {
    let variant = Variant {
        unreadable_epoch_not_committed: true,
        ..Variant::default()
    };
    let m = Epochs::new(PLAIN, 1, 1, variant);
    let steps = counterexample(m, "no unexplained duplicate", "(c) unreadable epoch");
    assert!(steps.iter().any(|(_, a)| matches!(
        a,
        Action::ReadEpoch {
            unreadable: true,
            ..
        }
    )));
    assert!(takes_an_unaborted_slot(&steps));
}
