//! The keys a lock holds, and what it owes the store for each: the commit of a delivered
//! message's key, the release of a key whose message certainly failed, the abandonment of
//! one whose message may have been delivered although its send failed, and the renewal of
//! leases while messages are on their way.
//!
//! Every message that got its lock carries a token of a tracker made here: tagged with the
//! message's [`LockTicket`] and watched, so that when the last copy of the message is gone
//! (sent and acknowledged by a send inside the lock or after it, dropped, or failed) the
//! keeper hears of it and settles the key, off the hot path, in batched calls: one commit
//! call per up to 100 keys, a few milliseconds after the first of them resolved. The crash
//! window between a sink's acceptance and the commit is then about one store round trip,
//! whatever the input's rhythm.
//!
//! A message is settled by every copy of it, at every send: its key is committed only when
//! every copy was delivered (or deliberately dropped), inside the lock and after it. When
//! some copy failed, the key is released only if nothing was delivered anywhere and no
//! earlier attempt left history; otherwise it is abandoned with what the sends recorded as
//! delivered (the ticket's progress), so that the redelivery skips those copies and sends
//! the rest: one send of two, five records of six, a send inside the lock and not the one
//! after it.
//!
//! The work is done in two lanes, settlements (commits, releases, abandonments) and
//! renewals, which the keeper's own task drives when woken (a tokio task on the runtime the
//! lock runs on, started and restarted as needed), and which [`Keeper::pump`] runs both of
//! when the lock calls it at its checkpoint and when the adapter settles the pipeline
//! ([`Keeper::settle`]), so nothing depends on the task having run. Each lane is serialised.
//! A store call that fails leaves its keys queued; they are tried again by later pumps, all
//! of a kind together after one backoff of that kind's calls (not one per key, which split
//! an outage's retries into a call per key): a commit after delivery never fails a batch by
//! itself.
//!
//! Leases ([`renew`]): a key whose lease is a third gone while its message is still on its
//! way, or while its commit has not gone through, is renewed (conditional on the owner, as
//! lease-based consumers such as the Kinesis Client Library renew theirs), so a live process
//! keeps its keys however long a send holds them or a commit takes, and a crashed one loses
//! them a lease after its last renewal. Renewals have a lane of their own: a commit, release
//! or abandonment that hangs for seconds (a store call held until its attempt timed out)
//! never holds them up. A lease that ends with the invocation (Lambda) is not renewed: the
//! process cannot outlive it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use sluice_engine::ack::{AckSet, AckStatus, AckTag, AckToken, AckTracker, AckWatch};
use sluice_engine::context::Clock;
use sluice_engine::{Message, SettleReport};
use tokio::sync::Notify;

use crate::kv_store::{
    AbandonRequest, CommitRequest, LockStore, LockTicket, Progress, Settled, StoreError,
};

mod renew;

/// What a warning says when another owner took a key over before this process committed it.
const TAKEN_OVER: &str =
    "the lock was taken over after its lease ran out, before this delivery committed it";

/// How long the keeper waits, after the first message resolved, for more to join the same
/// commit call.
const LINGER: Duration = Duration::from_millis(10);
/// Backoff after a failed store call: from this…
const RETRY_MIN: Duration = Duration::from_millis(100);
/// …doubling up to this.
const RETRY_MAX: Duration = Duration::from_secs(5);
/// At the end, commits owed are tried for at least this long, even past their lease: a
/// commit is conditional on the owner, so a late one either lands (and spares the
/// redelivery a takeover, which a sink that cannot be read back would duplicate) or finds
/// the key taken over and does nothing. A store outage of seconds at exit is waited out.
const SETTLE_AT_LEAST: Duration = Duration::from_secs(30);

/// Counts of what the lock did, for logs and tests.
#[derive(Debug, Default)]
pub(crate) struct LockCounts {
    /// Keys taken.
    pub acquired: AtomicU64,
    /// Messages whose key was held.
    pub duplicates: AtomicU64,
    /// Keys committed.
    pub committed: AtomicU64,
    /// Keys released after their message failed.
    pub released: AtomicU64,
    /// Keys left pending for a later check after their message's send was uncertain.
    pub abandoned: AtomicU64,
    /// Leases renewed.
    pub renewed: AtomicU64,
    /// Keys another owner took over before they could be committed (possible duplicates).
    pub lost: AtomicU64,
    /// Messages that failed on their own (no key, a key held too long elsewhere).
    pub failed: AtomicU64,
}

