//! The `hash_*` family: hex digests of the data or of a value.

pub(crate) mod md5;
pub(crate) mod sha256;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.map(&md5::INFO, md5::HashMd5::build);
    r.map(&sha256::INFO, sha256::HashSha256::build);
}
