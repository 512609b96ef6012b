//! Exhaustive model check of `meta_kv_store_lock`'s protocol (see `../MODEL.md`).
//!
//! A [`Lock`] model explores, breadth first and to exhaustion, every interleaving of a
//! source, two processes and a lock store, with crashes, lost store answers, failed, lost
//! and uncertain sink answers, lost acknowledgements, leases that run out and TTLs that
//! pass, all drawn from one fault budget. Every change to a lock record goes through this
//! crate's rules ([`acquire`], [`change`]; [`LockRecord::blocks`] through them); the model
//! only decides what the processes and the environment do.
//!
//! BOUNDS:
//! - 2 processes (owners `p1`, `p2`; a crash restarts one as `p1'`, `p1''`, ...);
//! - per sink kind, two runs: 2 records (`r1`, `r2`, each its own lock key) with a budget
//!   of 3 faults, and 1 record with a budget of 5 faults;
//! - every kind of fault enabled in every run, drawn from the one budget;
//! - no depth bound: the state space is finite (the budget bounds every fault; sink copies
//!   are capped far above what a budget can produce) and is explored to the end; the
//!   deepest paths are 19 to 30 steps.
//!
//! MEASURED (2-core machine, dev profile, no opt-level override, one checker thread per
//! test; `CARGO_TARGET_DIR=/tmp/target-model cargo test -p sluice-lock-protocol --
//! --nocapture --test-threads=1`, which prints these lines; unique states, depth, time):
//!
//! | run                                        | unique states | depth | time   |
//! |--------------------------------------------|---------------|-------|--------|
//! | readable, 2 records, 3 faults              | 358,136       | 26    | 12.5 s |
//! | readable, 1 record, 5 faults               | 24,218        | 20    | 0.6 s  |
//! | transactional, 2 records, 3 faults         | 153,088       | 22    | 5.8 s  |
//! | transactional, 1 record, 5 faults          | 11,916        | 19    | 0.5 s  |
//! | plain, 2 records, 3 faults                 | 618,136       | 30    | 19.9 s |
//! | plain, 1 record, 5 faults                  | 41,691        | 28    | 0.9 s  |
//! | transactional, no lease assumption, 2r, 3f | 211,080       | 22    | 8.2 s  |
//! | the eight counterexample searches          | 218 to 1,533  | 9-14  | < 0.1 s each |
//!
//! The whole test binary: 49 s with one test thread; with the default two, 27 s on an
//! idle machine and 47 s with another build holding one core.
//!
//! TIME is abstract: the clock stands at [`NOW`] and a lease or a TTL is live (in the
//! future) or over (in the past). "Time passes beyond this lease / this TTL" is an event of
//! the environment that moves that one value into the past; every store operation is then
//! evaluated at [`NOW`] by the crate's rules.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_lock_protocol::{
    AcquireRequest, Acquired, Change, LockRecord, LockStatus, Settled, acquire, change,
};
use stateright::{Checker, HasDiscoveries, Model, Property};

/// The clock (epoch ms).
const NOW: i64 = 1_800_000_000_000;
/// A lease taken or renewed now ends here.
const LEASE_UNTIL: i64 = NOW + 60_000;
/// A lease whose time passed.
const LEASE_OVER: i64 = NOW - 1;
/// The TTL (epoch s) every lock asks for: a day ahead.
const TTL: i64 = NOW / 1000 + 24 * 3600;
/// A TTL whose time passed.
const TTL_OVER: i64 = NOW / 1000 - 1;
/// Sink copies are counted up to this (never reached by the budgets used: it only keeps
/// the state space finite whatever a broken variant does).
const COPIES_CAP: u8 = 7;
/// The longest fault-free continuation [`Lock::completes`] walks.
const COMPLETION_STEPS: usize = 200;

