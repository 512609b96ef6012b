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
    r.stateful(&control::INFO, control::UtilityControl::build);
    r.stateless(&delay::INFO, delay::UtilityDelay::build);
    r.stateless(&drop::INFO, drop::UtilityDrop::build);
    r.stateless(&err::INFO, err::UtilityErr::build);
    r.stateful(&metric_bytes::INFO, metric_bytes::UtilityMetricBytes::build);
    r.stateful(&metric_count::INFO, metric_count::UtilityMetricCount::build);
    r.stateful(
        &metric_freshness::INFO,
        metric_freshness::UtilityMetricFreshness::build,
    );
    r.stateless(&secret::INFO, secret::UtilitySecret::build);
}