/// What is owed for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owed {
    /// Its message is on its way: renew the lease while it is.
    Lease,
    /// Delivered: commit.
    Commit,
    /// Certainly not delivered anywhere: release.
    Release,
    /// Possibly delivered, or delivered by some sends and not others: abandon, with the
    /// progress.
    Abandon,
}

impl Owed {
    /// The lane's index among the settlements' backoffs.
    fn lane(self) -> usize {
        match self {
            Owed::Commit => 0,
            Owed::Release => 1,
            Owed::Abandon | Owed::Lease => 2,
        }
    }
}

/// A message's two trackers: `inner` follows the copies inside the lock's inner list (the
/// sends there), `outer` those that left the lock (a send after it). The outer token is
/// held here until no inner copy is left, since any inner copy may still come out.
struct Trackers {
    inner: Arc<AckTracker>,
    outer: Arc<AckTracker>,
    outer_token: Option<AckToken>,
}

impl Trackers {
    /// What the key is owed once both are done (`None` while a copy is on its way):
    /// committed only when every copy, inside the lock and after it, was delivered;
    /// otherwise released when nothing was delivered anywhere, nothing may have been, and
    /// no earlier attempt left history, else abandoned with the progress (see the module
    /// documentation).
    fn owed(&self, ticket: &LockTicket) -> Option<Owed> {
        if !(self.inner.is_done() && self.outer.is_done()) {
            return None;
        }
        let failed = [&self.inner, &self.outer]
            .iter()
            .any(|t| t.status() == AckStatus::Failed);
        if !failed {
            return Some(Owed::Commit);
        }
        Some(if keeps_history(ticket, &[&self.inner, &self.outer]) {
            Owed::Abandon
        } else {
            Owed::Release
        })
    }
}

/// Whether a failed message's key must stay for its next taker (abandoned, not released):
/// some copy was delivered or may have been, or an earlier attempt left history.
fn keeps_history(ticket: &LockTicket, trackers: &[&AckTracker]) -> bool {
    ticket.prior_since_ms.is_some()
        || !ticket.prior_progress.is_empty()
        || ticket.delivered_some()
        || trackers.iter().any(|t| t.uncertain() || t.accepted())
}

struct Entry {
    ticket: Arc<LockTicket>,
    /// The message's trackers (none for keys taken for messages that never ran).
    trackers: Option<Trackers>,
    owed: Owed,
    /// When the current lease began, and how long it is (`None`: it ends with the
    /// invocation and is not renewed).
    lease_start: Instant,
    lease: Option<Duration>,
    /// Another owner took the key over (already reported).
    lost: bool,
    /// The acknowledgement tokens of later copies of the message (the same key again
    /// while it is on its way here): they share its fate, so that a source acknowledging
    /// them on their own (SQS) never deletes a record whose first copy then fails.
    followers: Vec<AckSet>,
}

/// Backoff after failed store calls of one kind: not before `at`, after `failures` in a row.
#[derive(Debug, Default, Clone, Copy)]
struct Retry {
    at: Option<Instant>,
    failures: u32,
}

impl Retry {
    /// Notes one more failure at `now`: how many in a row.
    fn failed(&mut self, now: Instant) -> u32 {
        self.failures += 1;
        self.at = Some(now + backoff(self.failures));
        self.failures
    }

    /// Whether the backoff still runs at `now`.
    fn waiting(&self, now: Instant) -> bool {
        self.at.is_some_and(|t| t > now)
    }
}

/// Where resolved trackers are queued: the watch every tracker of this lock reports to.
/// It only records (a leaf lock and a wake-up), as [`AckWatch`] requires.
#[derive(Default)]
struct Resolved {
    queue: Mutex<Vec<(String, usize)>>,
    wake: Notify,
    /// Told when a key is tracked whose renewal is due before the renewal lane's next
    /// wake-up.
    reschedule: Notify,
    /// When the renewal lane wakes up next (None: only when told).
    next_renewal: Mutex<Option<Instant>>,
}

