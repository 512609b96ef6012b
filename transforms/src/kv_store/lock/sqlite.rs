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
//! the DynamoDB store's. Every operation reads the record and applies the protocol's rules
//! (`sluice_lock_protocol`) inside its transaction. Committed locks past their TTL are
//! deleted in the acquisition transaction; pending ones never are (a pending lock blocks
//! until its lease ends, whatever its TTL).
//!
//! Beside the file the store keeps a reserve of 2 MiB (`FILE-reserve`): when the disk fills,
//! a transaction that fails for it is tried again once after the reserve is deleted, so the
//! commits of what was delivered still land (the run fails on what follows, as it must) and
//! a rerun finds those messages done instead of sending them again.
//!
//! SQLite calls block, so they run on tokio's blocking pool; one connection per store,
//! behind a mutex that is never held across network I/O. The file is opened at first use,
//! so building a pipeline (`sluice vet`, `sluice build`) creates nothing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Deserialize;
use sluice_engine::{ConfigError, Value, async_trait};

use sluice_lock_protocol::{self as protocol, Change};

use super::super::KvPlace;
use super::{
    AbandonRequest, AcquireRequest, Acquired, CommitRequest, LockRecord, LockStatus, LockStore,
    Progress, RenewRequest, Settled, StoreError,
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
    ttl INTEGER NOT NULL,
    since_ms INTEGER,
    note TEXT,
    progress TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sluice_locks_by_ttl ON sluice_locks (ttl);
";

/// Columns added after the first release; a file made before gets them at open.
const ADDED_COLUMNS: [(&str, &str); 3] = [
    ("since_ms", "INTEGER"),
    ("note", "TEXT"),
    ("progress", "TEXT"),
];

const SELECT: &str = "SELECT owner, committed, lease_until_ms, ttl, since_ms, progress \
     FROM sluice_locks WHERE key = ?1";

const UPSERT: &str = "
INSERT INTO sluice_locks (key, owner, committed, lease_until_ms, ttl, since_ms, note, progress)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (key) DO UPDATE SET
    owner = excluded.owner, committed = excluded.committed,
    lease_until_ms = excluded.lease_until_ms, ttl = excluded.ttl,
    since_ms = excluded.since_ms, note = excluded.note, progress = excluded.progress";

const DELETE: &str = "DELETE FROM sluice_locks WHERE key = ?1";

impl SqliteStore {
    /// The process's store for this file (one per resolved path and scope). The file is
    /// opened at first use.
    pub fn shared(place: &KvPlace<'_, '_>, settings: &Value) -> Result<Arc<Self>, ConfigError> {
        let s: Settings = place.settings(settings)?;
        let file = s.file.as_deref().unwrap_or(DEFAULT_FILE);
        if file.is_empty() {
            return Err(place.error("file", "must not be empty"));
        }
        let path = place.resolve_path(file);
        place.shared(format!("sqlite:{}", path.display()), || {
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
    /// A full disk is met once with the reserve ([`reserve_path`]) when `settling` (what
    /// changes keys already taken: commits, renewals, releases, abandonments; not new
    /// acquisitions): it is deleted and the transaction tried again, so that the locks of
    /// what was delivered can still be settled (a later call on the still-full disk fails,
    /// as it must).
    async fn transaction<R: Send + 'static>(
        &self,
        settling: bool,
        f: impl Fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<R> + Send + 'static,
    ) -> Result<R, StoreError> {
        let conn = self.conn.clone();
        let at = self.path.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            let c = match &mut *guard {
                Some(c) => c,
                unconnected @ None => unconnected.insert(connect(&at)?),
            };
            let mut run = || {
                let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let r = f(&tx)?;
                tx.commit()?;
                Ok::<R, rusqlite::Error>(r)
            };
            match run() {
                Err(e)
                    if settling
                        && e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) =>
                {
                    let reserve = reserve_path(&at);
                    if std::fs::remove_file(&reserve).is_err() {
                        return Err(e.to_string());
                    }
                    tracing::error!(
                        file = %at.display(),
                        "the lock store's disk is full: its reserve ({}) was given up to settle the locks; free space on that disk",
                        reserve.display()
                    );
                    run().map_err(|e| e.to_string())
                }
                r => r.map_err(|e| e.to_string()),
            }
        })
        .await;
        let fail = |e: String| StoreError(format!("sqlite {}: {e}", self.path.display()));
        match joined {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(fail(e)),
            Err(e) => Err(fail(format!("the database task stopped: {e}"))),
        }
    }

    /// Applies one change per key in one transaction.
    async fn change(
        &self,
        owner: &str,
        changes: Vec<(String, Change, Option<String>)>,
    ) -> Result<Vec<Settled>, StoreError> {
        let owner = owner.to_string();
        self.transaction(true, move |tx| {
            let mut select = tx.prepare_cached(SELECT)?;
            let mut upsert = tx.prepare_cached(UPSERT)?;
            let mut delete = tx.prepare_cached(DELETE)?;
            changes
                .iter()
                .map(|(key, change, note)| {
                    let current = read_record(&mut select, key)?;
                    let (next, outcome) = protocol::change(current.as_ref(), &owner, change);
                    if outcome == Settled::Ok && next != current {
                        match &next {
                            Some(r) => write_record(&mut upsert, key, r, note.as_deref())?,
                            None => {
                                delete.execute(params![key])?;
                            }
                        }
                    }
                    Ok(outcome)
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
    create_private(path)?;
    let fail = |e: rusqlite::Error| format!("cannot open {}: {e}", path.display());
    let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    // Switching a new database to WAL answers SQLITE_BUSY at once, without the busy
    // handler, while another process is setting the same file up: try again.
    let started = std::time::Instant::now();
    loop {
        let setup = conn
            .pragma_update(None, "journal_mode", "WAL")
            .and_then(|()| conn.pragma_update(None, "synchronous", "FULL"))
            .and_then(|()| conn.execute_batch(SCHEMA))
            .and_then(|()| add_columns(&conn));
        match setup {
            Ok(()) => {
                keep_reserve(path);
                return Ok(conn);
            }
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

/// The files SQLite and the store keep beside the database at `path`.
fn companions(path: &Path) -> [PathBuf; 4] {
    ["-wal", "-shm", "-journal", "-reserve"].map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Refuses a symbolic link at `path` or at one of its companions (a link there could make
/// the store write, or truncate, another file), and creates the database file, when
/// missing, readable and writable by its owner only (0600; SQLite gives its `-wal` and
/// `-shm` files the database's mode). Lock keys come from message data, so the file is no
/// one else's to read.
fn create_private(path: &Path) -> Result<(), String> {
    for p in std::iter::once(path.to_path_buf()).chain(companions(path)) {
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "cannot open {}: {} is a symbolic link, which the lock store never follows",
                path.display(),
                p.display()
            ));
        }
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => tighten(path),
        Err(e) => Err(format!("cannot create {}: {e}", path.display())),
    }
}

/// Makes the existing database at `path`, and its companions, owner-only (0600) when the
/// user owns them and others may read or write them (as files from before sluice created
/// them 0600 are): its contents stay. Each is opened without following a link and changed
/// through that descriptor. Files of other users are left as they are.
#[cfg(unix)]
fn tighten(path: &Path) -> Result<(), String> {
    use rustix::fs::{FileType, Mode, OFlags, fchmod, fstat, open};
    let me = rustix::process::geteuid().as_raw();
    for p in std::iter::once(path.to_path_buf()).chain(companions(path)) {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let Ok(fd) = open(&p, flags, Mode::empty()) else {
            continue;
        };
        let st = fstat(&fd).map_err(|e| format!("cannot open {}: {e}", p.display()))?;
        if st.st_uid == me
            && FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            && st.st_mode & 0o077 != 0
        {
            fchmod(&fd, Mode::from_bits_truncate(0o600))
                .map_err(|e| format!("cannot make {} private (mode 0600): {e}", p.display()))?;
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn tighten(_path: &Path) -> Result<(), String> {
    Ok(())
}

/// The space kept beside the database for settling the locks when its disk fills
/// ([`SqliteStore::transaction`]): the commits of what was delivered then still land, and a
/// rerun finds those messages done instead of sending them again.
const RESERVE_BYTES: usize = 2 << 20;

/// The reserve file of the database at `path`: `FILE-reserve`.
fn reserve_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-reserve");
    PathBuf::from(name)
}

/// Writes the reserve when it is missing (best effort: on a disk already full it waits for
/// the next open).
fn keep_reserve(path: &Path) {
    use std::io::Write;
    let reserve = reserve_path(path);
    if std::fs::symlink_metadata(&reserve).is_ok() {
        return;
    }
    // Created exclusively (never through a link someone put there), owner-only.
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&reserve)
        .and_then(|mut f| f.write_all(&vec![0u8; RESERVE_BYTES]));
    if written.is_err() {
        let _ = std::fs::remove_file(&reserve);
    }
}

/// How long a process waits for another one's lock on the database.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Adds the columns a file made by an earlier version lacks.
fn add_columns(conn: &Connection) -> rusqlite::Result<()> {
    let mut have = Vec::new();
    let mut st = conn.prepare("SELECT name FROM pragma_table_info('sluice_locks')")?;
    for name in st.query_map([], |r| r.get::<_, String>(0))? {
        have.push(name?);
    }
    for (name, kind) in ADDED_COLUMNS {
        if !have.iter().any(|h| h == name) {
            conn.execute_batch(&format!(
                "ALTER TABLE sluice_locks ADD COLUMN {name} {kind}"
            ))?;
        }
    }
    Ok(())
}

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
                since_ms: row.get(4)?,
                progress: row
                    .get::<_, Option<String>>(5)?
                    .map(|p| Progress::from_entries(p.lines()))
                    .unwrap_or_default(),
            })
        })
        .optional()
}

fn write_record(
    upsert: &mut rusqlite::CachedStatement<'_>,
    key: &str,
    r: &LockRecord,
    note: Option<&str>,
) -> rusqlite::Result<()> {
    let (committed, lease) = match r.status {
        LockStatus::Committed => (1, 0),
        LockStatus::Pending { lease_until_ms } => (0, lease_until_ms),
    };
    let progress = (!r.progress.is_empty()).then(|| r.progress.entries().join("\n"));
    upsert.execute(params![
        key, r.owner, committed, lease, r.ttl, r.since_ms, note, progress
    ])?;
    Ok(())
}

impl SqliteStore {
    /// The change `to` makes of each request's progress (an abandonment or a record), on
    /// its key.
    async fn add_progress(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        to: fn(Progress) -> Change,
    ) -> Result<Vec<Settled>, StoreError> {
        let changes = requests
            .iter()
            .map(|r| (r.key.clone(), to(r.progress.clone()), None))
            .collect();
        self.change(owner, changes).await
    }
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
            .transaction(false, move |tx| {
                tx.execute(
                    "DELETE FROM sluice_locks WHERE committed = 1 AND ttl <= ?1",
                    params![now_s],
                )?;
                let mut select = tx.prepare_cached(SELECT)?;
                let mut upsert = tx.prepare_cached(UPSERT)?;
                reqs.iter()
                    .map(|r| {
                        let current = read_record(&mut select, &r.key)?;
                        match protocol::acquire(current.as_ref(), &owner, now_ms, r) {
                            Ok((record, taken)) => {
                                write_record(&mut upsert, &r.key, &record, None)?;
                                Ok(taken)
                            }
                            Err(holder) => Ok(Acquired::Held(Some(holder))),
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
        requests: &[CommitRequest],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        let changes = requests
            .iter()
            .map(|r| (r.key.clone(), Change::Commit { ttl: r.ttl }, r.note.clone()))
            .collect();
        self.change(owner, changes).await
    }

    async fn renew(
        &self,
        owner: &str,
        requests: &[RenewRequest],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        let changes = requests
            .iter()
            .map(|r| {
                let c = Change::Renew {
                    ttl: r.ttl,
                    lease_until_ms: r.lease_until_ms,
                };
                (r.key.clone(), c, None)
            })
            .collect();
        self.change(owner, changes).await
    }

    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        let changes = keys
            .iter()
            .map(|k| (k.clone(), Change::Release, None))
            .collect();
        self.change(owner, changes).await
    }

    async fn abandon(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.add_progress(owner, requests, |progress| Change::Abandon { progress })
            .await
    }

    async fn record(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        _concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.add_progress(owner, requests, |progress| Change::Record { progress })
            .await
    }
}

/// The `sqlite` kv store's descriptor: what registers it and lists it in the reference.
pub(crate) const INFO: crate::kv_store::stores::KvStoreInfo =
    crate::kv_store::stores::KvStoreInfo {
        info: sluice_engine::TypeInfo {
            name: "sqlite",
            aliases: &[],
            library: "sub.kv_store.sqlite",
            summary: "an SQLite database file: locks shared by the processes of one machine, kept across runs",
            reach: sluice_engine::Reach::Files,
            example: r#"{"file": "locks.sqlite"}"#,
        },
        items: None,
        read_only: false,
        locks: Some(|p, s| SqliteStore::shared(p, s).map(|s| s as Arc<dyn super::LockStore>)),
        file: None,
    };

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

    /// The database, its WAL files and its reserve are the owner's alone (0600), and a
    /// symbolic link at any of their paths is refused, never followed.
    #[cfg(unix)]
    #[test]
    fn files_are_private_and_symlinks_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks.sqlite");
        let conn = connect(&path).unwrap();
        conn.execute_batch("SELECT 1").unwrap();
        for name in [
            "locks.sqlite",
            "locks.sqlite-wal",
            "locks.sqlite-shm",
            "locks.sqlite-reserve",
        ] {
            let mode = std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}: {mode:o}");
        }
        drop(conn);
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        for suffix in ["", "-wal", "-reserve"] {
            let db = dir.path().join("l.sqlite");
            let at = if suffix.is_empty() {
                db.clone()
            } else {
                dir.path().join(format!("l.sqlite{suffix}"))
            };
            std::os::unix::fs::symlink(&victim, &at).unwrap();
            let e = connect(&db).expect_err("refused");
            assert!(e.contains("is a symbolic link"), "{suffix}: {e}");
            assert!(e.contains(&at.display().to_string()), "{e}");
            std::fs::remove_file(&at).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    /// A lock file from before (0644, as sluice made them) and its WAL file become 0600
    /// when opened; its locks stay.
    #[cfg(unix)]
    #[test]
    fn an_existing_file_readable_by_others_is_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        let conn = connect(&path).unwrap();
        conn.execute_batch("CREATE TABLE kept (x); INSERT INTO kept VALUES (1);")
            .unwrap();
        drop(conn);
        let wal = dir.path().join("old.sqlite-wal");
        std::fs::write(&wal, "").unwrap();
        for p in [&path, &wal] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let conn = connect(&path).unwrap();
        for p in [&path, &wal] {
            let mode = std::fs::metadata(p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{}: {mode:o}", p.display());
        }
        let kept: i64 = conn
            .query_row("SELECT x FROM kept", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, 1);
    }

    #[test]
    fn a_reserve_is_kept_beside_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks.sqlite");
        connect(&path).unwrap();
        let reserve = dir.path().join("locks.sqlite-reserve");
        assert_eq!(reserve_path(&path), reserve);
        assert_eq!(
            std::fs::metadata(&reserve).unwrap().len(),
            RESERVE_BYTES as u64
        );
        // Given up (a full disk), it is written again at the next open.
        std::fs::remove_file(&reserve).unwrap();
        connect(&path).unwrap();
        assert!(reserve.exists());
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
            skew_ms: 0,
            fresh_before_ms: None,
        };
        {
            let a = SqliteStore::open(path.clone()).unwrap();
            let r = a
                .acquire("a", 1_700_000_000_000, std::slice::from_ref(&req), 1)
                .await;
            assert_eq!(r[0].as_ref().unwrap(), &Acquired::FRESH);
            assert_eq!(
                a.commit("a", &[commit("k", 2_000_000_000)], 1)
                    .await
                    .unwrap(),
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
    async fn a_file_from_before_since_and_note_gets_them_and_keeps_its_locks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE sluice_locks (key TEXT PRIMARY KEY, owner TEXT NOT NULL, \
             committed INTEGER NOT NULL, lease_until_ms INTEGER NOT NULL, ttl INTEGER NOT NULL) \
             WITHOUT ROWID;
             INSERT INTO sluice_locks VALUES ('done', 'old', 1, 0, 2000000000);
             INSERT INTO sluice_locks VALUES ('crashed', 'old', 0, 5, 2000000000);",
        )
        .unwrap();
        drop(c);
        let store = SqliteStore::open(path).unwrap();
        let reqs: Vec<_> = ["done", "crashed"]
            .iter()
            .map(|k| AcquireRequest {
                key: k.to_string(),
                ttl: 2_000_000_000,
                lease_until_ms: 1_700_000_060_000,
                skew_ms: 0,
                fresh_before_ms: None,
            })
            .collect();
        let got = store.acquire("new", 1_700_000_000_000, &reqs, 1).await;
        assert!(matches!(&got[0], Ok(Acquired::Held(Some(r))) if r.owner == "old"));
        // The crashed lock had no `since`: an earlier attempt may date from any time.
        assert_eq!(
            got[1].as_ref().unwrap(),
            &Acquired::Taken {
                prior: Some(sluice_lock_protocol::Prior {
                    owner: "old".into(),
                    since_ms: 0,
                    progress: Default::default(),
                })
            }
        );
    }

    fn commit(key: &str, ttl: i64) -> CommitRequest {
        CommitRequest {
            key: key.into(),
            ttl,
            note: None,
        }
    }

    #[tokio::test]
    async fn committed_locks_past_their_ttl_are_deleted_pending_ones_never() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("l.sqlite")).unwrap();
        let reqs: Vec<_> = (0..12)
            .map(|i| AcquireRequest {
                key: format!("k{i}"),
                ttl: 100 + i,
                lease_until_ms: 0,
                skew_ms: 0,
                fresh_before_ms: None,
            })
            .collect();
        store.acquire("a", 0, &reqs, 1).await;
        // k0..k9 committed with TTLs 100..109; k10 and k11 stay pending.
        let commits: Vec<_> = (0..10).map(|i| commit(&format!("k{i}"), 100 + i)).collect();
        store.commit("a", &commits, 1).await.unwrap();
        store.acquire("a", 105_000, &[], 1).await;
        let left: i64 = store
            .conn
            .lock()
            .unwrap()
            .as_ref()
            .unwrap()
            .query_row("SELECT count(*) FROM sluice_locks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 6, "k6..k9 and the two pending ones");
    }

    #[tokio::test]
    async fn the_file_is_opened_at_first_use_and_errors_name_it() {
        let store = SqliteStore {
            path: PathBuf::from("/proc/no/such/locks.sqlite"),
            conn: Arc::new(Mutex::new(None)),
        };
        let e = store.release("a", &["k".into()], 1).await.unwrap_err();
        assert!(e.to_string().contains("/proc/no/such"), "{e}");
        let e = SqliteStore::open(PathBuf::from("/proc/no/such/locks.sqlite"))
            .err()
            .unwrap();
        assert!(e.contains("/proc/no/such"), "{e}");
    }
}
