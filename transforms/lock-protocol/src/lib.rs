//! # sluice-lock-protocol
//!
//! The rules of `meta_kv_store_lock`'s lock records, in one place and without I/O: what an
//! acquisition, a commit, a renewal, a release and an abandonment do to the record of one
//! key, and when a record blocks another owner. Every lock store applies these rules (the
//! memory and SQLite stores call them; the DynamoDB store writes them as condition
//! expressions, tested against them), and the model check in `tests/model.rs` explores
//! every interleaving of processes, crashes, lost answers and redeliveries over them.
//! [`epoch`] holds the rules of the epoch protocol, which commits a batch of keys with one
//! write (checked by `tests/model_epochs.rs`).
//!
//! # The record
//!
//! Per key: the `owner` that took it (unique per lock instance and process), its `status`
//! (pending while the message it guards is on its way, committed once it was delivered),
//! `lease_until` (pending only: until then nobody else may take the key), `ttl` (epoch
//! seconds: after it a committed record no longer blocks anything) and `since` (pending
//! only: when the first of the owners that held the key pending without committing took
//! it, so whoever takes it over knows from when an earlier attempt may have delivered the
//! message).
//!
//! # The rules
//!
//! - **Acquire** succeeds when the key is absent, committed and past its TTL, pending with
//!   a lease that ended at least the tolerated clock skew ago, or pending under the same
//!   owner (an earlier attempt of this owner whose answer was lost, or a key it failed to
//!   give back). A pending record blocks until its lease ends (plus the skew) whatever its
//!   TTL says: a TTL shorter than the work must not let a second owner in. Taking over a
//!   pending record keeps its `since` and its `progress`.
//! - **Commit**, **renew**, **record progress**, **release** and **abandon** apply only to
//!   the owner's pending record; anything else is left alone and reported. A commit of a
//!   record the owner already committed is a success (a retried commit whose first answer
//!   was lost).
//! - **Release** deletes the record (the message was certainly not delivered anywhere);
//!   **abandon** ends its lease but keeps it pending with its `since`, adding what this
//!   attempt delivered to its `progress` (the message may have been delivered, or was
//!   delivered to some sends and not others: whoever processes it next skips what the
//!   progress lists and looks before delivering the rest again). **Recording progress**
//!   adds to `progress` without ending the lease (a transactional sink writes it in the
//!   same transaction as its items). A commit clears `since` and `progress`.
//!
//! # Clocks
//!
//! Leases are compared across hosts: the lease end was written by its owner's clock and is
//! read by the taker's. Each acquisition carries the tolerated skew between any two
//! clocks (`AcquireRequest::skew_ms`), and a lease blocks until its end plus that skew, so
//! a taker whose clock runs ahead by up to the skew never takes a live owner's key. The
//! owner, for its part, checks by its own monotonic clock that its lease is live before
//! every send, so it never sends after the instant a takeover becomes possible.

use std::collections::BTreeMap;

pub mod epoch;

/// Whether a lock is waiting for its message's delivery or done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockStatus {
    /// Taken; the guarded message is on its way. Carries the lease end (epoch ms).
    Pending {
        /// Until this instant (epoch milliseconds) no other owner may take the key.
        lease_until_ms: i64,
    },
    /// The guarded message was delivered.
    Committed,
}

/// What earlier attempts at a message delivered: per send (its progress id, stable across
/// processes running the same config), the copies of the message it delivered, by ordinal
/// (the n-th copy of the message that reached that send, counted from 0). A later attempt
/// skips those copies and sends the rest, so a message partly delivered (one send of two,
/// five records of six) is completed without sending anything twice.
///
/// It also keeps where copies were *placed*: the object a send that writes one object per
/// batch (files, S3, Cloud Storage) recorded, before writing it, as holding a copy. The
/// object's name is unique to its batch, so a later attempt that finds the object knows
/// that copy delivered, whatever batch the later attempt forms (the earlier batch's
/// messages may come back split among several processes).
///
/// Stored as a set of entries (`send:first-last`, or `send:n` for one copy, and
/// `send:first-last>name` or `send:n>name` for placements), which a store may merge as a set (DynamoDB's `ADD` to a
/// string set): the entries' union is the progress, whichever order they were added in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Progress {
    /// Per send, the ranges of copies delivered.
    delivered: BTreeMap<String, Vec<(u32, u32)>>,
    /// Per (send, object name), the ranges of copies placed in that object.
    placed: BTreeMap<(String, String), Vec<(u32, u32)>>,
}

