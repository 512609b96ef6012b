//! `meta_kv_store_lock`: runs its inner transforms at most once per key, and, with a
//! source that redelivers what failed, exactly once.
//!
//! Per data message it takes a lock on a key (`object.source_key`'s value, or the SHA-256
//! of the data; `prefix:` in front when set; see [`keys`]) with a conditional write to a
//! kv store. A message whose key is held does not run the inner transforms: it continues
//! downstream unchanged (Substation's behaviour) or is dropped (`duplicates: "drop"`).
//!
//! A message that got its lock carries the lock's acknowledgement token wherever it goes,
//! inside the lock and after it, and its key is settled when the last copy is gone
//! ([`keeper`]): committed when it was delivered, released when it certainly was not, and
//! abandoned (left pending, its lease ended, for the next taker to check) when a send may
//! have applied it although it answered with an error. So a send after the lock
//! (Substation's consumer pattern) is covered exactly as a send inside it, and a batch
//! flushed by its timer while the input is idle is committed without waiting for a ctrl.
//!
//! Differences from Substation's lock, each a defect there (reference §5.4):
//! - Acquisitions are concurrent (`concurrency`, default 32), in pieces that fit the
//!   lease, not serialised by one mutex around the store call and the inner transforms;
//!   outputs keep input order.
//! - The lock record has an owner, a status, a lease and a history (`sluice-lock-protocol`).
//!   Commit and release are conditional on the owner: another process's lock is never
//!   deleted. A pending lock whose lease ended (its owner crashed) is taken over, and the
//!   taker learns since when an earlier attempt may have delivered the message.
//! - Leases are renewed while messages are on their way, so a live process keeps its keys
//!   however long a send holds them, and a crashed one loses them a lease after its last
//!   renewal (default 1 minute; in Lambda, the lease ends with the invocation).
//! - Only undelivered messages' keys are released (Substation unlocks every key since the
//!   last checkpoint, delivered ones included).
//! - With neither `ttl_offset` nor `ttl_key`, the TTL is 24 hours (Substation stores 0,
//!   which disables deduplication on DynamoDB); a `ttl_key` that is missing or not a number
//!   is an error for that message, not a TTL in 1970. A pending lock blocks until its
//!   lease ends whatever its TTL; a `ttl_offset` shorter than the lease is a config error.
//! - A missing, null or empty key is an error for that message alone, and typed values keep
//!   their type in the key (Substation shares one key among them, or hashes the data).
//! - A key pending under another owner with a live lease is, by default, waited for (up to
//!   `pending_wait`) while the rest of the batch goes on: if the other owner commits, the
//!   message is a duplicate; if it gives the key back or its lease ends, this process
//!   takes it; if it is still pending at the end of the wait, that message alone fails
//!   (the source redelivers it later). Before it waits, this process flushes its inner
//!   list and commits what it delivered, and at the end of the input the driver sends a
//!   boundary first (`driver::end_of_input`), which flushes the sends after the lock too:
//!   two processes with overlapping input never wait on each other for long. `pending: "skip"` treats such a message as a duplicate at
//!   once, as Substation does.

mod acquire;
pub(crate) mod events;
pub(crate) mod keeper;
pub(crate) mod keys;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use serde::Deserialize;
use sluice_engine::TransformName;
use sluice_engine::context::Clock;
use sluice_engine::settings::GoDuration;
use sluice_engine::telemetry::Telemetry;
use sluice_engine::{
    Build, ConfigError, Key, Message, OutputsReach, Pipeline, SettleReport, TransformError, Value,
    Wrapper, async_trait,
};

use super::required_pipeline;
use crate::kv_store::lock::ticket::KeyOf;
use crate::kv_store::{self, LockStore};
use keeper::Keeper;
pub(crate) use keeper::LockCounts;

/// The TTL when neither `ttl_offset` nor `ttl_key` is set.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a pending lock is protected from takeover, when `lease` is not set and the
/// lock does not run inside an invocation with a deadline (Lambda). Renewed every third.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// How long a message waits for another owner's pending lock.
pub(crate) const DEFAULT_PENDING_WAIT: Duration = Duration::from_secs(10);
/// Lock-store calls in flight at once.
pub(crate) const DEFAULT_CONCURRENCY: usize = 32;
/// The largest difference tolerated between the clocks of two processes sharing a lock
/// table, when `clock_skew` is not set.
pub(crate) const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(10);
/// How long acquisitions that the store fails are tried again before the batch fails.
pub(crate) const STORE_RETRY_FOR: Duration = Duration::from_secs(30);

/// `object` settings of the lock.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LockObject {
    /// The lock key's source; absent: the SHA-256 of the data.
    pub source_key: Option<String>,
    /// The event time (epoch seconds, ms, µs or ns) the TTL counts from.
    pub ttl_key: Option<String>,
}

