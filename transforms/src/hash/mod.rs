//! The `hash_*` family: hex digests of the data or of a value.

pub(crate) mod md5;
pub(crate) mod sha256;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.map("hash_md5", md5::HashMd5::build);
    r.map("hash_sha256", sha256::HashSha256::build);
}
