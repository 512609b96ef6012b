//! The `test` family: transforms that seed config tests.

pub mod message;

use sluice_engine::Registry;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.stateful("test_message", message::TestMessage::build);
}
