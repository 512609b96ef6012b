//! The `test` family: transforms that seed config tests.

pub(crate) mod message;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.stateful(&message::INFO, message::TestMessage::build);
}
