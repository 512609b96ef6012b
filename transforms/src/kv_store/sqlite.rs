//! The `sqlite` kv store as a lock store: exactly-once across runs on one machine, with no
//! server.
//!
//! `sluice run` over a file that a later run sees again (a re-sent log, a retried job)
//! needs its locks to outlive the process; so does a second process on the same machine.
//! An SQLite database file gives both: every acquisition batch is one `BEGIN IMMEDIATE`
//! transaction (SQLite's file lock serialises writers across processes, and
//! `busy_timeout` makes a second process wait instead of failing), the journal is WAL with
//! `synchronous=FULL` (a lock, once acquired or committed, survives a crash of the process
//! and of the machine), and commit and release are conditional on the owner exactly like
//! the DynamoDB store's. Expired locks are deleted in the acquisition transaction.
//!
//! SQLite calls block, so they run on tokio's blocking pool; one connection per store,
//! behind a mutex that is never held across network I/O. The file is opened at first use,
//! so building a pipeline (`sluice vet`, `sluice build`) creates nothing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use sluice_engine::{ConfigError, Value, async_trait};

use super::{
    AcquireRequest, Acquired, KvPlace, LockRecord, LockStatus, LockStore, Settled, StoreError,
};

/// The database file when `file` is not set (relative to the working directory).
pub const DEFAULT_FILE: &str = ".sluice/locks.sqlite";

/// Settings of the `sqlite` kv store.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The database file; created with its directory when missing. Relative paths resolve
    /// against the working directory (a temporary directory under `sluice test`).
    pub file: Option<String>,
}

/// Locks in an SQLite database file.
pub struct SqliteStore {
    path: PathBuf,
    conn: Arc<Mutex<Option<Connection>>>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sluice_locks (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    committed INTEGER NOT NULL,
    lease_until_ms INTEGER NOT NULL,
    ttl INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sluice_locks_by_ttl ON sluice_locks (ttl);
";

const ACQUIRE: &str = "
INSERT INTO sluice_locks (key, owner, committed, lease_until_ms, ttl)
VALUES (?1, ?2, 0, ?3, ?4)
ON CONFLICT (key) DO UPDATE SET
    owner = excluded.owner, committed = 0,
    lease_until_ms = excluded.lease_until_ms, ttl = excluded.ttl
WHERE sluice_locks.ttl <= ?5
   OR (sluice_locks.committed = 0 AND sluice_locks.lease_until_ms < ?6)";

const SELECT: &str =
    "SELECT owner, committed, lease_until_ms, ttl FROM sluice_locks WHERE key = ?1";

const COMMIT: &str =
    "UPDATE sluice_locks SET committed = 1 WHERE key = ?1 AND owner = ?2 AND committed = 0";

const RELEASE: &str = "DELETE FROM sluice_locks WHERE key = ?1 AND owner = ?2 AND committed = 0";

impl SqliteStore {
    /// The process's store for this file (one per resolved path and scope). The file is
    /// opened at first use.
    pub fn shared(place: &KvPlace<'_, '_>, settings: &Value) -> Result<Arc<Self>, ConfigError> {
        let s: Settings = place.settings(settings)?;
        let file = s.file.as_deref().unwrap_or(DEFAULT_FILE);
        if file.is_empty() {
            return Err(place.error("file", "must not be empty"));
        }
        let path = super::resolve_path(file);
        super::shared(format!("sqlite:{}", path.display()), || {
            Ok(SqliteStore {
                path: path.clone(),
                conn: Arc::new(Mutex::new(None)),
            })
        })
    }

    /// Opens (creating when missing) the database at `path` now.
    pub fn open(path: PathBuf) -> Result<SqliteStore, String> {
        let conn = connect(&path)?;
        Ok(SqliteStore {
            path,
            conn: Arc::new(Mutex::new(Some(conn))),
        })
    }

    /// Runs `f` in one immediate transaction on the blocking pool.
    async fn transaction<R: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<R> + Send + 'static,
    ) -> Result<R, StoreError> {
        let conn = self.conn.clone();
        let at = self.path.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            if guard.is_none() {
                *guard = Some(connect(&at)?);
            }
            let c = guard.as_mut().expect("connected above");
            let run = || {
                let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let r = f(&tx)?;
                tx.commit()?;
                Ok::<R, rusqlite::Error>(r)
            };
            run().map_err(|e| e.to_string())
        })
        .await;
        let fail = |e: String| StoreError(format!("sqlite {}: {e}", self.path.display()));
        match joined {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(fail(e)),
            Err(e) => Err(fail(format!("the database task stopped: {e}"))),
        }
    }

    async fn settle(
        &self,
        owner: &str,
        keys: &[String],
        statement: &'static str,
    ) -> Result<Vec<Settled>, StoreError> {
        let owner = owner.to_string();
        let keys = keys.to_vec();
        self.transaction(move |tx| {
            let mut change = tx.prepare_cached(statement)?;
            let mut select = tx.prepare_cached(SELECT)?;
            keys.iter()
                .map(|k| {
                    if change.execute(params![k, owner])? == 1 {
                        Ok(Settled::Ok)
                    } else {
                        Ok(Settled::NotOwner(read_record(&mut select, k)?))
                    }
                })
                .collect()
        })
        .await
    }
}

