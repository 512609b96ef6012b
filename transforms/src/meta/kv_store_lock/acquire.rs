//! Taking the locks of a run of data messages and running the inner list on those that got
//! theirs, in input order.
//!
//! Keys are asked for in pieces: a piece's calls are in flight together (up to
//! `concurrency`), and the piece size adapts so that one piece takes well under half a
//! lease (a slow store gets smaller pieces; a fast one larger). A key whose lease is half
//! gone by the time its piece answered (a slow or retrying store) is renewed before its
//! message runs; a key another owner took meanwhile is then held, not processed. Failed
//! store calls are tried again, with backoff, for [`STORE_RETRY_FOR`]. A message whose key is
//! held by another owner's live pending lock is held back ([`Waiting`]) and asked for again
//! on the lock's timer (its `deadline`) while the rest of the input goes on, and at the
//! latest at the next ctrl, up to `pending_wait`. So a slow store slows the pipeline down
//! and a crashed owner's key delays only its own message; neither wedges a batch, and two
//! processes over crossed input never wait for each other's commits, which need the call
//! that holds them to return.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::events::DuplicateSkipped;
use sluice_engine::ack::AckSet;
use sluice_engine::{Message, TransformError};

use super::keeper::Known;
use super::{Duplicates, MetaKvStoreLock, Pending, STORE_RETRY_FOR, keys};
use crate::kv_store::{
    AcquireRequest, Acquired, LockRecord, LockStatus, LockTicket, Prior, RenewRequest, Settled,
};

/// How many renewals in a row may come back with half the lease gone before the keys are
/// given back and their messages fail.
const SLOW_RENEWALS: u32 = 3;
/// The largest piece.
const MAX_PIECE: usize = 4096;

/// The first pause before asking again for a key pending elsewhere…
const FIRST_RETRY: Duration = Duration::from_millis(20);
/// …doubling up to this.
const MAX_RETRY: Duration = Duration::from_millis(500);

/// A message whose key is pending under another owner with a live lease: held by the lock
/// and asked for again on its timer, while the rest of the input goes on.
pub(super) struct Waiting {
    item: Item,
    holder: LockRecord,
    since: Instant,
    next_try: Instant,
    backoff: Duration,
}

/// A data message on its way through acquisition.
struct Item {
    msg: Message,
    key: String,
    ttl: i64,
    /// Whether the store must be asked (else: a duplicate known here).
    ask: bool,
    /// The tokens of later copies of it in the same batch, which share its fate.
    followers: Vec<AckSet>,
}

impl Item {
    /// Marks the message and its followers failed.
    fn fail(&self, reason: &str) {
        self.msg.fail_acks(reason);
        for f in &self.followers {
            sluice_engine::ack::fail_all(f, reason);
        }
    }
}

/// What became of one key asked for.
enum Outcome {
    /// Ours: run the message. The lease began at `lease_start`; `lease` is its length when
    /// it is renewed (not when it ends with the invocation).
    Taken {
        ticket: Arc<LockTicket>,
        lease_start: Instant,
        lease: Option<Duration>,
    },
    /// Held: a duplicate.
    Duplicate(Option<LockRecord>),
    /// Pending under another owner with a live lease: wait.
    Blocked(LockRecord),
    /// This message alone fails, for this reason.
    Fail(String),
}

/// A message that got its lock, ready to run.
struct Ready {
    ticket: Arc<LockTicket>,
    msg: Message,
    lease_start: Instant,
    lease: Option<Duration>,
    followers: Vec<AckSet>,
}

