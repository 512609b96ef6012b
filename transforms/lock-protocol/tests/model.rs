//! Exhaustive model check of `meta_kv_store_lock`'s protocol (see `../MODEL.md`).
//!
//! A [`Lock`] model explores, breadth first and to exhaustion, every interleaving of a
//! source, two processes on two hosts whose clocks disagree, and a lock store, with crashes,
//! lost store answers, failed, lost and uncertain sink answers, lost acknowledgements,
//! leases that run out and TTLs that pass, all drawn from one fault budget. A message
//! guarded by a lock goes to several sends (of different kinds, or several copies to one
//! send); a message partly delivered is completed by a later attempt that skips what the
//! lock's progress lists. Every change to a lock record goes through this crate's rules
//! ([`acquire`], [`change`]; [`LockRecord::blocks`] / [`LockRecord::takeable_by`] through
//! them); the model only decides what the processes and the environment do.
//!
//! BOUNDS (the runs below; see MODEL.md for the figures):
//! - 2 processes on 2 hosts, host 1's clock 1 s ahead and host 2's 1 s behind (the
//!   tolerated skew, 2 s, covers the difference exactly);
//! - per configuration of sends, one record (its own lock key) with a budget of faults;
//!   one run with 2 records (a readable send);
//! - every kind of fault enabled in every run, drawn from the one budget;
//! - no depth bound: the space is finite and is explored to the end.
//!
//! TIME is abstract. Every store operation is evaluated at a fixed instant, each host
//! reading it by its own clock; a lock's lease is a concrete end written by its owner's
//! clock, and "time passes" is an event that moves one lease's end into the past, to the
//! next instant at which what some clock concludes about it changes: live (the owner's
//! pre-send check passes), lapsing (over by the owner's clock, with its margin, but
//! blocking every taker), takeable by the host whose clock runs ahead, takeable by both.

// Test code: its items need not say `pub(crate)`, and it may unwrap and panic (the
// workspace's lints).
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use sluice_lock_protocol::{
    AcquireRequest, Acquired, Change, LockRecord, LockStatus, Progress, Settled, acquire, change,
};
use stateright::{Checker, Model, Property};

use common::*;

/// Historical or described behaviours the model can be switched to, to show that the
/// check finds what they break. All `false` is the protocol as designed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Variant {
    /// Bug (a): a pending lock whose TTL passed is free (the takeover ignores its lease).
    ttl_frees_pending: bool,
    /// Bug (b): acquisition is not re-entrant (the owner's own live pending lock holds it
    /// off, and the owner takes that for a duplicate), and a release that fails is
    /// dropped, not retried.
    not_reentrant: bool,
    /// Bug (c): the lock commits at its checkpoint, before the last send (the one after
    /// the lock) happened.
    commit_before_send: bool,
    /// The in-memory rule as first described: a copy that arrives while the same process
    /// has the record in flight is acknowledged at once as a duplicate. The design lets
    /// such a copy follow the first copy's fate instead.
    ack_inflight_duplicate: bool,
    /// Drops the design's assumption (one sink call takes less than the pre-send check's
    /// margin): a live owner's lease may run out past every taker's limit between its
    /// pre-send check and its send being applied.
    lease_may_lapse_mid_send: bool,
    /// Bug (i), the old commit rule: the key is committed once the send inside the lock
    /// (send 0) delivered, whatever became of the sends after it.
    commit_after_partial_failure: bool,
    /// Bug (ii): a failed message's key is released when nothing was uncertain and there
    /// was no prior holder, even though some sends delivered (their progress is dropped).
    release_after_partial_delivery: bool,
    /// Bug (iii): no pre-send check: the owner sends whatever its own clock says of its
    /// lease.
    no_presend_check: bool,
    /// Bug (iv): unbounded skew: takers compare leases without the skew margin
    /// (`skew_ms: 0`) while the hosts' clocks differ.
    no_skew_margin: bool,
    /// A redelivered copy that finds its process owing an abandonment with progress
    /// cancels it and retakes the key at once (what `Keeper::forget_for_retake` does with
    /// a queued abandonment), so the progress it owed is never written. The design checked
    /// here lets such a copy wait until the abandonment landed (it follows the failed
    /// attempt's fate and is redelivered).
    retake_drops_progress: bool,
}

/// What a process owes the store for a key once its message resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Owed {
    /// Every unit delivered: commit.
    Commit,
    /// Certainly not delivered anywhere, no prior holder: release (delete).
    Release,
    /// Some units delivered (the mask: this attempt's progress, inherited included), or
    /// uncertain, or taken with a prior holder: abandon (end the lease, stay pending with
    /// `since`, add the progress).
    Abandon(u8),
}

/// What a process knows of one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Slot {
    /// Nothing.
    Idle,
    /// Received; an acquisition is due (first try, after an answer was lost, or while
    /// waiting for another owner's pending lock).
    Acquiring,
    /// Taken; its units are on their way.
    Working(Work),
    /// Resolved; the store change is queued and retried until it lands.
    Owes(Owed),
}

/// One process: its incarnation (a crash restarts it as a new owner on the same host, with
/// the same clock) and its memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Proc {
    incarnation: u8,
    slots: Vec<Slot>,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    /// The lock store: one record per key (record `i` is key `r{i+1}`).
    store: Vec<Option<LockRecord>>,
    /// Copies in the sinks, per record and unit (`r * units + u`).
    sink: Vec<u8>,
    /// Plain units: the extra copies that a crash, an uncertain answer or a live owner's
    /// lapsed lease in the record's path explains (each such event explains one).
    explained: Vec<u8>,
    /// Records the source was told were done (it redelivers the others).
    acked: Vec<bool>,
    procs: Vec<Proc>,
    /// Faults the environment may still inject.
    faults: u8,
}