/// The kind of sink inside the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Sink {
    /// Kinesis with read-back: a taker told of an earlier pending owner reads the sink
    /// before sending, and a send's uncertain answer is resolved by reading back.
    Readable,
    /// DynamoDB with `transactional: true`: the item write and the lock's commit are one
    /// transaction, conditional on the lock being the owner's pending lock.
    Transactional,
    /// Firehose: no read-back, no transaction.
    Plain,
}

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
    /// Bug (c): the lock commits at its checkpoint, before the send after it happened.
    commit_before_send: bool,
    /// The in-memory rule as described: a copy that arrives while the same process has the
    /// record in flight is acknowledged at once as a duplicate. The design checked here
    /// lets such a copy follow the first copy's fate instead (acknowledged when that one
    /// is delivered, redelivered when it fails).
    ack_inflight_duplicate: bool,
    /// Drops the design's assumption (a lease is longer than one sink call): a live
    /// owner's lease may also run out between its lease check and its send being applied.
    lease_may_lapse_mid_send: bool,
}

/// What a process owes the store for a key once its message resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Owed {
    /// Delivered: commit.
    Commit,
    /// Certainly not delivered: release (delete).
    Release,
    /// Possibly delivered: abandon (end the lease, stay pending with `since`).
    Abandon,
}

/// What a process knows of one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Slot {
    /// Nothing.
    Idle,
    /// Received; an acquisition is due (first try, after an answer was lost, or while
    /// waiting for another owner's pending lock).
    Acquiring,
    /// Taken. `prior`: it was pending before (under anyone, this owner included), so an
    /// earlier attempt may have delivered it. `lease_ok`: what the owner knows from its own
    /// clock: its lease has not run out (it cannot see a takeover, only time).
    Taken { prior: bool, lease_ok: bool },
    /// The lease was checked live with margin; the send comes next. The design's
    /// assumption (a lease is longer than one sink call) is that the lease cannot run out
    /// from here until the send was applied.
    Checked,
    /// Resolved; the store change is queued and retried until it lands.
    Owes(Owed),
}

/// One process: its incarnation (a crash restarts it as a new owner) and its memory.
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
    /// Copies of each record in the sink.
    sink: Vec<u8>,
    /// Plain sink: the extra copies that a crash, an uncertain answer or a live owner's
    /// lapsed lease in the record's path explains (each such event explains one).
    explained: Vec<u8>,
    /// Records the source was told were done (it redelivers the others).
    acked: Vec<bool>,
    procs: Vec<Proc>,
    /// Faults the environment may still inject.
    faults: u8,
}

/// How a send went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SendOutcome {
    /// Applied and answered.
    Ok,
    /// Not applied, and the client knows it (an error before forwarding): certain failure.
    FailBefore,
    /// Applied, answer lost: uncertain. A readable sink reads back (`read_fails`: that
    /// read fails too, leaving it uncertain).
    FailAfter { read_fails: bool },
    /// Not applied, answer lost (a timeout before forwarding): uncertain. A readable sink
    /// reads back as above.
    Timeout { read_fails: bool },
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
    /// Readable sink: `p` looks for `r` before sending, since the lock was pending before.
    ReadBack { p: usize, r: usize, fails: bool },
    /// `p` renews its lease on `r` (conditional on the owner).
    Renew { p: usize, r: usize },
    /// `p` checks its lease on `r` before sending; re-acquires when it ran out.
    Check { p: usize, r: usize },
    /// `p` sends `r` to the sink. `ack_lost`: delivered, but the source never gets the ack.
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
    /// Time passes beyond the lease of `r`'s pending lock (its owner did not renew it).
    LeaseEnds { r: usize },
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
            Action::LeaseEnds { .. } => 6,
            Action::Deliver { .. } => 7,
            Action::StoreOutage { .. } | Action::Crash { .. } | Action::TtlPasses { .. } => 8,
        }
    }
}

/// The model: its bounds and variant, and the memory of the completion check.
struct Lock {
    sink: Sink,
    records: usize,
    processes: usize,
    faults: u8,
    variant: Variant,
    /// Fingerprints of states known to complete without faults ([`Lock::completes`]).
    completes: Arc<Mutex<HashSet<u64>>>,
}