/// Opens (creating when missing) the database and its directory, and sets it up.
fn connect(path: &Path) -> Result<Connection, String> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let fail = |e: rusqlite::Error| format!("cannot open {}: {e}", path.display());
    let conn = Connection::open(path).map_err(fail)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    // Switching a new database to WAL answers SQLITE_BUSY at once, without the busy
    // handler, while another process is setting the same file up: try again.
    let started = std::time::Instant::now();
    loop {
        let setup = conn
            .pragma_update(None, "journal_mode", "WAL")
            .and_then(|()| conn.pragma_update(None, "synchronous", "FULL"))
            .and_then(|()| conn.execute_batch(SCHEMA));
        match setup {
            Ok(()) => return Ok(conn),
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                ) && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5 + fastrand::u64(0..20)));
            }
            Err(e) => return Err(fail(e)),
        }
    }
}

/// How long a process waits for another one's lock on the database.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn read_record(
    select: &mut rusqlite::CachedStatement<'_>,
    key: &str,
) -> rusqlite::Result<Option<LockRecord>> {
    select
        .query_row(params![key], |row| {
            let committed: i64 = row.get(1)?;
            Ok(LockRecord {
                owner: row.get(0)?,
                status: if committed != 0 {
                    LockStatus::Committed
                } else {
                    LockStatus::Pending {
                        lease_until_ms: row.get(2)?,
                    }
                },
                ttl: row.get(3)?,
            })
        })
        .optional()
}

#[async_trait]
impl LockStore for SqliteStore {
    fn describe(&self) -> String {
        format!("sqlite {}", self.path.display())
    }

    async fn acquire(
        &self,
        owner: &str,
        now_ms: i64,
        requests: &[AcquireRequest],
        _concurrency: usize,
    ) -> Vec<Result<Acquired, StoreError>> {
        let owner = owner.to_string();
        let reqs = requests.to_vec();
        let now_s = now_ms.div_euclid(1000);
        let r = self
            .transaction(move |tx| {
                tx.execute("DELETE FROM sluice_locks WHERE ttl <= ?1", params![now_s])?;
                let mut insert = tx.prepare_cached(ACQUIRE)?;
                let mut select = tx.prepare_cached(SELECT)?;
                reqs.iter()
                    .map(|r| {
                        let n = insert.execute(params![
                            r.key,
                            owner,
                            r.lease_until_ms,
                            r.ttl,
                            now_s,
                            now_ms
                        ])?;
                        if n == 1 {
                            Ok(Acquired::Taken)
                        } else {
                            Ok(Acquired::Held(read_record(&mut select, &r.key)?))
                        }
                    })
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .await;
        match r {
            Ok(v) => v.into_iter().map(Ok).collect(),
            Err(e) => requests
                .iter()
                .map(|_| Err(StoreError(e.0.clone())))
                .collect(),
        }
    }

    async fn commit(
        &self,
        owner: &str,
        keys: &[String],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.settle(owner, keys, COMMIT).await
    }

    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.settle(owner, keys, RELEASE).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_racing_to_set_up_a_new_database_all_succeed() {
        // Two processes starting at once both set up the same new file; the WAL switch
        // used to fail one of them with "database is locked".
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("locks.sqlite");
            let opened: Vec<Result<Connection, String>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4).map(|_| s.spawn(|| connect(&path))).collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for r in opened {
                r.unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
        }
    }

    #[tokio::test]
    async fn passes_the_lock_store_contract() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("locks.sqlite")).unwrap();
        super::super::contract::check(&store, "", 1_700_000_000_000).await;
    }

    #[tokio::test]
    async fn locks_survive_reopening_and_are_shared_between_connections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/locks.sqlite");
        let req = AcquireRequest {
            key: "k".into(),
            ttl: 2_000_000_000,
            lease_until_ms: 1_700_000_060_000,
        };
        {
            let a = SqliteStore::open(path.clone()).unwrap();
            let r = a
                .acquire("a", 1_700_000_000_000, std::slice::from_ref(&req), 1)
                .await;
            assert_eq!(r[0].as_ref().unwrap(), &Acquired::Taken);
            assert_eq!(
                a.commit("a", &["k".into()], 1).await.unwrap(),
                vec![Settled::Ok]
            );
        }
        let a2 = SqliteStore::open(path.clone()).unwrap();
        let b = SqliteStore::open(path).unwrap();
        for s in [&a2, &b] {
            let r = s
                .acquire("b", 1_700_000_000_000, std::slice::from_ref(&req), 1)
                .await;
            assert!(matches!(
                r[0].as_ref().unwrap(),
                Acquired::Held(Some(LockRecord { status: LockStatus::Committed, owner, .. })) if owner == "a"
            ));
        }
    }

    #[tokio::test]
    async fn expired_locks_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("l.sqlite")).unwrap();
        let reqs: Vec<_> = (0..10)
            .map(|i| AcquireRequest {
                key: format!("k{i}"),
                ttl: 100 + i,
                lease_until_ms: 0,
            })
            .collect();
        store.acquire("a", 0, &reqs, 1).await;
        store.acquire("a", 105_000, &[], 1).await;
        let left: i64 = store
            .conn
            .lock()
            .unwrap()
            .as_ref()
            .unwrap()
            .query_row("SELECT count(*) FROM sluice_locks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 4);
    }

    #[tokio::test]
    async fn the_file_is_opened_at_first_use_and_errors_name_it() {
        let store = SqliteStore {
            path: PathBuf::from("/proc/no/such/locks.sqlite"),
            conn: Arc::new(Mutex::new(None)),
        };
        let e = store.commit("a", &["k".into()], 1).await.unwrap_err();
        assert!(e.to_string().contains("/proc/no/such"), "{e}");
        let e = SqliteStore::open(PathBuf::from("/proc/no/such/locks.sqlite"))
            .err()
            .unwrap();
        assert!(e.contains("/proc/no/such"), "{e}");
    }
}
