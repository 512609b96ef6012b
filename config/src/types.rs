//! The kv store and secret provider types the embedded library can emit.
//!
//! The test `library_emits_exactly_these_types` walks the library and checks these lists,
//! so they cannot drift. The transform and condition types are not listed here: each is
//! declared once, in its descriptor in `sluice-transforms`, and
//! `tests/library_registry.rs` checks the library against the registered descriptors.

/// The kv store types (`sub.kv_store.*`), sorted.
pub const LIBRARY_KV_STORE_TYPES: &[&str] = &[
    "aws_dynamodb",
    "csv_file",
    "json_file",
    "memory",
    "mmdb",
    "sqlite",
    "text_file",
];

/// The secret provider types (`sub.secrets.*`), sorted.
pub const LIBRARY_SECRET_TYPES: &[&str] = &["aws_secrets_manager", "environment_variable"];