/// How a store change (commit, release, abandon) went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Answer {
    /// Applied and answered.
    Ok,
    /// Applied, answer lost: the process keeps it queued and retries.
    Lost,
    /// Bug (b) only: not applied, and the process drops it (not retried). In the design a
    /// call that fails before it is applied is retried, which is the same as the call not
    /// having been made yet: the model spends no fault on it.
    Dropped,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    /// The source hands record `r` to process `p` (first delivery or redelivery).
    Deliver { p: usize, r: usize },
    /// `p` asks the store for `r`'s lock; `lost`: applied but the answer is lost.
    Acquire { p: usize, r: usize, lost: bool },
    /// `p`'s acquisitions kept failing: it gives the record up for now (not acknowledged).
    StoreOutage { p: usize, r: usize },
    /// Readable units, key taken with a prior holder: `p` looks for them before sending.
    ReadBack { p: usize, r: usize, fails: bool },
    /// `p` renews its lease on `r` (conditional on the owner): its pre-send check failed.
    Renew { p: usize, r: usize },
    /// `p`'s pre-send check for its next unit of `r`: its lease is live with margin.
    Check { p: usize, r: usize },
    /// `p` sends its next unit of `r`. `ack_lost`: that completed the message, but the
    /// source never gets the acknowledgement.
    Send {
        p: usize,
        r: usize,
        outcome: SendOutcome,
        ack_lost: bool,
    },
    /// `p`'s queued store change for `r`.
    Settle { p: usize, r: usize, answer: Answer },
    /// `p` crashes and restarts as a new owner with an empty memory.
    Crash { p: usize },
    /// Time passes to the next instant at which some clock's view of `r`'s pending lease
    /// changes (its owner did not renew it).
    LeaseLapses { r: usize },
    /// Time passes beyond the TTL of `r`'s pending lock.
    TtlPasses { r: usize },
}

impl Action {
    /// What a fault-free continuation prefers (lower first); see [`Lock::completes`].
    fn rank(&self) -> u8 {
        match self {
            Action::Settle { .. } => 0,
            Action::Send { .. } => 1,
            Action::ReadBack { .. } => 2,
            Action::Check { .. } => 3,
            Action::Renew { .. } => 4,
            Action::Acquire { .. } => 5,
            Action::LeaseLapses { .. } => 6,
            Action::Deliver { .. } => 7,
            Action::StoreOutage { .. } | Action::Crash { .. } | Action::TtlPasses { .. } => 8,
        }
    }
}

/// The model: its bounds and variant, and the memory of the completion check (shared by
/// clones: a state that completes does so in every run of the same model).
#[derive(Clone)]
struct Lock {
    units: Vec<Unit>,
    records: usize,
    processes: usize,
    faults: u8,
    /// Each host's clock offset, in [`CLOCK_UNIT`]s.
    clocks: Vec<i64>,
    variant: Variant,
    /// Fingerprints of states known to complete without faults ([`Lock::completes`]).
    completes: Arc<Mutex<HashSet<u64>>>,
}

fn is_pending(rec: &LockRecord) -> bool {
    matches!(rec.status, LockStatus::Pending { .. })
}

fn in_flight(slot: Slot) -> bool {
    matches!(slot, Slot::Acquiring | Slot::Working(_))
}

