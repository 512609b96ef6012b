//! What the lock protocol's two model checks share (`tests/model.rs`, today's per-key
//! commits, and `tests/model_epochs.rs`, commits by epoch): the abstract time and clocks,
//! the kinds of sends and their units, a process's attempt at a message, and the runners
//! that check a model to the end or search a broken variant's shortest counterexample.
//! See `../../MODEL.md`.

// Each test binary uses part of this module.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use stateright::{Checker, HasDiscoveries, Model};

/// The instant every store operation happens at, by a clock that is exactly right (epoch
/// ms). A host reads it as `NOW + its offset`.
pub const NOW: i64 = 1_800_000_000_000;
/// A clock offset unit (ms): each host's clock is `NOW + offset * CLOCK_UNIT`.
pub const CLOCK_UNIT: i64 = 1_000;
/// The tolerated skew between any two clocks (ms), which every acquisition carries.
pub const SKEW: i64 = 2_000;
/// How long a lease runs from its taking or renewal (ms, by the owner's clock).
pub const LEASE: i64 = 60_000;
/// The pre-send check: the owner sends only while its lease has more than this left by its
/// own clock. The design's assumption is that one sink call takes less than this.
pub const MARGIN: i64 = 500;
/// The TTL (epoch s) every lock asks for: a day ahead.
pub const TTL: i64 = NOW / 1000 + 24 * 3600;
/// A TTL whose time passed.
pub const TTL_OVER: i64 = NOW / 1000 - 1;
/// Sink copies are counted up to this (never reached by the budgets used: it only keeps
/// the state space finite whatever a broken variant does).
pub const COPIES_CAP: u8 = 7;
/// The longest fault-free continuation `completes` check of each model walks.
pub const COMPLETION_STEPS: usize = 300;

/// The kind of a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sink {
    /// Kinesis with read-back: a taker told of an earlier pending owner reads the sink
    /// before sending, and a send's uncertain answer is resolved by reading back.
    Readable,
    /// DynamoDB with `transactional: true`: the item write and `Change::Record` of its
    /// progress are one transaction, conditional on the lock being the owner's pending
    /// lock. The lock is committed later, by the normal commit.
    Transactional,
    /// Firehose: no read-back, no transaction.
    Plain,
}

/// One delivery a message needs: copy `copy` of the message at send `send` (each send has
/// a stable progress id, `s{send}`). A process attempts a message's units in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub kind: Sink,
    pub send: u8,
    pub copy: u32,
}

impl Unit {
    pub fn send_id(&self) -> String {
        format!("s{}", self.send)
    }
}

/// The sends a message guarded by one lock goes to: per send, its kind and how many copies
/// of the message it gets (a fan-out into several records of one send). Send 0 is the one
/// inside the lock; any further ones come after it.
pub fn units(sends: &[(Sink, u32)]) -> Vec<Unit> {
    let mut v = Vec::new();
    for (i, &(kind, copies)) in sends.iter().enumerate() {
        for copy in 0..copies {
            v.push(Unit {
                kind,
                send: u8::try_from(i).unwrap(),
                copy,
            });
        }
    }
    assert!(v.len() <= 8, "units are a u8 mask");
    v
}

/// A process's attempt at a message whose key it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Work {
    /// The key was pending before (under anyone, this owner included): an earlier attempt
    /// may have delivered units that its progress does not list.
    pub prior: bool,
    /// What the owner's own clock says: its lease has more than the margin left. It sees
    /// time, not a takeover.
    pub lease_ok: bool,
    /// Readable units not in `done` must be read back before anything is sent (`prior`).
    pub read: bool,
    /// The pre-send check passed for unit `next`; its send comes next. The design's
    /// assumption is that the lease does not end (by the owner's clock) from here until the
    /// send was applied.
    pub checked: bool,
    /// The next unit to attempt (units in `done` are skipped).
    pub next: u8,
    /// Units known delivered: inherited from the lock's progress, found by a read-back, or
    /// delivered by this attempt.
    pub done: u8,
    /// Some unit's send had an uncertain answer.
    pub uncertain: bool,
}

/// How a send went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SendOutcome {
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

pub fn owner(p: usize, incarnation: u8) -> String {
    format!("p{}{}", p + 1, "'".repeat(usize::from(incarnation)))
}

/// The host an owner name runs on.
pub fn host_of(name: &str) -> usize {
    usize::from(name.as_bytes()[1] - b'1')
}

pub fn bit(u: usize) -> u8 {
    1 << u
}

pub fn fingerprint(s: &impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

pub const READABLE: &[(Sink, u32)] = &[(Sink::Readable, 1)];
pub const TRANSACTIONAL: &[(Sink, u32)] = &[(Sink::Transactional, 1)];
pub const PLAIN: &[(Sink, u32)] = &[(Sink::Plain, 1)];
/// A readable send inside the lock and a plain one after it.
pub const READABLE_PLAIN: &[(Sink, u32)] = &[(Sink::Readable, 1), (Sink::Plain, 1)];
/// A transactional send inside the lock and a plain one after it.
pub const TRANSACTIONAL_PLAIN: &[(Sink, u32)] = &[(Sink::Transactional, 1), (Sink::Plain, 1)];
/// A readable send inside the lock, then a transactional one and a plain one after it.
pub const READABLE_TRANSACTIONAL_PLAIN: &[(Sink, u32)] = &[
    (Sink::Readable, 1),
    (Sink::Transactional, 1),
    (Sink::Plain, 1),
];
/// One plain send that gets two copies of the message (a fan-out).
pub const PLAIN_TWO_COPIES: &[(Sink, u32)] = &[(Sink::Plain, 2)];

/// Runs the check to the end, printing its figures.
pub fn check<M>(model: M, label: &str) -> impl Checker<M>
where
    M: Model + Send + Sync + 'static,
    M::State: Debug + Hash + Send + Sync + Clone + PartialEq,
    M::Action: Debug + Send + Sync + Clone + PartialEq,
{
    let t = Instant::now();
    let checker = model.checker().spawn_bfs().join();
    report(&checker, label, t.elapsed());
    checker
}

pub fn report<M: Model>(checker: &impl Checker<M>, label: &str, elapsed: Duration) {
    eprintln!(
        "{label}: {} states ({} unique), depth {}, {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        elapsed.as_secs_f64()
    );
}

/// Runs a broken variant until `property` fails and returns a shortest counterexample:
/// each state with the action taken from it. (stateright's search keeps the last violation
/// it met, not the first, so the depth is raised one step at a time.)
pub fn counterexample<M>(
    model: M,
    property: &'static str,
    label: &str,
) -> Vec<(M::State, M::Action)>
where
    M: Model + Clone + Send + Sync + 'static,
    M::State: Debug + Hash + Send + Sync + Clone + PartialEq,
    M::Action: Debug + Send + Sync + Clone + PartialEq,
{
    let t = Instant::now();
    let mut depth = 2;
    let (checker, path) = loop {
        let checker = model
            .clone()
            .checker()
            .target_max_depth(depth)
            .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property])))
            .spawn_bfs()
            .join();
        if let Some(path) = checker.discovery(property) {
            break (checker, path);
        }
        // The whole space was explored below the bound.
        if checker.max_depth() < depth - 1 {
            panic!("{label}: \"{property}\" was not violated");
        }
        depth += 1;
    };
    report(&checker, label, t.elapsed());
    eprintln!("{label}: counterexample: {:?}", path.clone().into_actions());
    eprintln!("{label}: last state: {:?}", path.last_state());
    path.into_vec()
        .into_iter()
        .filter_map(|(s, a)| Some((s, a?)))
        .collect()
}
