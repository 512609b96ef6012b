//! The `hash_*` family: hex digests of the data or of a value.

pub mod md5;
pub mod sha256;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform("hash_md5", ctor!(md5::HashMd5));
    r.transform("hash_sha256", ctor!(sha256::HashSha256));
}
