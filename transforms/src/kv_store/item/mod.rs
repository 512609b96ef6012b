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
//! URLs ([`sluice_platform::fetch`]), read on first use (never while a config is built).
//!
//! Instances are shared per configuration within a build context
//! ([`sluice_engine::Context::shared`]), as
//! Substation shares them per process: two transforms configured with the same store see
//! the same items. Unlike Substation, a `memory` or `aws_dynamodb` store used for items and
//! for `meta_kv_store_lock` with the same settings is one instance too (its locks are
//! kept apart from its items).

pub mod csv_file;
pub mod file;
pub mod json_file;
pub mod mmdb;
pub mod store;
pub mod text_file;

use std::sync::Arc;

use sluice_engine::{Build, ConfigError, Value};

#[cfg(feature = "aws")]
use super::aws_dynamodb::DynamoDbStore;
use super::memory::MemoryStore;
use super::{kv_config, unknown_type};
use csv_file::CsvFile;
use json_file::JsonFile;
use mmdb::Mmdb;
pub use store::{ItemError, ItemStore, set_members};
use text_file::TextFile;

/// Builds the item store configured in `field` (a `{type, settings}` object).
pub fn item_store(
    b: &Build<'_>,
    field: &str,
    cfg: &Value,
) -> Result<Arc<dyn ItemStore>, ConfigError> {
    let (type_name, settings, place) = kv_config(b, field, cfg)?;
    let settings = &settings;
    Ok(match type_name {
        "memory" => MemoryStore::shared(&place, settings)? as Arc<dyn ItemStore>,
        #[cfg(feature = "aws")]
        "aws_dynamodb" => {
            let st = DynamoDbStore::shared(&place, settings)?;
            if st.table.attributes.value.is_none() {
                return Err(place.error(
                    "attributes.value",
                    "missing required option: the attribute that holds an item's value",
                ));
            }
            st
        }
        "csv_file" => CsvFile::shared(&place, settings)?,
        "json_file" => JsonFile::shared(&place, settings)?,
        "text_file" => TextFile::shared(&place, settings)?,
        "mmdb" => Mmdb::shared(&place, settings)?,
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
            return Err(unknown_type(b, field, "kv store", other, &known));
        }
    })
}
