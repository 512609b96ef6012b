//! `meta_kv_store_lock`: runs its inner transforms at most once per key, and, with a
//! source that redelivers what failed, exactly once.
//!
//! Per data message it takes a lock on a key (`object.source_key`'s value, or the SHA-256 of
//! the data; `prefix:` in front when set) with a conditional write to a kv store. A message
//! whose key is held does not run the inner transforms: it continues downstream unchanged
//! (Substation's behaviour) or is dropped (`duplicates: "drop"`). Locks are pending until a
//! ctrl message has flushed the inner transforms; then the locks of the messages that were
//! delivered are committed, and those of messages that were not are released, so that a
//! redelivery processes them. A send that fails inside the lock makes the lock release the
//! keys of what was not delivered, commit what was, and return the error.
//!
//! Differences from Substation's lock, each a defect there (reference §5.4):
//! - Acquisitions of a batch are concurrent (`concurrency`, default 32), not serialised by
//!   one mutex around the store call and the inner transforms; outputs keep input order.
//! - The lock record has an owner, a status and a lease. Commit and release are conditional
//!   on the owner: another process's lock is never deleted. A pending lock whose lease
//!   expired (its owner crashed) is taken over, so a crash loses nothing until the TTL.
//! - Only undelivered messages' keys are released (Substation unlocks every key since the
//!   last checkpoint, delivered ones included), and released keys are forgotten.
//! - With neither `ttl_offset` nor `ttl_key`, the TTL is 24 hours (Substation stores 0,
//!   which disables deduplication on DynamoDB); a `ttl_key` that is missing or not a number
//!   is an error, not a TTL in 1970.
//! - A key pending under another owner with a live lease is, by default, waited for (up to
//!   `pending_wait`): if the other owner commits, the message is a duplicate; if it
//!   releases or its lease runs out, this process takes the key; if it is still pending at
//!   the end of the wait, the batch fails (the source redelivers it later) instead of the
//!   message being skipped, and lost should the other owner fail. While it waits, this
//!   process holds no uncommitted lock (it releases the batch's and settles earlier ones),
//!   so two processes with overlapping input never wait on each other. `pending: "skip"`
//!   treats such a message as a duplicate at once, as Substation does.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use sluice_engine::ack::{AckStatus, AckTracker};
use sluice_engine::settings::GoDuration;
use sluice_engine::{
    Build, ConfigError, Key, Kind, Message, Pipeline, Transform, TransformError, Value,
    async_trait, value,
};

use super::required_pipeline;
use crate::kv_store::co_commit::{self, LockRef};
use crate::kv_store::{self, AcquireRequest, Acquired, LockStatus, LockStore, Settled};

/// The TTL when neither `ttl_offset` nor `ttl_key` is set.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a pending lock is protected from takeover.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(300);
/// How long a message waits for another owner's pending lock.
pub const DEFAULT_PENDING_WAIT: Duration = Duration::from_secs(10);
/// Lock-store calls in flight at once.
pub const DEFAULT_CONCURRENCY: usize = 32;

/// `object` settings of the lock.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct LockObject {
    /// The lock key's source; absent: the SHA-256 of the data.
    pub source_key: Option<String>,
    /// The event time (epoch seconds, ms, µs or ns) the TTL counts from.
    pub ttl_key: Option<String>,
}

/// What to do with a message whose key is held.
#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Duplicates {
    /// Continue downstream unchanged, without the inner transforms (Substation).
    #[default]
    Continue,
    /// Drop it.
    Drop,
}

/// What to do when another owner's pending lock (live lease) holds the key.
#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Pending {
    /// Wait for it to be committed, released or expired, up to `pending_wait`; then fail.
    #[default]
    Wait,
    /// Treat the message as a duplicate at once (Substation).
    Skip,
}

/// Settings of `meta_kv_store_lock`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The kv store holding the locks: `aws_dynamodb`, `sqlite` or `memory`.
    pub kv_store: Value,
    /// The inner list, run for messages that got their lock.
    pub transforms: Value,
    /// Put in front of every key, with a colon.
    pub prefix: String,
    /// Added to the event time (`ttl_key`) or to now.
    pub ttl_offset: Option<GoDuration>,
    /// Where the key and the event time are.
    pub object: LockObject,
    /// Lock-store calls in flight at once.
    pub concurrency: Option<usize>,
    /// Duplicates continue (default) or are dropped.
    pub duplicates: Duplicates,
    /// How long a pending lock is protected from takeover.
    pub lease: Option<GoDuration>,
    /// What to do about another owner's pending lock.
    pub pending: Pending,
    /// The longest wait for another owner's pending lock.
    pub pending_wait: Option<GoDuration>,
}

/// A lock this instance took and has not committed or released yet.
struct Held {
    key: String,
    tracker: Arc<AckTracker>,
    /// When it was taken: past half the lease, the lock checkpoints on its own.
    taken: Instant,
    /// Registered for a DynamoDB send's co-commit (DynamoDB stores only).
    co: Option<Arc<LockRef>>,
}

/// Messages found to be duplicates by any lock in this process, since it started: the
/// Lambda function's `DuplicatesSkipped` metric.
pub static DUPLICATES_SKIPPED: AtomicU64 = AtomicU64::new(0);

/// Counts of what the lock did, for logs and tests.
#[derive(Debug, Default)]
pub struct LockCounts {
    /// Keys taken.
    pub acquired: AtomicU64,
    /// Messages whose key was held.
    pub duplicates: AtomicU64,
    /// Keys committed.
    pub committed: AtomicU64,
    /// Keys released after a failure.
    pub released: AtomicU64,
    /// Keys another owner took over before we could commit them (possible duplicates).
    pub lost: AtomicU64,
}

/// The `meta_kv_store_lock` transform.
pub struct MetaKvStoreLock {
    id: Arc<str>,
    inner: Pipeline,
    store: Arc<dyn LockStore>,
    owner: Arc<str>,
    /// Whether the store can commit together with a DynamoDB send (`co_commit`).
    co_commit: bool,
    prefix: String,
    source_key: Option<Key>,
    ttl_key: Option<Key>,
    ttl_offset: i64,
    concurrency: usize,
    duplicates: Duplicates,
    lease_ms: i64,
    pending: Pending,
    pending_wait: Duration,
    held: Mutex<Vec<Held>>,
    counts: LockCounts,
}

/// What became of one data message at acquisition.
/// How many acquisitions in a row may use more than half the lease before the batch fails.
const SLOW_ACQUISITIONS: u32 = 3;

