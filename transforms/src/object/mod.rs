//! The `object_*` family: copy, delete, insert and convert values by key.

pub mod copy;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform("object_copy", ctor!(copy::ObjectCopy));
}
