//! The `meta` family.

use sluice_engine::Registry;

/// Registers the family.
pub fn register(_r: &mut Registry) {}