impl AckWatch for Resolved {
    fn done(&self, tracker: &Arc<AckTracker>) {
        let Some(key) = tracker
            .tag()
            .and_then(|t| t.clone().downcast::<LockTicket>().ok())
            .map(|t| t.key.clone())
        else {
            return;
        };
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((key, tracker.id()));
        self.wake.notify_one();
    }
}

struct Shared {
    /// The lock as the config has it (`transforms[0] (meta_kv_store_lock, id ...)`).
    lock_id: Arc<str>,
    /// The backoff of each kind of settlement call (commits, releases, abandonments), after
    /// failed calls: every key owed that kind waits for it, and goes in the next call.
    settle_retry: Mutex<[Retry; 3]>,
    /// The backoff of renewal calls, after failed ones.
    renew_retry: Mutex<Retry>,
    store: Arc<dyn LockStore>,
    owner: Arc<str>,
    concurrency: usize,
    entries: Mutex<HashMap<String, Entry>>,
    resolved: Arc<Resolved>,
    /// Held by the settlement lane while it works.
    settling: tokio::sync::Mutex<()>,
    /// Held by the renewal lane while it works.
    renewing: tokio::sync::Mutex<()>,
    counts: Arc<LockCounts>,
    clock: Arc<dyn Clock>,
}

/// The keys one lock instance holds (see the module documentation).
pub(crate) struct Keeper {
    shared: Arc<Shared>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if let Some(t) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            t.abort();
        }
    }
}

/// The history a key retaken by its owner keeps from its last attempt (see
/// [`Keeper::forget_for_retake`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Retaken {
    /// When the first attempt at the message began (epoch ms).
    pub origin_ms: i64,
    /// What the attempts delivered.
    pub progress: Progress,
}

/// What the lock knows of a key before asking the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// Nothing: ask the store.
    Unknown,
    /// Its message is on its way here: a duplicate, which follows that message's fate.
    InFlight,
    /// Its message was delivered here (its commit is under way): a duplicate.
    Delivered,
    /// Held for a message that failed, not yet given back: take it again (the store lets
    /// its owner do so), and stop giving it back.
    Retake,
}

impl Keeper {
    /// A keeper for `owner`'s keys in `store`.
    pub(crate) fn new(
        lock_id: Arc<str>,
        store: Arc<dyn LockStore>,
        owner: Arc<str>,
        concurrency: usize,
        counts: Arc<LockCounts>,
        clock: Arc<dyn Clock>,
    ) -> Keeper {
        Keeper {
            shared: Arc::new(Shared {
                lock_id,
                settle_retry: Mutex::new([Retry::default(); 3]),
                renew_retry: Mutex::new(Retry::default()),
                store,
                owner,
                concurrency,
                entries: Mutex::new(HashMap::new()),
                resolved: Arc::new(Resolved::default()),
                settling: tokio::sync::Mutex::new(()),
                renewing: tokio::sync::Mutex::new(()),
                counts,
                clock,
            }),
            task: Mutex::new(None),
        }
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.shared.entries()
    }

    /// Takes in what resolved since the last pump, so that [`Keeper::known`] is current.
    pub(crate) fn catch_up(&self) {
        self.shared.take_resolved();
    }

    /// What is known of `key` here.
    pub(crate) fn known(&self, key: &str) -> Known {
        match self.entries().get(key).map(|e| e.owed) {
            None => Known::Unknown,
            Some(Owed::Lease) => Known::InFlight,
            Some(Owed::Commit) => Known::Delivered,
            Some(Owed::Release | Owed::Abandon) => Known::Retake,
        }
    }

    /// Stops giving back `keys` (about to be taken again): waits for the settlement lane's
    /// work in progress, so that no release of them is in flight when the store is asked.
    /// Returns, per key, the history its last attempt leaves (when it began, and what it
    /// delivered), which the store may not have been told yet: the retake inherits it.
    pub(crate) async fn forget_for_retake(&self, keys: &[String]) -> HashMap<String, Retaken> {
        let _lane = self.shared.settling.lock().await;
        let mut entries = self.entries();
        let mut history = HashMap::new();
        for k in keys {
            let retaken = entries
                .get(k)
                .is_some_and(|e| matches!(e.owed, Owed::Release | Owed::Abandon));
            let Some(e) = retaken.then(|| entries.remove(k)).flatten() else {
                continue;
            };
            if e.owed == Owed::Abandon {
                history.insert(
                    k.clone(),
                    Retaken {
                        origin_ms: e.ticket.origin_ms(),
                        progress: e.ticket.progress(),
                    },
                );
            }
        }
        history
    }