impl Progress {
    /// No progress.
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.delivered.is_empty() && self.placed.is_empty()
    }

    /// Whether nothing is recorded delivered (placements aside).
    pub fn delivered_none(&self) -> bool {
        self.delivered.is_empty()
    }

    /// Whether `send` delivered copy `copy`.
    pub fn contains(&self, send: &str, copy: u32) -> bool {
        self.delivered
            .get(send)
            .is_some_and(|rs| rs.iter().any(|&(lo, hi)| lo <= copy && copy <= hi))
    }

    /// Records that `send` delivered copy `copy`.
    pub fn insert(&mut self, send: &str, copy: u32) {
        self.insert_range(send, copy, copy);
    }

    fn insert_range(&mut self, send: &str, lo: u32, hi: u32) {
        let ranges = match self.delivered.get_mut(send) {
            Some(r) => r,
            None => self.delivered.entry(send.to_string()).or_default(),
        };
        add_range(ranges, lo, hi);
    }

    /// Records that `send` placed copy `copy` in the object `name` (see the type's
    /// documentation). A name with a line break or other control character is not kept
    /// (stores that keep entries as lines could not tell it apart).
    pub fn place(&mut self, send: &str, copy: u32, name: &str) {
        self.place_range(send, copy, copy, name);
    }

    fn place_range(&mut self, send: &str, lo: u32, hi: u32, name: &str) {
        if !name.is_empty() && !name.chars().any(char::is_control) {
            let ranges = self
                .placed
                .entry((send.to_string(), name.to_string()))
                .or_default();
            add_range(ranges, lo, hi);
        }
    }

    /// Whether any placement is recorded.
    pub fn has_placements(&self) -> bool {
        !self.placed.is_empty()
    }

    /// The objects `send` placed copy `copy` in.
    pub fn placed(&self, send: &str, copy: u32) -> impl Iterator<Item = &str> {
        self.placed
            .iter()
            .filter(move |((s, _), ranges)| {
                s == send && ranges.iter().any(|&(lo, hi)| lo <= copy && copy <= hi)
            })
            .map(|((_, name), _)| name.as_str())
    }

    /// Adds everything `other` records.
    pub fn merge(&mut self, other: &Progress) {
        for (send, ranges) in &other.delivered {
            for &(lo, hi) in ranges {
                self.insert_range(send, lo, hi);
            }
        }
        for ((send, name), ranges) in &other.placed {
            for &(lo, hi) in ranges {
                self.place_range(send, lo, hi, name);
            }
        }
    }

    /// The sends with something recorded delivered.
    pub fn sends(&self) -> impl Iterator<Item = &str> {
        self.delivered.keys().map(String::as_str)
    }

    /// How many copies are recorded delivered, over every send.
    pub fn copies(&self) -> u64 {
        self.delivered
            .values()
            .flatten()
            .map(|&(lo, hi)| u64::from(hi - lo) + 1)
            .sum()
    }

    /// The entries a store keeps (see the type's documentation): deliveries by send and
    /// copy, then placements.
    pub fn entries(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (send, ranges) in &self.delivered {
            for &(lo, hi) in ranges {
                if lo == hi {
                    out.push(format!("{send}:{lo}"));
                } else {
                    out.push(format!("{send}:{lo}-{hi}"));
                }
            }
        }
        for ((send, name), ranges) in &self.placed {
            for &(lo, hi) in ranges {
                if lo == hi {
                    out.push(format!("{send}:{lo}>{name}"));
                } else {
                    out.push(format!("{send}:{lo}-{hi}>{name}"));
                }
            }
        }
        out
    }

    /// The progress a store's entries record; an entry that is not one (written by
    /// something else) is ignored.
    pub fn from_entries<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> Progress {
        let mut p = Progress::default();
        for e in entries {
            // A placement: the send and copies come before the first `>` (a send's id has
            // none), the name, which may hold anything, after it.
            let (head, name) = match e.as_ref().split_once('>') {
                Some((head, name)) => (head, Some(name)),
                None => (e.as_ref(), None),
            };
            let Some((send, copies)) = head.rsplit_once(':') else {
                continue;
            };
            let range = match copies.split_once('-') {
                Some((lo, hi)) => lo.parse().ok().zip(hi.parse().ok()),
                None => copies.parse().ok().map(|n| (n, n)),
            };
            match (range, send.is_empty(), name) {
                (Some((lo, hi)), false, Some(name)) => p.place_range(send, lo, hi, name),
                (Some((lo, hi)), false, None) => p.insert_range(send, lo, hi),
                _ => {}
            }
        }
        p
    }
}

