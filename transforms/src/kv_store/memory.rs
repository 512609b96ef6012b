//! The `memory` kv store: locks (for `meta_kv_store_lock`) and items (for the
//! `enrich_kv_store_*` transforms) that live as long as the process.
//!
//! Items are kept in an LRU map of `capacity` entries (Substation's default 1024): when it
//! is full, setting a new key evicts the one used longest ago. An item's TTL is checked
//! when it is read (an expired item is gone). A set (`set_add`) is an array of distinct
//! strings in the order they were first added.
//!
//! Good for tests and for pipelines whose duplicates can only come from within one process
//! (one Lambda container sees only its own invocations: use `aws_dynamodb` there). Unlike
//! Substation's memory locker, locks are kept apart from the store's LRU items, so a held
//! lock is never evicted (`capacity` bounds items only), every call takes one mutex (no
//! race between lock and item operations), and an expired lock is taken over in one
//! attempt. Expired locks are swept when the map has grown past twice its size at the last
//! sweep, so a long run does not keep every key it ever saw.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use lru::LruCache;

use serde::Deserialize;
use sluice_engine::json::Array;
use sluice_engine::{ConfigError, Value, async_trait};

use sluice_lock_protocol::{self as protocol, Change, Progress};

use super::item::store::{ItemError, ItemStore};
use super::{
    AbandonRequest, AcquireRequest, Acquired, CommitRequest, KvPlace, LockRecord, LockStatus,
    LockStore, RenewRequest, Settled, StoreError,
};

/// Substation's default `capacity`.
pub const DEFAULT_CAPACITY: NonZeroUsize = NonZeroUsize::new(1024).unwrap();

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

/// An item and when it expires (epoch seconds).
struct Item {
    value: Value,
    ttl: Option<i64>,
}

/// Locks in a map behind one mutex, items in an LRU map behind another.
pub struct MemoryStore {
    locks: Mutex<Locks>,
    items: Mutex<LruCache<String, Item>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl MemoryStore {
    /// The process's store for these settings (one per distinct configuration and scope).
    pub fn shared(place: &KvPlace<'_, '_>, settings: &Value) -> Result<Arc<Self>, ConfigError> {
        let s: Settings = place.settings(settings)?;
        let capacity = match s.capacity {
            None => DEFAULT_CAPACITY,
            Some(c) => {
                NonZeroUsize::new(c).ok_or_else(|| place.error("capacity", "must be at least 1"))?
            }
        };
        let id = format!("memory:{capacity}");
        place.shared(id, || Ok(MemoryStore::new(capacity)))
    }

    /// A store holding at most `capacity` items.
    pub fn new(capacity: NonZeroUsize) -> Self {
        MemoryStore {
            locks: Mutex::default(),
            items: Mutex::new(LruCache::new(capacity)),
        }
    }

    fn items(&self) -> std::sync::MutexGuard<'_, LruCache<String, Item>> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
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
        // Committed locks past their TTL go; pending ones stay whatever their lease says,
        // since an abandoned lock's history (`since`, `progress`) is what its next taker needs.
        self.records
            .retain(|_, r| r.status != LockStatus::Committed || r.blocks(now_ms, 0));
        self.swept_at_len = self.records.len();
    }

    /// Applies `change` to `key` by the protocol's rules.
    fn change(&mut self, owner: &str, key: &str, change: &Change) -> Settled {
        let (next, outcome) = protocol::change(self.records.get(key), owner, change);
        match next {
            Some(r) => {
                self.records.insert(key.to_string(), r);
            }
            None => {
                self.records.remove(key);
            }
        }
        outcome
    }

    fn change_all<'k>(
        &mut self,
        owner: &str,
        changes: impl Iterator<Item = (&'k str, Change)>,
    ) -> Vec<Settled> {
        changes.map(|(k, c)| self.change(owner, k, &c)).collect()
    }
}

impl MemoryStore {
    /// The change `to` makes of each request's progress (an abandonment or a record), on
    /// its key.
    fn add_progress(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        to: fn(Progress) -> Change,
    ) -> Vec<Settled> {
        self.with(|l| {
            l.change_all(
                owner,
                requests
                    .iter()
                    .map(|r| (r.key.as_str(), to(r.progress.clone()))),
            )
        })
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
                .map(
                    |r| match protocol::acquire(l.records.get(&r.key), owner, now_ms, r) {
                        Ok((record, taken)) => {
                            l.records.insert(r.key.clone(), record);
                            Ok(taken)
                        }
                        Err(holder) => Ok(Acquired::Held(Some(holder))),
                    },
                )
                .collect()
        })
    }

    async fn commit(
        &self,
        owner: &str,
        requests: &[CommitRequest],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        Ok(self.with(|l| {
            l.change_all(
                owner,
                requests
                    .iter()
                    .map(|r| (r.key.as_str(), Change::Commit { ttl: r.ttl })),
            )
        }))
    }

    async fn renew(
        &self,
        owner: &str,
        requests: &[RenewRequest],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        Ok(self.with(|l| {
            l.change_all(
                owner,
                requests.iter().map(|r| {
                    (
                        r.key.as_str(),
                        Change::Renew {
                            ttl: r.ttl,
                            lease_until_ms: r.lease_until_ms,
                        },
                    )
                }),
            )
        }))
    }

    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        Ok(self.with(|l| l.change_all(owner, keys.iter().map(|k| (k.as_str(), Change::Release)))))
    }

    async fn abandon(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        Ok(self.add_progress(owner, requests, |progress| Change::Abandon { progress }))
    }

    async fn record(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        Ok(self.add_progress(owner, requests, |progress| Change::Record { progress }))
    }
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn expired(item: &Item, now: i64) -> bool {
    item.ttl.is_some_and(|t| t <= now)
}