    /// Starts tracking a key taken for a message: the token to attach to the message
    /// before it enters the inner list.
    pub(crate) fn track(
        &self,
        ticket: Arc<LockTicket>,
        lease_start: Instant,
        lease: Option<Duration>,
    ) -> AckToken {
        let watch = || Some(self.shared.resolved.clone() as Arc<dyn AckWatch>);
        let tag = || Some(ticket.clone() as AckTag);
        let (inner, token) = AckTracker::watched(tag(), watch());
        let (outer, outer_token) = AckTracker::watched(tag(), watch());
        self.entries().insert(
            ticket.key.clone(),
            Entry {
                ticket,
                trackers: Some(Trackers {
                    inner,
                    outer,
                    outer_token: Some(outer_token),
                }),
                owed: Owed::Lease,
                lease_start,
                lease,
                lost: false,
                followers: Vec::new(),
            },
        );
        if let Some(l) = lease {
            let due = lease_start + l / 3;
            let r = &self.shared.resolved;
            let later = r
                .next_renewal
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_none_or(|w| w > due);
            if later {
                r.reschedule.notify_one();
            }
        }
        token
    }

    /// Gives back a key taken for a message that will not run (it failed on its own):
    /// released, or abandoned when an earlier attempt may have delivered the message (its
    /// history must stay for the next taker).
    pub(crate) fn give_back(&self, ticket: Arc<LockTicket>) {
        let owed = if keeps_history(&ticket, &[]) {
            Owed::Abandon
        } else {
            Owed::Release
        };
        self.entries().insert(
            ticket.key.clone(),
            Entry {
                ticket,
                trackers: None,
                owed,
                lease_start: Instant::now(),
                lease: None,
                lost: false,
                followers: Vec::new(),
            },
        );
        self.shared.resolved.wake.notify_one();
    }

    /// Makes `acks` (a later copy's tokens) share the fate of `key`'s message on its way
    /// here: dropped when it is delivered, failed when it is not. When that fate is decided
    /// already, it applies at once.
    pub(crate) fn follow(&self, key: &str, acks: AckSet) {
        if acks.is_empty() {
            return;
        }
        let mut entries = self.entries();
        match entries.get_mut(key) {
            Some(e) if e.owed == Owed::Lease => e.followers.push(acks),
            Some(e) => {
                let owed = e.owed;
                drop(entries);
                settle_followers(owed, vec![acks]);
            }
            None => {}
        }
    }

    /// How many keys have a message on its way.
    pub(crate) fn in_flight(&self) -> usize {
        self.entries()
            .values()
            .filter(|e| e.owed == Owed::Lease)
            .count()
    }

    /// Swaps the inner-list tokens of this lock on `m` (one leaving the lock) for the
    /// tokens that follow its copies after the lock, or, without `follow`, takes them off:
    /// the key then waits for the sends inside the lock only.
    pub(crate) fn pass_out(&self, m: &mut Message, follow: bool) {
        if m.acks().is_empty() {
            return;
        }
        let entries = self.entries();
        let outer_of = |t: &AckToken| -> Option<AckToken> {
            let ticket = t.tag::<LockTicket>()?;
            let tr = entries.get(&ticket.key)?.trackers.as_ref()?;
            if !t.reports_to(&tr.inner) {
                return None;
            }
            tr.outer_token.clone()
        };
        if !m.acks().iter().any(|t| outer_of(t).is_some()) {
            return;
        }
        let taken = m.take_acks_where(|t| outer_of(t).is_some());
        for t in taken.iter().filter(|_| follow) {
            if let Some(o) = outer_of(t) {
                m.add_ack(o);
            }
        }
        drop(entries);
        drop(taken);
    }

