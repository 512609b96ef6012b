//! The `utility` family: dropping, failing, delaying, cutting a stream into batches with
//! ctrl messages, loading secrets, and counting what passes as metrics.

pub mod control;
pub mod delay;
pub mod drop;
pub mod err;
pub mod metric_bytes;
pub mod metric_count;
pub mod metric_freshness;
pub mod secret;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform("utility_control", ctor!(control::UtilityControl));
    r.transform("utility_delay", ctor!(delay::UtilityDelay));
    r.transform("utility_drop", ctor!(drop::UtilityDrop));
    r.transform("utility_err", ctor!(err::UtilityErr));
    r.transform(
        "utility_metric_bytes",
        ctor!(metric_bytes::UtilityMetricBytes),
    );
    r.transform(
        "utility_metric_count",
        ctor!(metric_count::UtilityMetricCount),
    );
    r.transform(
        "utility_metric_freshness",
        ctor!(metric_freshness::UtilityMetricFreshness),
    );
    r.transform("utility_secret", ctor!(secret::UtilitySecret));
}
