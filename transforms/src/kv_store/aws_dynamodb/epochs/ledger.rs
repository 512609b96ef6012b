//! What a process knows of its open epochs (`lock_acquire: 'epochs'`): the `lock_v` it
//! last saw of each, the slots it learnt were aborted, the TTL it committed there, and which
//! epoch and slot holds each of its keys, with the TTL the key's item has. Kept until each
//! key is settled (committed, released, abandoned, or found another owner's).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use sluice_lock_protocol::epoch::EpochSlot;

/// What a process knows of its open epochs, by owner.
#[derive(Debug, Default)]
pub(crate) struct Ledger(Mutex<Books>);

#[derive(Debug, Default)]
struct Books {
    /// The next epoch number of each owner.
    next: HashMap<String, u64>,
    /// Each key held in an epoch, by owner and key: its slot and TTL.
    keys: HashMap<(String, String), Slotted>,
    /// Each open epoch, by owner and number.
    open: HashMap<(String, u64), Open>,
}

#[derive(Debug, Clone, Copy)]
struct Slotted {
    at: EpochSlot,
    /// The TTL its item has (its acquisition's or its last renewal's).
    ttl: i64,
}

#[derive(Debug, Default)]
struct Open {
    /// The abort counter the owner last saw.
    v: u64,
    /// Every slot it learnt was aborted.
    aborted: BTreeSet<u32>,
    /// The largest TTL committed in it.
    ttl: i64,
    /// Keys not settled yet.
    keys: usize,
}

impl Ledger {
    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a new epoch for `owner`: its number.
    pub(crate) fn open(&self, owner: &str) -> u64 {
        let mut b = self.books();
        let next = b.next.entry(owner.to_string()).or_default();
        let epoch = *next;
        *next += 1;
        epoch
    }

    /// `owner` holds `key` in `at`.
    pub(crate) fn taken(&self, owner: &str, key: &str, at: EpochSlot, ttl: i64) {
        let mut b = self.books();
        let slotted = Slotted { at, ttl };
        if let Some(old) = b.keys.insert((owner.to_string(), key.to_string()), slotted) {
            b.left(owner, old.at.epoch);
        }
        b.open
            .entry((owner.to_string(), at.epoch))
            .or_default()
            .keys += 1;
    }

    /// A renewal wrote `ttl` on `owner`'s `key`.
    pub(crate) fn renewed(&self, owner: &str, key: &str, ttl: i64) {
        if let Some(s) = self
            .books()
            .keys
            .get_mut(&(owner.to_string(), key.to_string()))
        {
            s.ttl = s.ttl.max(ttl);
        }
    }

    /// The TTL of `owner`'s `key`'s item, if held in an epoch.
    pub(crate) fn item_ttl(&self, owner: &str, key: &str) -> Option<i64> {
        self.books()
            .keys
            .get(&(owner.to_string(), key.to_string()))
            .map(|s| s.ttl)
    }

    /// A commit set `owner`'s epoch's TTL to `ttl`.
    pub(crate) fn committed_until(&self, owner: &str, epoch: u64, ttl: i64) {
        if let Some(open) = self.books().open.get_mut(&(owner.to_string(), epoch)) {
            open.ttl = open.ttl.max(ttl);
        }
    }

    /// Where `owner` holds `key`, if in an epoch.
    pub(crate) fn slot_of(&self, owner: &str, key: &str) -> Option<EpochSlot> {
        self.books()
            .keys
            .get(&(owner.to_string(), key.to_string()))
            .map(|s| s.at)
    }

    /// `owner` no longer holds `key` in an epoch (committed, released, abandoned).
    pub(crate) fn forget(&self, owner: &str, key: &str) {
        let mut b = self.books();
        if let Some(old) = b.keys.remove(&(owner.to_string(), key.to_string())) {
            b.left(owner, old.at.epoch);
        }
    }

    /// The abort counter last seen, the slots known aborted and the TTL of `owner`'s epoch.
    pub(crate) fn seen(&self, owner: &str, epoch: u64) -> (u64, BTreeSet<u32>, i64) {
        let b = self.books();
        match b.open.get(&(owner.to_string(), epoch)) {
            Some(o) => (o.v, o.aborted.clone(), o.ttl),
            None => (0, BTreeSet::new(), 0),
        }
    }

    /// A commit found the epoch's counter at `v`, with `aborted` slots.
    pub(crate) fn moved(&self, owner: &str, epoch: u64, v: u64, aborted: BTreeSet<u32>) {
        let mut b = self.books();
        let open = b.open.entry((owner.to_string(), epoch)).or_default();
        open.v = open.v.max(v);
        open.aborted.extend(aborted);
    }
}

impl Books {
    fn left(&mut self, owner: &str, epoch: u64) {
        let id = (owner.to_string(), epoch);
        if let Some(open) = self.open.get_mut(&id) {
            open.keys = open.keys.saturating_sub(1);
            if open.keys == 0 {
                self.open.remove(&id);
            }
        }
    }
}