    /// Makes sure the keeper's task runs on the current tokio runtime (it stops with the
    /// runtime that ran it; a test's runtime is new at every call).
    pub(crate) fn ensure_task(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let weak = Arc::downgrade(&self.shared);
        let resolved = self.shared.resolved.clone();
        *task = Some(rt.spawn(run(weak, resolved)));
    }

    /// Settles what is due now, in both lanes: the keys of resolved messages, the leases a
    /// third gone, and what earlier failures left (once their backoff passed, or at once
    /// with `force`). Store failures are logged and left for a later pump.
    pub(crate) async fn pump(&self, force: bool) {
        self.shared.pump(force).await;
    }

    /// Pumps until nothing but messages still on their way is owed, or until `until`
    /// (bounded by one lease, or [`SETTLE_AT_LEAST`] if longer); what is left stays owed and
    /// is reported: how many keys, and what a run over the same input will do with them.
    pub(crate) async fn settle(&self, until: Instant, lease: Duration) -> SettleReport {
        let until = until.min(Instant::now() + lease.max(SETTLE_AT_LEAST));
        loop {
            self.shared.pump(true).await;
            let (left, soonest) = self.shared.owed_beyond_leases();
            if left.total() == 0 {
                return SettleReport::default();
            }
            let now = Instant::now();
            if now >= until {
                let line =
                    left.describe(&self.shared.lock_id, &self.shared.store.describe(), lease);
                return SettleReport {
                    unsettled: vec![line],
                };
            }
            let wait = soonest.map_or(RETRY_MIN, |t| t.saturating_duration_since(now));
            tokio::time::sleep(
                wait.clamp(Duration::from_millis(5), RETRY_MAX)
                    .min(until - now),
            )
            .await;
        }
    }
}

/// The keys a lock could not settle in time, by what they are owed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Left {
    /// Delivered, not committed.
    pub commits: usize,
    /// Failed, not given back.
    pub releases: usize,
    /// Possibly or partly delivered, not left for the next attempt.
    pub abandons: usize,
}

impl Left {
    fn total(&self) -> usize {
        self.commits + self.releases + self.abandons
    }

    /// What is left and what a run over the same input does about it.
    fn describe(&self, lock: &str, store: &str, lease: Duration) -> String {
        let mut parts = Vec::new();
        if self.commits > 0 {
            parts.push(format!(
                "{} delivered message(s) whose keys could not be committed (a run over the same input within the {} s lease waits for them and fails those lines; after it, it takes the keys over and sends only what a send cannot find or was not recorded as delivered)",
                self.commits,
                lease.as_secs_f64()
            ));
        }
        if self.releases > 0 {
            parts.push(format!(
                "{} failed message(s) whose keys could not be given back (a run within the lease waits for them; after it, they are processed again)",
                self.releases
            ));
        }
        if self.abandons > 0 {
            parts.push(format!(
                "{} message(s) possibly or partly delivered whose keys could not be handed on with what was delivered (after the lease a run takes them over, reads back what a Kinesis send can find and sends the rest again: what this run delivered to some sends may reach them twice)",
                self.abandons
            ));
        }
        format!(
            "{lock}: {} lock key(s) left pending in {store}: the store kept failing: {}",
            self.total(),
            parts.join("; ")
        )
    }
}

impl Shared {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keys owed a commit, release or abandonment, and the soonest retry among them.
    fn owed_beyond_leases(&self) -> (Left, Option<Instant>) {
        let entries = self.entries();
        let mut n = Left::default();
        let mut soonest: Option<Instant> = None;
        let retries = *self.settle_retry.lock().unwrap_or_else(|p| p.into_inner());
        for e in entries.values() {
            match e.owed {
                Owed::Lease => continue,
                Owed::Commit => n.commits += 1,
                Owed::Release => n.releases += 1,
                Owed::Abandon => n.abandons += 1,
            }
            if let Some(t) = retries[e.owed.lane()].at {
                soonest = Some(soonest.map_or(t, |s| s.min(t)));
            }
        }
        (n, soonest)
    }

    /// When a failed commit, release or abandonment call is to be tried again next (only
    /// when keys of its kind are owed).
    fn next_settlement_retry(&self) -> Option<Instant> {
        let retries = *self.settle_retry.lock().unwrap_or_else(|p| p.into_inner());
        let entries = self.entries();
        let mut owed = [false; 3];
        for e in entries.values().filter(|e| e.owed != Owed::Lease) {
            owed[e.owed.lane()] = true;
        }
        (0..3)
            .filter(|&i| owed[i])
            .filter_map(|i| retries[i].at)
            .min()
    }