enum Fate {
    /// Taken: runs the inner transforms.
    Run(String),
    /// Its key is held (or repeats an earlier message of the batch).
    Duplicate,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A name for this process and lock instance, unique and readable in the store.
fn new_owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string());
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}/{}/{}", std::process::id(), &id[..12])
}

/// Substation's truncation of an event time to epoch seconds: a value longer than ten
/// digits is ms, µs or ns and loses its extra digits.
pub fn truncate_to_seconds(t: i64) -> i64 {
    let mut t = t;
    while t >= 10_000_000_000 {
        t /= 10;
    }
    t
}

impl MetaKvStoreLock {
    /// Builds it from its settings.
    pub fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let inner = required_pipeline(b, "transforms", &s.transforms)?;
        if s.kv_store.is_null() {
            return Err(b.field_error(
                "kv_store",
                "missing required option: the kv store that holds the locks (aws_dynamodb, sqlite or memory)",
            ));
        }
        let store = kv_store::lock_store(b, "kv_store", &s.kv_store)?;
        let source_key = b.opt_key("object.source_key", &s.object.source_key)?;
        let ttl_key = b.opt_key("object.ttl_key", &s.object.ttl_key)?;
        let ttl_offset = match (s.ttl_offset, &ttl_key) {
            (Some(d), _) => d.0.as_secs() as i64,
            (None, Some(_)) => 0,
            (None, None) => {
                tracing::debug!(
                    id = %b.id(),
                    "meta_kv_store_lock: no ttl_offset or ttl_key; locks last 24h"
                );
                DEFAULT_TTL.as_secs() as i64
            }
        };
        if s.ttl_offset.is_some() && ttl_offset == 0 && ttl_key.is_none() {
            return Err(b.field_error(
                "ttl_offset",
                "a zero TTL would make every lock expire at once (no deduplication); set a duration such as \"24h\"",
            ));
        }
        let concurrency = s.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
        if concurrency == 0 {
            return Err(b.field_error("concurrency", "must be at least 1"));
        }
        let lease = s.lease.map_or(DEFAULT_LEASE, |d| d.0);
        if lease.is_zero() {
            return Err(b.field_error("lease", "must be longer than zero"));
        }
        Ok(MetaKvStoreLock {
            id: b.id().clone(),
            inner,
            co_commit: store.dynamodb().is_some(),
            store,
            owner: new_owner().into(),
            prefix: s.prefix,
            source_key,
            ttl_key,
            ttl_offset,
            concurrency,
            duplicates: s.duplicates,
            lease_ms: lease.as_millis() as i64,
            pending: s.pending,
            pending_wait: s.pending_wait.map_or(DEFAULT_PENDING_WAIT, |d| d.0),
            held: Mutex::new(Vec::new()),
            counts: LockCounts::default(),
        })
    }

    /// What the lock did so far.
    pub fn counts(&self) -> &LockCounts {
        &self.counts
    }

    /// This instance's owner name, as written in the store.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Vec<Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lock key of a data message.
    fn key_of(&self, msg: &Message) -> String {
        let raw = self
            .source_key
            .as_ref()
            .and_then(|k| msg.get(k))
            .filter(|v| !v.is_null())
            .map(|v| value::to_text(&v).into_owned())
            .unwrap_or_else(|| hex::encode(Sha256::digest(msg.data())));
        if self.prefix.is_empty() {
            raw
        } else {
            format!("{}:{raw}", self.prefix)
        }
    }

    /// The lock's TTL (epoch seconds) for a data message.
    fn ttl_of(&self, msg: &Message, now_ms: i64) -> Result<i64, TransformError> {
        let Some(k) = &self.ttl_key else {
            return Ok(now_ms / 1000 + self.ttl_offset);
        };
        let bad = |what: &str| {
            TransformError::failed(format!(
                "object.ttl_key {:?}: {what}; the lock's TTL counts from this event time (epoch seconds, ms, µs or ns)",
                k.as_str()
            ))
        };
        let v = msg.get(k).ok_or_else(|| bad("no value in the message"))?;
        let t = match &*v {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        }
        .ok_or_else(|| bad(&format!("{} is not a whole number", value::to_text(&v))))?;
        if t < 0 {
            return Err(bad("negative"));
        }
        Ok(truncate_to_seconds(t) + self.ttl_offset)
    }

    /// Takes the locks of `msgs`' keys; one fate per message, in order.
    ///
    /// When another owner's pending lock (live lease) holds a key and `pending` is `wait`,
    /// the keys taken in this call are released, the locks held from earlier batches are
    /// settled (the inner list is flushed first: see [`Self::flush_and_settle`]), and the
    /// whole batch is tried again after a jittered backoff, until `pending_wait` has
    /// passed. So this process never waits while holding uncommitted locks, and two
    /// processes with overlapping input cannot wait for each other until their leases end.
    ///
    /// The leases start when the store call is made. When the call returns with less than
    /// half the lease left (a slow or retrying store), another process could take the keys
    /// over while the inner list runs: the keys are given back and the batch tried again,
    /// at most [`SLOW_ACQUISITIONS`] times before the batch fails.
    ///
    /// Answers each message's fate and when the leases of the taken keys began.
    async fn acquire_all(
        &self,
        msgs: &[Message],
        out: &mut Vec<Message>,
    ) -> Result<(Vec<Fate>, Instant), TransformError> {
        let first = now_ms();
        // Every message is a duplicate unless its own request takes the key.
        let mut fates: Vec<Fate> = Vec::with_capacity(msgs.len());
        let mut requests = Vec::new();
        let mut index_of_request = Vec::new();
        let mut seen: HashSet<String> = HashSet::with_capacity(msgs.len());
        for (i, m) in msgs.iter().enumerate() {
            let key = self.key_of(m);
            if !seen.insert(key.clone()) {
                // The same key earlier in this batch: a duplicate of that message.
                fates.push(Fate::Duplicate);
                continue;
            }
            let ttl = self.ttl_of(m, first)?;
            requests.push(AcquireRequest {
                key,
                ttl,
                lease_until_ms: 0,
            });
            index_of_request.push(i);
            fates.push(Fate::Duplicate);
        }
        let started = Instant::now();
        let mut backoff = Duration::from_millis(20);
        let half_lease = Duration::from_millis(self.lease_ms as u64 / 2);
        let mut slow = 0;
        let mut lease_start;
        let results = loop {
            lease_start = Instant::now();
            let now = now_ms();
            for r in &mut requests {
                r.lease_until_ms = now + self.lease_ms;
            }
            let results = self
                .store
                .acquire(&self.owner, now, &requests, self.concurrency)
                .await;
            if let Some((r, e)) = results
                .iter()
                .enumerate()
                .find_map(|(r, res)| res.as_ref().err().map(|e| (r, e)))
            {
                let e = TransformError::failed(format!(
                    "lock {:?} in {}: {e}",
                    requests[r].key,
                    self.store.describe()
                ));
                self.release_taken(&requests, &results).await;
                return Err(e);
            }
            let took = lease_start.elapsed();
            if took >= half_lease && results.iter().any(|r| matches!(r, Ok(Acquired::Taken))) {
                self.release_taken(&requests, &results).await;
                slow += 1;
                if slow >= SLOW_ACQUISITIONS {
                    return Err(TransformError::failed(format!(
                        "taking {} locks in {} took {took:?}, more than half the {:?} lease, {slow} times in a row: another process could take them over before their messages are processed; raise `lease` (or lower `concurrency`'s load on the store)",
                        requests.len(),
                        self.store.describe(),
                        Duration::from_millis(self.lease_ms as u64),
                    )));
                }
                tracing::warn!(
                    lock = %self.id,
                    took_ms = took.as_millis() as u64,
                    lease_ms = self.lease_ms,
                    "taking the locks used more than half their lease; gave them back to take them again"
                );
                continue;
            }
            // The first key pending under another owner's live lease, with that lease.
            let blocked = results.iter().enumerate().find_map(|(r, res)| match res {
                Ok(Acquired::Held(Some(rec)))
                    if self.pending == Pending::Wait
                        && *rec.owner != *self.owner
                        && rec.blocks(now) =>
                {
                    match rec.status {
                        LockStatus::Pending { lease_until_ms } => Some((r, rec, lease_until_ms)),
                        LockStatus::Committed => None,
                    }
                }
                _ => None,
            });
            let Some((blocked, holder, until)) = blocked else {
                break results;
            };
            if started.elapsed() >= self.pending_wait {
                let e = TransformError::failed(format!(
                    "key {:?} is pending under {} (lease until {} ms since the epoch) after waiting {:?}: another process is processing that message; the source should redeliver it later (or set `pending: \"skip\"`)",
                    requests[blocked].key, holder.owner, until, self.pending_wait
                ));
                self.release_taken(&requests, &results).await;
                return Err(e);
            }
            self.release_taken(&requests, &results).await;
            self.flush_and_settle(out).await?;
            let jitter = backoff.mul_f64(0.5 + fastrand::f64());
            let left = self.pending_wait.saturating_sub(started.elapsed());
            tokio::time::sleep(jitter.min(left)).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        };
        // No result is an error here: errors returned above.
        for ((req, result), &i) in requests.iter().zip(results).zip(&index_of_request) {
            match result {
                Ok(Acquired::Taken) => {
                    self.counts.acquired.fetch_add(1, Ordering::Relaxed);
                    fates[i] = Fate::Run(req.key.clone());
                }
                Ok(Acquired::Held(rec)) => {
                    tracing::debug!(
                        lock = %self.id,
                        key = %req.key,
                        holder = ?rec,
                        "duplicate: the key is held"
                    );
                }
                Err(_) => {}
            }
        }
        Ok((fates, lease_start))
    }

    /// A checkpoint of the lock's own, in the middle of a batch: the inner list is flushed
    /// with a ctrl that goes no further (its data outputs do), and the held locks settled.
    async fn flush_and_settle(&self, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if self.held().is_empty() {
            return Ok(());
        }
        let mut flushed = Vec::new();
        self.checkpoint(Message::ctrl(), &mut flushed).await?;
        out.extend(flushed.into_iter().filter(|m| !m.is_ctrl()));
        Ok(())
    }

    /// Releases the keys this acquisition took (their messages never ran).
    async fn release_taken(
        &self,
        requests: &[AcquireRequest],
        results: &[Result<Acquired, kv_store::StoreError>],
    ) {
        let taken: Vec<String> = requests
            .iter()
            .zip(results)
            .filter(|(_, r)| matches!(r, Ok(Acquired::Taken)))
            .map(|(q, _)| q.key.clone())
            .collect();
        if !taken.is_empty()
            && let Err(e) = self
                .store
                .release(&self.owner, &taken, self.concurrency)
                .await
        {
            tracing::warn!(lock = %self.id, error = %e, keys = taken.len(),
                "could not release locks taken for a failed batch; they block until their lease ends");
        }
    }

    /// Runs the inner list over `run` (messages that got their locks), tracking each.
    /// `taken` is when their leases began.
    async fn run_inner(
        &self,
        run: Vec<(String, Message)>,
        taken: Instant,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let mut msgs = Vec::with_capacity(run.len());
        let mut ours = HashSet::with_capacity(run.len());
        {
            let mut held = self.held();
            for (key, mut m) in run {
                let (tracker, token) = AckTracker::new();
                ours.insert(tracker.id());
                m.add_ack(token);
                let co = self.co_commit.then(|| {
                    let lock = Arc::new(LockRef::new(
                        self.store.clone(),
                        self.owner.clone(),
                        key.clone(),
                    ));
                    co_commit::register(tracker.id(), lock.clone());
                    lock
                });
                held.push(Held {
                    key,
                    tracker,
                    taken,
                    co,
                });
                msgs.push(m);
            }
        }
        let outs = self.inner.apply(msgs).await?;
        push_without_our_tokens(outs, &ours, out);
        Ok(())
    }

    /// Data messages between two ctrls: acquire, then run the inner list on the taken ones
    /// (in runs, so outputs keep input order). On error, every message not yet passed on
    /// is marked failed: none may count as delivered by being dropped here.
    async fn process(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msgs.is_empty() {
            return Ok(());
        }
        // Locks held for half their lease are settled now, whatever the source's ctrl
        // rhythm (`sluice run` sends one at the end of input), so a long run never lets
        // its leases run out before it commits.
        let half_lease = Duration::from_millis(self.lease_ms as u64 / 2);
        // `held` is oldest first (see `settle`).
        let stale = self
            .held()
            .first()
            .is_some_and(|h| h.taken.elapsed() >= half_lease);
        if stale && let Err(e) = self.flush_and_settle(out).await {
            fail_each(msgs.iter(), &e);
            return Err(e);
        }
        let (fates, taken) = match self.acquire_all(&msgs, out).await {
            Ok(f) => f,
            Err(e) => {
                fail_each(msgs.iter(), &e);
                return Err(e);
            }
        };
        let mut run: Vec<(String, Message)> = Vec::new();
        let mut rest = msgs.into_iter().zip(fates);
        while let Some((m, fate)) = rest.next() {
            let result = match fate {
                Fate::Run(key) => {
                    run.push((key, m));
                    continue;
                }
                Fate::Duplicate => {
                    self.counts.duplicates.fetch_add(1, Ordering::Relaxed);
                    DUPLICATES_SKIPPED.fetch_add(1, Ordering::Relaxed);
                    let r = if run.is_empty() {
                        Ok(())
                    } else {
                        self.run_inner(std::mem::take(&mut run), taken, out).await
                    };
                    if r.is_ok() && self.duplicates == Duplicates::Continue {
                        out.push(m);
                    } else if let Err(e) = &r {
                        fail_each(std::iter::once(&m), e);
                    }
                    r
                }
            };
            if let Err(e) = result {
                fail_each(rest.map(|(m, _)| m).collect::<Vec<_>>().iter(), &e);
                return Err(e);
            }
        }
        if !run.is_empty() {
            self.run_inner(run, taken, out).await?;
        }
        Ok(())
    }

    /// The checkpoint: flush the inner list with `ctrl`, then settle the locks.
    async fn checkpoint(
        &self,
        ctrl: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let ours: HashSet<usize> = self.held().iter().map(|h| h.tracker.id()).collect();
        let outs = self.inner.apply(vec![ctrl]).await?;
        let mut ctrls = Vec::new();
        let mut datas = Vec::new();
        for m in outs {
            if m.is_ctrl() {
                ctrls.push(m);
            } else {
                datas.push(m);
            }
        }
        push_without_our_tokens(datas, &ours, out);
        self.settle(false).await?;
        out.extend(ctrls);
        Ok(())
    }

    /// Commits the keys of delivered messages and releases those of failed ones (and, after
    /// an abort, of those still pending). Keys whose messages are still on their way stay
    /// held for the next checkpoint; so do keys a store failure left unsettled.
    async fn settle(&self, aborting: bool) -> Result<(), TransformError> {
        let held = std::mem::take(&mut *self.held());
        if held.is_empty() {
            return Ok(());
        }
        let mut commit = Vec::new();
        let mut release = Vec::new();
        let mut keep = Vec::new();
        let mut co_committed = 0;
        for h in held {
            match h.tracker.status() {
                // A DynamoDB send committed it with the message's items: done.
                AckStatus::Delivered if h.co.as_ref().is_some_and(|c| c.is_committed()) => {
                    co_committed += 1;
                    co_commit::unregister([h.tracker.id()]);
                }
                AckStatus::Delivered => commit.push(h),
                AckStatus::Failed => release.push(h),
                AckStatus::Pending if aborting => release.push(h),
                AckStatus::Pending => keep.push(h),
            }
        }
        self.counts
            .committed
            .fetch_add(co_committed, Ordering::Relaxed);
        let mut first_error = None;
        let committed = self.settle_keys(&commit, true).await;
        let released = self.settle_keys(&release, false).await;
        for (group, result) in [(commit, committed), (release, released)] {
            match result {
                Ok(()) => {
                    if self.co_commit {
                        co_commit::unregister(group.iter().map(|h| h.tracker.id()));
                    }
                }
                Err(e) => {
                    keep.extend(group);
                    first_error.get_or_insert(e);
                }
            }
        }
        if !keep.is_empty() {
            // Kept locks are older than any taken since: they go first.
            let mut held = self.held();
            keep.append(&mut held);
            *held = keep;
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn settle_keys(&self, group: &[Held], commit: bool) -> Result<(), TransformError> {
        if group.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = group.iter().map(|h| h.key.clone()).collect();
        let what = if commit { "commit" } else { "release" };
        let result = if commit {
            self.store
                .commit(&self.owner, &keys, self.concurrency)
                .await
        } else {
            self.store
                .release(&self.owner, &keys, self.concurrency)
                .await
        };
        let settled = result.map_err(|e| {
            TransformError::failed(format!(
                "{what} of {} lock(s) in {}: {e}",
                keys.len(),
                self.store.describe()
            ))
        })?;
        let mut ok = 0u64;
        for (key, s) in keys.iter().zip(settled) {
            match s {
                Settled::Ok => ok += 1,
                Settled::NotOwner(rec) if commit => {
                    self.counts.lost.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        lock = %self.id, key = %key, holder = ?rec,
                        "the lock was taken over after its lease ran out, before this delivery committed it: the message may have been processed twice (lengthen `lease`)"
                    );
                }
                Settled::NotOwner(rec) => {
                    tracing::debug!(lock = %self.id, key = %key, holder = ?rec,
                        "release: the key is no longer ours");
                }
            }
        }
        let counter = if commit {
            &self.counts.committed
        } else {
            &self.counts.released
        };
        counter.fetch_add(ok, Ordering::Relaxed);
        Ok(())
    }

    /// After an error: what the inner list holds is discarded (and marked failed), then
    /// delivered messages' keys are committed and the rest released.
    async fn fail(&self, e: TransformError) -> TransformError {
        self.inner.abort(&e.to_string()).await;
        if let Err(settle_error) = self.settle(true).await {
            tracing::error!(lock = %self.id, error = %settle_error,
                "could not settle the locks after a failure; pending ones block until their lease ends");
        }
        e
    }
}

