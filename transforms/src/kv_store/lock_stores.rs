//! Builds the lock store a `meta_kv_store_lock` names: the one place that knows every store
//! that can hold locks, so that the stores and the `LockStore` trait they implement need not
//! know each other.

use std::sync::Arc;

use sluice_engine::{Build, ConfigError, Value};

#[cfg(feature = "aws")]
use super::aws_dynamodb;
use super::lock::{self, LockStore};
use super::{kv_config, memory, unknown_type};

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
        "sqlite" => lock::sqlite::SqliteStore::shared(&place, settings).map(|s| s as Arc<dyn LockStore>),
        #[cfg(feature = "aws")]
        "aws_dynamodb" => {
            aws_dynamodb::DynamoDbStore::shared(&place, settings).map(|s| s as Arc<dyn LockStore>)
        }
        #[cfg(test)]
        "test_faulty_sqlite" => lock::test_faulty::FaultySqliteStore::build(&place, settings)
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
