//! Item stores: what the `enrich_kv_store_*` transforms read and write. An item is a JSON
//! value under a string key, optionally with a TTL; a *set* item holds distinct strings
//! that `set_add` adds to.
//!
//! Stores, by Substation's type names (`reference/substation.md` §2.4):
//!
//! | type | what it is | writes |
//! |---|---|---|
//! | `memory` | an LRU map in the process (`capacity` items, default 1024) | yes |
//! | `aws_dynamodb` | a DynamoDB table, one item per key | yes |
//! | `csv_file` | a CSV file, one row per key (`column`) | read-only |
//! | `json_file` | a JSON document; the key is a path into it | read-only |
//! | `text_file` | a list of lines; the value is whether the key is one of them | read-only |
//! | `mmdb` | a MaxMind database; the key is an IP address | read-only |
//!
//! Files are local paths (relative to the working directory) or `http(s)://` and `s3://`
//! URLs ([`crate::fetch`]), read on first use (never while a config is built).
//!
//! Instances are shared per configuration within a scope ([`super::new_scope`]), as
//! Substation shares them per process: two transforms configured with the same store see
//! the same items. Unlike Substation, a `memory` or `aws_dynamodb` store used for items and
//! for `meta_kv_store_lock` with the same settings is one instance too (its locks are
//! kept apart from its items).

use std::sync::Arc;

use sluice_engine::{Build, ConfigError, Value, async_trait};

/// An item store's failure.
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    /// The store cannot be written.
    #[error("{store}: {operation} is not supported: the store is read-only")]
    ReadOnly {
        /// The store, as [`ItemStore::describe`] gives it.
        store: String,
        /// `set` or `set_add`.
        operation: &'static str,
    },
    /// The key cannot be looked up in this store (e.g. not an IP address for `mmdb`).
    #[error("{store}: bad key {key:?}: {why}")]
    BadKey {
        /// The store.
        store: String,
        /// The key as given.
        key: String,
        /// Why.
        why: String,
    },
    /// The store's file could not be read or parsed.
    #[error("{store}: {why}")]
    Load {
        /// The store.
        store: String,
        /// What went wrong, naming the file.
        why: String,
    },
    /// The store (a service) failed, after its own retries.
    #[error("{0}")]
    Failed(String),
}

/// Where `enrich_kv_store_*` items are kept. Keys arrive with their prefix.
#[async_trait]
pub trait ItemStore: Send + Sync + 'static {
    /// A short description for errors, e.g. `csv_file users.csv`.
    fn describe(&self) -> String;

    /// The value under `key`, `None` when there is none (or its TTL has passed).
    async fn get(&self, key: &str) -> Result<Option<Value>, ItemError>;

    /// Stores `value` under `key`, replacing what was there; `ttl` (epoch seconds) is when
    /// it stops being returned, `None` for never. A read-only store (the file stores) keeps
    /// this default, which refuses.
    async fn set(&self, key: &str, value: Value, ttl: Option<i64>) -> Result<(), ItemError> {
        let _ = (key, value, ttl);
        Err(ItemError::ReadOnly {
            store: self.describe(),
            operation: "set",
        })
    }

    /// Adds `values` to the set of strings under `key` (creating it), and sets its TTL
    /// when `ttl` is given (a set without one keeps the TTL it had). Refused by default,
    /// like [`ItemStore::set`].
    async fn set_add(
        &self,
        key: &str,
        values: Vec<String>,
        ttl: Option<i64>,
    ) -> Result<(), ItemError> {
        let _ = (key, values, ttl);
        Err(ItemError::ReadOnly {
            store: self.describe(),
            operation: "set_add",
        })
    }

    /// Lets go of what the store holds that it can get again (a file store forgets its
    /// file and reads it anew on next use); `close_kv_store` calls it at every ctrl.
    async fn close(&self) {}
}

/// The strings `set_add` adds for `v`: each element's text for an array (a string as
/// itself, anything else as its JSON), the value's text otherwise.
pub fn set_members(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a
            .iter()
            .map(|e| sluice_engine::value::to_text(e).into_owned())
            .collect(),
        other => vec![sluice_engine::value::to_text(other).into_owned()],
    }
}

/// Builds the item store configured in `field` (a `{type, settings}` object).
pub fn item_store(
    b: &Build<'_>,
    field: &str,
    cfg: &Value,
) -> Result<Arc<dyn ItemStore>, ConfigError> {
    let (type_name, settings, place) = super::kv_config(b, field, cfg)?;
    let settings = &settings;
    Ok(match type_name {
        "memory" => super::memory::MemoryStore::shared(&place, settings)? as Arc<dyn ItemStore>,
        "aws_dynamodb" => {
            let st = super::aws_dynamodb::DynamoDbStore::shared(&place, settings)?;
            if st.table.attributes.value.is_none() {
                return Err(place.error(
                    "attributes.value",
                    "missing required option: the attribute that holds an item's value",
                ));
            }
            st
        }
        "csv_file" => super::csv_file::CsvFile::shared(&place, settings)?,
        "json_file" => super::json_file::JsonFile::shared(&place, settings)?,
        "text_file" => super::text_file::TextFile::shared(&place, settings)?,
        "mmdb" => super::mmdb::Mmdb::shared(&place, settings)?,
        "sqlite" => {
            return Err(b.field_error(
                &format!("{field}.type"),
                "the sqlite kv store holds locks only; use memory or aws_dynamodb for items",
            ));
        }
        other => {
            let known = [
                "aws_dynamodb",
                "memory",
                "csv_file",
                "json_file",
                "text_file",
                "mmdb",
            ];
            return Err(super::unknown_type(b, field, "kv store", other, &known));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::json;

    #[test]
    fn set_members_are_texts() {
        assert_eq!(set_members(&json!("a")), vec!["a"]);
        assert_eq!(set_members(&json!(1.5)), vec!["1.5"]);
        assert_eq!(set_members(&json!(["a", 2, true])), vec!["a", "2", "true"]);
        assert_eq!(set_members(&json!({"k": 1})), vec![r#"{"k":1}"#]);
        assert!(set_members(&json!([])).is_empty());
    }
}
