//! The lock guarding one message, as the lock's acknowledgement tracker carries it (its
//! tag, see `sluice_engine::ack`), for the sends that message reaches, inside the lock and
//! after it.
//!
//! A send reads its items' tickets from their tokens ([`tickets`]) to do what only it can:
//! - **every send** numbers the copies of the message it holds ([`LockTicket::next_copy`]),
//!   skips a copy an earlier attempt delivered ([`LockTicket::delivered_before`]: the
//!   progress the lock record kept when that attempt failed elsewhere or crashed after
//!   recording it), records each copy it delivers ([`LockTicket::record_delivery`]), and
//!   checks the lease before it sends ([`LockTicket::check_lease`]): a message whose key
//!   may have been taken over is not sent;
//! - `send_aws_kinesis_data_stream` reads the stream back for a record whose ticket says an
//!   earlier attempt may have delivered it ([`LockTicket::read_back_since`]: a takeover, or
//!   an uncertain failure of a send under this lock) before sending it again, counts a
//!   record found only when it provably belongs to this message ([`LockTicket::proves`]),
//!   and notes where each record landed ([`LockTicket::set_note`]), which the commit stores
//!   with the lock;
//! - `send_file`, `send_aws_s3` and `send_gcp_storage` name a batch's object after its
//!   tickets' keys and first attempts ([`LockTicket::origin_ms`]), so a batch sent again
//!   replaces its object instead of adding another, and a key taken afresh after its TTL
//!   never takes an earlier object's name; before writing it they record in each lock that
//!   the copy goes there ([`LockTicket::record_placements`]), and a later attempt that finds
//!   an object its copy was placed in ([`LockTicket::placed`]) counts the copy delivered,
//!   however the batch was re-formed;
//! - `send_aws_dynamodb_put` (transactional) records its delivery in the lock record in the
//!   same transaction as the message's items.
//!
//! A ticket lives as long as the tracker; what it holds is fixed when the key is taken,
//! except the note, the progress of this attempt, the lease and whether a send may have
//! delivered it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sluice_engine::ack::{AckSet, tags};
use sluice_lock_protocol::Progress;

use super::LockStore;

/// The lock key a record's data carries, as the lock would read it from a message with that
/// data (`None`: it carries none). See [`LockTicket::proves`].
pub type KeyOf = Arc<dyn Fn(&[u8]) -> Option<String> + Send + Sync>;

/// The lock guarding one message (see the module documentation).
pub struct LockTicket {
    /// The lock key (prefix included).
    pub key: String,
    /// Epoch seconds: the TTL the lock gets when committed.
    pub ttl: i64,
    /// When this owner took the key (epoch ms).
    pub taken_ms: i64,
    /// Set when the key was pending before it was taken (another owner's lease ran out, or
    /// an earlier attempt failed, partly or uncertainly): since when (epoch ms) an earlier
    /// attempt may have delivered the message.
    pub prior_since_ms: Option<i64>,
    /// What earlier attempts are known to have delivered: those copies are not sent again.
    pub prior_progress: Progress,
    /// The store holding the lock.
    pub store: Arc<dyn LockStore>,
    /// The lock's owner name.
    pub owner: Arc<str>,
    /// The key a record's data carries, when that can be told.
    key_of: Option<KeyOf>,
    /// The tolerated skew between the clocks of the processes that took the key (ms).
    skew_ms: i64,
    /// Without an event time (`ttl_key`), how long a committed key deduplicates at least
    /// after its commit (s): the lock's `ttl_offset`.
    ttl_offset_s: Option<i64>,
    maybe_delivered: AtomicBool,
    /// Another owner took the key over (a renewal found it so).
    lost: AtomicBool,
    note: Mutex<Option<String>>,
    attempt: Mutex<Attempt>,
    lease: Mutex<LeaseView>,
}

/// What this attempt at the message did, per send.
#[derive(Default)]
struct Attempt {
    /// The next copy's ordinal, per send.
    copies: HashMap<String, u32>,
    /// The copies delivered, per send.
    delivered: Progress,
    /// The copies a send holds now, not delivered yet (send, copy).
    held: Vec<(String, u32)>,
}

/// The lease as this process knows it, by its own monotonic clock.
#[derive(Debug, Clone, Copy)]
struct LeaseView {
    /// When the call that took or last renewed the key was made.
    start: Instant,
    /// Its length, when it is renewed; `None`: it ends with the invocation, which this
    /// process cannot outlive.
    length: Option<Duration>,
}