impl MetaKvStoreLock {
    /// Data messages between two ctrls: acquire, then run the inner list on the taken ones
    /// (in runs, so outputs keep input order). On error, every message not yet passed on
    /// is marked failed: none may count as delivered by being dropped here.
    pub(super) async fn process(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msgs.is_empty() {
            return Ok(());
        }
        let first_ms = self.now_ms();
        self.keeper.catch_up();
        let mut items: Vec<Item> = Vec::with_capacity(msgs.len());
        let mut first_of: HashMap<String, usize> = HashMap::with_capacity(msgs.len());
        let mut retake = Vec::new();
        for m in msgs {
            let key = match keys::key_of(&self.prefix, self.source_key.as_ref(), &m) {
                Ok(k) => k,
                Err(why) => {
                    self.fail_alone(m, None, &why);
                    continue;
                }
            };
            let ttl = match keys::ttl_of(self.ttl_key.as_ref(), self.ttl_offset, &m, first_ms) {
                Ok(t) => t,
                Err(why) => {
                    self.fail_alone(m, Some(&key), &why);
                    continue;
                }
            };
            // The same key earlier in this batch, or on its way here from an earlier one: a
            // duplicate of that message, whose fate it shares.
            let ask = match first_of.get(&key) {
                Some(&i) => {
                    items[i].followers.push(m.acks().clone());
                    false
                }
                None if self.follow_waiting(&key, m.acks()) => {
                    // A copy of a message held back from an earlier call (meta_retry hands
                    // the lock one message at a time): it shares that message's fate.
                    false
                }
                None => {
                    first_of.insert(key.clone(), items.len());
                    match self.keeper.known(&key) {
                        Known::Unknown => true,
                        Known::InFlight => {
                            self.keeper.follow(&key, m.acks().clone());
                            false
                        }
                        Known::Delivered => false,
                        Known::Retake => {
                            retake.push(key.clone());
                            true
                        }
                    }
                }
            };
            items.push(Item {
                msg: m,
                key,
                ttl,
                ask,
                followers: Vec::new(),
            });
        }
        if !retake.is_empty() {
            let history = self.keeper.forget_for_retake(&retake).await;
            self.retaken
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(history);
        }
        let mut blocked = Vec::new();
        let mut rest = items.into_iter().peekable();
        while rest.peek().is_some() {
            // The next piece: up to `piece` keys to ask for, with the duplicates among them.
            let piece = self.piece.load(Ordering::Relaxed).max(1);
            let mut chunk = Vec::new();
            let mut asked = 0;
            while let Some(it) = rest.next_if(|it| !it.ask || asked < piece) {
                asked += it.ask as usize;
                chunk.push(it);
            }
            let reqs: Vec<AcquireRequest> = chunk
                .iter()
                .filter(|it| it.ask)
                .map(|it| AcquireRequest {
                    key: it.key.clone(),
                    ttl: it.ttl,
                    lease_until_ms: 0,
                    skew_ms: 0,
                    fresh_before_ms: None,
                })
                .collect();
            let outcomes = match self.acquire_piece(&reqs).await {
                Ok(o) => o,
                Err(e) => {
                    let reason = e.text_within(&self.name);
                    let later: Vec<Item> = rest.collect();
                    let waiting = blocked.iter().map(|(it, _)| it);
                    for it in chunk.iter().chain(&later).chain(waiting) {
                        it.fail(&reason);
                    }
                    return Err(e);
                }
            };
            let mut outcomes = outcomes.into_iter();
            let mut run = Vec::new();
            let mut chunk = chunk.into_iter();
            let mut placed = Ok(());
            for it in chunk.by_ref() {
                let outcome = if it.ask {
                    outcomes.next().unwrap_or(Outcome::Duplicate(None))
                } else {
                    Outcome::Duplicate(None)
                };
                placed = self.place(it, outcome, &mut run, &mut blocked, out).await;
                if placed.is_err() {
                    break;
                }
            }
            let ran = match placed {
                Ok(()) => self.run_inner(run, out).await,
                Err(e) => Err(e),
            };
            if let Err(e) = ran {
                // What the inner list was given it failed itself; what was not yet placed,
                // and the messages held back, must not count as delivered by being dropped.
                let reason = e.text_within(&self.name);
                let later: Vec<Item> = rest.collect();
                let waiting = blocked.iter().map(|(it, _)| it);
                for it in chunk.as_slice().iter().chain(&later).chain(waiting) {
                    it.fail(&reason);
                }
                self.give_back_unplaced(outcomes);
                return Err(e);
            }
        }
        if !blocked.is_empty() {
            // Whoever holds them may be waiting for keys this process holds in its inner
            // list: deliver and commit those now.
            if let Err(e) = self.flush_and_settle(out).await {
                let reason = e.text_within(&self.name);
                for (it, _) in &blocked {
                    it.fail(&reason);
                }
                return Err(e);
            }
            let now = Instant::now();
            let mut waiting = self.waiting();
            for (item, holder) in blocked {
                waiting.push(Waiting {
                    item,
                    holder,
                    since: now,
                    next_try: now + FIRST_RETRY,
                    backoff: FIRST_RETRY,
                });
            }
        }
        Ok(())
    }