fn fail_each<'m>(msgs: impl Iterator<Item = &'m Message>, e: &TransformError) {
    let reason = e.to_string();
    for m in msgs {
        m.fail_acks(&reason);
    }
}

/// Pushes `outs`, taking off the tokens of the lock's own trackers: what leaves the lock is
/// no longer the lock's to track.
fn push_without_our_tokens(outs: Vec<Message>, ours: &HashSet<usize>, out: &mut Vec<Message>) {
    for mut m in outs {
        if !m.acks().is_empty() {
            m.take_acks_where(|t| ours.contains(&t.tracker_id()));
        }
        out.push(m);
    }
}

#[async_trait]
impl Transform for MetaKvStoreLock {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        self.transform_batch(vec![msg], out).await
    }

    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let mut segment = Vec::new();
        let mut rest = msgs.into_iter();
        let result = loop {
            let Some(m) = rest.next() else {
                break self.process(std::mem::take(&mut segment), out).await;
            };
            if !m.is_ctrl() {
                segment.push(m);
                continue;
            }
            if let Err(e) = self.process(std::mem::take(&mut segment), out).await {
                break Err(e);
            }
            if let Err(e) = self.checkpoint(m, out).await {
                break Err(e);
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                let reason = e.to_string();
                for m in segment.iter().chain(rest.as_slice()) {
                    m.fail_acks(&reason);
                }
                Err(self.fail(e).await)
            }
        }
    }

    fn kind(&self) -> Kind {
        Kind::Stateful
    }

    fn deadline(&self) -> Option<Instant> {
        self.inner.deadline()
    }

    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let ours: HashSet<usize> = self.held().iter().map(|h| h.tracker.id()).collect();
        match self.inner.expire(now).await {
            Ok(outs) => {
                push_without_our_tokens(outs, &ours, out);
                Ok(())
            }
            Err(e) => Err(self.fail(e).await),
        }
    }

    async fn abort(&self, reason: &str) {
        self.inner.abort(reason).await;
        if let Err(e) = self.settle(true).await {
            tracing::error!(lock = %self.id, error = %e,
                "could not settle the locks after an abort; pending ones block until their lease ends");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Duration;

    use sluice_engine::ack::AckStatus;
    use sluice_engine::{Message, Pipeline, Transform, Value, json, testing};

    use super::truncate_to_seconds;
    use crate::kv_store::sqlite::SqliteStore;
    use crate::kv_store::{AcquireRequest, Acquired, LockStore};
    use crate::meta::test_support::{assert_status, datas, journal, registry, tracked};

    /// A lock over a fresh sqlite file, around `inner`, with extra settings merged in.
    struct Fixture {
        _dir: tempfile::TempDir,
        db: PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("locks.sqlite");
            Fixture { _dir: dir, db }
        }

        fn settings(&self, inner: Value, extra: Value) -> Value {
            let mut s = json!({
                "kv_store": {"type": "sqlite", "settings": {"file": self.db.to_str().unwrap()}},
                "ttl_offset": "1h",
                "transforms": inner,
            });
            if let (Some(m), Some(e)) = (s.as_object_mut(), extra.as_object()) {
                for (k, v) in e {
                    m.insert(k.clone(), v.clone());
                }
            }
            s
        }

        fn lock(&self, inner: Value, extra: Value) -> Arc<dyn Transform> {
            testing::build(
                &registry(),
                json!({"type": "meta_kv_store_lock", "settings": self.settings(inner, extra)}),
            )
            .unwrap()
        }

        /// Another process's view of the same file.
        fn other(&self) -> SqliteStore {
            SqliteStore::open(self.db.clone()).unwrap()
        }

        /// key → (owner, committed) of every lock in the file.
        fn records(&self) -> Vec<(String, String, bool)> {
            records(&self.db)
        }
    }

    fn records(db: &Path) -> Vec<(String, String, bool)> {
        let c = rusqlite::Connection::open(db).unwrap();
        let mut st = c
            .prepare("SELECT key, owner, committed FROM sluice_locks ORDER BY key")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? != 0)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    fn record(name: &str) -> Value {
        json!([{"type": "fixture_record", "settings": {"name": name}}])
    }

    fn suffix_and_send(name: &str) -> Value {
        json!([
            {"type": "fixture_suffix", "settings": {"suffix": "+"}},
            {"type": "fixture_send", "settings": {"name": name}},
        ])
    }

    fn now_ms() -> i64 {
        super::now_ms()
    }

    fn hold(store: &SqliteStore, owner: &str, key: &str, lease_ms: i64) {
        let now = now_ms();
        let r = testing::block_on(store.acquire(
            owner,
            now,
            &[AcquireRequest {
                key: key.into(),
                ttl: now / 1000 + 3600,
                lease_until_ms: now + lease_ms,
            }],
            1,
        ));
        assert_eq!(r[0].as_ref().unwrap(), &Acquired::Taken);
    }

    #[test]
    fn duplicates_skip_the_inner_list_and_continue_or_drop() {
        let f = Fixture::new();
        let by_id = json!({"object": {"source_key": "id"}});
        let lock = f.lock(record("lock-dup-1"), by_id.clone());
        let out = testing::run(
            lock,
            &[r#"{"id":1}"#, r#"{"id":2}"#, r#"{"id":1,"again":true}"#],
        )
        .unwrap();
        // The repeat of id 1 continues unchanged, in its place, without the inner list.
        assert_eq!(
            out,
            vec![r#"{"id":1}"#, r#"{"id":2}"#, r#"{"id":1,"again":true}"#]
        );
        assert_eq!(
            journal("lock-dup-1"),
            vec![r#"{"id":1}"#, r#"{"id":2}"#, "<ctrl>"]
        );
        // A later run (a new process) sees the committed locks.
        let mut drop_settings = by_id;
        drop_settings
            .as_object_mut()
            .unwrap()
            .insert("duplicates", json!("drop"));
        let lock = f.lock(record("lock-dup-2"), drop_settings);
        let out = testing::run(lock, &[r#"{"id":2}"#, r#"{"id":3}"#]).unwrap();
        assert_eq!(out, vec![r#"{"id":3}"#]);
        assert_eq!(journal("lock-dup-2"), vec![r#"{"id":3}"#, "<ctrl>"]);
        let recs = f.records();
        assert_eq!(recs.len(), 3);
        assert!(recs.iter().all(|(_, _, committed)| *committed), "{recs:?}");
    }

    #[test]
    fn keys_come_from_source_key_or_the_data_hash_with_the_prefix() {
        let f = Fixture::new();
        let lock = f.lock(
            record("lock-keys"),
            json!({"prefix": "pre", "object": {"source_key": "user.id"}}),
        );
        testing::run(
            lock,
            &[r#"{"user":{"id":"u1"}}"#, r#"{"user":{"id":7}}"#, "raw"],
        )
        .unwrap();
        let keys: Vec<String> = f.records().into_iter().map(|r| r.0).collect();
        let raw_key = format!("pre:{}", hex::encode(sha2::Sha256::digest(b"raw")));
        let mut want = vec!["pre:7".to_string(), "pre:u1".to_string(), raw_key];
        want.sort();
        assert_eq!(keys, want);
    }

    use sha2::Digest;

    #[test]
    fn the_ttl_counts_from_the_event_time_or_now() {
        assert_eq!(truncate_to_seconds(1_700_000_000), 1_700_000_000);
        assert_eq!(truncate_to_seconds(1_700_000_000_123), 1_700_000_000);
        assert_eq!(truncate_to_seconds(1_700_000_000_123_456), 1_700_000_000);
        assert_eq!(
            truncate_to_seconds(1_700_000_000_123_456_789),
            1_700_000_000
        );
        let f = Fixture::new();
        let ttl_of = |settings: Value, data: &str| {
            let lock = f.lock(record("lock-ttl"), settings);
            let key = format!("k{}", fastrand::u64(..));
            let data = data.replace("KEY", &key);
            testing::run(lock, &[&data])?;
            let c = rusqlite::Connection::open(&f.db).unwrap();
            Ok::<i64, sluice_engine::TransformError>(
                c.query_row("SELECT ttl FROM sluice_locks WHERE key = ?1", [&key], |r| {
                    r.get(0)
                })
                .unwrap(),
            )
        };
        let by_key = |extra: Value| {
            let mut s = json!({"object": {"source_key": "k", "ttl_key": "t"}});
            for (k, v) in extra.as_object().unwrap() {
                s.as_object_mut().unwrap().insert(k.clone(), v.clone());
            }
            s
        };
        // ttl_key in s, ms and ns, with and without an offset (the fixture sets 1h).
        let t = ttl_of(by_key(json!({})), r#"{"k":"KEY","t":1700000000}"#).unwrap();
        assert_eq!(t, 1_700_000_000 + 3600);
        let t = ttl_of(by_key(json!({})), r#"{"k":"KEY","t":"1700000000123"}"#).unwrap();
        assert_eq!(t, 1_700_000_000 + 3600);
        let mut no_offset = f.settings(record("lock-ttl"), by_key(json!({})));
        no_offset
            .as_object_mut()
            .unwrap()
            .shift_remove("ttl_offset");
        let lock = testing::build(
            &registry(),
            json!({"type": "meta_kv_store_lock", "settings": no_offset}),
        )
        .unwrap();
        testing::run(lock, &[r#"{"k":"plain","t":1700000000123456789}"#]).unwrap();
        let c = rusqlite::Connection::open(&f.db).unwrap();
        let t: i64 = c
            .query_row(
                "SELECT ttl FROM sluice_locks WHERE key = 'plain'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(t, 1_700_000_000);
        // Offset only: now + offset.
        let before = now_ms() / 1000;
        let t = ttl_of(json!({"object": {"source_key": "k"}}), r#"{"k":"KEY"}"#).unwrap();
        assert!((before + 3600..=before + 3602).contains(&t), "{t}");
        // Neither: 24 hours, never 0.
        let mut neither = f.settings(record("lock-ttl"), json!({"object": {"source_key": "k"}}));
        neither.as_object_mut().unwrap().shift_remove("ttl_offset");
        let lock = testing::build(
            &registry(),
            json!({"type": "meta_kv_store_lock", "settings": neither}),
        )
        .unwrap();
        testing::run(lock, &[r#"{"k":"day"}"#]).unwrap();
        let t: i64 = c
            .query_row("SELECT ttl FROM sluice_locks WHERE key = 'day'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert!((before + 86_400..=before + 86_402).contains(&t), "{t}");
        // A missing or non-numeric event time is an error naming ttl_key.
        for bad in [r#"{"k":"KEY"}"#, r#"{"k":"KEY","t":"yesterday"}"#] {
            let e = ttl_of(by_key(json!({})), bad).unwrap_err().to_string();
            assert!(e.contains("object.ttl_key \"t\""), "{e}");
        }
    }

    #[test]
    fn outputs_keep_input_order_across_duplicates_and_runs() {
        let f = Fixture::new();
        let lock = f.lock(
            suffix_and_send("lock-order"),
            json!({"object": {"source_key": "id"}, "concurrency": 4}),
        );
        let inputs: Vec<String> = (0..200)
            .map(|i| format!(r#"{{"id":{}}}"#, if i % 7 == 3 { i - 1 } else { i }))
            .collect();
        let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let out = testing::run(lock, &refs).unwrap();
        let want: Vec<String> = (0..200)
            .map(|i| {
                if i % 7 == 3 {
                    format!(r#"{{"id":{}}}"#, i - 1)
                } else {
                    format!(r#"{{"id":{i}}}+"#)
                }
            })
            .collect();
        assert_eq!(out, want);
        let sent = journal("lock-order");
        assert_eq!(sent.len(), 200 - 29);
    }

    #[test]
    fn a_checkpoint_commits_delivered_keys_and_a_failed_send_releases_the_rest() {
        let f = Fixture::new();
        // "a…" goes to a send that delivers, "b…" to one whose flush fails once.
        let inner = json!([{"type": "meta_switch", "settings": {"cases": [
            {"condition": {"type": "fixture_contains", "settings": {"value": "a"}},
             "transforms": [{"type": "fixture_send", "settings": {"name": "lock-fail-a"}}]},
            {"transforms": [{"type": "fixture_send", "settings": {"name": "lock-fail-b", "fail_flushes": 1}}]},
        ]}}]);
        let lock = f.lock(inner, json!({}));
        let p = Pipeline::new(vec![("lock".into(), lock)]);
        let (a, t_a) = tracked("a1");
        let (b, t_b) = tracked("b1");
        let err = testing::block_on(p.apply(vec![a, b, Message::ctrl()])).unwrap_err();
        assert!(err.to_string().contains("delivery failed"), "{err}");
        // For the source both failed (the pipeline returned an error, so what the lock had
        // passed on was abandoned), but inside the lock a1 was delivered and b1 was not.
        assert_status(&t_a, AckStatus::Failed, "the pipeline failed");
        assert_status(&t_b, AckStatus::Failed, "b1 was not sent");
        assert_eq!(journal("lock-fail-a"), vec!["sent:a1"]);
        // Only a1's lock is left, committed; b1's was released (the failure propagated).
        let recs = f.records();
        assert_eq!(recs.len(), 1, "{recs:?}");
        assert!(recs[0].2, "committed");
        assert_eq!(
            recs[0].0,
            hex::encode(sha2::Sha256::digest(b"a1")),
            "the delivered key"
        );
        // The redelivery of both: a1 is a duplicate, b1 is processed (the send works now).
        let (a, _) = tracked("a1");
        let (b, t_b) = tracked("b1");
        let out = testing::block_on(p.apply(vec![a, b, Message::ctrl()])).unwrap();
        assert_eq!(datas(&out), vec!["a1", "b1"]);
        drop(out);
        assert_status(&t_b, AckStatus::Delivered, "b1 delivered on redelivery");
        // The failed flush's copy was discarded by the abort, so it is sent once.
        assert_eq!(journal("lock-fail-b"), vec!["aborted:b1", "sent:b1"]);
        assert_eq!(journal("lock-fail-a"), vec!["sent:a1"], "a1 sent once");
        assert_eq!(f.records().iter().filter(|r| r.2).count(), 2);
    }

    #[test]
    fn meta_err_around_the_lock_swallows_but_keys_are_still_released() {
        let f = Fixture::new();
        let inner =
            json!([{"type": "fixture_send", "settings": {"name": "lock-err", "fail_flushes": 1}}]);
        let lock_cfg =
            json!({"type": "meta_kv_store_lock", "settings": f.settings(inner, json!({}))});
        let t = testing::build(
            &registry(),
            json!({"type": "meta_err", "settings": {"transforms": [lock_cfg], "error_messages": [".*"]}}),
        )
        .unwrap();
        let p = Pipeline::new(vec![("err".into(), t)]);
        let (m, tracker) = tracked("x");
        testing::block_on(p.apply(vec![m, Message::ctrl()])).unwrap();
        assert_status(&tracker, AckStatus::Failed, "still failed for the source");
        assert!(
            f.records().is_empty(),
            "released: a redelivery processes it"
        );
    }

    #[test]
    fn an_own_pending_key_from_an_earlier_batch_is_a_duplicate() {
        let f = Fixture::new();
        let lock = f.lock(suffix_and_send("lock-own"), json!({}));
        let p = Pipeline::new(vec![("lock".into(), lock)]);
        let out1 = testing::block_on(p.apply(vec![Message::new(&b"x"[..])])).unwrap();
        let out2 = testing::block_on(p.apply(vec![Message::new(&b"x"[..])])).unwrap();
        let out3 = testing::block_on(p.apply(vec![Message::ctrl()])).unwrap();
        assert_eq!(datas(&out1), vec!["x+"]);
        assert_eq!(datas(&out2), vec!["x"], "no wait on our own lock");
        assert!(out3.last().unwrap().is_ctrl());
        assert_eq!(journal("lock-own"), vec!["sent:x+"]);
    }

    #[test]
    fn another_owners_pending_lock_is_skipped_waited_for_or_taken_over() {
        let f = Fixture::new();
        let other = f.other();
        let key = hex::encode(sha2::Sha256::digest(b"m"));
        // skip: a duplicate at once.
        hold(&other, "them", &key, 60_000);
        let lock = f.lock(record("lock-skip"), json!({"pending": "skip"}));
        assert_eq!(testing::run(lock, &["m"]).unwrap(), vec!["m"]);
        assert_eq!(journal("lock-skip"), vec!["<ctrl>"]);

        // wait: they commit meanwhile, so it is a duplicate.
        let lock = f.lock(record("lock-wait-commit"), json!({"pending_wait": "5s"}));
        let store = f.other();
        let k = key.clone();
        let committer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            testing::block_on(store.commit("them", &[k], 1)).unwrap();
        });
        assert_eq!(testing::run(lock, &["m"]).unwrap(), vec!["m"]);
        committer.join().unwrap();
        assert_eq!(journal("lock-wait-commit"), vec!["<ctrl>"]);

        // wait: they release (their send failed), so we process it.
        let key2 = hex::encode(sha2::Sha256::digest(b"n"));
        hold(&other, "them", &key2, 60_000);
        let lock = f.lock(record("lock-wait-release"), json!({"pending_wait": "5s"}));
        let store = f.other();
        let k = key2.clone();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            testing::block_on(store.release("them", &[k], 1)).unwrap();
        });
        testing::run(lock, &["n"]).unwrap();
        releaser.join().unwrap();
        assert_eq!(journal("lock-wait-release"), vec!["n", "<ctrl>"]);

        // wait: still pending at the end of the wait: the message fails (redelivered later)
        // and the keys this batch took are released.
        let key3 = hex::encode(sha2::Sha256::digest(b"o"));
        hold(&other, "them", &key3, 60_000);
        let lock = f.lock(record("lock-wait-fail"), json!({"pending_wait": "300ms"}));
        let p = Pipeline::new(vec![("lock".into(), lock)]);
        let (free, t_free) = tracked("free");
        let (o, t_o) = tracked("o");
        let e = testing::block_on(p.apply(vec![free, o])).unwrap_err();
        assert!(e.to_string().contains("pending under them"), "{e}");
        assert_status(&t_o, AckStatus::Failed, "o");
        assert_status(&t_free, AckStatus::Failed, "the batch failed");
        assert!(journal("lock-wait-fail").is_empty());
        let keys: Vec<String> = f.records().into_iter().map(|r| r.0).collect();
        assert!(
            !keys.contains(&hex::encode(sha2::Sha256::digest(b"free"))),
            "released"
        );

        // Their lease ran out (they crashed): taken over and processed.
        let key4 = hex::encode(sha2::Sha256::digest(b"q"));
        hold(&other, "them", &key4, 100);
        std::thread::sleep(Duration::from_millis(150));
        let lock = f.lock(record("lock-takeover"), json!({"pending": "skip"}));
        testing::run(lock, &["q"]).unwrap();
        assert_eq!(journal("lock-takeover"), vec!["q", "<ctrl>"]);
        let recs = f.records();
        let q = recs.iter().find(|r| r.0 == key4).unwrap();
        assert!(q.1 != "them" && q.2, "ours now, committed: {q:?}");
    }

    #[test]
    fn keys_whose_lease_ran_out_while_they_were_taken_are_taken_again_not_processed() {
        // The store answers the acquisition after the leases ran out, and meanwhile another
        // process took the key over (the fault campaign found this with a stalled PutItem).
        // Processing the message would send it twice; the lock takes the keys again and
        // finds the key held by the other process.
        let f = Fixture::new();
        let settings = json!({
            "kv_store": {"type": "test_slow_sqlite",
                         "settings": {"file": f.db.to_str().unwrap(), "takeover_by": "them"}},
            "ttl_offset": "1h",
            "lease": "200ms",
            "pending": "skip",
            "transforms": record("lock-slow-acquire"),
        });
        let lock = testing::build(
            &registry(),
            json!({"type": "meta_kv_store_lock", "settings": settings}),
        )
        .unwrap();
        assert_eq!(testing::run(lock, &["m"]).unwrap(), vec!["m"]);
        assert_eq!(
            journal("lock-slow-acquire"),
            vec!["<ctrl>"],
            "not processed"
        );
        let key = hex::encode(sha2::Sha256::digest(b"m"));
        assert_eq!(f.records(), vec![(key, "them".to_string(), false)]);

        // A store that stays that slow fails the batch (its messages are redelivered) with
        // an error that says what to change.
        let f = Fixture::new();
        let settings = json!({
            "kv_store": {"type": "test_slow_sqlite",
                         "settings": {"file": f.db.to_str().unwrap(), "delay_ms": 60}},
            "ttl_offset": "1h",
            "lease": "100ms",
            "transforms": record("lock-slow-always"),
        });
        let lock = testing::build(
            &registry(),
            json!({"type": "meta_kv_store_lock", "settings": settings}),
        )
        .unwrap();
        let p = Pipeline::new(vec![("lock".into(), lock)]);
        let (m, t_m) = tracked("m");
        let e = testing::block_on(p.apply(vec![m])).unwrap_err();
        assert!(e.to_string().contains("raise `lease`"), "{e}");
        assert_status(&t_m, AckStatus::Failed, "m");
        assert!(journal("lock-slow-always").is_empty());
        assert!(f.records().is_empty(), "the keys were given back");
    }

    #[test]
    fn locks_half_their_lease_old_are_committed_without_waiting_for_a_ctrl() {
        let f = Fixture::new();
        let lock = f.lock(
            suffix_and_send("lock-half-lease"),
            json!({"lease": "400ms"}),
        );
        let p = Pipeline::new(vec![("lock".into(), lock)]);
        testing::block_on(p.apply(vec![Message::new(&b"early"[..])])).unwrap();
        assert!(journal("lock-half-lease").is_empty(), "held by the send");
        std::thread::sleep(Duration::from_millis(250));
        // The next batch finds "early" held for more than half the lease: the lock flushes
        // its inner list and commits it before going on.
        let out = testing::block_on(p.apply(vec![Message::new(&b"late"[..])])).unwrap();
        assert_eq!(datas(&out), vec!["late+"]);
        assert_eq!(journal("lock-half-lease"), vec!["sent:early+"]);
        let early = hex::encode(sha2::Sha256::digest(b"early"));
        let recs = f.records();
        assert!(recs.iter().any(|r| r.0 == early && r.2), "{recs:?}");
        assert!(recs.iter().any(|r| r.0 != early && !r.2), "late is pending");
    }

    #[test]
    fn two_owners_with_crossed_overlapping_batches_do_not_wait_on_each_other() {
        let f = Fixture::new();
        let ids = |r: std::ops::Range<u32>| -> Vec<Message> {
            r.map(|i| Message::new(format!(r#"{{"id":{i}}}"#).into_bytes()))
                .collect()
        };
        let run = |name: &'static str, order: [std::ops::Range<u32>; 2]| {
            let lock = f.lock(
                json!([{"type": "fixture_send", "settings": {"name": name}}]),
                json!({"object": {"source_key": "id"}, "pending_wait": "20s"}),
            );
            std::thread::spawn(move || {
                let p = Pipeline::new(vec![("lock".into(), lock)]);
                testing::block_on(async {
                    for r in order {
                        p.apply(ids(r)).await?;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    p.apply(vec![Message::ctrl()]).await
                })
            })
        };
        let started = std::time::Instant::now();
        let a = run("dl-a", [0..50, 50..100]);
        let b = run("dl-b", [50..100, 0..50]);
        a.join().unwrap().unwrap();
        b.join().unwrap().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no wait until a lease or the pending_wait ran out: {:?}",
            started.elapsed()
        );
        let mut sent: Vec<String> = journal("dl-a");
        sent.extend(journal("dl-b"));
        sent.sort();
        let mut want: Vec<String> = (0..100).map(|i| format!(r#"sent:{{"id":{i}}}"#)).collect();
        want.sort();
        assert_eq!(sent, want, "every id sent exactly once");
    }

    #[test]
    fn a_crash_before_the_checkpoint_leaves_pending_locks_that_a_rerun_takes_over() {
        let f = Fixture::new();
        let extra = json!({"lease": "200ms", "pending_wait": "2s"});
        // "Crash": the data went through, no ctrl ever came, the process is gone.
        let crashed = f.lock(suffix_and_send("lock-crash-1"), extra.clone());
        let p = Pipeline::new(vec![("lock".into(), crashed)]);
        testing::block_on(p.apply(vec![Message::new(&b"c1"[..]), Message::new(&b"c2"[..])]))
            .unwrap();
        drop(p);
        assert!(journal("lock-crash-1").is_empty(), "never delivered");
        assert!(f.records().iter().all(|r| !r.2), "pending");
        // The rerun waits for the lease and processes both.
        let rerun = f.lock(suffix_and_send("lock-crash-2"), extra.clone());
        assert_eq!(
            testing::run(rerun, &["c1", "c2"]).unwrap(),
            vec!["c1+", "c2+"]
        );
        assert_eq!(journal("lock-crash-2"), vec!["sent:c1+", "sent:c2+"]);
        // A crash after the checkpoint: the rerun skips them.
        let again = f.lock(suffix_and_send("lock-crash-3"), extra);
        assert_eq!(
            testing::run(again, &["c1", "c2"]).unwrap(),
            vec!["c1", "c2"]
        );
        assert!(journal("lock-crash-3").is_empty());
    }

    #[test]
    fn what_leaves_the_lock_no_longer_carries_its_tokens() {
        let f = Fixture::new();
        // The inner list passes the message on; downstream keeps it (e.g. a later send).
        let lock = f.lock(suffix_and_send("lock-tokens"), json!({}));
        let p = Pipeline::new(vec![("lock".into(), lock)]);
        let out =
            testing::block_on(p.apply(vec![Message::new(&b"t"[..]), Message::ctrl()])).unwrap();
        assert!(out[0].acks().is_empty());
        // …so the commit did not wait for `out` to be dropped.
        assert!(
            f.records()[0].2,
            "committed while the output is still alive"
        );
        drop(out);
    }

    #[test]
    fn config_errors_name_the_field() {
        let f = Fixture::new();
        let inner = record("unused");
        let with = |extra: Value| f.settings(inner.clone(), extra);
        let mut no_store = with(json!({}));
        no_store.as_object_mut().unwrap().shift_remove("kv_store");
        let mut no_inner = with(json!({}));
        no_inner.as_object_mut().unwrap().shift_remove("transforms");
        testing::assert_config_errors(
            &registry(),
            "meta_kv_store_lock",
            &[
                (no_store, "kv_store"),
                (no_inner, "transforms"),
                (with(json!({"kv_store": {"type": "csv_file"}})), "read-only"),
                (
                    with(json!({"kv_store": {"type": "sqlit"}})),
                    "did you mean \"sqlite\"",
                ),
                (
                    with(json!({"kv_store": {"type": "aws_dynamodb", "settings": {}}})),
                    "aws.arn",
                ),
                (with(json!({"concurrency": 0})), "concurrency"),
                (with(json!({"ttl_offset": "0s"})), "ttl_offset"),
                (with(json!({"ttl_offset": "soon"})), "ttl_offset"),
                (with(json!({"lease": "0s"})), "lease"),
                (with(json!({"duplicates": "keep"})), "duplicates"),
                (with(json!({"pending": "hope"})), "pending"),
            ],
        );
    }

    #[test]
    fn compliance() {
        let f = Fixture::new();
        testing::check_type_compliance(
            &registry(),
            "meta_kv_store_lock",
            f.settings(record("lock-compliance"), json!({})),
        );
    }
}
