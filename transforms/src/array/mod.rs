//! The `array_*` family: join and zip arrays.

pub(crate) mod join;
pub(crate) mod zip;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.map(&join::INFO, join::ArrayJoin::build);
    r.map(&zip::INFO, zip::ArrayZip::build);
}
