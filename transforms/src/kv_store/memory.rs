//! The `memory` kv store as a lock store: locks that live as long as the process.
//!
//! Good for tests and for pipelines whose duplicates can only come from within one process
//! (one Lambda container sees only its own invocations: use `aws_dynamodb` there). Unlike
//! Substation's memory locker, locks are kept apart from the store's LRU items, so a held
//! lock is never evicted (`capacity` bounds items only), every call takes one mutex (no
//! race between lock and item operations), and an expired lock is taken over in one
//! attempt. Expired locks are swept when the map has grown past twice its size at the last
//! sweep, so a long run does not keep every key it ever saw.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use sluice_engine::{ConfigError, Value, async_trait};

use super::{
    AcquireRequest, Acquired, KvPlace, LockRecord, LockStatus, LockStore, Settled, StoreError,
};

/// Settings of the `memory` kv store.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The most items (not locks) kept; Substation's default 1024.
    pub capacity: Option<usize>,
}

#[derive(Default)]
struct Locks {
    records: HashMap<String, LockRecord>,
    swept_at_len: usize,
}

/// Locks in a map behind one mutex.
#[derive(Default)]
pub struct MemoryStore {
    locks: Mutex<Locks>,
}

impl MemoryStore {
    /// The process's store for these settings (one per distinct configuration and scope).
    pub fn shared(place: &KvPlace<'_, '_>, settings: &Value) -> Result<Arc<Self>, ConfigError> {
        let s: Settings = place.settings(settings)?;
        if s.capacity == Some(0) {
            return Err(place.error("capacity", "must be at least 1"));
        }
        let id = format!("memory:{}", s.capacity.unwrap_or(1024));
        super::shared(id, || Ok(MemoryStore::default()))
    }

    fn with<R>(&self, f: impl FnOnce(&mut Locks) -> R) -> R {
        let mut g = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }
}

impl Locks {
    fn sweep(&mut self, now_ms: i64) {
        if self.records.len() < 1024 || self.records.len() < self.swept_at_len * 2 {
            return;
        }
        self.records.retain(|_, r| r.blocks(now_ms));
        self.swept_at_len = self.records.len();
    }

    fn settle(
        &mut self,
        owner: &str,
        keys: &[String],
        mut on_ours: impl FnMut(&mut Locks, &str),
    ) -> Vec<Settled> {
        keys.iter()
            .map(|k| match self.records.get(k) {
                Some(r) if r.owner == owner && matches!(r.status, LockStatus::Pending { .. }) => {
                    on_ours(self, k);
                    Settled::Ok
                }
                other => Settled::NotOwner(other.cloned()),
            })
            .collect()
    }
}

#[async_trait]
impl LockStore for MemoryStore {
    fn describe(&self) -> String {
        "memory".to_string()
    }

    async fn acquire(
        &self,
        owner: &str,
        now_ms: i64,
        requests: &[AcquireRequest],
        _concurrency: usize,
    ) -> Vec<Result<Acquired, StoreError>> {
        self.with(|l| {
            l.sweep(now_ms);
            requests
                .iter()
                .map(|r| match l.records.get(&r.key) {
                    Some(held) if held.blocks(now_ms) => Ok(Acquired::Held(Some(held.clone()))),
                    _ => {
                        l.records.insert(
                            r.key.clone(),
                            LockRecord {
                                owner: owner.to_string(),
                                status: LockStatus::Pending {
                                    lease_until_ms: r.lease_until_ms,
                                },
                                ttl: r.ttl,
                            },
                        );
                        Ok(Acquired::Taken)
                    }
                })
                .collect()
        })
    }

    async fn commit(
        &self,
        owner: &str,
        keys: &[String],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        Ok(self.with(|l| {
            l.settle(owner, keys, |l, k| {
                if let Some(r) = l.records.get_mut(k) {
                    r.status = LockStatus::Committed;
                }
            })
        }))
    }

    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        Ok(self.with(|l| {
            l.settle(owner, keys, |l, k| {
                l.records.remove(k);
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn passes_the_lock_store_contract() {
        let store = MemoryStore::default();
        super::super::contract::check(&store, "", 1_700_000_000_000).await;
    }

    #[tokio::test]
    async fn concurrent_acquisitions_of_one_key_give_it_to_exactly_one_owner() {
        let store = Arc::new(MemoryStore::default());
        let mut tasks = Vec::new();
        for i in 0..16 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let req = AcquireRequest {
                    key: "k".into(),
                    ttl: i64::MAX / 2000,
                    lease_until_ms: i64::MAX / 2,
                };
                let r = store.acquire(&format!("o{i}"), 0, &[req], 1).await;
                matches!(r[0], Ok(Acquired::Taken))
            }));
        }
        let mut taken = 0;
        for t in tasks {
            taken += t.await.unwrap() as usize;
        }
        assert_eq!(taken, 1);
    }

    #[tokio::test]
    async fn expired_locks_are_swept_but_held_ones_never_are() {
        let store = MemoryStore::default();
        let reqs: Vec<_> = (0..3000)
            .map(|i| AcquireRequest {
                key: format!("k{i}"),
                // The first 2000 expire at 10 s, the rest at 1000 s.
                ttl: if i < 2000 { 10 } else { 1000 },
                lease_until_ms: 0,
            })
            .collect();
        store.acquire("o", 0, &reqs, 1).await;
        let keys: Vec<String> = (0..3000).map(|i| format!("k{i}")).collect();
        store.commit("o", &keys, 1).await.unwrap();
        // A later acquisition at 20 s sweeps the expired ones.
        let more = [AcquireRequest {
            key: "new".into(),
            ttl: 1000,
            lease_until_ms: 0,
        }];
        store.acquire("o", 20_000, &more, 1).await;
        let len = store.with(|l| l.records.len());
        assert_eq!(len, 1001);
        let again = store.acquire("p", 20_000, &reqs[2000..2001], 1).await;
        assert!(matches!(again[0], Ok(Acquired::Held(Some(_)))));
    }
}
