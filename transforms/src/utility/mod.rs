//! The `utility` family: dropping, failing, delaying, and cutting a stream into batches
//! with ctrl messages.

pub mod control;
pub mod delay;
pub mod drop;
pub mod err;
pub mod secret;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform("utility_control", ctor!(control::UtilityControl));
    r.transform("utility_delay", ctor!(delay::UtilityDelay));
    r.transform("utility_drop", ctor!(drop::UtilityDrop));
    r.transform("utility_err", ctor!(err::UtilityErr));
    r.transform("utility_secret", ctor!(secret::UtilitySecret));
}