#[async_trait]
impl ItemStore for MemoryStore {
    fn describe(&self) -> String {
        "memory".to_string()
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, ItemError> {
        let mut items = self.items();
        let now = now_s();
        match items.get(key) {
            Some(item) if expired(item, now) => {
                items.pop(key);
                Ok(None)
            }
            Some(item) => Ok(Some(item.value.clone())),
            None => Ok(None),
        }
    }

    async fn set(&self, key: &str, value: Value, ttl: Option<i64>) -> Result<(), ItemError> {
        self.items().put(key.to_string(), Item { value, ttl });
        Ok(())
    }

    async fn set_add(
        &self,
        key: &str,
        values: Vec<String>,
        ttl: Option<i64>,
    ) -> Result<(), ItemError> {
        let mut items = self.items();
        let now = now_s();
        if items.peek(key).is_some_and(|i| expired(i, now)) {
            items.pop(key);
        }
        let item = items.get_or_insert_mut(key.to_string(), || Item {
            value: Value::Array(Array::new()),
            ttl: None,
        });
        let Value::Array(members) = &mut item.value else {
            return Err(ItemError::BadKey {
                store: "memory".into(),
                key: key.to_string(),
                why: "it holds a value that is not a set (set it with set_add only)".into(),
            });
        };
        for v in values {
            if !members.iter().any(|m| m.as_str() == Some(v.as_str())) {
                members.push(Value::String(v.into()));
            }
        }
        if ttl.is_some() {
            item.ttl = ttl;
        }
        Ok(())
    }
}

/// The `memory` kv store's descriptor: what registers it and lists it in the reference.
pub(crate) const INFO: crate::kv_store::stores::KvStoreInfo =
    crate::kv_store::stores::KvStoreInfo {
        info: sluice_engine::TypeInfo {
            name: "memory",
            aliases: &[],
            library: "sub.kv_store.memory",
            summary: "an LRU map of `capacity` items in the process; its locks serve that process alone",
            reach: sluice_engine::Reach::Memory,
            example: r#"{"capacity": 16}"#,
        },
        items: Some(|p, s| MemoryStore::shared(p, s).map(|s| s as Arc<dyn ItemStore>)),
        read_only: false,
        locks: Some(|p, s| MemoryStore::shared(p, s).map(|s| s as Arc<dyn LockStore>)),
        file: None,
    };

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::json;
    use sluice_engine::testing::block_on;

    #[test]
    fn items_are_an_lru_map_with_ttls() {
        let st = MemoryStore::new(NonZeroUsize::new(2).unwrap());
        block_on(st.set("a", json!({"x": 1}), None)).unwrap();
        block_on(st.set("b", json!(2), Some(now_s() + 100))).unwrap();
        assert_eq!(block_on(st.get("a")).unwrap(), Some(json!({"x": 1})));
        // "b" is now the least recently used: a third key evicts it.
        block_on(st.set("c", json!(3), None)).unwrap();
        assert_eq!(block_on(st.get("b")).unwrap(), None);
        assert_eq!(block_on(st.get("a")).unwrap(), Some(json!({"x": 1})));
        // An expired item is gone.
        block_on(st.set("a", json!(1), Some(now_s() - 1))).unwrap();
        assert_eq!(block_on(st.get("a")).unwrap(), None);
        assert_eq!(block_on(st.get("nothing")).unwrap(), None);
    }

    #[test]
    fn set_add_keeps_distinct_strings_in_order() {
        let st = MemoryStore::default();
        block_on(st.set_add("s", vec!["b".into(), "a".into()], None)).unwrap();
        block_on(st.set_add("s", vec!["a".into(), "c".into()], Some(now_s() + 60))).unwrap();
        block_on(st.set_add("s", vec![], None)).unwrap();
        assert_eq!(block_on(st.get("s")).unwrap(), Some(json!(["b", "a", "c"])));
        // A set whose TTL passed starts again.
        block_on(st.set_add("t", vec!["x".into()], Some(now_s() - 1))).unwrap();
        block_on(st.set_add("t", vec!["y".into()], None)).unwrap();
        assert_eq!(block_on(st.get("t")).unwrap(), Some(json!(["y"])));
        // A plain value is not a set.
        block_on(st.set("v", json!("plain"), None)).unwrap();
        let e = block_on(st.set_add("v", vec!["x".into()], None)).unwrap_err();
        assert!(e.to_string().contains("not a set"), "{e}");
    }

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
                    skew_ms: 0,
                    fresh_before_ms: None,
                };
                let r = store.acquire(&format!("o{i}"), 0, &[req], 1).await;
                matches!(r[0], Ok(Acquired::Taken { .. }))
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
                skew_ms: 0,
                fresh_before_ms: None,
            })
            .collect();
        store.acquire("o", 0, &reqs, 1).await;
        let commits: Vec<CommitRequest> = reqs
            .iter()
            .map(|r| CommitRequest {
                key: r.key.clone(),
                ttl: r.ttl,
                note: None,
            })
            .collect();
        store.commit("o", &commits, 1).await.unwrap();
        // A later acquisition at 20 s sweeps the expired ones.
        let more = [AcquireRequest {
            key: "new".into(),
            ttl: 1000,
            lease_until_ms: 0,
            skew_ms: 0,
            fresh_before_ms: None,
        }];
        store.acquire("o", 20_000, &more, 1).await;
        let len = store.with(|l| l.records.len());
        assert_eq!(len, 1001);
        let again = store.acquire("p", 20_000, &reqs[2000..2001], 1).await;
        assert!(matches!(again[0], Ok(Acquired::Held(Some(_)))));
    }
}