fn owner(p: usize, incarnation: u8) -> String {
    format!("p{}{}", p + 1, "'".repeat(usize::from(incarnation)))
}

fn request(r: usize) -> AcquireRequest {
    AcquireRequest {
        key: format!("r{}", r + 1),
        ttl: TTL,
        lease_until_ms: LEASE_UNTIL,
        skew_ms: 0,
    }
}

fn is_pending(rec: &LockRecord) -> bool {
    matches!(rec.status, LockStatus::Pending { .. })
}

fn in_flight(slot: Slot) -> bool {
    matches!(slot, Slot::Acquiring | Slot::Taken { .. } | Slot::Checked)
}

fn fingerprint(s: &State) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

impl Lock {
    fn new(sink: Sink, records: usize, faults: u8, variant: Variant) -> Lock {
        Lock {
            sink,
            records,
            processes: 2,
            faults,
            variant,
            completes: Arc::default(),
        }
    }

    fn me(&self, s: &State, p: usize) -> String {
        owner(p, s.procs[p].incarnation)
    }

    /// The live process whose current owner name is `name` (none: a crashed owner).
    fn live_holder(&self, s: &State, name: &str) -> Option<usize> {
        (0..self.processes).find(|&p| self.me(s, p) == name)
    }

    /// The store's acquisition: the crate's rule, or a historical one layered on it.
    fn store_acquire(
        &self,
        current: Option<&LockRecord>,
        who: &str,
        r: usize,
    ) -> Result<(LockRecord, Acquired), LockRecord> {
        if let Some(rec) = current {
            if self.variant.ttl_frees_pending && is_pending(rec) && rec.ttl * 1000 <= NOW {
                // (a): "absent, or TTL passed, or pending with its lease over".
                return acquire(None, who, NOW, &request(r));
            }
            if self.variant.not_reentrant && rec.owner == who && rec.blocks(NOW, 0) {
                // (b): the owner's own live pending lock holds it off like anyone's.
                return Err(rec.clone());
            }
        }
        acquire(current, who, NOW, &request(r))
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
            Action::LeaseEnds { r } => {
                let rec = s.store[r].as_ref()?;
                match self.live_holder(s, &rec.owner) {
                    // A crashed owner renews nothing: time alone ends its lease.
                    None => 0,
                    Some(p) => match s.procs[p].slots[r] {
                        // The owner does not know it holds the key (an acquisition whose
                        // answer was lost, a key it gave up): it does not renew it either.
                        Slot::Idle | Slot::Acquiring => 0,
                        // The design's assumption: not between the lease check and the
                        // send being applied.
                        Slot::Checked if !self.variant.lease_may_lapse_mid_send => return None,
                        // A live owner's lease runs out only if its renewals (or its
                        // settling call) failed for a whole lease: a fault.
                        Slot::Taken { .. } | Slot::Checked | Slot::Owes(_) => 1,
                    },
                }
            }
        })
    }

    /// The sends to explore: each outcome, and the delivered ones with a lost ack.
    fn send_outcomes(&self) -> Vec<(SendOutcome, bool)> {
        let mut v = vec![
            (SendOutcome::Ok, false),
            (SendOutcome::Ok, true),
            (SendOutcome::FailBefore, false),
            (SendOutcome::FailAfter { read_fails: false }, false),
            (SendOutcome::Timeout { read_fails: false }, false),
        ];
        if self.sink == Sink::Readable {
            // The read-back resolves a lost answer: found means delivered (and acked).
            v.push((SendOutcome::FailAfter { read_fails: false }, true));
            v.push((SendOutcome::FailAfter { read_fails: true }, false));
            v.push((SendOutcome::Timeout { read_fails: true }, false));
        }
        v
    }

    /// Whether the system is done: every record acknowledged and in the sink, nothing left
    /// in any process, and every lock committed, except what [`Lock::leftover`] allows.
    fn done(&self, s: &State) -> bool {
        s.procs
            .iter()
            .all(|p| p.slots.iter().all(|x| *x == Slot::Idle))
            && (0..self.records).all(|r| {
                s.acked[r]
                    && s.sink[r] >= 1
                    && (s.store[r]
                        .as_ref()
                        .is_some_and(|rec| rec.status == LockStatus::Committed)
                        || self.leftover(s, r))
            })
    }

    /// A lock that nothing will commit although its record was delivered and acknowledged.
    /// The acknowledgement does not wait for the commit (by design), and the source
    /// redelivers nothing acknowledged, so:
    /// - readable and plain sinks: a crash (or a lapsed lease) between the delivery and the
    ///   commit leaves the lock pending, its lease over, until a later copy takes it over
    ///   (and looks) or the store's TTL removes it;
    /// - plain sink only: a concurrent copy's process took such a lock over, sent, and its
    ///   send failed certainly: it released (deleted) the lock, and its `since` with it.
    ///
    /// The transactional sink allows neither: its commit is the delivery.
    fn leftover(&self, s: &State, r: usize) -> bool {
        let allowed = match &s.store[r] {
            Some(rec) => is_pending(rec) && !rec.blocks(NOW, 0) && self.sink != Sink::Transactional,
            None => self.sink == Sink::Plain,
        };
        allowed
            && s.acked[r]
            && s.sink[r] >= 1
            && (0..self.processes).all(|p| s.procs[p].slots[r] == Slot::Idle)
    }

    /// Acknowledged, not in the sink, and no process has it on its way: the source will
    /// not redeliver it and nobody will send it.
    fn lost_for_good(&self, s: &State, r: usize) -> bool {
        s.acked[r] && s.sink[r] == 0 && s.procs.iter().all(|p| !in_flight(p.slots[r]))
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

    /// `p` crashes: each queued commit of a delivered record whose lock is still its
    /// pending lock explains one extra copy (after the lease, a taker sends again).
    fn crash(&self, s: &mut State, p: usize) {
        let me = self.me(s, p);
        for r in 0..self.records {
            let delivered_uncommitted = s.procs[p].slots[r] == Slot::Owes(Owed::Commit)
                && s.store[r].as_ref().is_some_and(|rec| rec.pending_for(&me));
            if delivered_uncommitted {
                s.explained[r] = s.explained[r].saturating_add(1);
            }
        }
        s.procs[p].incarnation += 1;
        s.procs[p].slots.iter_mut().for_each(|x| *x = Slot::Idle);
    }

    /// What a send does to the sink and the store, and what the process concludes:
    /// `(applied, resolution)`, or `None` when the combination is not worth exploring.
    fn send(
        &self,
        s: &mut State,
        p: usize,
        r: usize,
        outcome: SendOutcome,
    ) -> Option<(bool, Owed)> {
        let readable = self.sink == Sink::Readable;
        Some(match (self.sink, outcome) {
            (Sink::Readable | Sink::Plain, SendOutcome::Ok) => (true, Owed::Commit),
            (Sink::Readable | Sink::Plain, SendOutcome::FailBefore) => (false, Owed::Release),
            // Read back: found means delivered; a failed read leaves it uncertain.
            (Sink::Readable | Sink::Plain, SendOutcome::FailAfter { read_fails }) => {
                if readable && !read_fails {
                    (true, Owed::Commit)
                } else {
                    (true, Owed::Abandon)
                }
            }
            // Read back: not found means a certain failure.
            (Sink::Readable | Sink::Plain, SendOutcome::Timeout { read_fails }) => {
                if readable && !read_fails {
                    (false, Owed::Release)
                } else {
                    (false, Owed::Abandon)
                }
            }
            (Sink::Transactional, _) => {
                // The items and the commit in one transaction conditional on the owner:
                // the commit's rule decides whether it applies at all.
                let me = self.me(s, p);
                let (next, settled) =
                    change(s.store[r].as_ref(), &me, &Change::Commit { ttl: TTL });
                if settled != Settled::Ok {
                    // Cancelled (another owner took the key over): nothing written, and
                    // the client is told so. Other outcomes: the same, for a fault.
                    return (outcome == SendOutcome::Ok).then_some((false, Owed::Release));
                }
                let applied = matches!(outcome, SendOutcome::Ok | SendOutcome::FailAfter { .. });
                if applied {
                    s.store[r] = next;
                }
                match outcome {
                    SendOutcome::Ok => (true, Owed::Commit),
                    SendOutcome::FailBefore => (false, Owed::Release),
                    SendOutcome::FailAfter { .. } => (true, Owed::Abandon),
                    SendOutcome::Timeout { .. } => (false, Owed::Abandon),
                }
            }
        })
    }
}