/// Adds copies `lo..=hi` to sorted, disjoint `ranges`, merging neighbours.
fn add_range(ranges: &mut Vec<(u32, u32)>, lo: u32, hi: u32) {
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    // The next copy after the last range (copies are delivered in order): no sort.
    if let Some(last) = ranges.last_mut()
        && lo == last.1.saturating_add(1)
    {
        last.1 = last.1.max(hi);
        return;
    }
    ranges.push((lo, hi));
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for &(lo, hi) in ranges.iter() {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    *ranges = merged;
}

/// A lock as a store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockRecord {
    /// Who took it.
    pub owner: String,
    /// Pending or committed.
    pub status: LockStatus,
    /// Epoch seconds after which a committed lock no longer blocks anything. While the lock
    /// is pending the stored value is at least the lease's end, so a store's own expiry
    /// (DynamoDB's TTL) never deletes a live pending lock.
    pub ttl: i64,
    /// Pending only: when the chain of owners that held the key without committing it
    /// began (epoch ms). `None` for committed records and records from before it existed.
    pub since_ms: Option<i64>,
    /// Pending only: what earlier attempts delivered (empty for committed records).
    pub progress: Progress,
}

impl LockRecord {
    /// Whether the record stops another owner, whose clock may run up to `skew_ms` ahead of
    /// the owner's, from taking the key at `now_ms` (by the taker's clock): a pending lock
    /// blocks until its lease end plus the skew.
    pub fn blocks(&self, now_ms: i64, skew_ms: i64) -> bool {
        match self.status {
            LockStatus::Committed => self.ttl.saturating_mul(1000) > now_ms,
            LockStatus::Pending { lease_until_ms } => {
                lease_until_ms.saturating_add(skew_ms.max(0)) >= now_ms
            }
        }
    }

    /// Whether `owner` may take the key at `now_ms`, tolerating `skew_ms` of clock skew
    /// (see the crate's rules).
    pub fn takeable_by(&self, owner: &str, now_ms: i64, skew_ms: i64) -> bool {
        match self.status {
            LockStatus::Committed => !self.blocks(now_ms, skew_ms),
            LockStatus::Pending { .. } => self.owner == owner || !self.blocks(now_ms, skew_ms),
        }
    }

    /// Whether it is another owner's pending lock whose chain of attempts began before
    /// `fresh_before_ms` (see [`AcquireRequest::fresh_before_ms`]).
    pub fn chain_over(&self, owner: &str, fresh_before_ms: Option<i64>) -> bool {
        matches!(self.status, LockStatus::Pending { .. })
            && self.owner != owner
            && fresh_before_ms.is_some_and(|before| self.since_ms.unwrap_or(0) < before)
    }

    /// Whether it is `owner`'s pending lock: what commit, renew, release and abandon need.
    pub fn pending_for(&self, owner: &str) -> bool {
        self.owner == owner && matches!(self.status, LockStatus::Pending { .. })
    }