    /// Moves the keys whose messages are done from their lease to what they are owed.
    fn take_resolved(&self) {
        loop {
            let queued = std::mem::take(
                &mut *self
                    .resolved
                    .queue
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            if queued.is_empty() {
                return;
            }
            // Outer tokens no inner copy can take out any more: dropped after the entries'
            // lock, which may finish their trackers and queue them for the next round.
            let mut last_tokens = Vec::new();
            let mut decided = Vec::new();
            let mut entries = self.entries();
            for (key, id) in queued {
                let Some(e) = entries.get_mut(&key) else {
                    continue;
                };
                let Some(tr) = e.trackers.as_mut().filter(|_| e.owed == Owed::Lease) else {
                    continue;
                };
                if tr.inner.id() != id && tr.outer.id() != id {
                    continue;
                }
                if tr.inner.is_done()
                    && let Some(t) = tr.outer_token.take()
                {
                    last_tokens.push(t);
                }
                let Some(owed) = tr.owed(&e.ticket) else {
                    continue;
                };
                e.owed = owed;
                if !e.followers.is_empty() {
                    decided.push((owed, std::mem::take(&mut e.followers)));
                }
            }
            drop(entries);
            drop(last_tokens);
            for (owed, followers) in decided {
                settle_followers(owed, followers);
            }
        }
    }

    /// Both lanes at once.
    async fn pump(&self, force: bool) {
        tokio::join!(self.settle_due(force), self.renew_due(force));
    }

    /// The settlement lane: commits, releases and abandonments due now (or all of them
    /// with `force`), in one call of each kind.
    async fn settle_due(&self, force: bool) {
        let _lane = self.settling.lock().await;
        self.take_resolved();
        let now = Instant::now();
        let now_ms = self.clock.now_ms();
        let retries = *self.settle_retry.lock().unwrap_or_else(|p| p.into_inner());
        let mut commits = Vec::new();
        let mut releases = Vec::new();
        let mut abandons = Vec::new();
        {
            let entries = self.entries();
            for (key, e) in entries.iter() {
                if e.owed == Owed::Lease || (!force && retries[e.owed.lane()].waiting(now)) {
                    continue;
                }
                match e.owed {
                    Owed::Commit => commits.push(CommitRequest {
                        key: key.clone(),
                        ttl: e.ticket.commit_ttl(now_ms),
                        note: e.ticket.note(),
                    }),
                    Owed::Release => releases.push(key.clone()),
                    Owed::Abandon => abandons.push(AbandonRequest {
                        key: key.clone(),
                        progress: e.ticket.progress(),
                    }),
                    Owed::Lease => {}
                }
            }
        }
        if commits.is_empty() && releases.is_empty() && abandons.is_empty() {
            return;
        }
        let c = self.concurrency;
        let (committed, released, abandoned) = tokio::join!(
            self.call(!commits.is_empty(), || self.store.commit(
                &self.owner,
                &commits,
                c
            )),
            self.call(!releases.is_empty(), || self.store.release(
                &self.owner,
                &releases,
                c
            )),
            self.call(!abandons.is_empty(), || self.store.abandon(
                &self.owner,
                &abandons,
                c
            )),
        );
        let now = Instant::now();
        let commit_keys: Vec<&String> = commits.iter().map(|r| &r.key).collect();
        let release_keys: Vec<&String> = releases.iter().collect();
        let abandon_keys: Vec<&String> = abandons.iter().map(|r| &r.key).collect();
        let mut entries = self.entries();
        self.apply(&mut entries, Owed::Commit, &commit_keys, committed, now);
        self.apply(&mut entries, Owed::Release, &release_keys, released, now);
        self.apply(&mut entries, Owed::Abandon, &abandon_keys, abandoned, now);
    }

    async fn call<'a, F, Fut>(&'a self, any: bool, f: F) -> Option<Result<Vec<Settled>, StoreError>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Vec<Settled>, StoreError>> + 'a,
    {
        if any { Some(f().await) } else { None }
    }