impl Model for Lock {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            store: vec![None; self.records],
            sink: vec![0; self.records],
            explained: vec![0; self.records],
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
                if !s.acked[r] && (!in_flight(slot) || self.variant.ack_inflight_duplicate) {
                    candidates.push(Action::Deliver { p, r });
                }
                match slot {
                    Slot::Idle => {}
                    Slot::Acquiring => {
                        candidates.push(Action::Acquire { p, r, lost: false });
                        candidates.push(Action::Acquire { p, r, lost: true });
                        candidates.push(Action::StoreOutage { p, r });
                    }
                    Slot::Taken { prior, lease_ok } => {
                        if prior && self.sink == Sink::Readable {
                            candidates.push(Action::ReadBack { p, r, fails: false });
                            candidates.push(Action::ReadBack { p, r, fails: true });
                        } else {
                            candidates.push(Action::Check { p, r });
                        }
                        if !lease_ok {
                            candidates.push(Action::Renew { p, r });
                        }
                    }
                    Slot::Checked => {
                        for (outcome, ack_lost) in self.send_outcomes() {
                            candidates.push(Action::Send {
                                p,
                                r,
                                outcome,
                                ack_lost,
                            });
                        }
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
                if is_pending(rec) && rec.blocks(NOW, 0) {
                    candidates.push(Action::LeaseEnds { r });
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
                // store lets its owner) and stop giving it back.
                Slot::Owes(Owed::Release | Owed::Abandon) => {
                    s.procs[p].slots[r] = Slot::Acquiring;
                }
                // Delivered here, commit queued (its ack was lost): a duplicate.
                Slot::Owes(Owed::Commit) => s.acked[r] = true,
                // In flight here: only the described rule gets here (acked at once).
                Slot::Acquiring | Slot::Taken { .. } | Slot::Checked => s.acked[r] = true,
            },
            Action::Acquire { p, r, lost } => {
                let me = self.me(&s, p);
                match self.store_acquire(s.store[r].as_ref(), &me, r) {
                    Ok((rec, Acquired::Taken { prior })) => {
                        s.store[r] = Some(rec);
                        // Lost: applied, but the process saw an error; it retries.
                        if !lost {
                            s.procs[p].slots[r] = Slot::Taken {
                                prior: prior.is_some(),
                                lease_ok: true,
                            };
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
                let Slot::Taken { lease_ok, .. } = s.procs[p].slots[r] else {
                    unreachable!()
                };
                s.procs[p].slots[r] = if fails {
                    // Cannot tell: give it back as possibly delivered.
                    Slot::Owes(Owed::Abandon)
                } else if s.sink[r] > 0 {
                    s.acked[r] = true;
                    Slot::Owes(Owed::Commit)
                } else {
                    Slot::Taken {
                        prior: false,
                        lease_ok,
                    }
                };
            }
            Action::Renew { p, r } => {
                let me = self.me(&s, p);
                let renew = Change::Renew {
                    ttl: TTL,
                    lease_until_ms: LEASE_UNTIL,
                };
                let (next, settled) = change(s.store[r].as_ref(), &me, &renew);
                if settled != Settled::Ok {
                    return None; // Not its lock any more: nothing changes.
                }
                s.store[r] = next;
                let Slot::Taken { prior, .. } = s.procs[p].slots[r] else {
                    unreachable!()
                };
                s.procs[p].slots[r] = Slot::Taken {
                    prior,
                    lease_ok: true,
                };
            }
            Action::Check { p, r } => {
                let Slot::Taken { lease_ok, .. } = s.procs[p].slots[r] else {
                    unreachable!()
                };
                if lease_ok {
                    s.procs[p].slots[r] = Slot::Checked;
                    if self.variant.commit_before_send {
                        // (c): the lock's checkpoint commits before the send after it.
                        let me = self.me(&s, p);
                        let commit = Change::Commit { ttl: TTL };
                        s.store[r] = change(s.store[r].as_ref(), &me, &commit).0;
                    }
                } else {
                    // Ran out (as far as its own clock says): take it again first.
                    s.procs[p].slots[r] = Slot::Acquiring;
                }
            }
            Action::Send {
                p,
                r,
                outcome,
                ack_lost,
            } => {
                let (applied, resolved) = self.send(&mut s, p, r, outcome)?;
                let delivered = resolved == Owed::Commit;
                if ack_lost && !delivered {
                    return None;
                }
                if applied {
                    s.sink[r] = (s.sink[r] + 1).min(COPIES_CAP);
                    if self.sink == Sink::Plain && !delivered {
                        // An uncertain answer: the taker of the abandoned lock sends again.
                        s.explained[r] = s.explained[r].saturating_add(1);
                    }
                }
                if delivered && !ack_lost {
                    s.acked[r] = true;
                }
                s.procs[p].slots[r] = if delivered && self.sink == Sink::Transactional {
                    Slot::Idle // Committed by the transaction itself.
                } else {
                    Slot::Owes(resolved)
                };
            }
            Action::Settle { p, r, answer } => {
                let me = self.me(&s, p);
                let Slot::Owes(owed) = s.procs[p].slots[r] else {
                    unreachable!()
                };
                let c = match owed {
                    Owed::Commit => Change::Commit { ttl: TTL },
                    Owed::Release => Change::Release,
                    Owed::Abandon => Change::Abandon {
                        progress: Default::default(),
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
            Action::LeaseEnds { r } => {
                let rec = s.store[r].as_mut()?;
                rec.status = LockStatus::Pending {
                    lease_until_ms: LEASE_OVER,
                };
                let name = rec.owner.clone();
                if let Some(p) = self.live_holder(&s, &name) {
                    match s.procs[p].slots[r] {
                        Slot::Taken { prior, .. } => {
                            s.procs[p].slots[r] = Slot::Taken {
                                prior,
                                lease_ok: false,
                            };
                        }
                        Slot::Owes(Owed::Commit) if self.sink == Sink::Plain => {
                            // Delivered, not committed, lease lapsed: a taker sends again.
                            s.explained[r] = s.explained[r].saturating_add(1);
                        }
                        _ => {}
                    }
                }
            }
            Action::TtlPasses { r } => s.store[r].as_mut()?.ttl = TTL_OVER,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut v = vec![
            Property::<Self>::always("no loss", |m, s| {
                (0..m.records).all(|r| !s.acked[r] || s.sink[r] >= 1)
            }),
            // Implied by "no loss". The broken variants are checked against this one, so
            // that their counterexamples end in a real loss, not in an early ack that a
            // copy still in flight would have made good.
            Property::<Self>::always("no record lost for good", |m, s| {
                (0..m.records).all(|r| !m.lost_for_good(s, r))
            }),
            Property::<Self>::always("no unexplained duplicate", |m, s| {
                (0..m.records).all(|r| match m.sink {
                    Sink::Readable | Sink::Transactional => s.sink[r] <= 1,
                    Sink::Plain => s.sink[r] <= 1 + s.explained[r],
                })
            }),
            Property::<Self>::always("commit implies delivered", |m, s| {
                (0..m.records).all(|r| {
                    s.store[r]
                        .as_ref()
                        .is_none_or(|rec| rec.status != LockStatus::Committed || s.sink[r] >= 1)
                })
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
        ];
        if self.sink != Sink::Plain {
            // What the read-back (or the transaction) relies on: once a copy is in the
            // sink, its key is never free again (a taker always learns of the earlier
            // attempt, or finds it committed).
            v.push(Property::<Self>::always(
                "a delivered record keeps its lock",
                |m, s| (0..m.records).all(|r| s.sink[r] == 0 || s.store[r].is_some()),
            ));
        }
        if self.sink != Sink::Transactional {
            v.push(Property::<Self>::sometimes(
                "done with a leftover pending lock",
                |m, s| {
                    m.done(s) && (0..m.records).any(|r| s.store[r].is_some() && m.leftover(s, r))
                },
            ));
        }
        if self.sink == Sink::Plain {
            v.push(Property::<Self>::sometimes(
                "an explained duplicate",
                |_, s| s.sink.iter().any(|&c| c >= 2),
            ));
            v.push(Property::<Self>::sometimes(
                "done with a delivered record's lock released",
                |m, s| m.done(s) && s.store.iter().any(Option::is_none),
            ));
        }
        v
    }
}

/// Runs the check to the end, printing its figures.
fn check(model: Lock, label: &str) -> impl Checker<Lock> {
    let t = Instant::now();
    let checker = model.checker().spawn_bfs().join();
    report(&checker, label, t.elapsed());
    checker
}

fn report(checker: &impl Checker<Lock>, label: &str, elapsed: Duration) {
    eprintln!(
        "{label}: {} states ({} unique), depth {}, {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        elapsed.as_secs_f64()
    );
}

/// Runs a broken variant until `property` fails and returns the counterexample: each
/// state with the action taken from it.
fn counterexample(model: Lock, property: &'static str, label: &str) -> Vec<(State, Action)> {
    let t = Instant::now();
    let checker = model
        .checker()
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property])))
        .spawn_bfs()
        .join();
    report(&checker, label, t.elapsed());
    let path = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("{label}: \"{property}\" was not violated"));
    eprintln!("{label}: counterexample: {:?}", path.clone().into_actions());
    eprintln!("{label}: last state: {:?}", path.last_state());
    path.into_vec()
        .into_iter()
        .filter_map(|(s, a)| Some((s, a?)))
        .collect()
}

#[test]
fn readable_sink() {
    check(
        Lock::new(Sink::Readable, 2, 3, Variant::default()),
        "readable, 2 records, 3 faults",
    )
    .assert_properties();
    check(
        Lock::new(Sink::Readable, 1, 5, Variant::default()),
        "readable, 1 record, 5 faults",
    )
    .assert_properties();
}

#[test]
fn transactional_sink() {
    check(
        Lock::new(Sink::Transactional, 2, 3, Variant::default()),
        "transactional, 2 records, 3 faults",
    )
    .assert_properties();
    check(
        Lock::new(Sink::Transactional, 1, 5, Variant::default()),
        "transactional, 1 record, 5 faults",
    )
    .assert_properties();
}

#[test]
fn plain_sink() {
    check(
        Lock::new(Sink::Plain, 2, 3, Variant::default()),
        "plain, 2 records, 3 faults",
    )
    .assert_properties();
    check(
        Lock::new(Sink::Plain, 1, 5, Variant::default()),
        "plain, 1 record, 5 faults",
    )
    .assert_properties();
}

/// The stated assumption is needed: without it, a readable sink gets a second copy (the
/// owner's lease runs out after its check, a taker reads back, finds nothing and sends,
/// then the first send lands).
#[test]
fn finds_a_lease_lapsing_mid_send_duplicating() {
    let variant = Variant {
        lease_may_lapse_mid_send: true,
        ..Variant::default()
    };
    let steps = counterexample(
        Lock::new(Sink::Readable, 1, 1, variant),
        "no unexplained duplicate",
        "lapse mid-send, readable",
    );
    assert!(steps.iter().any(|(s, a)| match *a {
        Action::LeaseEnds { r } => s.procs.iter().any(|p| p.slots[r] == Slot::Checked),
        _ => false,
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
        Lock::new(Sink::Transactional, 2, 3, variant),
        "transactional without the lease assumption, 2 records, 3 faults",
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
    let steps = counterexample(
        Lock::new(Sink::Readable, 1, 1, variant),
        "no unexplained duplicate",
        "(a) readable",
    );
    // The culprit: an acquisition that took another owner's lock with a live lease.
    assert!(steps.iter().any(|(s, a)| {
        match *a {
            Action::Acquire { p, r, lost: false } => s.store[r].as_ref().is_some_and(|rec| {
                rec.blocks(NOW, 0) && rec.owner != owner(p, s.procs[p].incarnation)
            }),
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
    for sink in [Sink::Readable, Sink::Transactional, Sink::Plain] {
        let model = Lock::new(sink, 1, 2, variant);
        let steps = counterexample(model, "no record lost for good", &format!("(b) {sink:?}"));
        // The culprit: an acquisition over the owner's own pending lock.
        assert!(steps.iter().any(|(s, a)| match *a {
            Action::Acquire { p, r, lost: false } => s.store[r].as_ref().is_some_and(|rec| {
                is_pending(rec) && rec.owner == owner(p, s.procs[p].incarnation)
            }),
            _ => false,
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
        Lock::new(Sink::Plain, 1, 1, variant),
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

/// The in-memory rule as described: a copy arriving while the same process has the record
/// in flight is acknowledged at once as a duplicate. When the first copy then fails, the
/// source has been told the record is done: lost.
#[test]
fn finds_an_in_flight_duplicate_acknowledged_too_early() {
    let variant = Variant {
        ack_inflight_duplicate: true,
        ..Variant::default()
    };
    for sink in [Sink::Readable, Sink::Transactional, Sink::Plain] {
        let model = Lock::new(sink, 1, 1, variant);
        let label = format!("in-flight ack, {sink:?}");
        let steps = counterexample(model, "no record lost for good", &label);
        assert!(steps.iter().any(|(s, a)| match *a {
            Action::Deliver { p, r } => in_flight(s.procs[p].slots[r]),
            _ => false,
        }));
    }
}

/// By hand, to explore other bounds or variants: `M_SINK=readable|transactional|plain`,
/// `M_RECORDS`, `M_FAULTS`, and `M_A`..`M_E`=1 for the variants in [`Variant`]'s order;
/// prints every discovery (violations and examples) with its last state. E.g.
/// `M_SINK=plain M_RECORDS=2 M_FAULTS=2 cargo test -p sluice-lock-protocol --test model
/// explore -- --ignored --nocapture`.
#[test]
#[ignore]
fn explore() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let sink = match env("M_SINK", "readable").as_str() {
        "readable" => Sink::Readable,
        "transactional" => Sink::Transactional,
        _ => Sink::Plain,
    };
    let records: usize = env("M_RECORDS", "1").parse().unwrap();
    let faults: u8 = env("M_FAULTS", "1").parse().unwrap();
    let variant = Variant {
        ttl_frees_pending: env("M_A", "0") == "1",
        not_reentrant: env("M_B", "0") == "1",
        commit_before_send: env("M_C", "0") == "1",
        ack_inflight_duplicate: env("M_D", "0") == "1",
        lease_may_lapse_mid_send: env("M_E", "0") == "1",
    };
    let c = check(Lock::new(sink, records, faults, variant), "explore");
    for (name, path) in c.discoveries() {
        eprintln!("DISCOVERY {name}: {:?}", path.clone().into_actions());
        eprintln!("LAST {:?}", path.last_state());
    }
}
