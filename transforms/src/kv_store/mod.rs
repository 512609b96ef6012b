//! kv stores: where `meta_kv_store_lock` keeps its locks, and where the
//! `enrich_kv_store_*` transforms read and write items ([`item`]: the item interface,
//! the stores that hold items and the read-only file stores).
//!
//! A kv store is configured like a transform, `{type, settings}`, with Substation's type
//! names. Three can hold locks: `aws_dynamodb` (shared between processes and machines),
//! `memory` (one process) and `sqlite` (an embedded database file: shared between the
//! processes of one machine and kept across runs, with no server).
//!
//! # The lock record
//!
//! Every lock store keeps, per key: the `owner` that took it (unique per lock instance and
//! process), its `status` (pending until the messages it guards were delivered, then
//! committed), `lease_until` (pending locks only: after it, the lock may be taken over, so
//! a crashed owner's messages are not lost until the TTL) and `ttl` (epoch seconds: after
//! it, the lock no longer blocks anything, whatever the store's own expiry does).
//!
//! Acquisition is a conditional write that succeeds when the key is absent, its `ttl` has
//! passed, or it is pending with an expired lease. Commit and release are conditional on
//! the owner, so a process never commits or deletes a lock another process took over.
//! Times are passed in by the caller (`now_ms`), which keeps every store's conditions
//! testable without waiting.

pub mod aws_dynamodb;
pub mod aws_dynamodb_item;
pub mod co_commit;
pub mod contract;
pub mod csv_file;
pub mod file;
pub mod item;
pub mod json_file;
pub mod memory;
pub mod mmdb;
pub mod sqlite;
#[cfg(test)]
pub(crate) mod test_slow_sqlite;
#[cfg(test)]
pub(crate) mod test_support;
pub mod text_file;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sluice_engine::{Build, ConfigError, Value, async_trait};

/// Whether a lock is waiting for its messages' delivery or done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockStatus {
    /// Taken; the guarded messages are on their way. Carries the lease end (epoch ms).
    Pending {
        /// After this (epoch milliseconds) another owner may take the key over.
        lease_until_ms: i64,
    },
    /// The guarded messages were delivered.
    Committed,
}

/// A lock as a store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRecord {
    /// Who took it.
    pub owner: String,
    /// Pending or committed.
    pub status: LockStatus,
    /// Epoch seconds after which the lock no longer blocks anything.
    pub ttl: i64,
}

impl LockRecord {
    /// Whether the record still blocks an acquisition at `now_ms`.
    pub fn blocks(&self, now_ms: i64) -> bool {
        if self.ttl.saturating_mul(1000) <= now_ms {
            return false;
        }
        match self.status {
            LockStatus::Committed => true,
            LockStatus::Pending { lease_until_ms } => lease_until_ms >= now_ms,
        }
    }
}

/// One key to acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireRequest {
    /// The lock key (prefix included).
    pub key: String,
    /// Epoch seconds stored as the lock's TTL.
    pub ttl: i64,
    /// Epoch milliseconds stored as the lease end.
    pub lease_until_ms: i64,
}

/// What an acquisition found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// The key is ours now (pending).
    Taken,
    /// Someone holds it (possibly us, from an earlier message); the record as the store
    /// returned it (`None` when the store could not say, e.g. it vanished meanwhile).
    Held(Option<LockRecord>),
}

/// The outcome of committing or releasing one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Done.
    Ok,
    /// The key is not ours (any more): another owner took it over after our lease expired,
    /// or it is gone. Nothing was changed.
    NotOwner(Option<LockRecord>),
}

/// A lock store's failure, after its own retries.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// Where locks are kept.
#[async_trait]
pub trait LockStore: Send + Sync + 'static {
    /// A short description for logs and errors, e.g. `aws_dynamodb table locks`.
    fn describe(&self) -> String;

    /// Tries to take each key for `owner`, with at most `concurrency` store calls in flight.
    /// One result per request, in order. Keys in one call are distinct.
    async fn acquire(
        &self,
        owner: &str,
        now_ms: i64,
        requests: &[AcquireRequest],
        concurrency: usize,
    ) -> Vec<Result<Acquired, StoreError>>;

    /// Marks `owner`'s pending locks on `keys` committed, with at most `concurrency` store
    /// calls in flight. One result per key, in order. An `Err` means the store failed for
    /// the call as a whole (after retries).
    async fn commit(
        &self,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError>;

    /// Deletes `owner`'s pending locks on `keys`, like [`LockStore::commit`].
    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError>;

    /// The DynamoDB table behind this store, when it is one: a DynamoDB send can then
    /// commit a lock in the same transaction as its items ([`co_commit`]).
    fn dynamodb(&self) -> Option<&aws_dynamodb::DynamoDbStore> {
        None
    }
}

