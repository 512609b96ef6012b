//! A lock store for unit tests whose `acquire` answers late. With `takeover_by`, the first
//! call takes the keys in a sqlite file, then waits until their leases have run out and
//! lets another owner take them over (as another process would), and only then answers;
//! with `delay_ms`, every call answers that much later. It is how the lock's
//! handling of an acquisition that outlasts its lease is tested without timing races.
//! Registered as the `test_slow_sqlite` lock kv store in test builds only.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use sluice_engine::async_trait;

use super::sqlite::SqliteStore;
use super::{AcquireRequest, Acquired, KvPlace, LockStore, Settled, StoreError};

fn clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    file: String,
    /// The owner that takes the keys over while the first acquisition is answered.
    #[serde(default)]
    takeover_by: Option<String>,
    /// How late every acquisition answers.
    #[serde(default)]
    delay_ms: u64,
}

pub(crate) struct SlowSqliteStore {
    inner: SqliteStore,
    takeover_by: Option<String>,
    delay: std::time::Duration,
    answered: AtomicBool,
}

impl SlowSqliteStore {
    pub(crate) fn build(
        place: &KvPlace<'_, '_>,
        settings: &sluice_engine::Value,
    ) -> Result<SlowSqliteStore, sluice_engine::ConfigError> {
        let s: Settings = place.settings(settings)?;
        Ok(SlowSqliteStore {
            inner: SqliteStore::open(PathBuf::from(&s.file)).map_err(|e| place.error("file", e))?,
            takeover_by: s.takeover_by,
            delay: std::time::Duration::from_millis(s.delay_ms),
            answered: AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl LockStore for SlowSqliteStore {
    fn describe(&self) -> String {
        format!("slow {}", self.inner.describe())
    }

    async fn acquire(
        &self,
        owner: &str,
        now_ms: i64,
        requests: &[AcquireRequest],
        concurrency: usize,
    ) -> Vec<Result<Acquired, StoreError>> {
        let results = self
            .inner
            .acquire(owner, now_ms, requests, concurrency)
            .await;
        tokio::time::sleep(self.delay).await;
        let Some(takeover_by) = &self.takeover_by else {
            return results;
        };
        if self.answered.swap(true, Ordering::SeqCst) {
            return results;
        }
        // The answer is late: the leases run out, and another owner takes the keys.
        let until = requests.iter().map(|r| r.lease_until_ms).max().unwrap_or(0);
        while clock_ms() <= until {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let later = clock_ms();
        let theirs: Vec<AcquireRequest> = requests
            .iter()
            .map(|r| AcquireRequest {
                key: r.key.clone(),
                ttl: r.ttl,
                lease_until_ms: later + 3_600_000,
            })
            .collect();
        for r in self
            .inner
            .acquire(takeover_by, later, &theirs, concurrency)
            .await
        {
            assert_eq!(r.expect("the takeover"), Acquired::Taken, "the takeover");
        }
        results
    }

    async fn commit(
        &self,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.inner.commit(owner, keys, concurrency).await
    }

    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.inner.release(owner, keys, concurrency).await
    }
}
