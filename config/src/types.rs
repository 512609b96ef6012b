//! The secret provider types the embedded library can emit.
//!
//! The test `library_emits_exactly_these_types` walks the library and checks this list,
//! so it cannot drift. The transform, condition and kv store types are not listed here:
//! each is declared once, in its descriptor in `sluice-transforms`, and
//! `tests/library_registry.rs` checks the library against the registered descriptors.

/// The secret provider types (`sub.secrets.*`), sorted.
pub const LIBRARY_SECRET_TYPES: &[&str] = &["aws_secrets_manager", "environment_variable"];
