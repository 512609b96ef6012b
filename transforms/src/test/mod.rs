//! The `test` family: transforms that seed config tests.

pub mod message;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform("test_message", ctor!(message::TestMessage));
}
