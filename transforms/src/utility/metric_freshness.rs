//! `utility_metric_freshness`: measures how fresh data is. Each data message's
//! `object.source_key` holds a time in epoch nanoseconds; a message younger than
//! `threshold` counts as a success, an older one as a failure. On each ctrl message both
//! counts are written as the metric, twice: with the dimension `FreshnessType` = `Success`
//! and = `Failure` (after the configured attributes), and start again from zero.
//!
//! Substation compatibility: the same settings (`threshold`, `object.source_key`,
//! `metric`) and behaviour: a missing, null or zero time is not counted, a time in the
//! future counts as fresh, messages pass unchanged. Differences: Substation panics (a nil
//! map) when `metric.attributes` is not set, and writes the dimension into the shared
//! attributes map without a lock; here the attributes may be absent and the two counts are
//! taken and reset together under one lock, so a message is never lost or counted twice.
//! A value that is not a number of epoch nanoseconds (text, an array) is an error naming
//! what was found (Substation reads it as 0 and skips it silently). Counts are 64 bits and
//! carry `Unit: Count`. See `crate::metrics` for the `metric` settings.

use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use sluice_engine::settings::{GoDuration, ObjectSettings};
use sluice_engine::{
    Build, ConfigError, Key, Message, StatefulTransform, TransformError, Value, async_trait,
};

use crate::metrics::{Metric, MetricSettings};
use sluice_platform::emf::Unit;

/// The dimension this transform adds.
pub(crate) const DIMENSION: &str = "FreshnessType";

/// Settings of `utility_metric_freshness`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// Messages younger than this are fresh (required; a Go duration).
    pub threshold: Option<GoDuration>,
    /// `source_key`: where the time (epoch nanoseconds) is (required).
    pub object: ObjectSettings,
    /// The metric: `name`, `attributes`, `destination`.
    pub metric: MetricSettings,
}

#[derive(Debug, Default)]
struct Counts {
    success: u64,
    failure: u64,
}

/// The `utility_metric_freshness` transform.
pub(crate) struct UtilityMetricFreshness {
    threshold: Duration,
    source: Key,
    metric: Metric,
    counts: Mutex<Counts>,
}