impl LockTicket {
    /// A ticket for `owner`'s lock on `key`, taken at `taken_ms` (epoch ms) by a call made
    /// at `lease_start` for a lease of `lease` (`None`: it ends with the invocation).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        key: String,
        ttl: i64,
        taken_ms: i64,
        prior: Option<(i64, Progress)>,
        store: Arc<dyn LockStore>,
        owner: Arc<str>,
        lease_start: Instant,
        lease: Option<Duration>,
    ) -> LockTicket {
        let (prior_since_ms, prior_progress) = match prior {
            Some((since, progress)) => (Some(since), progress),
            None => (None, Progress::default()),
        };
        LockTicket {
            key,
            ttl,
            taken_ms,
            prior_since_ms,
            prior_progress,
            store,
            owner,
            key_of: None,
            skew_ms: 0,
            ttl_offset_s: None,
            maybe_delivered: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            note: Mutex::new(None),
            attempt: Mutex::new(Attempt::default()),
            lease: Mutex::new(LeaseView {
                start: lease_start,
                length: lease,
            }),
        }
    }

    /// The same ticket, whose key deduplicates for at least `ttl_offset_s` seconds after
    /// its commit (a lock without `ttl_key`).
    pub fn with_ttl_offset(mut self, ttl_offset_s: Option<i64>) -> LockTicket {
        self.ttl_offset_s = ttl_offset_s;
        self
    }

    /// The TTL (epoch s) the key is committed with at `now_ms`: its own, or, without an
    /// event time, at least `ttl_offset` after the commit, so that a message delivered long
    /// after its key was taken (a stalled send, a lease renewed for long) is still
    /// deduplicated for the whole offset.
    pub fn commit_ttl(&self, now_ms: i64) -> i64 {
        match self.ttl_offset_s {
            Some(offset) => self.ttl.max(seconds_up(now_ms) + offset),
            None => self.ttl,
        }
    }

    /// The same ticket, for a lock that tolerates `skew` between its processes' clocks.
    pub fn with_skew(mut self, skew: Duration) -> LockTicket {
        self.skew_ms = skew.as_millis() as i64;
        self
    }

    /// The same ticket, with `key_of` to tell its records apart (see [`LockTicket::proves`]).
    pub fn with_key_of(mut self, key_of: Option<KeyOf>) -> LockTicket {
        self.key_of = key_of;
        self
    }

    /// When the processing of this message began, the same for every attempt at it: the
    /// first attempt's acquisition time, which a takeover inherits. A key taken afresh
    /// (after its TTL, or after it was released) begins a new one.
    pub fn origin_ms(&self) -> i64 {
        self.prior_since_ms.unwrap_or(self.taken_ms)
    }

    /// Records that a send of this message failed in a way that may have delivered it
    /// (`SendError::uncertain`), so that a send trying again under this same lock checks
    /// first ([`LockTicket::read_back_since`]).
    pub fn mark_maybe_delivered(&self) {
        self.maybe_delivered.store(true, Ordering::Release);
    }

    /// Since when (epoch ms) an earlier attempt may have delivered the message, if one may
    /// have: the earlier owner's first attempt ([`LockTicket::prior_since_ms`]), less the
    /// tolerated clock skew (that owner's clock may have run ahead), else, after an
    /// uncertain failure under this lock, when this owner took the key.
    pub fn read_back_since(&self) -> Option<i64> {
        self.prior_since_ms
            .map(|since| since.saturating_sub(self.skew_ms))
            .or_else(|| {
                self.maybe_delivered
                    .load(Ordering::Acquire)
                    .then_some(self.taken_ms)
            })
    }

    /// Whether `record` (a record's data, as a send wrote it) provably belongs to this
    /// message: it carries the message's lock key where the lock reads it
    /// (`object.source_key`), so no other message (another key) can have made it. `None`
    /// when that cannot be told (the key is the data's hash, or the lock did not say).
    pub fn proves(&self, record: &[u8]) -> Option<bool> {
        self.key_of
            .as_ref()
            .map(|key_of| key_of(record).is_some_and(|k| k == self.key))
    }

    /// The ordinal of the next copy of this message that `send` (its progress id) holds:
    /// 0 for the first, and so on, the same on every attempt for a pipeline that makes the
    /// same copies in the same order.
    pub fn next_copy(&self, send: &str) -> u32 {
        let mut a = self.attempt();
        if let Some(n) = a.copies.get_mut(send) {
            *n += 1;
            return *n - 1;
        }
        a.copies.insert(send.to_string(), 1);
        0
    }

    /// Gives back the ordinal [`LockTicket::next_copy`] just gave: `send` did not hold that
    /// copy after all (it refused the message, which may come again).
    pub fn unhold_copy(&self, send: &str) {
        if let Some(n) = self.attempt().copies.get_mut(send) {
            *n = n.saturating_sub(1);
        }
    }

    /// Whether copy `copy` was delivered by `send` already, by an earlier attempt (the
    /// progress it recorded) or by this one before it started over
    /// ([`LockTicket::start_over`]): it is not sent again.
    pub fn delivered_before(&self, send: &str, copy: u32) -> bool {
        self.prior_progress.contains(send, copy) || self.attempt().delivered.contains(send, copy)
    }

    /// Marks copy `copy` held by `send` until it is delivered or dropped
    /// ([`LockTicket::unhold`]); `false` when it is held there already (the same copy,
    /// handed to the send again after the inner list started over).
    pub fn hold(&self, send: &str, copy: u32) -> bool {
        let mut a = self.attempt();
        if a.held.iter().any(|(s, c)| s == send && *c == copy) {
            return false;
        }
        a.held.push((send.to_string(), copy));
        true
    }

    /// `send` no longer holds copy `copy` (delivered, failed or dropped).
    pub fn unhold(&self, send: &str, copy: u32) {
        let mut a = self.attempt();
        if let Some(i) = a.held.iter().position(|(s, c)| s == send && *c == copy) {
            a.held.swap_remove(i);
        }
    }

    /// The inner list runs over the message again within this attempt (`meta_retry`): its
    /// copies are numbered from the start again, so that each send meets the copies it
    /// delivered, or holds, as the same copies, and does not send them twice.
    pub fn start_over(&self) {
        self.attempt().copies.clear();
    }

    /// Records that `send` delivered copy `copy` of this message.
    pub fn record_delivery(&self, send: &str, copy: u32) {
        self.attempt().delivered.insert(send, copy);
    }

    /// Records where sends are about to place copies of this message (`placed` holds
    /// placements only: [`Progress::place`]), recorded in the lock's record first
    /// ([`LockStore::record`]).
    pub fn record_placements(&self, placed: &Progress) {
        self.attempt().delivered.merge(placed);
    }

    /// Whether an earlier attempt or this one placed a copy of this message anywhere (what
    /// [`LockTicket::placed`] would find something in), without building the list.
    pub fn has_placements(&self) -> bool {
        self.prior_progress.has_placements() || self.attempt().delivered.has_placements()
    }

    /// The objects that `send` placed copy `copy` in, on an earlier attempt or on this one:
    /// if one of them exists, the copy was delivered.
    pub fn placed(&self, send: &str, copy: u32) -> Vec<String> {
        let mut names: Vec<String> = self
            .prior_progress
            .placed(send, copy)
            .map(str::to_string)
            .collect();
        names.extend(
            self.attempt()
                .delivered
                .placed(send, copy)
                .map(str::to_string),
        );
        names.sort_unstable();
        names.dedup();
        names
    }

    /// What is known delivered: the earlier attempts' progress and this attempt's.
    pub fn progress(&self) -> Progress {
        let mut p = self.prior_progress.clone();
        p.merge(&self.attempt().delivered);
        p
    }

    /// Whether this attempt delivered anything.
    pub fn delivered_some(&self) -> bool {
        !self.attempt().delivered.delivered_none()
    }

    /// Records that the lease was renewed by a call made at `start`.
    pub fn renewed(&self, start: Instant, length: Option<Duration>) {
        *self.lease.lock().unwrap_or_else(|p| p.into_inner()) = LeaseView { start, length };
    }

    /// Records that another owner took the key over: nothing may be sent for it any more.
    pub fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
    }

    /// Whether a send may still send this message at `now`: the key was not taken over,
    /// and, by this process's own clock, at least a third of the lease is left (a live
    /// process renews every third, so a lease with less left means renewals are failing;
    /// another owner may take the key over once it ends, and a send begun now must be done
    /// by then). A lease that ends with the invocation needs no margin: the process cannot
    /// outlive it. The error says why not.
    pub fn check_lease(&self, now: Instant) -> Result<(), String> {
        if self.lost.load(Ordering::Acquire) {
            return Err(format!(
                "its lock {:?} was taken over by another process after its lease ran out; not sent, so that it is not sent twice",
                self.key
            ));
        }
        let view = *self.lease.lock().unwrap_or_else(|p| p.into_inner());
        let Some(length) = view.length else {
            return Ok(());
        };
        let elapsed = now.saturating_duration_since(view.start);
        if elapsed + length / 3 > length {
            return Err(format!(
                "its lock {:?} could not be renewed for {elapsed:?} of its {length:?} lease (the lock store is failing or slow); not sent, since another process may take the key over when the lease ends",
                self.key
            ));
        }
        Ok(())
    }

    /// Notes where the message was delivered (kept with the committed lock).
    pub fn set_note(&self, note: String) {
        if let Ok(mut n) = self.note.lock() {
            *n = Some(note);
        }
    }

    /// What a send noted of the delivery.
    pub fn note(&self) -> Option<String> {
        self.note.lock().ok().and_then(|n| n.clone())
    }

    fn attempt(&self) -> MutexGuard<'_, Attempt> {
        self.attempt.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for LockTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockTicket")
            .field("key", &self.key)
            .field("owner", &self.owner)
            .field("taken_ms", &self.taken_ms)
            .field("prior_since_ms", &self.prior_since_ms)
            .field("prior_progress", &self.prior_progress)
            .finish_non_exhaustive()
    }
}

