//! The `aggregate` family: fan-out of arrays and strings into messages, and batching of
//! messages into arrays and strings.

pub mod buffer;
pub mod from_array;
pub mod from_string;
pub mod to_array;
pub mod to_string;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform(
        "aggregate_from_array",
        ctor!(from_array::AggregateFromArray),
    );
    r.transform(
        "aggregate_from_string",
        ctor!(from_string::AggregateFromString),
    );
    r.transform("aggregate_to_array", ctor!(to_array::AggregateToArray));
    r.transform("aggregate_to_string", ctor!(to_string::AggregateToString));
}