/// What to do with a message whose key is held.
#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Duplicates {
    /// Continue downstream unchanged, without the inner transforms (Substation).
    #[default]
    Continue,
    /// Drop it.
    Drop,
}

/// What to do when another owner's pending lock (live lease) holds the key.
#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Pending {
    /// Wait for it to be committed, released or expired, up to `pending_wait`; then fail.
    #[default]
    Wait,
    /// Treat the message as a duplicate at once (Substation).
    Skip,
}

/// Settings of `meta_kv_store_lock`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
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
    /// How long a pending lock is protected from takeover without a renewal.
    pub lease: Option<GoDuration>,
    /// What to do about another owner's pending lock.
    pub pending: Pending,
    /// The longest wait for another owner's pending lock.
    pub pending_wait: Option<GoDuration>,
    /// The largest difference tolerated between the clocks of the processes sharing the
    /// lock store.
    pub clock_skew: Option<GoDuration>,
}

/// The `meta_kv_store_lock` transform.
pub(crate) struct MetaKvStoreLock {
    id: Arc<str>,
    /// Where the config has it, which names it in the reasons it gives.
    name: TransformName,
    inner: Pipeline,
    store: Arc<dyn LockStore>,
    owner: Arc<str>,
    prefix: String,
    source_key: Option<Key>,
    ttl_key: Option<Key>,
    ttl_offset: i64,
    concurrency: usize,
    duplicates: Duplicates,
    /// `lease` as configured (`None`: the invocation's end, else [`DEFAULT_LEASE`]).
    lease: Option<Duration>,
    pending: Pending,
    pending_wait: Duration,
    /// The tolerated clock skew: another owner's lease blocks until its end plus this.
    skew: Duration,
    /// Whether this host's clock was reported off already.
    clock_warned: std::sync::atomic::AtomicBool,
    /// Where what leaves the lock ends up (`StatefulTransform::outputs_reach`): 0 unknown
    /// (its tokens follow it), 1 nowhere (no token follows it out), 2 an answer (this lock's
    /// tokens do not follow it: a retried call gets the same answer).
    reach: std::sync::atomic::AtomicU8,
    /// The key a record's data carries (when the key is read from the data), for the sends
    /// that recognise a message's records by it.
    key_of: Option<KeyOf>,
    /// The history of keys this process is taking again after a failure, which the store
    /// may not have been told yet (see [`keeper::Keeper::forget_for_retake`]).
    retaken: std::sync::Mutex<HashMap<String, keeper::Retaken>>,
    /// How many keys one acquisition call takes: adapted so that a call fits the lease.
    piece: AtomicUsize,
    /// Messages whose key is pending elsewhere, asked for again on the lock's timer.
    waiting: std::sync::Mutex<Vec<acquire::Waiting>>,
    keeper: Keeper,
    counts: Arc<LockCounts>,
    /// Where the duplicates it skips are counted (the Lambda function's
    /// `DuplicatesSkipped` metric).
    telemetry: Arc<Telemetry>,
    /// The wall clock leases are measured by (the build context's).
    clock: Arc<dyn Clock>,
}

/// A name for this process and lock instance, unique and readable in the store:
/// `host/pid/PROCESS.LOCK`, where `PROCESS` is random per process (a pid is reused, by a
/// restarted container for one) and `LOCK` random per lock instance.
fn new_owner() -> String {
    static PROCESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let process = PROCESS.get_or_init(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "host".to_string());
        let id = uuid::Uuid::new_v4().simple().to_string();
        format!("{host}/{}/{}", std::process::id(), &id[..8])
    });
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{process}.{}", &id[..6])
}

/// The owners of the lock instances alive in this process: a key held by one of them is
/// not another process's (two locks sharing keys would wait on each other).
fn live_owners() -> &'static std::sync::Mutex<std::collections::HashSet<Arc<str>>> {
    static LIVE: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<Arc<str>>>> =
        std::sync::OnceLock::new();
    LIVE.get_or_init(Default::default)
}

/// Whether `owner` is a lock instance alive in this process.
fn alive_here(owner: &str) -> bool {
    live_owners()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(owner)
}

impl Drop for MetaKvStoreLock {
    fn drop(&mut self) {
        live_owners()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.owner);
    }
}

