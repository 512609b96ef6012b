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

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.stateful("utility_control", control::UtilityControl::build);
    r.stateless("utility_delay", delay::UtilityDelay::build);
    r.stateless("utility_drop", drop::UtilityDrop::build);
    r.stateless("utility_err", err::UtilityErr::build);
    r.stateful(
        "utility_metric_bytes",
        metric_bytes::UtilityMetricBytes::build,
    );
    r.stateful(
        "utility_metric_count",
        metric_count::UtilityMetricCount::build,
    );
    r.stateful(
        "utility_metric_freshness",
        metric_freshness::UtilityMetricFreshness::build,
    );
    r.stateless("utility_secret", secret::UtilitySecret::build);
}
