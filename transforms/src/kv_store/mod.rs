//! kv stores: where `meta_kv_store_lock` keeps its locks ([`lock`]: the lock store
//! interface, the rules every lock store applies, and the stores that only hold locks),
//! and where the `enrich_kv_store_*` transforms read and write items ([`item`]: the item
//! interface, the stores that hold items and the read-only file stores).
//!
//! A kv store is configured like a transform, `{type, settings}`, with Substation's type
//! names. Each type is declared once, by its descriptor ([`stores::KvStoreInfo`]), which
//! says whether it holds items, locks or both; [`stores`] builds them and derives the
//! rest. `memory` and `aws_dynamodb` hold both (in separate records) and are listed here
//! ([`STORES`]); the stores that hold only locks are listed in [`lock`], those that hold
//! only items in [`item`].

#[cfg(feature = "aws")]
pub mod aws_dynamodb;
pub mod item;
pub mod lock;
pub mod memory;
pub mod stores;
#[cfg(test)]
pub(crate) mod test_support;

use std::path::PathBuf;
use std::sync::Arc;

use sluice_engine::{Build, ConfigError, Reach, TypeInfo, Value};

use stores::KvStoreInfo;

#[cfg(any(test, feature = "test-support"))]
pub use lock::contract;
pub use lock::{
    AbandonRequest, AcquireRequest, Acquired, CommitRequest, LockRecord, LockStatus, LockStore,
    LockTicket, Prior, Progress, RenewRequest, Settled, StoreError, sqlite,
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
        type_field: format!("{field}.type"),
        type_name,
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
    type_field: String,
    type_name: &'a str,
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

    /// The store's type name.
    pub fn type_name(&self) -> &str {
        self.type_name
    }

    /// An error about the store's `type`.
    pub fn type_error(&self, message: impl Into<String>) -> ConfigError {
        self.b.field_error(&self.type_field, message)
    }
}

impl KvPlace<'_, '_> {
    /// Resolves a store file against the build context's state directory (`sluice test`
    /// gives every test case its own, so tests never see each other's locks or a real
    /// run's).
    pub(crate) fn resolve_path(&self, file: &str) -> PathBuf {
        self.b.context().resolve(file)
    }

    /// The store instance registered under `id` in the build context, made by `make` the
    /// first time: every transform configured with the same store shares one instance.
    pub(crate) fn shared<T: Send + Sync + 'static>(
        &self,
        id: String,
        make: impl FnOnce() -> Result<T, ConfigError>,
    ) -> Result<Arc<T>, ConfigError> {
        self.b.context().shared(id, make)
    }
}

/// The stores that hold both items and locks, by their descriptors.
pub(crate) const STORES: &[&KvStoreInfo] = &[&AWS_DYNAMODB, &memory::INFO];

/// The `aws_dynamodb` store's descriptor: here rather than in its module, which only a
/// build with the `aws` feature compiles (a build without it still knows the name, and
/// says it lacks it).
pub(crate) const AWS_DYNAMODB: KvStoreInfo = KvStoreInfo {
    info: TypeInfo {
        name: "aws_dynamodb",
        aliases: &[],
        library: "sub.kv_store.aws.dynamodb",
        summary: "a DynamoDB table: locks shared by every process using it, one item per key",
        reach: Reach::Aws,
        example: r#"{"aws": {"arn": "arn:aws:dynamodb:us-east-1:123456789012:table/items"}, "attributes": {"partition_key": "pk", "value": "value"}}"#,
    },
    #[cfg(feature = "aws")]
    items: Some(aws_dynamodb::items),
    #[cfg(not(feature = "aws"))]
    items: Some(stores::lacking_aws),
    read_only: false,
    #[cfg(feature = "aws")]
    locks: Some(|p, s| aws_dynamodb::DynamoDbStore::shared(p, s).map(|s| s as Arc<dyn LockStore>)),
    #[cfg(not(feature = "aws"))]
    locks: Some(stores::lacking_aws),
    file: None,
};

/// Substation's truncation of an event time to epoch seconds: a value longer than ten
/// digits is ms, µs or ns and loses its extra digits.
pub(crate) fn truncate_to_seconds(t: i64) -> i64 {
    let mut t = t;
    while t >= 10_000_000_000 {
        t /= 10;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_times_are_truncated_to_seconds() {
        assert_eq!(truncate_to_seconds(1_700_000_000), 1_700_000_000);
        assert_eq!(truncate_to_seconds(1_700_000_000_123), 1_700_000_000);
        assert_eq!(truncate_to_seconds(1_700_000_000_123_456), 1_700_000_000);
        assert_eq!(
            truncate_to_seconds(1_700_000_000_123_456_789),
            1_700_000_000
        );
    }
}