    /// The lease end, for a pending record.
    pub fn lease_until_ms(&self) -> Option<i64> {
        match self.status {
            LockStatus::Pending { lease_until_ms } => Some(lease_until_ms),
            LockStatus::Committed => None,
        }
    }
}

/// One key to acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireRequest {
    /// The lock key (prefix included).
    pub key: String,
    /// Epoch seconds: the TTL the lock gets when it is committed.
    pub ttl: i64,
    /// Epoch milliseconds: the lease's end.
    pub lease_until_ms: i64,
    /// The tolerated skew between any two clocks (ms): another owner's pending lock blocks
    /// until its lease end plus this.
    pub skew_ms: i64,
    /// Another owner's pending lock whose chain of attempts began (`since`) before this
    /// instant (epoch ms) is over: its message's deduplication window (`ttl_offset`) has
    /// passed, so the key is taken as new, without its history. A message with the same key
    /// now is another one ("once per key per window"), which an earlier message's progress
    /// must not mark delivered. `None`: a pending lock's history never ends.
    pub fresh_before_ms: Option<i64>,
}

/// What taking a key found before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prior {
    /// Who held it pending (possibly the taker itself).
    pub owner: String,
    /// When the pending chain began: an earlier attempt may have delivered the message
    /// since then (0 when the record did not say).
    pub since_ms: i64,
    /// What earlier attempts are known to have delivered.
    pub progress: Progress,
}

/// What an acquisition found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// The key is ours now (pending). `prior` is set when it was pending before, under an
    /// owner whose lease had ended or under ourselves: the message may have been delivered.
    Taken {
        /// The pending record it replaced.
        prior: Option<Prior>,
    },
    /// Someone holds it; the record as the store returned it (`None` when the store could
    /// not say, e.g. it vanished meanwhile).
    Held(Option<LockRecord>),
}

impl Acquired {
    /// Taken fresh: nobody held it pending before.
    pub const FRESH: Acquired = Acquired::Taken { prior: None };

    /// Whether the key was taken.
    pub fn is_taken(&self) -> bool {
        matches!(self, Acquired::Taken { .. })
    }
}

/// The outcome of committing, renewing, releasing or abandoning one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Done.
    Ok,
    /// The key is not the owner's pending lock (any more): another owner took it over after
    /// the lease ended, or it is gone. Nothing was changed.
    NotOwner(Option<LockRecord>),
}

/// The TTL stored with a pending lock: the requested one, or the lease's end when that is
/// later, so that a store's own expiry never removes a lock whose lease is live.
pub fn pending_ttl(ttl: i64, lease_until_ms: i64) -> i64 {
    ttl.max(lease_until_ms.div_euclid(1000) + 1)
}

/// Acquisition of `req` by `owner` at `now_ms` over the current record: the new record and
/// what was taken, or the record that holds the key.
pub fn acquire(
    current: Option<&LockRecord>,
    owner: &str,
    now_ms: i64,
    req: &AcquireRequest,
) -> Result<(LockRecord, Acquired), LockRecord> {
    let prior = match current {
        None => None,
        Some(r) if !r.takeable_by(owner, now_ms, req.skew_ms) => return Err(r.clone()),
        Some(r) => match r.status {
            LockStatus::Pending { .. } if r.chain_over(owner, req.fresh_before_ms) => None,
            LockStatus::Pending { .. } => Some(Prior {
                owner: r.owner.clone(),
                since_ms: r.since_ms.unwrap_or(0),
                progress: r.progress.clone(),
            }),
            LockStatus::Committed => None,
        },
    };
    let since_ms = prior.as_ref().map_or(now_ms, |p| p.since_ms);
    let record = LockRecord {
        owner: owner.to_string(),
        status: LockStatus::Pending {
            lease_until_ms: req.lease_until_ms,
        },
        ttl: pending_ttl(req.ttl, req.lease_until_ms),
        since_ms: Some(since_ms),
        progress: prior
            .as_ref()
            .map(|p| p.progress.clone())
            .unwrap_or_default(),
    };
    Ok((record, Acquired::Taken { prior }))
}