    /// Records the outcome of one kind of settlement call.
    fn apply(
        &self,
        entries: &mut HashMap<String, Entry>,
        kind: Owed,
        keys: &[&String],
        result: Option<Result<Vec<Settled>, StoreError>>,
        now: Instant,
    ) {
        let Some(result) = result else { return };
        let verb = match kind {
            Owed::Commit => "commit",
            Owed::Release => "release",
            Owed::Abandon => "abandonment",
            Owed::Lease => "lease renewal",
        };
        let outcomes = match result {
            Ok(o) => {
                self.settle_retry.lock().unwrap_or_else(|p| p.into_inner())[kind.lane()] =
                    Retry::default();
                o
            }
            Err(e) => {
                let attempts = self.settle_retry.lock().unwrap_or_else(|p| p.into_inner())
                    [kind.lane()]
                .failed(now);
                tracing::warn!(
                    lock = %self.lock_id,
                    keys = keys.len(),
                    attempts,
                    error = %e,
                    "{verb} of lock keys failed; trying again"
                );
                return;
            }
        };
        for (k, outcome) in keys.iter().zip(outcomes) {
            let Some(en) = entries.get_mut(*k) else {
                continue;
            };
            if en.owed != kind {
                continue;
            }
            match (kind, outcome) {
                (Owed::Commit, Settled::NotOwner(rec)) if !en.lost => {
                    self.counts.lost.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        lock = %self.lock_id, key = %k, holder = %super::events::holder_text(rec.as_ref(), &self.owner),
                        "{TAKEN_OVER}: the message may have been processed twice (lengthen `lease`)"
                    );
                    entries.remove(*k);
                }
                (Owed::Commit, _) => {
                    if en.lost {
                        // Reported when a renewal found it gone.
                    } else {
                        self.counts.committed.fetch_add(1, Ordering::Relaxed);
                    }
                    entries.remove(*k);
                }
                (Owed::Release, _) => {
                    self.counts.released.fetch_add(1, Ordering::Relaxed);
                    entries.remove(*k);
                }
                (Owed::Abandon, _) => {
                    self.counts.abandoned.fetch_add(1, Ordering::Relaxed);
                    entries.remove(*k);
                }
                (Owed::Lease, _) => {}
            }
        }
    }
}

/// Gives later copies the fate of the first: dropped (delivered) when it was committed,
/// failed (uncertainly when it was abandoned) otherwise.
fn settle_followers(owed: Owed, followers: Vec<AckSet>) {
    if owed == Owed::Commit {
        return;
    }
    let reason = "an earlier copy of this message, with the same lock key, was not delivered";
    for acks in &followers {
        if owed == Owed::Abandon {
            sluice_engine::ack::fail_all_uncertain(acks, reason);
        } else {
            sluice_engine::ack::fail_all(acks, reason);
        }
    }
}

/// The pause after `failures` failed calls in a row.
fn backoff(failures: u32) -> Duration {
    let d = RETRY_MIN * 2u32.saturating_pow(failures.saturating_sub(1).min(10));
    let d = d.min(RETRY_MAX);
    d / 2 + d.mul_f64(fastrand::f64() / 2.0)
}

/// The keeper's task: its two lanes, each woken when it has work (see [`settle_loop`] and
/// [`renew::renew_loop`]); ends when the keeper is gone.
async fn run(shared: Weak<Shared>, resolved: Arc<Resolved>) {
    tokio::join!(
        settle_loop(shared.clone(), resolved.clone()),
        renew::renew_loop(shared, resolved)
    );
}

/// The settlement lane's loop: settles when a message resolved (after a short linger, so
/// that one call commits many) and when a failed call's retry is due.
async fn settle_loop(shared: Weak<Shared>, resolved: Arc<Resolved>) {
    loop {
        let due = match shared.upgrade() {
            Some(s) => s.next_settlement_retry(),
            None => return,
        };
        tokio::select! {
            _ = resolved.wake.notified() => tokio::time::sleep(LINGER).await,
            _ = sleep_until(due) => {}
        }
        let Some(s) = shared.upgrade() else { return };
        s.settle_due(false).await;
    }
}

/// Sleeps until `due`, or for ever.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}