impl UtilityMetricFreshness {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let threshold = s.threshold.map(|d| d.0).ok_or_else(|| {
            b.field_error(
                "threshold",
                "missing required option: how young a message must be to count as fresh, e.g. \"5m\"",
            )
        })?;
        let source = b
            .opt_key("object.source_key", &s.object.source_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.source_key",
                    "missing required option: where the time (epoch nanoseconds) is",
                )
            })?;
        Ok(UtilityMetricFreshness {
            threshold,
            source,
            metric: Metric::build(b, s.metric, &[DIMENSION])?,
            counts: Mutex::new(Counts::default()),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn emit(&self, c: &Counts) -> Result<(), TransformError> {
        self.metric
            .emit(c.success, Some(Unit::Count), Some((DIMENSION, "Success")))?;
        self.metric
            .emit(c.failure, Some(Unit::Count), Some((DIMENSION, "Failure")))
    }

    /// Whether `msg` is fresh; `None` when it has no time to judge by.
    fn judge(&self, msg: &Message, now_ns: i128) -> Result<Option<bool>, TransformError> {
        let Some(v) = msg.get(&self.source) else {
            return Ok(None);
        };
        if matches!(&*v, Value::Null) {
            return Ok(None);
        }
        let ns = crate::time::epoch_nanos(&v, 0, "nanoseconds")?;
        if ns == 0 {
            return Ok(None);
        }
        let age = now_ns - i128::from(ns);
        Ok(Some(age < self.threshold.as_nanos() as i128))
    }
}

fn now_ns() -> i128 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

#[async_trait]
impl StatefulTransform for UtilityMetricFreshness {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            let taken = std::mem::take(&mut *self.counts());
            if let Err(e) = self.emit(&taken) {
                // Put the counts back so that the next ctrl reports them.
                let mut c = self.counts();
                c.success += taken.success;
                c.failure += taken.failure;
                return Err(e);
            }
        } else if let Some(fresh) = self.judge(&msg, now_ns())? {
            let mut c = self.counts();
            if fresh {
                c.success += 1;
            } else {
                c.failure += 1;
            }
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `utility_metric_freshness` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "utility_metric_freshness",
    aliases: &[],
    library: "sub.tf.util.metric.freshness",
    summary: "counts fresh and stale messages by a timestamp; writes both on ctrl",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"threshold": "1m", "object": {"source_key": "ts"}, "metric": {"name": "F", "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": "compliance"}}}}"#,
};

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::metrics::aws_cloudwatch_embedded_metrics::test_capture;
    use crate::metrics::test_support::lines;
    use crate::registry;
    use sluice_engine::{Message, Value, json, testing};

    const TYPE: &str = "utility_metric_freshness";

    fn cfg(ns: &str, attributes: Option<Value>) -> Value {
        let destination =
            json!({"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": ns}});
        let metric = match attributes {
            Some(a) => json!({"name": "Fresh", "attributes": a, "destination": destination}),
            None => json!({"name": "Fresh", "destination": destination}),
        };
        json!({"type": TYPE, "settings": {
            "threshold": "1m",
            "object": {"source_key": "ts"},
            "metric": metric,
        }})
    }

    fn now_ns() -> i64 {
        super::now_ns() as i64
    }

    #[test]
    fn cases() {
        let r = registry();
        let now = now_ns();
        let min = 60_000_000_000i64;
        let fresh = format!(r#"{{"ts":{}}}"#, now - min / 2);
        let stale = format!(r#"{{"ts":{}}}"#, now - 2 * min);
        let future = format!(r#"{{"ts":{}}}"#, now + min);
        let as_text = format!(r#"{{"ts":"{}"}}"#, now);
        /// (name, input, (success, failure) per ctrl)
        type Case<'a> = (&'a str, Vec<&'a str>, Vec<(u64, u64)>);
        let cases: Vec<Case> = vec![
            (
                "fresh and stale",
                vec![&fresh, &stale, &fresh, "<ctrl>"],
                vec![(2, 1)],
            ),
            (
                "a ctrl resets",
                vec![&stale, "<ctrl>", &fresh, "<ctrl>"],
                vec![(0, 1), (1, 0)],
            ),
            ("the future is fresh", vec![&future, "<ctrl>"], vec![(1, 0)]),
            (
                "a numeric string counts",
                vec![&as_text, "<ctrl>"],
                vec![(1, 0)],
            ),
            (
                "missing, null and zero are not counted",
                vec![
                    r#"{"a":1}"#,
                    r#"{"ts":null}"#,
                    r#"{"ts":0}"#,
                    "not json",
                    "<ctrl>",
                ],
                vec![(0, 0)],
            ),
        ];
        for (i, (name, input, want)) in cases.into_iter().enumerate() {
            let ns = format!("fresh-cases-{i}");
            let t = testing::build(&r, cfg(&ns, Some(json!({"Stream": "s1"})))).unwrap();
            let msgs: Vec<Message> = input
                .iter()
                .map(|s| match *s {
                    "<ctrl>" => Message::ctrl(),
                    s => Message::new(s.as_bytes().to_vec()),
                })
                .collect();
            let p = sluice_engine::Pipeline::new(vec![(Arc::from("m"), t)]);
            let out = testing::block_on(p.apply(msgs)).unwrap();
            assert_eq!(out.len(), input.len(), "{name}: everything passes");
            let got = lines(&test_capture(&ns));
            assert_eq!(got.len(), want.len() * 2, "{name}: two lines per ctrl");
            for (pair, (s, f)) in got.chunks(2).zip(want) {
                assert_eq!(pair[0]["FreshnessType"], "Success", "{name}");
                assert_eq!(pair[0]["Fresh"], s, "{name}");
                assert_eq!(pair[1]["FreshnessType"], "Failure", "{name}");
                assert_eq!(pair[1]["Fresh"], f, "{name}");
                for l in pair {
                    assert_eq!(l["Stream"], "s1", "{name}");
                    assert_eq!(
                        l["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
                        serde_json::json!([["Stream", "FreshnessType"]]),
                        "{name}"
                    );
                }
            }
        }
    }

    #[test]
    fn without_attributes_it_does_not_panic() {
        // Substation panics here (a nil map).
        let r = registry();
        let t = testing::build(&r, cfg("fresh-no-attributes", None)).unwrap();
        let now = now_ns().to_string();
        testing::run(t, &[&format!(r#"{{"ts":{now}}}"#)]).unwrap();
        let got = lines(&test_capture("fresh-no-attributes"));
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            serde_json::json!([["FreshnessType"]])
        );
        assert_eq!(got[0]["Fresh"], 1);
    }

    #[test]
    fn a_value_that_is_not_a_time_is_an_error() {
        let r = registry();
        for (input, want) in [
            (r#"{"ts":"yesterday"}"#, "epoch nanoseconds as a number"),
            (r#"{"ts":[1]}"#, "found an array"),
        ] {
            let t = testing::build(&r, cfg("fresh-errors", None)).unwrap();
            let err = testing::run(t, &[input]).unwrap_err().to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn config_errors_name_the_field() {
        let dest = json!({"type": "aws_cloudwatch_embedded_metrics"});
        testing::assert_config_errors(
            &registry(),
            TYPE,
            &[
                (
                    json!({"object": {"source_key": "ts"}, "metric": {"name": "F", "destination": dest}}),
                    "settings.threshold: missing required option",
                ),
                (
                    json!({"threshold": "1 minute", "object": {"source_key": "ts"}, "metric": {"name": "F", "destination": dest}}),
                    "settings.threshold: invalid duration",
                ),
                (
                    json!({"threshold": "1m", "metric": {"name": "F", "destination": dest}}),
                    "settings.object.source_key: missing required option",
                ),
                (
                    json!({"threshold": "1m", "object": {"source_key": "ts"}, "metric": {"name": "F", "attributes": {"FreshnessType": "x"}, "destination": dest}}),
                    "settings.metric.attributes: \"FreshnessType\" is used twice",
                ),
                (
                    json!({"threshold": "1m", "object": {"source_key": "ts"}, "metric": {"destination": dest}}),
                    "settings.metric.name: missing required option",
                ),
            ],
        );
    }

    #[test]
    fn compliance() {
        testing::check_compliance(
            testing::build(&registry(), cfg("fresh-compliance", None)).unwrap(),
        );
    }
}