impl MetaKvStoreLock {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let inner = required_pipeline(b, "transforms", &s.transforms)?;
        // Where the caller fails a message alone, so do the inner list's stateless steps:
        // each message's key settles by its own outcome. Its sends fail alone once the lock
        // is told that nothing retries it (`fails_alone`: not inside `meta_retry`).
        let inner = if b.context().messages_fail_alone() {
            inner.with_steps_failing_alone()
        } else {
            inner
        };
        if s.kv_store.is_null() {
            return Err(b.field_error(
                "kv_store",
                "missing required option: the kv store that holds the locks (aws_dynamodb, sqlite or memory)",
            ));
        }
        let store = kv_store::stores::lock_store(b, "kv_store", &s.kv_store)?;
        let source_key = b.opt_key("object.source_key", &s.object.source_key)?;
        let ttl_key = b.opt_key("object.ttl_key", &s.object.ttl_key)?;
        let ttl_offset = match (s.ttl_offset, &ttl_key) {
            // Whole seconds, rounded up: a fraction cut off would end every window early
            // ('28.75s' deduplicated for 28 s).
            (Some(d), _) => (d.0.as_secs() + u64::from(d.0.subsec_nanos() > 0)) as i64,
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
        let lease = s.lease.map(|d| d.0);
        if lease.is_some_and(|l| l.is_zero()) {
            return Err(b.field_error("lease", "must be longer than zero"));
        }
        let checked_lease = lease.unwrap_or(DEFAULT_LEASE);
        if let Some(offset) = s.ttl_offset
            && offset.0 < checked_lease
        {
            return Err(b.field_error(
                "ttl_offset",
                format!(
                    "{:?} is shorter than the lease ({:?}): a key would stop deduplicating while its message may still be on its way; raise ttl_offset or lower lease",
                    offset.0, checked_lease
                ),
            ));
        }
        // Unset: the default, or a quarter of a lease shorter than four times that.
        let skew = s
            .clock_skew
            .map_or(DEFAULT_CLOCK_SKEW.min(checked_lease / 4), |d| d.0);
        if skew >= checked_lease {
            return Err(b.field_error(
                "clock_skew",
                format!(
                    "{skew:?} is not shorter than the lease ({checked_lease:?}): a lease would block for a skew it cannot outlast; lower clock_skew (the hosts' clocks should be synchronised, e.g. by NTP) or raise lease"
                ),
            ));
        }
        if let Some(why) = keys::prefix_problem(&s.prefix) {
            return Err(b.field_error("prefix", why));
        }
        let key_of = source_key.clone().map(|k| {
            let prefix = s.prefix.clone();
            Arc::new(move |data: &[u8]| {
                keys::key_of(&prefix, Some(&k), &Message::new(data.to_vec())).ok()
            }) as KeyOf
        });
        let id = b.id().clone();
        let owner: Arc<str> = new_owner().into();
        live_owners()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(owner.clone());
        let counts = Arc::new(LockCounts::default());
        let keeper = Keeper::new(
            Arc::from(b.name().to_string()),
            store.clone(),
            owner.clone(),
            concurrency,
            counts.clone(),
            b.context().clock().clone(),
        );
        Ok(MetaKvStoreLock {
            id,
            name: b.name(),
            inner,
            store,
            owner,
            prefix: s.prefix,
            source_key,
            ttl_key,
            ttl_offset,
            concurrency,
            duplicates: s.duplicates,
            lease,
            pending: s.pending,
            pending_wait: s.pending_wait.map_or(DEFAULT_PENDING_WAIT, |d| d.0),
            skew,
            clock_warned: std::sync::atomic::AtomicBool::new(false),
            reach: std::sync::atomic::AtomicU8::new(0),
            key_of,
            retaken: std::sync::Mutex::new(HashMap::new()),
            piece: AtomicUsize::new(concurrency * 4),
            waiting: std::sync::Mutex::new(Vec::new()),
            keeper,
            counts,
            telemetry: b.context().telemetry().clone(),
            clock: b.context().clock().clone(),
        })
    }

    /// The time now, in milliseconds since the epoch.
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The lease a key taken now gets: its length (for renewals; `None` when it ends with
    /// the invocation) and its end (epoch ms).
    fn lease_now(&self, now_ms: i64) -> (Option<Duration>, i64) {
        if let Some(l) = self.lease {
            return (Some(l), now_ms + l.as_millis() as i64);
        }
        match sluice_engine::invocation::deadline() {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                (None, now_ms + left.as_millis() as i64)
            }
            None => (
                Some(DEFAULT_LEASE),
                now_ms + DEFAULT_LEASE.as_millis() as i64,
            ),
        }
    }

    /// The length used to judge whether an acquisition was slow, and to bound waits.
    fn lease_len(&self) -> Duration {
        self.lease.unwrap_or_else(|| {
            sluice_engine::invocation::deadline()
                .map(|d| d.saturating_duration_since(Instant::now()))
                .unwrap_or(DEFAULT_LEASE)
        })
    }

