//! The `utility` family: dropping, failing, delaying, cutting a stream into batches with
//! ctrl messages, loading secrets, and counting what passes as metrics.

pub(crate) mod control;
pub(crate) mod delay;
pub(crate) mod drop;
pub(crate) mod err;
pub(crate) mod metric_bytes;
pub(crate) mod metric_count;
pub(crate) mod metric_freshness;
pub(crate) mod secret;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
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