impl Lock {
    fn new(sends: &[(Sink, u32)], records: usize, faults: u8, variant: Variant) -> Lock {
        Lock {
            units: units(sends),
            records,
            processes: 2,
            faults,
            clocks: vec![1, -1],
            variant,
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

    /// Host `p`'s clock.
    fn clock(&self, p: usize) -> i64 {
        NOW + self.clocks[p] * CLOCK_UNIT
    }

    /// The skew takers tolerate.
    fn skew(&self) -> i64 {
        if self.variant.no_skew_margin { 0 } else { SKEW }
    }

    fn request(&self, p: usize, r: usize) -> AcquireRequest {
        AcquireRequest {
            key: format!("r{}", r + 1),
            ttl: TTL,
            lease_until_ms: self.clock(p) + LEASE,
            skew_ms: self.skew(),
            fresh_before_ms: None,
        }
    }

    /// The live process whose current owner name is `name` (none: a crashed owner).
    fn live_holder(&self, s: &State, name: &str) -> Option<usize> {
        (0..self.processes).find(|&p| self.me(s, p) == name)
    }

    /// Whether an owner on host `q` other than `rec`'s may take it now, by `q`'s clock.
    fn takeable_from(&self, rec: &LockRecord, q: usize) -> bool {
        rec.takeable_by("someone else", self.clock(q), self.skew())
    }

    /// The progress a mask of units is.
    fn progress(&self, mask: u8) -> Progress {
        let mut p = Progress::new();
        for (u, unit) in self.units.iter().enumerate() {
            if mask & bit(u) != 0 {
                p.insert(&unit.send_id(), unit.copy);
            }
        }
        p
    }

    /// The units a progress lists.
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

    /// The units `p`'s memory says were delivered for `r`.
    fn remembered(&self, slot: Slot) -> u8 {
        match slot {
            Slot::Working(w) => w.done,
            Slot::Owes(Owed::Commit) => self.all(),
            Slot::Owes(Owed::Abandon(m)) => m,
            _ => 0,
        }
    }

    /// Plain units that `p` delivered (as its memory says) while `r`'s lock is its pending
    /// lock and its progress does not list them: if `p` stops now (a crash) or its lease
    /// lapses to a takeover, the next attempt sends them again. Each explains one extra
    /// copy.
    fn explain_unrecorded(&self, s: &mut State, p: usize, r: usize) {
        let me = self.me(s, p);
        let Some(rec) = s.store[r].as_ref().filter(|rec| rec.pending_for(&me)) else {
            return;
        };
        let unrecorded = self.remembered(s.procs[p].slots[r]) & !self.mask(&rec.progress);
        for u in 0..self.n() {
            if unrecorded & bit(u) != 0 && self.units[u].kind == Sink::Plain {
                let e = &mut s.explained[r * self.n() + u];
                *e = e.saturating_add(1);
            }
        }
    }

    /// The store's acquisition: the crate's rule, or a historical one layered on it.
    fn store_acquire(
        &self,
        current: Option<&LockRecord>,
        who: &str,
        p: usize,
        r: usize,
    ) -> Result<(LockRecord, Acquired), LockRecord> {
        let now = self.clock(p);
        if let Some(rec) = current {
            if self.variant.ttl_frees_pending && is_pending(rec) && rec.ttl * 1000 <= now {
                // (a): "absent, or TTL passed, or pending with its lease over".
                return acquire(None, who, now, &self.request(p, r));
            }
            if self.variant.not_reentrant && rec.owner == who && rec.blocks(now, self.skew()) {
                // (b): the owner's own live pending lock holds it off like anyone's.
                return Err(rec.clone());
            }
        }
        acquire(current, who, now, &self.request(p, r))
    }

    /// The next lease end of `rec` when time passes: the latest instant before its current
    /// end at which some clock's conclusion changes (the owner's pre-send check fails; a
    /// host may take it over). `None` when every host may take it already.
    fn next_lease(&self, rec: &LockRecord) -> Option<i64> {
        let lease = rec.lease_until_ms()?;
        let h = host_of(&rec.owner);
        let own = self.clock(h);
        let delta = lease - own;
        // By the owner's clock: `LEASE` after a taking or renewal; `MARGIN`: the pre-send
        // check fails from here. By host q's clock: a taker on q may take it (the crate's
        // `blocks`) once the end is below this.
        let mut candidates = vec![MARGIN];
        for q in 0..self.processes {
            candidates.push(self.clock(q) - own - self.skew() - 1);
        }
        candidates
            .into_iter()
            .filter(|&c| c < delta)
            .max()
            .map(|c| own + c)
    }

    /// The faults an action costs, or `None` when the environment may not do it here.
    fn cost(&self, s: &State, a: &Action) -> Option<u8> {
        Some(match *a {
            Action::Deliver { .. }
            | Action::Check { .. }
            | Action::Renew { .. }
            | Action::Acquire { lost: false, .. }
            | Action::ReadBack { fails: false, .. }
            | Action::Settle {
                answer: Answer::Ok, ..
            } => 0,
            Action::Acquire { lost: true, .. }
            | Action::StoreOutage { .. }
            | Action::ReadBack { fails: true, .. }
            | Action::Settle { .. }
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
                let rec = s.store[r].as_ref()?;
                let next = self.next_lease(rec)?;
                match self.live_holder(s, &rec.owner) {
                    // A crashed owner renews nothing: time alone ends its lease.
                    None => 0,
                    Some(p) => match s.procs[p].slots[r] {
                        // The owner does not know it holds the key (an acquisition whose
                        // answer was lost, a key it gave up or is retaking): it does not
                        // renew it either.
                        Slot::Idle | Slot::Acquiring => 0,
                        // The design's assumption: between the pre-send check (more than
                        // the margin left) and the send being applied, less than the
                        // margin passes, so by the owner's clock the lease has not ended
                        // when the send lands (and, with the skew within the tolerance, no
                        // taker may take the key).
                        Slot::Working(w)
                            if w.checked
                                && !self.variant.lease_may_lapse_mid_send
                                && next < self.clock(p) =>
                        {
                            return None;
                        }
                        // A live owner's lease runs out only if its renewals (or its
                        // settling call) failed for a whole lease: a fault, once; from
                        // there on, time passing is free.
                        Slot::Working(_) | Slot::Owes(_) => {
                            let live = rec.lease_until_ms()? - self.clock(p) > MARGIN;
                            u8::from(live)
                        }
                    },
                }
            }
        })
    }

    /// The sends to explore for a unit: each outcome, and the delivered ones with a lost
    /// acknowledgement.
    fn send_outcomes(&self, kind: Sink) -> Vec<(SendOutcome, bool)> {
        let mut v = vec![
            (SendOutcome::Ok, false),
            (SendOutcome::Ok, true),
            (SendOutcome::FailBefore, false),
            (SendOutcome::FailAfter { read_fails: false }, false),
            (SendOutcome::Timeout { read_fails: false }, false),
        ];
        if kind == Sink::Readable {
            // The read-back resolves a lost answer: found means delivered (and acked).
            v.push((SendOutcome::FailAfter { read_fails: false }, true));
            v.push((SendOutcome::FailAfter { read_fails: true }, false));
            v.push((SendOutcome::Timeout { read_fails: true }, false));
        }
        v
    }

    /// Whether the system is done: every record acknowledged and in every sink, nothing
    /// left in any process, and every lock committed, except what [`Lock::leftover`]
    /// allows.
    fn done(&self, s: &State) -> bool {
        s.procs
            .iter()
            .all(|p| p.slots.iter().all(|x| *x == Slot::Idle))
            && (0..self.records).all(|r| {
                s.acked[r]
                    && self.delivered_all(s, r)
                    && (s.store[r]
                        .as_ref()
                        .is_some_and(|rec| rec.status == LockStatus::Committed)
                        || self.leftover(s, r))
            })
    }

    /// A lock that nothing will commit although its record was delivered and acknowledged:
    /// still pending, its lease over for every host. The acknowledgement does not wait for
    /// the commit (by design), and the source redelivers nothing acknowledged, so a crash
    /// (or a lapsed lease) between the acknowledgement and the commit leaves it, until a
    /// later copy takes it over (and skips or looks) or the store's TTL removes it.
    fn leftover(&self, s: &State, r: usize) -> bool {
        s.store[r].as_ref().is_some_and(|rec| {
            is_pending(rec) && (0..self.processes).all(|q| self.takeable_from(rec, q))
        }) && s.acked[r]
            && self.delivered_all(s, r)
            && (0..self.processes).all(|p| s.procs[p].slots[r] == Slot::Idle)
    }

    /// Acknowledged, missing from some sink, and no process has it on its way: the source
    /// will not redeliver it and nobody will send it.
    fn lost_for_good(&self, s: &State, r: usize) -> bool {
        s.acked[r] && !self.delivered_all(s, r) && s.procs.iter().all(|p| !in_flight(p.slots[r]))
    }

    /// From `s`, a fault-free continuation reaches a done state: nothing is stuck, no
    /// record left behind, no lock left pending but the allowed leftovers. The
    /// continuation is one fixed fair schedule: of the fault-free actions (store and sink
    /// calls answered, no crash, no live owner's lease lapsing, no TTL passing), the
    /// lowest-ranked one that changes the state ([`Action::rank`]: settle, send, read,
    /// check, renew, acquire, let a lease nobody renews run out, deliver), for at most
    /// [`COMPLETION_STEPS`] steps. Reaching a done state proves one is reachable. States on
    /// the way are remembered, so each is walked once.
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
                // An acquisition that meets another owner's live pending lock gives up
                // (changes the state) only when nothing ranked before it can move.
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

    /// `p` crashes: the plain units it delivered and the store does not list explain one
    /// extra copy each (the next taker sends them again).
    fn crash(&self, s: &mut State, p: usize) {
        for r in 0..self.records {
            self.explain_unrecorded(s, p, r);
        }
        s.procs[p].incarnation += 1;
        s.procs[p].slots.iter_mut().for_each(|x| *x = Slot::Idle);
    }

    /// The attempt `w` moves on: past the units known delivered, and when none is left to
    /// attempt, it resolves (the message is acknowledged when every unit was delivered,
    /// unless `ack_lost`). Returns `false` when `ack_lost` does not apply.
    fn advance(&self, s: &mut State, p: usize, r: usize, mut w: Work, ack_lost: bool) -> bool {
        while usize::from(w.next) < self.n() && w.done & bit(usize::from(w.next)) != 0 {
            w.next += 1;
        }
        if w.read || usize::from(w.next) < self.n() {
            s.procs[p].slots[r] = Slot::Working(w);
            return !ack_lost;
        }
        let all = w.done == self.all();
        let inside = self
            .units
            .iter()
            .enumerate()
            .filter(|(_, u)| u.send == 0)
            .all(|(u, _)| w.done & bit(u) != 0);
        let owed = if all || (self.variant.commit_after_partial_failure && inside) {
            Owed::Commit
        } else if w.uncertain
            || w.prior
            || (w.done != 0 && !self.variant.release_after_partial_delivery)
        {
            Owed::Abandon(w.done)
        } else {
            Owed::Release
        };
        if all && !ack_lost {
            s.acked[r] = true;
        }
        s.procs[p].slots[r] = Slot::Owes(owed);
        all || !ack_lost
    }

    /// What a send of unit `u` does to the sink and the store: `(applied, delivered,
    /// uncertain)`, or `None` when the combination is not worth exploring.
    fn send(
        &self,
        s: &mut State,
        p: usize,
        r: usize,
        u: usize,
        outcome: SendOutcome,
    ) -> Option<(bool, bool, bool)> {
        let kind = self.units[u].kind;
        let readable = kind == Sink::Readable;
        Some(match (kind, outcome) {
            (Sink::Readable | Sink::Plain, SendOutcome::Ok) => (true, true, false),
            (Sink::Readable | Sink::Plain, SendOutcome::FailBefore) => (false, false, false),
            // Read back: found means delivered; a failed read leaves it uncertain.
            (Sink::Readable | Sink::Plain, SendOutcome::FailAfter { read_fails }) => {
                let found = readable && !read_fails;
                (true, found, !found)
            }
            // Read back: not found means a certain failure.
            (Sink::Readable | Sink::Plain, SendOutcome::Timeout { read_fails }) => {
                (false, false, !readable || read_fails)
            }
            (Sink::Transactional, _) => {
                // The items and the unit's progress in one transaction conditional on the
                // owner: the rule of `Record` decides whether it applies at all.
                let me = self.me(s, p);
                let record = Change::Record {
                    progress: self.progress(bit(u)),
                };
                let (next, settled) = change(s.store[r].as_ref(), &me, &record);
                if settled != Settled::Ok {
                    // Cancelled (another owner took the key over, or it is gone): nothing
                    // written, and the client is told so. Other outcomes: the same, for a
                    // fault.
                    return (outcome == SendOutcome::Ok).then_some((false, false, false));
                }
                let applied = matches!(outcome, SendOutcome::Ok | SendOutcome::FailAfter { .. });
                if applied {
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

    /// The properties ([`Model::properties`]).
    fn checked_properties(&self) -> Vec<Property<Self>> {
        let mut v = vec![
            Property::<Self>::always("no loss", |m, s| {
                (0..m.records).all(|r| !s.acked[r] || m.delivered_all(s, r))
            }),
            // Implied by "no loss". The broken variants are checked against this one, so
            // that their counterexamples end in a real loss, not in an early ack that a
            // copy still in flight would have made good.
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
                (0..m.records).all(|r| {
                    s.store[r].as_ref().is_none_or(|rec| {
                        rec.status != LockStatus::Committed || m.delivered_all(s, r)
                    })
                })
            }),
            // What a taker relies on when it skips what the progress lists.
            Property::<Self>::always("recorded progress was delivered", |m, s| {
                (0..m.records).all(|r| {
                    s.store[r].as_ref().is_none_or(|rec| {
                        let listed = m.mask(&rec.progress);
                        (0..m.n()).all(|u| listed & bit(u) == 0 || m.copies(s, r, u) >= 1)
                    })
                })
            }),
            // What the read-back and the progress rely on: once a unit is in its sink, the
            // key is never free again (a taker always learns of the earlier attempt, or
            // finds it committed).
            Property::<Self>::always("a delivered record keeps its lock", |m, s| {
                (0..m.records)
                    .all(|r| s.store[r].is_some() || (0..m.n()).all(|u| m.copies(s, r, u) == 0))
            }),
            Property::<Self>::always("completes without faults", |m, s| m.completes(s)),
            // Examples, so that the check is not vacuous.
            Property::<Self>::sometimes("all delivered and committed", |m, s| {
                m.done(s)
                    && s.store.iter().all(|rec| {
                        rec.as_ref()
                            .is_some_and(|rec| rec.status == LockStatus::Committed)
                    })
            }),
            Property::<Self>::sometimes("committed by a restarted owner", |_, s| {
                s.store
                    .iter()
                    .flatten()
                    .any(|rec| rec.status == LockStatus::Committed && rec.owner.ends_with('\''))
            }),
            Property::<Self>::sometimes("done with a leftover pending lock", |m, s| {
                m.done(s) && (0..m.records).any(|r| m.leftover(s, r))
            }),
            // `since` is the first owner's clock reading: here, the other host's.
            Property::<Self>::sometimes("a pending lock taken over by the other host", |m, s| {
                s.store.iter().flatten().any(|rec| {
                    is_pending(rec) && rec.since_ms != Some(m.clock(host_of(&rec.owner)))
                })
            }),
        ];
        v.push(Property::<Self>::sometimes(
            "a lapsed owner's key taken over under it",
            |m, s| {
                (0..m.processes).any(|p| {
                    (0..m.records).any(|r| {
                        matches!(s.procs[p].slots[r], Slot::Working(w) if !w.lease_ok)
                            && s.store[r]
                                .as_ref()
                                .is_some_and(|rec| !rec.pending_for(&m.me(s, p)))
                    })
                })
            },
        ));
        if self.n() > 1 {
            v.push(Property::<Self>::sometimes(
                "a taker skips inherited progress and completes the rest",
                |m, s| {
                    s.procs.iter().any(|p| {
                        p.slots.iter().any(|x| {
                            matches!(x, Slot::Working(w)
                                if w.prior && w.done != 0 && w.done != m.all())
                        })
                    })
                },
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

impl Model for Lock {
    type State = State;
    type Action = Action;

    fn properties(&self) -> Vec<Property<Self>> {
        self.checked_properties()
    }

    fn init_states(&self) -> Vec<State> {
        vec![State {
            store: vec![None; self.records],
            sink: vec![0; self.records * self.n()],
            explained: vec![0; self.records * self.n()],
            acked: vec![false; self.records],
            procs: vec![
                Proc {
                    incarnation: 0,
                    slots: vec![Slot::Idle; self.records],
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
                let slot = s.procs[p].slots[r];
                let deliverable = match slot {
                    Slot::Idle | Slot::Owes(Owed::Commit | Owed::Release) => true,
                    Slot::Owes(Owed::Abandon(m)) => m == 0 || self.variant.retake_drops_progress,
                    Slot::Acquiring | Slot::Working(_) => self.variant.ack_inflight_duplicate,
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
                    Slot::Working(w) if w.read => {
                        candidates.push(Action::ReadBack { p, r, fails: false });
                        candidates.push(Action::ReadBack { p, r, fails: true });
                    }
                    Slot::Working(w) if w.checked => {
                        let kind = self.units[usize::from(w.next)].kind;
                        for (outcome, ack_lost) in self.send_outcomes(kind) {
                            candidates.push(Action::Send {
                                p,
                                r,
                                outcome,
                                ack_lost,
                            });
                        }
                    }
                    Slot::Working(w) => {
                        if w.lease_ok || self.variant.no_presend_check {
                            candidates.push(Action::Check { p, r });
                        }
                        // Renewals run in the background while the key is held; the
                        // pre-send check waits for one when the lease lapsed by the
                        // owner's clock. One that finds the key taken over stops the
                        // attempt. (While the lease is live, a renewal rewrites the same
                        // end: the same state, unless the key was taken over.)
                        candidates.push(Action::Renew { p, r });
                    }
                    Slot::Owes(owed) => {
                        candidates.push(Action::Settle {
                            p,
                            r,
                            answer: Answer::Ok,
                        });
                        candidates.push(Action::Settle {
                            p,
                            r,
                            answer: Answer::Lost,
                        });
                        if self.variant.not_reentrant && owed == Owed::Release {
                            candidates.push(Action::Settle {
                                p,
                                r,
                                answer: Answer::Dropped,
                            });
                        }
                    }
                }
            }
            if s.procs[p].slots.iter().any(|x| *x != Slot::Idle) {
                candidates.push(Action::Crash { p });
            }
        }
        for r in 0..self.records {
            if let Some(rec) = &s.store[r] {
                if is_pending(rec) && self.next_lease(rec).is_some() {
                    candidates.push(Action::LeaseLapses { r });
                }
                if is_pending(rec) && rec.ttl > TTL_OVER {
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
                Slot::Idle => s.procs[p].slots[r] = Slot::Acquiring,
                // Held for a message that failed, not yet given back: take it again (the
                // store lets its owner) and stop giving it back. An abandonment with
                // progress is only cancelled by the variant (see `retake_drops_progress`).
                Slot::Owes(Owed::Release | Owed::Abandon(_)) => {
                    s.procs[p].slots[r] = Slot::Acquiring;
                }
                // Delivered here, commit queued (its ack was lost): a duplicate.
                Slot::Owes(Owed::Commit) => s.acked[r] = true,
                // In flight here: only the described rule gets here (acked at once).
                Slot::Acquiring | Slot::Working(_) => s.acked[r] = true,
            },
            Action::Acquire { p, r, lost } => {
                let me = self.me(&s, p);
                match self.store_acquire(s.store[r].as_ref(), &me, p, r) {
                    Ok((rec, Acquired::Taken { prior })) => {
                        s.store[r] = Some(rec);
                        // Lost: applied, but the process saw an error; it retries.
                        if !lost {
                            let done = prior.as_ref().map_or(0, |p| self.mask(&p.progress));
                            let read = prior.is_some()
                                && (0..self.n()).any(|u| {
                                    self.units[u].kind == Sink::Readable && done & bit(u) == 0
                                });
                            let w = Work {
                                prior: prior.is_some(),
                                lease_ok: true,
                                read,
                                checked: false,
                                next: 0,
                                done,
                                uncertain: false,
                            };
                            self.advance(&mut s, p, r, w, false);
                        }
                    }
                    Ok((_, Acquired::Held(_))) => unreachable!("acquire returns Err when held"),
                    // Nothing was applied: there is no answer to lose.
                    Err(_) if lost => return None,
                    Err(holder) => {
                        let duplicate = match holder.status {
                            LockStatus::Committed => true,
                            // Only bug (b) meets its own pending lock here: it calls it a
                            // duplicate, as the historical code did.
                            LockStatus::Pending { .. } => holder.owner == me,
                        };
                        if duplicate {
                            s.acked[r] = true;
                        }
                        // Another owner's live pending lock: waiting is this action not
                        // being taken yet; taking it is giving up for now (not acked).
                        s.procs[p].slots[r] = Slot::Idle;
                    }
                }
            }
            Action::StoreOutage { p, r } => s.procs[p].slots[r] = Slot::Idle,
            Action::ReadBack { p, r, fails } => {
                let Slot::Working(mut w) = s.procs[p].slots[r] else {
                    unreachable!()
                };
                if fails {
                    // Cannot tell: give it back as possibly delivered.
                    s.procs[p].slots[r] = Slot::Owes(Owed::Abandon(w.done));
                } else {
                    for u in 0..self.n() {
                        if self.units[u].kind == Sink::Readable && self.copies(&s, r, u) > 0 {
                            w.done |= bit(u);
                        }
                    }
                    w.read = false;
                    self.advance(&mut s, p, r, w, false);
                }
            }
            Action::Renew { p, r } => {
                let me = self.me(&s, p);
                let renew = Change::Renew {
                    ttl: TTL,
                    lease_until_ms: self.clock(p) + LEASE,
                };
                let (next, settled) = change(s.store[r].as_ref(), &me, &renew);
                if settled == Settled::Ok {
                    s.store[r] = next;
                    let Slot::Working(w) = s.procs[p].slots[r] else {
                        unreachable!()
                    };
                    s.procs[p].slots[r] = Slot::Working(Work {
                        lease_ok: true,
                        ..w
                    });
                } else {
                    // The key was taken over: the process gives the message up (not
                    // acked; the source redelivers it). It can no longer write anything.
                    s.procs[p].slots[r] = Slot::Idle;
                }
            }
            Action::Check { p, r } => {
                let Slot::Working(w) = s.procs[p].slots[r] else {
                    unreachable!()
                };
                s.procs[p].slots[r] = Slot::Working(Work { checked: true, ..w });
                if self.variant.commit_before_send && usize::from(w.next) == self.n() - 1 {
                    // (c): the lock's checkpoint commits before the send after it.
                    let me = self.me(&s, p);
                    let commit = Change::Commit { ttl: TTL };
                    s.store[r] = change(s.store[r].as_ref(), &me, &commit).0;
                }
            }
            Action::Send {
                p,
                r,
                outcome,
                ack_lost,
            } => {
                let Slot::Working(mut w) = s.procs[p].slots[r] else {
                    unreachable!()
                };
                let u = usize::from(w.next);
                let (applied, delivered, uncertain) = self.send(&mut s, p, r, u, outcome)?;
                let i = r * self.n() + u;
                if applied {
                    s.sink[i] = (s.sink[i] + 1).min(COPIES_CAP);
                    if self.units[u].kind == Sink::Plain && !delivered {
                        // An uncertain answer: the next attempt sends it again.
                        s.explained[i] = s.explained[i].saturating_add(1);
                    }
                }
                if delivered {
                    w.done |= bit(u);
                }
                w.uncertain |= uncertain;
                w.checked = false;
                w.next += 1;
                if !self.advance(&mut s, p, r, w, ack_lost) {
                    return None;
                }
            }
            Action::Settle { p, r, answer } => {
                let me = self.me(&s, p);
                let Slot::Owes(owed) = s.procs[p].slots[r] else {
                    unreachable!()
                };
                let c = match owed {
                    Owed::Commit => Change::Commit { ttl: TTL },
                    Owed::Release => Change::Release,
                    Owed::Abandon(m) => Change::Abandon {
                        progress: self.progress(m),
                    },
                };
                let (next, settled) = change(s.store[r].as_ref(), &me, &c);
                match answer {
                    // Done, or not its lock any more (taken over, gone): nothing to do.
                    Answer::Ok => {
                        s.store[r] = next;
                        s.procs[p].slots[r] = Slot::Idle;
                    }
                    // Applied; still queued, to be retried.
                    Answer::Lost if settled == Settled::Ok => s.store[r] = next,
                    // Nothing applied, nothing to lose.
                    Answer::Lost => return None,
                    Answer::Dropped => s.procs[p].slots[r] = Slot::Idle,
                }
            }
            Action::Crash { p } => self.crash(&mut s, p),
            Action::LeaseLapses { r } => {
                let rec = s.store[r].as_ref()?;
                let next = self.next_lease(rec)?;
                let name = rec.owner.clone();
                let before = rec.clone();
                let rec = s.store[r].as_mut()?;
                rec.status = LockStatus::Pending {
                    lease_until_ms: next,
                };
                let after = rec.clone();
                if let Some(p) = self.live_holder(&s, &name) {
                    if let Slot::Working(w) = s.procs[p].slots[r] {
                        // The owner's own clock sees it: its pre-send check fails from now.
                        if next - self.clock(p) <= MARGIN {
                            s.procs[p].slots[r] = Slot::Working(Work {
                                lease_ok: false,
                                ..w
                            });
                        }
                    }
                    if !self.takeable_from(&before, 1 - p) && self.takeable_from(&after, 1 - p) {
                        // The other host may take the key over now: what this live owner
                        // delivered and the store does not list will be sent again.
                        self.explain_unrecorded(&mut s, p, r);
                    }
                }
            }
            Action::TtlPasses { r } => s.store[r].as_mut()?.ttl = TTL_OVER,
        }
        Some(s)
    }
}

#[test]
fn readable_then_plain() {
    check(
        Lock::new(READABLE_PLAIN, 1, 4, Variant::default()),
        "readable+plain, 1 record, 4 faults",
    )
    .assert_properties();
}

#[test]
fn transactional_then_plain() {
    check(
        Lock::new(TRANSACTIONAL_PLAIN, 1, 4, Variant::default()),
        "transactional+plain, 1 record, 4 faults",
    )
    .assert_properties();
}

#[test]
fn three_kinds_and_two_copies() {
    check(
        Lock::new(READABLE_TRANSACTIONAL_PLAIN, 1, 3, Variant::default()),
        "readable+transactional+plain, 1 record, 3 faults",
    )
    .assert_properties();
    check(
        Lock::new(PLAIN_TWO_COPIES, 1, 3, Variant::default()),
        "plain x2, 1 record, 3 faults",
    )
    .assert_properties();
}

#[test]
fn single_sends() {
    for (sends, name) in [
        (READABLE, "readable"),
        (TRANSACTIONAL, "transactional"),
        (PLAIN, "plain"),
    ] {
        check(
            Lock::new(sends, 1, 4, Variant::default()),
            &format!("{name}, 1 record, 4 faults"),
        )
        .assert_properties();
    }
}

/// Two keys: a crash hits both records' attempts, and one budget pays for both.
#[test]
fn two_records() {
    check(
        Lock::new(READABLE, 2, 2, Variant::default()),
        "readable, 2 records, 2 faults",
    )
    .assert_properties();
}

/// By hand, to explore other bounds or variants: `M_SENDS` (`+`-separated sends, each
/// `readable`, `transactional` or `plain`, optionally `*copies`; default
/// `readable+plain`), `M_RECORDS`, `M_FAULTS`, `M_CLOCKS` (the two hosts' offsets in
/// seconds, e.g. `1,-1`; the tolerated skew stays 2 s) and `M_VARIANT` (`,`-separated
/// names of [`Variant`]'s fields); prints every discovery (violations and examples) with
/// its last state. E.g. `M_SENDS=readable*2+plain M_RECORDS=2 M_FAULTS=2 cargo test -p
/// sluice-lock-protocol --test model explore -- --ignored --nocapture`.
#[test]
#[ignore]
fn explore() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let sends: Vec<(Sink, u32)> = env("M_SENDS", "readable+plain")
        .split('+')
        .map(|s| {
            let (kind, copies) = s.split_once('*').unwrap_or((s, "1"));
            let kind = match kind {
                "readable" => Sink::Readable,
                "transactional" => Sink::Transactional,
                "plain" => Sink::Plain,
                other => panic!("unknown send kind {other}"),
            };
            (kind, copies.parse().unwrap())
        })
        .collect();
    let records: usize = env("M_RECORDS", "1").parse().unwrap();
    let faults: u8 = env("M_FAULTS", "2").parse().unwrap();
    let names = env("M_VARIANT", "");
    let on = |name: &str| names.split(',').any(|n| n == name);
    let variant = Variant {
        ttl_frees_pending: on("ttl_frees_pending"),
        not_reentrant: on("not_reentrant"),
        commit_before_send: on("commit_before_send"),
        ack_inflight_duplicate: on("ack_inflight_duplicate"),
        lease_may_lapse_mid_send: on("lease_may_lapse_mid_send"),
        commit_after_partial_failure: on("commit_after_partial_failure"),
        release_after_partial_delivery: on("release_after_partial_delivery"),
        no_presend_check: on("no_presend_check"),
        no_skew_margin: on("no_skew_margin"),
        retake_drops_progress: on("retake_drops_progress"),
    };
    let mut model = Lock::new(&sends, records, faults, variant);
    model.clocks = env("M_CLOCKS", "1,-1")
        .split(',')
        .map(|c| c.trim().parse().unwrap())
        .collect();
    let c = check(model, "explore");
    for (name, path) in c.discoveries() {
        eprintln!("DISCOVERY {name}: {:?}", path.clone().into_actions());
        eprintln!("LAST {:?}", path.last_state());
    }
}

/// The slot `p` has for `r` in `s`.
fn slot(s: &State, p: usize, r: usize) -> Slot {
    s.procs[p].slots[r]
}

/// Bug (i), the old commit rule: the send inside the lock delivered, the one after it
/// failed, and the key is committed anyway: the redelivery finds it committed, drops it as
/// a duplicate and acknowledges it, and the plain sink never gets the record.
#[test]
fn finds_a_commit_after_a_partial_failure_losing_a_record() {
    let variant = Variant {
        commit_after_partial_failure: true,
        ..Variant::default()
    };
    let model = Lock::new(READABLE_PLAIN, 1, 1, variant);
    let m = Lock::new(READABLE_PLAIN, 1, 1, variant);
    let steps = counterexample(model, "no record lost for good", "(i) readable+plain");
    // The culprit: a commit owed for a message missing from a sink (whether it lands, or
    // a redelivery meets it queued and is dropped as a duplicate).
    assert!(steps.iter().any(|(s, _)| {
        (0..m.processes)
            .any(|p| slot(s, p, 0) == Slot::Owes(Owed::Commit) && !m.delivered_all(s, 0))
    }));
}

/// Bug (ii): a message delivered to one send and failed at another is released, and its
/// progress with it: the next attempt takes the key fresh and sends to the first send
/// again.
#[test]
fn finds_a_release_after_a_partial_delivery_duplicating() {
    let variant = Variant {
        release_after_partial_delivery: true,
        ..Variant::default()
    };
    for sends in [READABLE_PLAIN, PLAIN_TWO_COPIES] {
        let model = Lock::new(sends, 1, 1, variant);
        let m = Lock::new(sends, 1, 1, variant);
        let label = format!("(ii) {sends:?}");
        let steps = counterexample(model, "no unexplained duplicate", &label);
        // The culprit: a release owed for a message that reached a sink (never, in the
        // design: a key taken fresh whose attempt delivered nothing had no earlier
        // delivery either). Whether it lands or a redelivery cancels it and retakes the
        // key, the progress is gone.
        assert!(steps.iter().any(|(s, _)| (0..m.processes).any(|p| {
            slot(s, p, 0) == Slot::Owes(Owed::Release) && (0..m.n()).any(|u| m.copies(s, 0, u) > 0)
        })));
    }
}

/// Bug (iii): no pre-send check: an owner whose renewals failed sends although, by its own
/// clock, its lease has lapsed, after the other host took the key over and sent.
#[test]
fn finds_a_send_without_the_presend_check_duplicating() {
    let variant = Variant {
        no_presend_check: true,
        ..Variant::default()
    };
    let steps = counterexample(
        Lock::new(READABLE, 1, 1, variant),
        "no unexplained duplicate",
        "(iii) readable",
    );
    // The culprit: a send prepared although the owner's own clock said its lease lapsed.
    assert!(steps.iter().any(|(s, a)| match *a {
        Action::Check { p, r } => matches!(slot(s, p, r), Slot::Working(w) if !w.lease_ok),
        _ => false,
    }));
}

/// Bug (iv): takers compare leases without the skew margin while the clocks differ: the
/// host whose clock runs ahead takes over a lease its owner still sees live with margin,
/// and both send.
#[test]
fn finds_an_unbounded_skew_duplicating() {
    let variant = Variant {
        no_skew_margin: true,
        ..Variant::default()
    };
    let m = Lock::new(READABLE, 1, 1, variant);
    let steps = counterexample(m.clone(), "no unexplained duplicate", "(iv) readable");
    assert!(takes_over_a_live_lease(&m, &steps));
}

/// The same with the margin kept but the clocks 3 s apart, beyond the 2 s tolerated: the
/// tolerance must cover the real skew.
#[test]
fn finds_a_skew_beyond_the_tolerance_duplicating() {
    let mut m = Lock::new(READABLE, 1, 1, Variant::default());
    m.clocks = vec![2, -1];
    let steps = counterexample(m.clone(), "no unexplained duplicate", "skew 3 s, readable");
    assert!(takes_over_a_live_lease(&m, &steps));
}

/// Whether a step takes over a lease that its owner's clock sees live with margin.
fn takes_over_a_live_lease(m: &Lock, steps: &[(State, Action)]) -> bool {
    steps.iter().any(|(s, a)| match *a {
        Action::Acquire { p, r, lost: false } => s.store[r].as_ref().is_some_and(|rec| {
            rec.owner != m.me(s, p)
                && is_pending(rec)
                && rec.lease_until_ms().unwrap() - m.clock(host_of(&rec.owner)) > MARGIN
        }),
        _ => false,
    })
}

/// A redelivered copy that cancels its process's queued abandonment and retakes the key
/// drops the progress that abandonment carried: the retake sends the delivered copy again.
#[test]
fn finds_a_retake_dropping_progress_duplicating() {
    let variant = Variant {
        retake_drops_progress: true,
        ..Variant::default()
    };
    let steps = counterexample(
        Lock::new(PLAIN_TWO_COPIES, 1, 1, variant),
        "no unexplained duplicate",
        "retake drops progress, plain x2",
    );
    assert!(steps.iter().any(|(s, a)| match *a {
        Action::Deliver { p, r } => matches!(slot(s, p, r), Slot::Owes(Owed::Abandon(m)) if m != 0),
        _ => false,
    }));
}

/// The design's assumption is needed: without it, a readable sink gets a second copy (the
/// owner's lease runs out after its pre-send check, a taker reads back, finds nothing and
/// sends, then the first send lands).
#[test]
fn finds_a_lease_lapsing_mid_send_duplicating() {
    let variant = Variant {
        lease_may_lapse_mid_send: true,
        ..Variant::default()
    };
    let steps = counterexample(
        Lock::new(READABLE, 1, 1, variant),
        "no unexplained duplicate",
        "lapse mid-send, readable",
    );
    assert!(steps.iter().any(|(s, a)| {
        match *a {
            Action::LeaseLapses { r } => s
                .procs
                .iter()
                .any(|p| matches!(p.slots[r], Slot::Working(w) if w.checked)),
            _ => false,
        }
    }));
}

/// ... and the transactional sink does not need it: its write is conditional on the
/// owner, so a late send after a takeover writes nothing.
#[test]
fn transactional_sink_without_the_lease_assumption() {
    let variant = Variant {
        lease_may_lapse_mid_send: true,
        ..Variant::default()
    };
    check(
        Lock::new(TRANSACTIONAL, 1, 4, variant),
        "transactional without the lease assumption, 1 record, 4 faults",
    )
    .assert_properties();
}

/// Bug (a): a pending lock whose TTL passed is taken over although its lease is live: two
/// owners send the same record.
#[test]
fn finds_a_pending_lock_freed_by_its_ttl() {
    let variant = Variant {
        ttl_frees_pending: true,
        ..Variant::default()
    };
    let m = Lock::new(READABLE, 1, 1, variant);
    let steps = counterexample(
        Lock::new(READABLE, 1, 1, variant),
        "no unexplained duplicate",
        "(a) readable",
    );
    // The culprit: an acquisition that took another owner's lock with a live lease.
    assert!(steps.iter().any(|(s, a)| {
        match *a {
            Action::Acquire { p, r, lost: false } => s.store[r]
                .as_ref()
                .is_some_and(|rec| rec.blocks(m.clock(p), SKEW) && rec.owner != m.me(s, p)),
            _ => false,
        }
    }));
}

/// Bug (b): acquisition is not re-entrant and a failed release is dropped: the owner meets
/// its own forgotten pending lock, calls the record a duplicate and acknowledges it unsent.
#[test]
fn finds_a_non_reentrant_acquire_losing_a_record() {
    let variant = Variant {
        not_reentrant: true,
        ..Variant::default()
    };
    for sends in [READABLE, TRANSACTIONAL, PLAIN] {
        let m = Lock::new(sends, 1, 2, variant);
        let model = Lock::new(sends, 1, 2, variant);
        let steps = counterexample(model, "no record lost for good", &format!("(b) {sends:?}"));
        // The culprit: an acquisition over the owner's own pending lock.
        assert!(steps.iter().any(|(s, a)| {
            match *a {
                Action::Acquire { p, r, lost: false } => s.store[r]
                    .as_ref()
                    .is_some_and(|rec| is_pending(rec) && rec.owner == m.me(s, p)),
                _ => false,
            }
        }));
    }
}

/// Bug (c): the lock commits at its checkpoint, before the send after it: when that send
/// fails, the redelivery finds the key committed and drops the record.
#[test]
fn finds_a_commit_before_the_send_losing_a_record() {
    let variant = Variant {
        commit_before_send: true,
        ..Variant::default()
    };
    let steps = counterexample(
        Lock::new(PLAIN, 1, 1, variant),
        "no record lost for good",
        "(c) plain",
    );
    assert!(steps.iter().any(|(_, a)| matches!(
        a,
        Action::Send {
            outcome: SendOutcome::FailBefore | SendOutcome::Timeout { .. },
            ..
        }
    )));
}

/// The in-memory rule as first described: a copy arriving while the same process has the
/// record in flight is acknowledged at once as a duplicate. When the first copy then
/// fails, the source has been told the record is done: lost.
#[test]
fn finds_an_in_flight_duplicate_acknowledged_too_early() {
    let variant = Variant {
        ack_inflight_duplicate: true,
        ..Variant::default()
    };
    for sends in [READABLE, TRANSACTIONAL, PLAIN] {
        let model = Lock::new(sends, 1, 1, variant);
        let label = format!("in-flight ack, {sends:?}");
        let steps = counterexample(model, "no record lost for good", &label);
        assert!(steps.iter().any(|(s, a)| match *a {
            Action::Deliver { p, r } => in_flight(s.procs[p].slots[r]),
            _ => false,
        }));
    }
}