    /// Puts one message where its outcome says: into the run, among the blocked, out as a
    /// duplicate (after the run so far, to keep order), or failed alone.
    async fn place(
        &self,
        it: Item,
        outcome: Outcome,
        run: &mut Vec<Ready>,
        blocked: &mut Vec<(Item, LockRecord)>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        match outcome {
            Outcome::Taken {
                ticket,
                lease_start,
                lease,
            } => run.push(Ready {
                ticket,
                msg: it.msg,
                lease_start,
                lease,
                followers: it.followers,
            }),
            Outcome::Blocked(rec) => blocked.push((it, rec)),
            Outcome::Fail(why) => {
                let reason = format!("{}: {why}", self.name);
                for f in &it.followers {
                    sluice_engine::ack::fail_all(f, &reason);
                }
                self.fail_alone(it.msg, Some(&it.key), &why);
            }
            Outcome::Duplicate(rec) => {
                self.counts.duplicates.fetch_add(1, Ordering::Relaxed);
                self.telemetry.emit(DuplicateSkipped {
                    lock: &self.id,
                    key: &it.key,
                    holder: rec.as_ref(),
                    owner: &self.owner,
                });
                if self.duplicates == Duplicates::Continue {
                    // What ran before it comes out before it.
                    if let Err(e) = self.run_inner(std::mem::take(run), out).await {
                        it.fail(&e.text_within(&self.name));
                        return Err(e);
                    }
                    out.push(it.msg);
                }
            }
        }
        Ok(())
    }

    /// Asks the store for `reqs`' keys: one outcome per request, in order. Keys whose
    /// lease is half gone when the answers are in are renewed first. Store failures are
    /// tried again for [`STORE_RETRY_FOR`]; then the keys taken are given back and the
    /// error returned.
    async fn acquire_piece(&self, reqs: &[AcquireRequest]) -> Result<Vec<Outcome>, TransformError> {
        let mut outcomes: Vec<Option<Outcome>> = reqs.iter().map(|_| None).collect();
        let mut ask: Vec<usize> = (0..reqs.len()).collect();
        let started = Instant::now();
        let mut failures = 0u32;
        while !ask.is_empty() {
            self.check_clock().await?;
            let now = self.now_ms();
            let (lease, lease_until_ms) = self.lease_now(now);
            let skew_ms = self.skew.as_millis() as i64;
            // Without an event time, a key's TTL counts from when it is taken (a message may
            // have waited for another owner's key since it arrived).
            let ttl_of = |r: &AcquireRequest| match self.ttl_key {
                None => r
                    .ttl
                    .max(crate::kv_store::lock::ticket::seconds_up(now) + self.ttl_offset),
                Some(_) => r.ttl,
            };
            // Another owner's pending key whose first attempt is older than the window
            // (`ttl_offset`) is a message of an earlier window: a message with that key now is
            // a new one, which its history (what that message delivered, where it placed its
            // copies) must not mark delivered.
            let fresh_before_ms = (self.ttl_offset > 0)
                .then(|| now.saturating_sub(self.ttl_offset.saturating_mul(1000)));
            let batch: Vec<AcquireRequest> = ask
                .iter()
                .map(|&i| AcquireRequest {
                    lease_until_ms,
                    skew_ms,
                    fresh_before_ms,
                    ttl: ttl_of(&reqs[i]),
                    ..reqs[i].clone()
                })
                .collect();
            let call_start = Instant::now();
            let results = self
                .store
                .acquire(&self.owner, now, &batch, self.concurrency)
                .await;
            self.adapt_piece(batch.len(), call_start.elapsed());
            let mut again = Vec::new();
            let mut first_error = None;
            for ((&i, result), sent) in ask.iter().zip(results).zip(&batch) {
                let r = sent;
                outcomes[i] = match result {
                    Ok(Acquired::Taken { prior }) => Some(Outcome::Taken {
                        ticket: Arc::new(self.ticket(r, now, prior, call_start, lease)),
                        lease_start: call_start,
                        lease,
                    }),
                    Ok(Acquired::Held(rec)) => match self.held(rec, now) {
                        Some(o) => Some(o),
                        None => {
                            // Its lease ended as we asked: ask again.
                            again.push(i);
                            None
                        }
                    },
                    Err(e) => {
                        first_error.get_or_insert(e);
                        again.push(i);
                        None
                    }
                };
            }
            ask = again;
            if let Some(e) = first_error {
                failures += 1;
                let pause = retry_pause(failures);
                if started.elapsed() >= STORE_RETRY_FOR
                    || sluice_engine::invocation::would_overrun(pause)
                {
                    self.give_back_taken_all(&mut outcomes);
                    return Err(TransformError::failed(format!(
                        "taking {} lock(s) in {} failed for {:?} ({failures} attempts): {e}",
                        ask.len(),
                        self.store.describe(),
                        started.elapsed()
                    )));
                }
                tracing::warn!(lock = %self.id, keys = ask.len(), attempts = failures, error = %e,
                    "taking locks failed; trying again");
                tokio::time::sleep(pause).await;
            }
        }
        self.refresh_stale(reqs, &mut outcomes).await?;
        Ok(outcomes
            .into_iter()
            .map(|o| o.unwrap_or(Outcome::Duplicate(None)))
            .collect())
    }

