//! kv stores: where `meta_kv_store_lock` keeps its locks ([`lock`]: the lock store
//! interface, the rules every lock store applies, and the stores that only hold locks),
//! and where the `enrich_kv_store_*` transforms read and write items ([`item`]: the item
//! interface, the stores that hold items and the read-only file stores).
//!
//! A kv store is configured like a transform, `{type, settings}`, with Substation's type
//! names. `memory` and `aws_dynamodb` hold both locks and items (in separate records);
//! `sqlite` holds locks only; the file stores are read-only item stores.

pub mod aws_dynamodb;
pub mod aws_dynamodb_item;
pub mod csv_file;
pub mod file;
pub mod item;
pub mod json_file;
pub mod lock;
pub mod memory;
pub mod mmdb;
#[cfg(test)]
pub(crate) mod test_support;
pub mod text_file;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sluice_engine::{Build, ConfigError, Value};

pub use lock::{
    AcquireRequest, Acquired, CommitRequest, LockRecord, LockStatus, LockStore, LockTicket, Prior,
    RenewRequest, Settled, StoreError, contract, lock_store, sqlite,
};

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