/// Which copy of each locked message an item held by a send is: per lock ticket, the copy's
/// ordinal at that send ([`LockTicket::next_copy`]).
pub type Copies = Vec<(Arc<LockTicket>, u32)>;

/// The lock tickets among a message's tokens (one per lock it went through).
pub fn tickets(acks: &AckSet) -> impl Iterator<Item = Arc<LockTicket>> + '_ {
    tags::<LockTicket>(acks)
}

/// `ms` (epoch milliseconds) in whole seconds, rounded up: a TTL counted from it in whole
/// seconds then never ends before the offset has passed (rounding down made a `1s` window
/// as short as a millisecond).
pub fn seconds_up(ms: i64) -> i64 {
    ms.div_euclid(1000) + i64::from(ms.rem_euclid(1000) > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_store::memory::MemoryStore;

    fn ticket(prior: Option<(i64, Progress)>, lease: Option<Duration>) -> LockTicket {
        LockTicket::new(
            "k".into(),
            0,
            1_000,
            prior,
            Arc::new(MemoryStore::default()),
            "me".into(),
            Instant::now(),
            lease,
        )
    }

    #[test]
    fn copies_are_numbered_per_send_and_skipped_when_an_earlier_attempt_delivered_them() {
        let t = ticket(Some((500, Progress::from_entries(["a:0", "b:1"]))), None);
        let got: Vec<(u32, bool)> = ["a", "a", "b", "b", "a"]
            .iter()
            .map(|s| {
                let c = t.next_copy(s);
                (c, t.delivered_before(s, c))
            })
            .collect();
        assert_eq!(
            got,
            vec![(0, true), (1, false), (0, false), (1, true), (2, false)]
        );
        t.unhold_copy("a");
        assert_eq!(t.next_copy("a"), 2, "a refused copy's number is reused");
        assert!(!t.delivered_some());
        t.record_delivery("a", 1);
        t.record_delivery("c", 0);
        assert!(t.delivered_some());
        assert_eq!(t.progress().entries(), vec!["a:0-1", "b:1", "c:0"]);
        assert_eq!((t.origin_ms(), t.read_back_since()), (500, Some(500)));
    }

    #[test]
    fn the_lease_is_checked_by_its_own_clock_with_a_third_to_spare() {
        let t = ticket(None, Some(Duration::from_secs(30)));
        let start = Instant::now();
        t.renewed(start, Some(Duration::from_secs(30)));
        assert!(t.check_lease(start + Duration::from_secs(19)).is_ok());
        let e = t.check_lease(start + Duration::from_secs(21)).unwrap_err();
        assert!(e.contains("could not be renewed"), "{e}");
        t.renewed(
            start + Duration::from_secs(20),
            Some(Duration::from_secs(30)),
        );
        assert!(t.check_lease(start + Duration::from_secs(21)).is_ok());
        t.mark_lost();
        let e = t.check_lease(start).unwrap_err();
        assert!(e.contains("taken over"), "{e}");
        // A lease that ends with the invocation is the invocation's.
        let t = ticket(None, None);
        assert!(
            t.check_lease(Instant::now() + Duration::from_secs(3600))
                .is_ok()
        );
    }
}