/// Builds the lock store configured in `field` (a `{type, settings}` object).
pub fn lock_store(
    b: &Build<'_>,
    field: &str,
    cfg: &Value,
) -> Result<Arc<dyn LockStore>, ConfigError> {
    let (type_name, settings, place) = kv_config(b, field, cfg)?;
    let settings = &settings;
    match type_name {
        "memory" => memory::MemoryStore::shared(&place, settings).map(|s| s as Arc<dyn LockStore>),
        "sqlite" => sqlite::SqliteStore::shared(&place, settings).map(|s| s as Arc<dyn LockStore>),
        "aws_dynamodb" => {
            aws_dynamodb::DynamoDbStore::shared(&place, settings).map(|s| s as Arc<dyn LockStore>)
        }
        #[cfg(test)]
        "test_slow_sqlite" => test_slow_sqlite::SlowSqliteStore::build(&place, settings)
            .map(|s| Arc::new(s) as Arc<dyn LockStore>),
        "csv_file" | "json_file" | "text_file" | "mmdb" => Err(b.field_error(
            &format!("{field}.type"),
            format!(
                "the {type_name} kv store is read-only and cannot hold locks; use aws_dynamodb, sqlite or memory"
            ),
        )),
        other => Err(unknown_type(
            b,
            field,
            "lock kv store",
            other,
            &["aws_dynamodb", "sqlite", "memory"],
        )),
    }
}

/// A kv store config `{type, settings}` in `field` taken apart: its type name, its settings
/// (an empty object when absent) and the place its settings' errors name.
pub(crate) fn kv_config<'a, 'b>(
    b: &'a Build<'b>,
    field: &str,
    cfg: &'a Value,
) -> Result<(&'a str, Value, KvPlace<'a, 'b>), ConfigError> {
    let obj = cfg.as_object().ok_or_else(|| {
        b.field_error(
            field,
            "missing required option: a kv store {\"type\": ..., \"settings\": {...}}",
        )
    })?;
    let type_name = match obj.get("type") {
        Some(Value::String(s)) => s.as_str(),
        _ => return Err(b.field_error(&format!("{field}.type"), "a kv store needs a \"type\"")),
    };
    let settings = match obj.get("settings") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(s @ Value::Object(_)) => s.clone(),
        Some(_) => {
            return Err(b.field_error(&format!("{field}.settings"), "must be an object"));
        }
    };
    let place = KvPlace {
        b,
        field: format!("{field}.settings"),
    };
    Ok((type_name, settings, place))
}

/// The error for a kv store type that is not one of `known` (what `kind` may be), with
/// the nearest name.
pub(crate) fn unknown_type(
    b: &Build<'_>,
    field: &str,
    kind: &str,
    other: &str,
    known: &[&str],
) -> ConfigError {
    let near = sluice_engine::registry::nearest(other, known.iter().copied());
    let hint = match near.first() {
        Some(n) => format!(" (did you mean {n:?}?)"),
        None => String::new(),
    };
    b.field_error(
        &format!("{field}.type"),
        format!(
            "unknown {kind} type {other:?}{hint}; {kind}s: {}",
            known.join(", ")
        ),
    )
}

/// Where a kv store's settings are, for its errors and warnings.
pub struct KvPlace<'a, 'b> {
    b: &'a Build<'b>,
    field: String,
}

impl KvPlace<'_, '_> {
    /// Decodes a store's settings; unknown keys warn, bad ones name the field.
    pub fn settings<T: serde::de::DeserializeOwned>(&self, v: &Value) -> Result<T, ConfigError> {
        use sluice_engine::registry::ConfigJson;
        match sluice_engine::settings::decode::<T>(&v.to_config()) {
            Ok((s, unknown)) => {
                for k in unknown {
                    self.b.warn(format!(
                        "unknown kv store setting {}.{k} is ignored",
                        self.field
                    ));
                }
                Ok(s)
            }
            Err((f, msg)) => Err(self.error(&f, msg)),
        }
    }

    /// An error about `sub` (a dotted path below the store's settings; empty for the whole).
    pub fn error(&self, sub: &str, message: impl Into<String>) -> ConfigError {
        let field = if sub.is_empty() {
            self.field.clone()
        } else {
            format!("{}.{sub}", self.field)
        };
        self.b.field_error(&field, message)
    }
}

/// Process-wide state of kv stores: the directory relative store files resolve against
/// and the store instances, shared by configuration so that every transform configured
/// with the same store uses the same one (Substation keeps lockers and stores apart).
#[derive(Default)]
struct Scope {
    state_dir: Option<PathBuf>,
    shared: HashMap<String, Arc<dyn std::any::Any + Send + Sync>>,
}

fn scope() -> &'static Mutex<Scope> {
    static S: OnceLock<Mutex<Scope>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// Starts a new scope: forgets the shared store instances and resolves relative store
/// files against `state_dir` (the current directory when `None`). `sluice test` gives
/// every test case a fresh scope in a temporary directory, so tests never see each
/// other's locks or a real run's.
pub fn new_scope(state_dir: Option<PathBuf>) {
    let mut s = scope().lock().unwrap_or_else(|p| p.into_inner());
    s.state_dir = state_dir;
    s.shared.clear();
}

/// Resolves a store file against the scope's state directory.
pub(crate) fn resolve_path(file: &str) -> PathBuf {
    let p = Path::new(file);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let s = scope().lock().unwrap_or_else(|p| p.into_inner());
    match &s.state_dir {
        Some(d) => d.join(p),
        None => p.to_path_buf(),
    }
}

/// The store instance registered under `id` in this scope, made by `make` the first time.
pub(crate) fn shared<T: Send + Sync + 'static>(
    id: String,
    make: impl FnOnce() -> Result<T, ConfigError>,
) -> Result<Arc<T>, ConfigError> {
    let mut s = scope().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(existing) = s.shared.get(&id)
        && let Ok(t) = existing.clone().downcast::<T>()
    {
        return Ok(t);
    }
    let t = Arc::new(make()?);
    s.shared.insert(id, t.clone());
    Ok(t)
}
