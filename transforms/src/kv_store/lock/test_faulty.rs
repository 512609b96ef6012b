//! A lock store for unit tests that answers late or fails on purpose: an SQLite store
//! behind a fault plan. It is how the lock's handling of a slow store, a store outage, a
//! release or commit that fails, and an answer lost after the write applied is tested
//! without timing races. Registered as the `test_faulty_sqlite` lock kv store in test
//! builds only.
//!
//! Settings: `file`; `delay_ms` (every acquisition and renewal answers that much later);
//! `takeover_by` (the first acquisition takes the keys, waits until their leases ran out,
//! lets that owner take them, then answers); and per operation (`acquire`, `commit`,
//! `renew`, `release`, `abandon`): `fail` (the first N calls fail before applying),
//! `fail_after` (the first N calls apply, then fail as if the answer was lost),
//! `outage_ms` (every call fails before applying until that long after the store was made)
//! and `slow_ms` (every call waits that long before it applies, as a call held until its
//! attempt timed out).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;
use sluice_engine::async_trait;

use super::super::KvPlace;
use super::sqlite::SqliteStore;
use super::{
    AbandonRequest, AcquireRequest, Acquired, ClockOffset, CommitRequest, LockStore, RenewRequest,
    Settled, StoreError,
};

fn clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    file: String,
    #[serde(default)]
    takeover_by: Option<String>,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    fail: HashMap<String, u32>,
    #[serde(default)]
    fail_after: HashMap<String, u32>,
    #[serde(default)]
    outage_ms: HashMap<String, u64>,
    #[serde(default)]
    slow_ms: HashMap<String, u64>,
    /// This host's clock against the store's, as the store would measure it (ms).
    #[serde(default)]
    clock_offset_ms: Option<i64>,
}

/// How many calls of each operation the stores over each file were asked (tests read it
/// with [`calls`]).
fn call_counts() -> &'static Mutex<HashMap<(String, String), u32>> {
    static C: std::sync::OnceLock<Mutex<HashMap<(String, String), u32>>> =
        std::sync::OnceLock::new();
    C.get_or_init(Default::default)
}

/// How many `op` calls the faulty stores over `file` were asked so far.
pub(crate) fn calls(file: &str, op: &str) -> u32 {
    call_counts()
        .lock()
        .unwrap()
        .get(&(file.to_string(), op.to_string()))
        .copied()
        .unwrap_or(0)
}

/// How a call of one operation goes.
enum Fault {
    None,
    Before,
    After,
}

pub(crate) struct FaultySqliteStore {
    file: String,
    clock_offset_ms: Option<i64>,
    inner: SqliteStore,
    takeover_by: Option<String>,
    delay: Duration,
    answered: AtomicBool,
    made: Instant,
    outage: HashMap<String, Duration>,
    slow: HashMap<String, Duration>,
    left: Mutex<HashMap<String, (u32, u32)>>,
}

impl FaultySqliteStore {
    pub(crate) fn build(
        place: &KvPlace<'_, '_>,
        settings: &sluice_engine::Value,
    ) -> Result<FaultySqliteStore, sluice_engine::ConfigError> {
        let s: Settings = place.settings(settings)?;
        let mut left: HashMap<String, (u32, u32)> = HashMap::new();
        for (op, n) in s.fail {
            left.entry(op).or_default().0 = n;
        }
        for (op, n) in s.fail_after {
            left.entry(op).or_default().1 = n;
        }
        Ok(FaultySqliteStore {
            file: s.file.clone(),
            clock_offset_ms: s.clock_offset_ms,
            inner: SqliteStore::open(PathBuf::from(&s.file)).map_err(|e| place.error("file", e))?,
            takeover_by: s.takeover_by,
            delay: Duration::from_millis(s.delay_ms),
            answered: AtomicBool::new(false),
            made: Instant::now(),
            outage: s
                .outage_ms
                .into_iter()
                .map(|(op, ms)| (op, Duration::from_millis(ms)))
                .collect(),
            slow: s
                .slow_ms
                .into_iter()
                .map(|(op, ms)| (op, Duration::from_millis(ms)))
                .collect(),
            left: Mutex::new(left),
        })
    }