    /// The ticket of a key taken at `now_ms` by a call made at `call_start`: its history
    /// is the store's prior record's, together with what this process's own last attempt
    /// left (a key retaken after a failure whose abandonment may not have reached the
    /// store).
    fn ticket(
        &self,
        r: &AcquireRequest,
        now_ms: i64,
        prior: Option<Prior>,
        call_start: Instant,
        lease: Option<Duration>,
    ) -> LockTicket {
        let retaken = self
            .retaken
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&r.key);
        let history = match (prior, retaken) {
            (None, None) => None,
            (Some(p), None) => Some((p.since_ms, p.progress)),
            (None, Some(t)) => Some((t.origin_ms, t.progress)),
            (Some(p), Some(t)) => {
                let mut progress = p.progress;
                progress.merge(&t.progress);
                Some((p.since_ms.min(t.origin_ms), progress))
            }
        };
        LockTicket::new(
            r.key.clone(),
            r.ttl,
            now_ms,
            history,
            self.store.clone(),
            self.owner.clone(),
            call_start,
            lease,
        )
        .with_key_of(self.key_of.clone())
        .with_skew(self.skew)
        .with_ttl_offset(self.ttl_key.is_none().then_some(self.ttl_offset))
    }

    /// Refuses to take keys while this host's clock is measured more than half the
    /// tolerated skew off the store's (two hosts within half differ by at most the skew): a
    /// clock ahead by more would take over live owners' keys, one behind would keep its own
    /// past their end. The measurement is an interval (about a second wide at first,
    /// narrowing with each answer); a host refused is one whose whole interval is past the
    /// bound, and one surely more than a quarter of the skew off is warned about, once.
    async fn check_clock(&self) -> Result<(), TransformError> {
        self.store.measure_clock().await;
        let Some(off) = self.store.clock_offset() else {
            return Ok(());
        };
        let half = self.skew.as_millis() as i64 / 2;
        let secs = |ms: i64| ms as f64 / 1000.0;
        if off.lo_ms > half || off.hi_ms < -half {
            let (how, by) = if off.lo_ms > half {
                ("ahead of", off.lo_ms)
            } else {
                ("behind", -off.hi_ms)
            };
            return Err(TransformError::failed(format!(
                "this host's clock is at least {:.1} s {how} {}'s (its answers' Date headers), more than half the {:?} clock_skew the lock tolerates between processes: taking keys now could take over live owners' locks, or keep ours past their end; synchronise the clock (NTP), or raise clock_skew",
                secs(by),
                self.store.describe(),
                self.skew
            ))
            // Every key would meet it: the run stops here even where messages fail alone.
            .stopping("every key would meet it"));
        }
        // At least this far off for certain (0 when the measurement allows no offset).
        let surely = off.lo_ms.max(0).max(-off.hi_ms);
        if surely > half / 2 && !self.clock_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(lock = %self.id, store = %self.store.describe(),
                "this host's clock is measured between {:.1} s and {:.1} s off the lock store's, more than a quarter of the {:?} clock_skew the lock tolerates; it refuses to take keys once the whole measurement is past half of it", secs(off.lo_ms), secs(off.hi_ms), self.skew);
        }
        Ok(())
    }

    /// What a held key means for its message (`None`: not held any more, ask again).
    fn held(&self, rec: Option<LockRecord>, now: i64) -> Option<Outcome> {
        let Some(rec) = rec else {
            return Some(Outcome::Duplicate(None));
        };
        match rec.status {
            LockStatus::Committed => Some(Outcome::Duplicate(Some(rec))),
            LockStatus::Pending { .. } if !rec.blocks(now, self.skew.as_millis() as i64) => None,
            LockStatus::Pending { .. } if self.held_by_another_lock_here(&rec.owner) => {
                Some(Outcome::Fail(format!(
                    "its lock key is pending under {}, another meta_kv_store_lock of this very process over the same kv store and prefix: two locks that share keys wait on each other; give each lock its own prefix (or table)",
                    rec.owner
                )))
            }
            LockStatus::Pending { .. } if self.pending == Pending::Skip => {
                Some(Outcome::Duplicate(Some(rec)))
            }
            LockStatus::Pending { .. } => Some(Outcome::Blocked(rec)),
        }
    }

    /// Whether `owner` is another lock instance alive in this process.
    fn held_by_another_lock_here(&self, owner: &str) -> bool {
        owner != &*self.owner && super::alive_here(owner)
    }

    /// Renews the keys of `outcomes` whose lease is half gone, until none is (they run with
    /// at least half a lease left) or [`SLOW_RENEWALS`] rounds came back late: then those
    /// keys are given back and their messages fail.
    async fn refresh_stale(
        &self,
        reqs: &[AcquireRequest],
        outcomes: &mut [Option<Outcome>],
    ) -> Result<(), TransformError> {
        let started = Instant::now();
        let mut rounds = 0;
        loop {
            let stale: Vec<usize> = outcomes
                .iter()
                .enumerate()
                .filter_map(|(i, o)| match o {
                    Some(Outcome::Taken {
                        lease_start,
                        lease: Some(l),
                        ..
                    }) if lease_start.elapsed() >= *l / 2 => Some(i),
                    _ => None,
                })
                .collect();
            if stale.is_empty() {
                return Ok(());
            }
            if rounds >= SLOW_RENEWALS {
                let lease = self.lease_len();
                for &i in &stale {
                    if let Some(Outcome::Taken { ticket, .. }) = outcomes[i].take() {
                        self.keeper.give_back(ticket);
                    }
                    outcomes[i] = Some(Outcome::Fail(format!(
                        "taking its lock in {} kept using more than half the {lease:?} lease ({rounds} renewals in a row came back late): another process could take it over before the message is processed; raise `lease` (or lower `concurrency`'s load on the store)",
                        self.store.describe()
                    )));
                }
                return Ok(());
            }
            rounds += 1;
            let now = self.now_ms();
            let (lease, lease_until_ms) = self.lease_now(now);
            let renewals: Vec<RenewRequest> = stale
                .iter()
                .map(|&i| RenewRequest {
                    key: reqs[i].key.clone(),
                    ttl: reqs[i].ttl,
                    lease_until_ms,
                })
                .collect();
            let call_start = Instant::now();
            match self
                .store
                .renew(&self.owner, &renewals, self.concurrency)
                .await
            {
                Ok(results) => {
                    for (&i, r) in stale.iter().zip(results) {
                        match r {
                            Settled::Ok => {
                                if let Some(Outcome::Taken {
                                    ticket,
                                    lease_start,
                                    lease: l,
                                }) = &mut outcomes[i]
                                {
                                    *lease_start = call_start;
                                    *l = lease;
                                    ticket.renewed(call_start, lease);
                                }
                            }
                            // Taken over meanwhile: held by its new owner.
                            // (A key free again is not worth another round here: its
                            // message fails and is redelivered.)
                            Settled::NotOwner(rec) => {
                                outcomes[i] =
                                    Some(self.held(rec, self.now_ms()).unwrap_or_else(|| {
                                        Outcome::Fail(
                                            "its lock was taken over while it was being taken"
                                                .into(),
                                        )
                                    }));
                            }
                        }
                    }
                }
                Err(e) if started.elapsed() < STORE_RETRY_FOR => {
                    tracing::warn!(lock = %self.id, error = %e, "renewing slow-taken locks failed; trying again");
                    tokio::time::sleep(retry_pause(rounds)).await;
                }
                Err(e) => {
                    self.give_back_taken_all(outcomes);
                    return Err(TransformError::failed(format!(
                        "renewing {} lock(s) in {}: {e}",
                        renewals.len(),
                        self.store.describe()
                    )));
                }
            }
            tracing::debug!(lock = %self.id, keys = stale.len(), round = rounds,
                "taking locks used half their lease; renewed them before running their messages");
        }
    }

    /// Makes the next piece smaller when this one took more than a quarter of the lease,
    /// larger when it took less than a sixteenth.
    fn adapt_piece(&self, asked: usize, took: Duration) {
        let lease = self.lease_len();
        let piece = self.piece.load(Ordering::Relaxed);
        if took > lease / 4 {
            self.piece.store((asked / 2).max(1), Ordering::Relaxed);
        } else if took < lease / 16 && asked >= piece {
            self.piece
                .store((piece * 2).min(MAX_PIECE), Ordering::Relaxed);
        }
    }

    fn give_back_taken_all(&self, outcomes: &mut [Option<Outcome>]) {
        for o in outcomes.iter_mut() {
            if let Some(Outcome::Taken { ticket, .. }) = o.take() {
                self.keeper.give_back(ticket);
            }
        }
    }

    /// Asks again for the keys of waiting messages that are due (all of them when `until_done`:
    /// then it keeps trying, with backoff, until each is taken, a duplicate, or past its
    /// `pending_wait`). A message still pending elsewhere after `pending_wait` fails alone.
    pub(super) async fn retry_waiting(
        &self,
        out: &mut Vec<Message>,
        until_done: bool,
    ) -> Result<(), TransformError> {
        loop {
            let now = Instant::now();
            // All of them as soon as one is due, so that those freed together come out in
            // their input order.
            let due: Vec<Waiting> = {
                let mut waiting = self.waiting();
                if waiting.iter().any(|w| w.next_try <= now) {
                    std::mem::take(&mut *waiting)
                } else {
                    Vec::new()
                }
            };
            if due.is_empty() {
                let next = self.waiting().iter().map(|w| w.next_try).min();
                match next {
                    Some(t) if until_done => {
                        tokio::time::sleep_until(t.into()).await;
                        continue;
                    }
                    _ => return Ok(()),
                }
            }
            let reqs: Vec<AcquireRequest> = due
                .iter()
                .map(|w| AcquireRequest {
                    key: w.item.key.clone(),
                    ttl: w.item.ttl,
                    lease_until_ms: 0,
                    skew_ms: 0,
                    fresh_before_ms: None,
                })
                .collect();
            let outcomes = match self.acquire_piece(&reqs).await {
                Ok(o) => o,
                Err(e) => {
                    for w in &due {
                        w.item.fail(&e.text_within(&self.name));
                    }
                    return Err(e);
                }
            };
            let mut run = Vec::new();
            let mut still = Vec::new();
            let mut again = Vec::new();
            let mut due = due.into_iter().zip(outcomes);
            let mut placed = Ok(());
            for (w, outcome) in due.by_ref() {
                let Waiting {
                    item,
                    since,
                    backoff,
                    ..
                } = w;
                placed = self.place(item, outcome, &mut run, &mut still, out).await;
                for (item, holder) in still.drain(..) {
                    again.push(Waiting {
                        item,
                        holder,
                        since,
                        next_try: now,
                        backoff,
                    });
                }
                if placed.is_err() {
                    break;
                }
            }
            let ran = match placed {
                Ok(()) => self.run_inner(run, out).await,
                Err(e) => Err(e),
            };
            if let Err(e) = ran {
                // As in `process`: what is still held back fails with the run.
                let reason = e.text_within(&self.name);
                let mut unplaced = Vec::new();
                for (w, outcome) in due {
                    w.item.fail(&reason);
                    unplaced.push(outcome);
                }
                self.give_back_unplaced(unplaced);
                for w in &again {
                    w.item.fail(&reason);
                }
                return Err(e);
            }
            let now = Instant::now();
            let mut waiting = self.waiting();
            for mut w in again {
                let give_up = self.give_up_waiting(&w);
                if now >= give_up {
                    let why = format!(
                        "its lock key is pending under {} (lease until {} ms since the epoch) after waiting {:?}{}: another process is processing that message, or crashed while doing so; the source should redeliver it later (or set `pending: \"skip\"`)",
                        w.holder.owner,
                        w.holder.lease_until_ms().unwrap_or(0),
                        now.saturating_duration_since(w.since),
                        if give_up < w.since + self.pending_wait {
                            " (all the invocation had left)"
                        } else {
                            ""
                        }
                    );
                    let reason = format!("{}: {why}", self.name);
                    for f in &w.item.followers {
                        sluice_engine::ack::fail_all(f, &reason);
                    }
                    self.fail_alone(w.item.msg, Some(&w.item.key), &why);
                    continue;
                }
                w.backoff = (w.backoff * 2).min(MAX_RETRY);
                let pause = w.backoff.mul_f64(0.5 + fastrand::f64());
                w.next_try = (now + pause).min(give_up);
                waiting.push(w);
            }
            if !until_done {
                return Ok(());
            }
        }
    }

    /// When a waiting message stops waiting: after `pending_wait`, or, inside an invocation,
    /// when its work must stop waiting to answer in time, if that is sooner.
    fn give_up_waiting(&self, w: &Waiting) -> Instant {
        let after = w.since + self.pending_wait;
        sluice_engine::invocation::stop_waiting_at().map_or(after, |stop| after.min(stop))
    }

    /// Gives back the keys taken for messages that never ran (the run failed first).
    fn give_back_unplaced(&self, outcomes: impl IntoIterator<Item = Outcome>) {
        for o in outcomes {
            if let Outcome::Taken { ticket, .. } = o {
                self.keeper.give_back(ticket);
            }
        }
    }

    /// When a message with `key` is held back, `acks` follow it (true); else false.
    fn follow_waiting(&self, key: &str, acks: &AckSet) -> bool {
        let mut waiting = self.waiting();
        match waiting.iter_mut().find(|w| w.item.key == key) {
            Some(w) => {
                w.item.followers.push(acks.clone());
                true
            }
            None => false,
        }
    }

    /// Fails every waiting message (the pipeline is failing or aborting).
    pub(super) fn fail_waiting(&self, reason: &str) {
        for w in self.waiting().drain(..) {
            w.item.fail(reason);
        }
    }

    /// The earliest instant a waiting message is due.
    pub(super) fn waiting_due(&self) -> Option<Instant> {
        self.waiting().iter().map(|w| w.next_try).min()
    }

    pub(super) fn waiting(&self) -> std::sync::MutexGuard<'_, Vec<Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A checkpoint of the lock's own, in the middle of a batch: the inner list is flushed
    /// with a ctrl that goes no further (its data outputs do), and what resolved settled.
    async fn flush_and_settle(&self, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if self.keeper.in_flight() == 0 {
            return Ok(());
        }
        let mut flushed = Vec::new();
        self.flush_inner(Message::checkpoint(), &mut flushed)
            .await?;
        out.extend(flushed.into_iter().filter(|m| !m.is_ctrl()));
        Ok(())
    }

    /// Runs the inner list over messages that got their locks, each carrying a token of a
    /// tracker the keeper watches.
    async fn run_inner(
        &self,
        run: Vec<Ready>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if run.is_empty() {
            return Ok(());
        }
        self.counts
            .acquired
            .fetch_add(run.len() as u64, Ordering::Relaxed);
        let msgs: Vec<Message> = run
            .into_iter()
            .map(|r| {
                let mut m = r.msg;
                let key = r.ticket.key.clone();
                m.add_ack(self.keeper.track(r.ticket, r.lease_start, r.lease));
                for f in r.followers {
                    self.keeper.follow(&key, f);
                }
                m
            })
            .collect();
        let outs = self.inner.apply(msgs).await?;
        self.pass_out(outs, out);
        Ok(())
    }

    /// A message that fails on its own: marked failed for its source (which redelivers it,
    /// or reports it) and logged; the rest of the batch goes on.
    fn fail_alone(&self, m: Message, key: Option<&str>, why: &str) {
        self.counts.failed.fetch_add(1, Ordering::Relaxed);
        let reason = format!("{}: {why}", self.name);
        m.fail_acks(&reason);
        match key {
            Some(k) => tracing::warn!(lock = %self.id, key = %k, "{why}"),
            None => tracing::warn!(lock = %self.id, "{why}"),
        }
    }
}

/// The pause before trying failed store calls again: 100 ms doubling to 2 s, jittered.
fn retry_pause(failures: u32) -> Duration {
    let d = Duration::from_millis(100) * 2u32.saturating_pow(failures.saturating_sub(1).min(5));
    let d = d.min(Duration::from_secs(2));
    d / 2 + d.mul_f64(fastrand::f64() / 2.0)
}