    /// The checkpoint: at the end of the input, settle the messages still waiting for keys
    /// pending elsewhere (up to `pending_wait`, and in an invocation until it must answer);
    /// at a boundary within it (`utility_control`), only those due now, the others waiting
    /// on; then flush the inner list with `ctrl`, and settle the keys whose messages
    /// resolved. What the store fails to take stays owed (see [`keeper`]).
    async fn checkpoint(
        &self,
        ctrl: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        self.retry_waiting(out, ctrl.ends_input()).await?;
        self.flush_inner(ctrl, out).await
    }

    /// Flushes the inner list with `ctrl` and settles what resolved.
    async fn flush_inner(
        &self,
        ctrl: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let outs = self.inner.apply(vec![ctrl]).await?;
        let (ctrls, datas): (Vec<Message>, Vec<Message>) =
            outs.into_iter().partition(|m| m.is_ctrl());
        self.pass_out(datas, out);
        self.keeper.pump(true).await;
        out.extend(ctrls);
        Ok(())
    }

    /// Passes what the inner list emitted on, each message now carrying the tokens that
    /// follow it after the lock (see [`keeper`]); none when what leaves the lock goes
    /// nowhere that reports on it, and none of this lock's when it makes an answer.
    fn pass_out(&self, outs: Vec<Message>, out: &mut Vec<Message>) {
        out.reserve(outs.len());
        let reach = self.reach.load(std::sync::atomic::Ordering::Relaxed);
        for mut m in outs {
            match reach {
                1 => drop(m.take_acks()),
                2 => self.keeper.pass_out(&mut m, false),
                _ => self.keeper.pass_out(&mut m, true),
            }
            out.push(m);
        }
    }

    /// After an error: what the inner list holds is discarded (and marked failed), then
    /// delivered messages' keys are committed and the rest given back.
    async fn fail(&self, e: TransformError) -> TransformError {
        self.fail_waiting(&e.to_string());
        self.inner.abort(&e.to_string()).await;
        self.keeper.pump(true).await;
        e
    }
}

#[async_trait]
impl Wrapper for MetaKvStoreLock {
    fn wraps(&self) -> &[Pipeline] {
        std::slice::from_ref(&self.inner)
    }

    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        self.transform_batch(vec![msg], out).await
    }

    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        self.keeper.ensure_task();
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
                let reason = e.text_within(&self.name);
                for m in segment.iter().chain(rest.as_slice()) {
                    m.fail_acks(&reason);
                }
                Err(self.fail(e).await)
            }
        }
    }

    fn deadline(&self) -> Option<Instant> {
        match (self.inner.deadline(), self.waiting_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        self.keeper.ensure_task();
        let waited = self.waiting().len();
        if let Err(e) = self.retry_waiting(out, false).await {
            return Err(self.fail(e).await);
        }
        if self.waiting().len() < waited {
            // Messages that waited for a key another process held went on (or failed
            // alone). Nothing else may come to flush them (a stream that is idle: its pause
            // was checkpointed while they waited), so they are checkpointed now: the sends
            // inside and after the lock write them, and the lock commits what they
            // delivered.
            return match self.flush_inner(Message::checkpoint(), out).await {
                Ok(()) => Ok(()),
                Err(e) => Err(self.fail(e).await),
            };
        }
        if self.inner.deadline().is_none_or(|d| d > now) {
            return Ok(());
        }
        match self.inner.expire(now).await {
            Ok(outs) => {
                self.pass_out(outs, out);
                Ok(())
            }
            Err(e) => Err(self.fail(e).await),
        }
    }

    async fn abort(&self, reason: &str) {
        self.fail_waiting(reason);
        self.inner.abort(reason).await;
        self.keeper.pump(true).await;
    }

    /// Not passed on: an error of the lock has already discarded what its inner list held.
    async fn give_up(&self, _reason: &str) {}

    fn waits_on_others(&self) -> bool {
        self.waiting_due().is_some() || self.inner.waits_on_others()
    }

    fn outputs_reach(&self, reach: OutputsReach) {
        let code = match reach {
            OutputsReach::Nowhere => 1,
            OutputsReach::Answer => 2,
        };
        self.reach.store(code, std::sync::atomic::Ordering::Relaxed);
        // What leaves the inner list leaves the lock: it goes where the lock's outputs go.
        self.inner.outputs_reach(reach);
    }

    async fn settle(&self, until: Instant) -> SettleReport {
        let mut report = self.inner.settle(until).await;
        report.extend(self.keeper.settle(until, self.lease_len()).await);
        report
    }
}

/// What registers the `meta_kv_store_lock` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "meta_kv_store_lock",
    aliases: &[],
    library: "sub.tf.meta.kv_store.lock",
    summary: "runs inner transforms once per key: exactly-once with a lock store",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"kv_store": {"type": "memory"}, "transforms": [{"type": "string_to_upper"}]}"#,
};