    /// Waits as long as `slow_ms` says calls of `op` take.
    async fn slow(&self, op: &str) {
        if let Some(d) = self.slow.get(op) {
            tokio::time::sleep(*d).await;
        }
    }

    fn fault(&self, op: &str) -> Fault {
        *call_counts()
            .lock()
            .unwrap()
            .entry((self.file.clone(), op.to_string()))
            .or_default() += 1;
        if self
            .outage
            .get(op)
            .is_some_and(|d| self.made.elapsed() < *d)
        {
            return Fault::Before;
        }
        let mut left = self.left.lock().unwrap();
        match left.get_mut(op) {
            Some((before, _)) if *before > 0 => {
                *before -= 1;
                Fault::Before
            }
            Some((_, after)) if *after > 0 => {
                *after -= 1;
                Fault::After
            }
            _ => Fault::None,
        }
    }

    fn error(op: &str, when: &str) -> StoreError {
        StoreError(format!("test_faulty_sqlite: {op} failed {when} applying"))
    }

    async fn settle<T>(
        &self,
        op: &str,
        call: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.slow(op).await;
        match self.fault(op) {
            Fault::Before => Err(Self::error(op, "before")),
            Fault::After => {
                call.await?;
                Err(Self::error(op, "after"))
            }
            Fault::None => call.await,
        }
    }
}

#[async_trait]
impl LockStore for FaultySqliteStore {
    fn describe(&self) -> String {
        format!("faulty {}", self.inner.describe())
    }

    fn clock_offset(&self) -> Option<ClockOffset> {
        self.clock_offset_ms.map(|ms| ClockOffset {
            lo_ms: ms - 100,
            hi_ms: ms + 100,
        })
    }

    async fn acquire(
        &self,
        owner: &str,
        now_ms: i64,
        requests: &[AcquireRequest],
        concurrency: usize,
    ) -> Vec<Result<Acquired, StoreError>> {
        self.slow("acquire").await;
        let fault = self.fault("acquire");
        if let Fault::Before = fault {
            return requests
                .iter()
                .map(|_| Err(Self::error("acquire", "before")))
                .collect();
        }
        let results = self
            .inner
            .acquire(owner, now_ms, requests, concurrency)
            .await;
        if let Fault::After = fault {
            return requests
                .iter()
                .map(|_| Err(Self::error("acquire", "after")))
                .collect();
        }
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
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let later = clock_ms();
        let theirs: Vec<AcquireRequest> = requests
            .iter()
            .map(|r| AcquireRequest {
                key: r.key.clone(),
                ttl: r.ttl,
                lease_until_ms: later + 3_600_000,
                skew_ms: 0,
                fresh_before_ms: None,
            })
            .collect();
        for r in self
            .inner
            .acquire(takeover_by, later, &theirs, concurrency)
            .await
        {
            assert!(r.expect("the takeover").is_taken(), "the takeover");
        }
        results
    }

    async fn commit(
        &self,
        owner: &str,
        requests: &[CommitRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.settle("commit", self.inner.commit(owner, requests, concurrency))
            .await
    }

    async fn renew(
        &self,
        owner: &str,
        requests: &[RenewRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        let r = self
            .settle("renew", self.inner.renew(owner, requests, concurrency))
            .await;
        tokio::time::sleep(self.delay).await;
        r
    }

    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.settle("release", self.inner.release(owner, keys, concurrency))
            .await
    }

    async fn abandon(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.settle("abandon", self.inner.abandon(owner, requests, concurrency))
            .await
    }

    async fn record(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.settle("record", self.inner.record(owner, requests, concurrency))
            .await
    }
}
