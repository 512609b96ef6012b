//! Co-commit: how a DynamoDB send inside `meta_kv_store_lock` learns which lock guards each
//! item it writes, so that it can commit that lock in the same `TransactWriteItems` as the
//! items (DESIGN.md, "The lock", item 7; `send_aws_dynamodb_put`'s `transactional` mode).
//!
//! A lock over an `aws_dynamodb` store gives every message that got its lock an
//! acknowledgement tracker of its own; every item that message becomes carries a token of
//! that tracker down to the send. The lock registers, per tracker, the lock's store, owner
//! and key ([`register`]); the send looks its items' trackers up ([`lookup`]), writes the
//! items and the commits together, and marks the locks committed ([`LockRef::mark_committed`]).
//! At its checkpoint the lock skips the keys already committed this way and forgets the
//! trackers it settled ([`unregister`]). Tracker ids are addresses of live trackers, unique
//! while registered: the lock unregisters a tracker before it drops it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::LockStore;

/// The lock guarding one message, as its lock registered it.
pub struct LockRef {
    /// The store holding the lock (an `aws_dynamodb` one).
    pub store: Arc<dyn LockStore>,
    /// The lock's owner name.
    pub owner: Arc<str>,
    /// The lock key (prefix included).
    pub key: String,
    committed: AtomicBool,
}

impl LockRef {
    /// A reference to `owner`'s lock on `key` in `store`.
    pub fn new(store: Arc<dyn LockStore>, owner: Arc<str>, key: String) -> LockRef {
        LockRef {
            store,
            owner,
            key,
            committed: AtomicBool::new(false),
        }
    }

    /// Records that a send committed the lock together with its items.
    pub fn mark_committed(&self) {
        self.committed.store(true, Ordering::Release);
    }

    /// Whether a send committed the lock already.
    pub fn is_committed(&self) -> bool {
        self.committed.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for LockRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockRef")
            .field("store", &self.store.describe())
            .field("owner", &self.owner)
            .field("key", &self.key)
            .field("committed", &self.is_committed())
            .finish()
    }
}

type Registry = HashMap<usize, Arc<LockRef>>;

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Registers the lock guarding the messages tracked by `tracker_id`.
pub fn register(tracker_id: usize, lock: Arc<LockRef>) {
    registry().insert(tracker_id, lock);
}

/// The lock registered for `tracker_id`, if any.
pub fn lookup(tracker_id: usize) -> Option<Arc<LockRef>> {
    registry().get(&tracker_id).cloned()
}

/// Forgets the trackers in `ids` (settled by their lock).
pub fn unregister(ids: impl IntoIterator<Item = usize>) {
    let mut r = registry();
    for id in ids {
        r.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_store::memory::MemoryStore;

    #[test]
    fn registered_locks_are_found_until_unregistered() {
        let store: Arc<dyn LockStore> = Arc::new(MemoryStore::default());
        let lock = Arc::new(LockRef::new(store, "me".into(), "k".into()));
        // Ids far from real addresses, so parallel tests cannot collide.
        register(1, lock.clone());
        register(3, lock.clone());
        assert_eq!(lookup(1).map(|l| l.key.clone()), Some("k".to_string()));
        assert!(lookup(2).is_none());
        assert!(!lock.is_committed());
        lookup(3).unwrap().mark_committed();
        assert!(lock.is_committed());
        unregister([1, 3]);
        assert!(lookup(1).is_none() && lookup(3).is_none());
    }
}
