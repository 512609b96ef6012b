//! Item stores: what the `enrich_kv_store_*` transforms read and write. An item is a JSON
//! value under a string key, optionally with a TTL; a *set* item holds distinct strings
//! that `set_add` adds to.
//!
//! The stores of this family ([`STORES`]) hold items only, read from a file; `memory` and
//! `aws_dynamodb` hold items and locks ([`super::STORES`]). Each store says what it is in
//! its descriptor; the reference is `docs/reference/kv_stores.md`.
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

use super::stores::KvStoreInfo;
pub use super::stores::item_store;
pub use store::{ItemError, ItemStore, set_members};

/// The item stores of this family, by their descriptors.
pub(crate) const STORES: &[&KvStoreInfo] = &[
    &csv_file::INFO,
    &json_file::INFO,
    &mmdb::INFO,
    &text_file::INFO,
];
