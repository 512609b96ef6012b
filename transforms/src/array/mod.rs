//! The `array_*` family: join and zip arrays.

pub mod join;
pub mod zip;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform("array_join", ctor!(join::ArrayJoin));
    r.transform("array_zip", ctor!(zip::ArrayZip));
}
