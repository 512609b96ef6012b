//! The `aggregate` family: fan-out of arrays and strings into messages, and batching of
//! messages into arrays and strings.

pub(crate) mod buffer;
pub(crate) mod from_array;
pub(crate) mod from_string;
pub(crate) mod to_array;
pub(crate) mod to_string;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.stateless(&from_array::INFO, from_array::AggregateFromArray::build);
    r.stateless(&from_string::INFO, from_string::AggregateFromString::build);
    r.stateful(&to_array::INFO, to_array::AggregateToArray::build);
    r.stateful(&to_string::INFO, to_string::AggregateToString::build);
}