/// What the owner does to its pending lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Delivered: committed, with the TTL it keeps from now on.
    Commit {
        /// Epoch seconds.
        ttl: i64,
    },
    /// Still working: the lease moves to `lease_until_ms`.
    Renew {
        /// The requested TTL (kept at least the lease's end while pending).
        ttl: i64,
        /// The new lease end (epoch ms).
        lease_until_ms: i64,
    },
    /// Certainly not delivered anywhere: the record is deleted.
    Release,
    /// Possibly delivered, or delivered by some sends and not others: the lease ends now,
    /// the record stays pending with its `since`, and `progress` is added to its own.
    Abandon {
        /// What this attempt delivered.
        progress: Progress,
    },
    /// Delivered by some sends (a transactional sink, in its own transaction): `progress`
    /// is added to the record's, which stays pending under its lease.
    Record {
        /// What was delivered.
        progress: Progress,
    },
}

/// `change` by `owner` over the current record: the new record (`None`: deleted) and the
/// outcome. A record that is not the owner's pending lock is left as it is, except that a
/// commit of the owner's own committed record succeeds again.
pub fn change(
    current: Option<&LockRecord>,
    owner: &str,
    change: &Change,
) -> (Option<LockRecord>, Settled) {
    let Some(r) = current else {
        return (None, Settled::NotOwner(None));
    };
    if !r.pending_for(owner) {
        let again = matches!(change, Change::Commit { .. })
            && r.owner == owner
            && r.status == LockStatus::Committed;
        let outcome = if again {
            Settled::Ok
        } else {
            Settled::NotOwner(Some(r.clone()))
        };
        return (Some(r.clone()), outcome);
    }
    let next = match change {
        Change::Commit { ttl } => Some(LockRecord {
            owner: r.owner.clone(),
            status: LockStatus::Committed,
            ttl: *ttl,
            since_ms: None,
            progress: Progress::default(),
        }),
        Change::Renew {
            ttl,
            lease_until_ms,
        } => Some(LockRecord {
            status: LockStatus::Pending {
                lease_until_ms: *lease_until_ms,
            },
            ttl: pending_ttl(*ttl, *lease_until_ms),
            ..r.clone()
        }),
        Change::Release => None,
        Change::Abandon { progress } => {
            let mut next = LockRecord {
                status: LockStatus::Pending { lease_until_ms: 0 },
                ..r.clone()
            };
            next.progress.merge(progress);
            Some(next)
        }
        Change::Record { progress } => {
            let mut next = r.clone();
            next.progress.merge(progress);
            Some(next)
        }
    };
    (next, Settled::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    /// The tolerated skew the tests take keys with.
    const SKEW: i64 = 10_000;

    fn req(lease: i64) -> AcquireRequest {
        AcquireRequest {
            key: "k".into(),
            ttl: NOW / 1000 + 3600,
            lease_until_ms: NOW + lease,
            skew_ms: SKEW,
            fresh_before_ms: None,
        }
    }

    fn pending(owner: &str, lease_until_ms: i64, ttl: i64) -> LockRecord {
        LockRecord {
            owner: owner.into(),
            status: LockStatus::Pending { lease_until_ms },
            ttl,
            since_ms: Some(NOW - 5_000),
            progress: Progress::default(),
        }
    }

    fn progress(entries: &[&str]) -> Progress {
        Progress::from_entries(entries)
    }

    /// A pending lock whose chain began before `fresh_before_ms` (its message's window has
    /// passed) is taken as new: no prior, no progress, a `since` of its own; a later chain
    /// is a takeover as before, and a lease that is live still holds the key.
    #[test]
    fn a_pending_chain_older_than_the_window_is_taken_as_new() {
        let mut old = pending("b", NOW - SKEW - 1, NOW / 1000 + 60);
        old.progress = progress(&["s:0", "s:0>obj"]);
        let window = |before: i64| AcquireRequest {
            fresh_before_ms: Some(before),
            ..req(60_000)
        };
        // `since` is NOW - 5 s.
        let (rec, got) = acquire(Some(&old), "a", NOW, &window(NOW - 4_000)).unwrap();
        assert_eq!(got, Acquired::Taken { prior: None });
        assert_eq!((rec.since_ms, rec.progress.is_empty()), (Some(NOW), true));
        let (rec, got) = acquire(Some(&old), "a", NOW, &window(NOW - 6_000)).unwrap();
        assert!(matches!(got, Acquired::Taken { prior: Some(_) }));
        assert_eq!(rec.since_ms, Some(NOW - 5_000));
        assert!(!rec.progress.is_empty());
        let live = pending("b", NOW + 1_000, NOW / 1000 + 60);
        assert!(acquire(Some(&live), "a", NOW, &window(NOW)).is_err());
        // Our own: a retake keeps its history.
        let mut ours = old.clone();
        ours.owner = "a".into();
        let (_, got) = acquire(Some(&ours), "a", NOW, &window(NOW)).unwrap();
        assert!(matches!(got, Acquired::Taken { prior: Some(_) }));
    }

    #[test]
    fn acquisition_table() {
        let committed = LockRecord {
            owner: "b".into(),
            status: LockStatus::Committed,
            ttl: NOW / 1000 + 10,
            since_ms: None,
            progress: Progress::default(),
        };
        let expired_commit = LockRecord {
            ttl: NOW / 1000 - 1,
            ..committed.clone()
        };
        // (current, taker, taken?, prior owner)
        let cases: Vec<(Option<LockRecord>, &str, bool, Option<&str>)> = vec![
            (None, "a", true, None),
            (Some(committed.clone()), "a", false, None),
            (Some(committed.clone()), "b", false, None),
            (Some(expired_commit), "a", true, None),
            (
                Some(pending("b", NOW + 1, NOW / 1000 + 60)),
                "a",
                false,
                None,
            ),
            // A lease that ended less than the tolerated skew ago still blocks: by the
            // owner's clock it may not have ended yet.
            (
                Some(pending("b", NOW - 1, NOW / 1000 + 60)),
                "a",
                false,
                None,
            ),
            (
                Some(pending("b", NOW - SKEW, NOW / 1000 + 60)),
                "a",
                false,
                None,
            ),
            (
                Some(pending("b", NOW - SKEW - 1, NOW / 1000 + 60)),
                "a",
                true,
                Some("b"),
            ),
            // A TTL that ended does not free a pending lock whose lease is live.
            (
                Some(pending("b", NOW + 10_000, NOW / 1000 - 100)),
                "a",
                false,
                None,
            ),
            // Our own pending lock is ours to take again, lease or not.
            (
                Some(pending("a", NOW + 10_000, NOW / 1000 + 60)),
                "a",
                true,
                Some("a"),
            ),
        ];
        for (i, (current, who, taken, prior_owner)) in cases.into_iter().enumerate() {
            let got = acquire(current.as_ref(), who, NOW, &req(60_000));
            match got {
                Ok((rec, Acquired::Taken { prior })) => {
                    assert!(taken, "case {i}: taken");
                    assert_eq!(
                        prior.as_ref().map(|p| p.owner.as_str()),
                        prior_owner,
                        "case {i}"
                    );
                    assert_eq!(rec.owner, who);
                    let since = prior.map_or(NOW, |p| p.since_ms);
                    assert_eq!(rec.since_ms, Some(since), "case {i}: since carried over");
                }
                Ok((_, held)) => panic!("case {i}: {held:?}"),
                Err(holder) => {
                    assert!(!taken, "case {i}: held by {holder:?}");
                    assert_eq!(Some(holder), current, "case {i}");
                }
            }
        }
    }

    #[test]
    fn a_takeover_inherits_the_progress_and_a_commit_clears_it() {
        let mut abandoned = pending("b", 0, NOW / 1000 + 60);
        abandoned.progress = progress(&["s1:0", "s2:0-4"]);
        let (rec, got) = acquire(Some(&abandoned), "a", NOW, &req(60_000)).unwrap();
        let Acquired::Taken { prior: Some(prior) } = got else {
            panic!("{got:?}")
        };
        assert_eq!(prior.progress, abandoned.progress);
        assert_eq!(rec.progress, abandoned.progress, "kept for the next taker");
        let (done, _) = change(Some(&rec), "a", &Change::Commit { ttl: 9 });
        assert_eq!(done.unwrap().progress, Progress::default());
        // A fresh acquisition (no record, or a committed one past its TTL) has none.
        let (fresh, _) = acquire(None, "a", NOW, &req(60_000)).unwrap();
        assert!(fresh.progress.is_empty());
    }

    #[test]
    fn abandoning_and_recording_add_to_the_progress() {
        let mut mine = pending("a", NOW + 1_000, NOW / 1000 + 60);
        mine.progress = progress(&["s1:0"]);
        let (next, s) = change(
            Some(&mine),
            "a",
            &Change::Record {
                progress: progress(&["s2:3"]),
            },
        );
        assert_eq!(s, Settled::Ok);
        let next = next.unwrap();
        assert_eq!(
            next.lease_until_ms(),
            Some(NOW + 1_000),
            "the lease goes on"
        );
        assert_eq!(next.progress, progress(&["s1:0", "s2:3"]));
        let (abandoned, _) = change(
            Some(&next),
            "a",
            &Change::Abandon {
                progress: progress(&["s2:2", "s2:4"]),
            },
        );
        let abandoned = abandoned.unwrap();
        assert_eq!(abandoned.lease_until_ms(), Some(0));
        assert_eq!(abandoned.progress.entries(), vec!["s1:0", "s2:2-4"]);
    }

    #[test]
    fn progress_entries_round_trip_and_merge_as_sets() {
        let mut p = Progress::new();
        for (send, copy) in [("a", 0), ("a", 1), ("a", 2), ("a", 5), ("b:x", 7)] {
            p.insert(send, copy);
        }
        assert_eq!(p.entries(), vec!["a:0-2", "a:5", "b:x:7"]);
        assert_eq!(Progress::from_entries(p.entries()), p);
        assert!(p.contains("a", 1) && p.contains("a", 5) && p.contains("b:x", 7));
        assert!(!p.contains("a", 3) && !p.contains("b", 7));
        assert_eq!(p.copies(), 5);
        // Entries added in any order, overlapping, or malformed (ignored).
        let q = Progress::from_entries(["a:3-4", "a:0-2", "a:1", "junk", ":3", "a:x"]);
        assert_eq!(q.entries(), vec!["a:0-4"]);
        let mut both = p.clone();
        both.merge(&q);
        assert_eq!(both.entries(), vec!["a:0-5", "b:x:7"]);
        assert_eq!(both.sends().collect::<Vec<_>>(), vec!["a", "b:x"]);
    }

    #[test]
    fn placements_round_trip_beside_deliveries_and_never_count_as_delivered() {
        let mut p = Progress::new();
        p.insert("a", 0);
        p.place("a", 1, "out/2026/x:y>z.json");
        p.place("a", 1, "out/other.json");
        p.place("b", 0, "bad\nname"); // a line break could not be stored as a line
        assert_eq!(
            p.entries(),
            vec!["a:0", "a:1>out/2026/x:y>z.json", "a:1>out/other.json"]
        );
        let back = Progress::from_entries(p.entries());
        assert_eq!(back, p);
        assert_eq!(
            back.placed("a", 1).collect::<Vec<_>>(),
            vec!["out/2026/x:y>z.json", "out/other.json"]
        );
        assert_eq!(back.placed("a", 0).count(), 0);
        assert!(!back.contains("a", 1), "placed is not delivered");
        assert_eq!(back.copies(), 1);
        assert!(!back.delivered_none());
        let mut only = Progress::new();
        only.place("a", 0, "o");
        assert!(!only.is_empty() && only.delivered_none());
        // Malformed placements are ignored.
        let junk = Progress::from_entries([">x", ":1>x", "a:q>x", "a>x"]);
        assert!(junk.is_empty());
        // Copies placed together are kept as ranges: a message fanned out into thousands of
        // records in one object is one entry, not thousands (DynamoDB's items end at 400 KB).
        let mut many = Progress::new();
        for copy in 0..8000 {
            many.place("a", copy, if copy < 5000 { "o1" } else { "o2" });
        }
        assert_eq!(many.entries(), vec!["a:0-4999>o1", "a:5000-7999>o2"]);
        assert_eq!(Progress::from_entries(many.entries()), many);
        assert_eq!(many.placed("a", 4999).collect::<Vec<_>>(), vec!["o1"]);
        assert_eq!(many.placed("a", 5000).collect::<Vec<_>>(), vec!["o2"]);
        let mut merged = Progress::from_entries(["a:0"]);
        merged.merge(&only);
        assert_eq!(merged.entries(), vec!["a:0", "a:0>o"]);
    }

    #[test]
    fn a_pending_lock_keeps_a_ttl_past_its_lease() {
        let (rec, _) = acquire(
            None,
            "a",
            NOW,
            &AcquireRequest {
                key: "k".into(),
                ttl: NOW / 1000 - 3600, // an event time long past
                lease_until_ms: NOW + 60_000,
                skew_ms: SKEW,
                fresh_before_ms: None,
            },
        )
        .unwrap();
        assert!(rec.ttl > (NOW + 60_000) / 1000);
        // Committing sets the requested TTL.
        let (c, s) = change(Some(&rec), "a", &Change::Commit { ttl: 7 });
        assert_eq!(s, Settled::Ok);
        assert_eq!(c.unwrap().ttl, 7);
    }

    #[test]
    fn changes_apply_to_the_owners_pending_lock_only() {
        let mine = pending("a", NOW + 1_000, NOW / 1000 + 60);
        let theirs = pending("b", NOW + 1_000, NOW / 1000 + 60);
        for c in [
            Change::Commit { ttl: 1 },
            Change::Renew {
                ttl: 1,
                lease_until_ms: NOW + 9_000,
            },
            Change::Release,
            Change::Abandon {
                progress: progress(&["s:0"]),
            },
            Change::Record {
                progress: progress(&["s:1"]),
            },
        ] {
            let (next, s) = change(Some(&theirs), "a", &c);
            assert_eq!(
                (next.as_ref(), &s),
                (Some(&theirs), &Settled::NotOwner(Some(theirs.clone())))
            );
            assert_eq!(change(None, "a", &c), (None, Settled::NotOwner(None)));
            let (next, s) = change(Some(&mine), "a", &c);
            assert_eq!(s, Settled::Ok);
            match c {
                Change::Commit { .. } => {
                    let n = next.unwrap();
                    assert_eq!((n.status, n.since_ms), (LockStatus::Committed, None));
                    // Committing again (a lost answer) is still a success.
                    assert_eq!(change(Some(&n), "a", &c).1, Settled::Ok);
                    assert!(matches!(change(Some(&n), "b", &c).1, Settled::NotOwner(_)));
                }
                Change::Renew { .. } => {
                    assert_eq!(next.unwrap().lease_until_ms(), Some(NOW + 9_000));
                }
                Change::Release => assert_eq!(next, None),
                Change::Abandon { .. } => {
                    let n = next.unwrap();
                    assert_eq!(n.lease_until_ms(), Some(0));
                    assert_eq!(n.since_ms, mine.since_ms);
                    assert!(n.takeable_by("b", NOW, SKEW));
                    assert_eq!(n.progress, progress(&["s:0"]));
                }
                Change::Record { .. } => {
                    let n = next.unwrap();
                    assert_eq!(n.lease_until_ms(), mine.lease_until_ms());
                    assert_eq!(n.progress, progress(&["s:1"]));
                }
            }
        }
    }
}
