//! The `array_*` family: join and zip arrays.

pub mod join;
pub mod zip;

use sluice_engine::Registry;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.map("array_join", join::ArrayJoin::build);
    r.map("array_zip", zip::ArrayZip::build);
}
