//! `utility_metric_bytes`: sums the sizes of the data messages that pass and, on each ctrl
//! message, writes the sum as a metric and starts again from zero.
//!
//! Substation compatibility: the same settings (`metric.name`, `metric.attributes`,
//! `metric.destination`) and behaviour (the size is the length of the data in bytes;
//! metadata does not count); messages pass unchanged. Differences: the sum is 64 bits
//! (Substation's wraps at 4 GiB); bytes are never lost or counted twice when messages
//! arrive while a ctrl is writing the sum (it is taken and reset in one atomic step, and put
//! back if the write fails); and the metric carries `Unit: Bytes`. See `crate::metrics` for
//! the `metric` settings.

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Message, StatefulTransform, TransformError, async_trait};

use crate::metrics::{Metric, MetricSettings, Tally};
use sluice_platform::emf::Unit;

/// Settings of `utility_metric_bytes`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The metric: `name`, `attributes`, `destination`.
    pub metric: MetricSettings,
}

/// The `utility_metric_bytes` transform.
pub(crate) struct UtilityMetricBytes {
    tally: Tally,
}

impl UtilityMetricBytes {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(UtilityMetricBytes {
            tally: Tally::new(Metric::build(b, s.metric, &[])?, Unit::Bytes),
        })
    }
}

#[async_trait]
impl StatefulTransform for UtilityMetricBytes {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            self.tally.emit()?;
        } else {
            self.tally.add(msg.data().len() as u64);
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `utility_metric_bytes` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "utility_metric_bytes",
    aliases: &[],
    library: "sub.tf.util.metric.bytes",
    summary: "sums the data's bytes; writes the sum as a metric on ctrl",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"metric": {"name": "B", "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": "compliance"}}}}"#,
};

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::metrics::aws_cloudwatch_embedded_metrics::test_capture;
    use crate::metrics::test_support::lines;
    use crate::registry;
    use sluice_engine::{Message, Value, json, testing};

    const TYPE: &str = "utility_metric_bytes";

    fn cfg(ns: &str) -> Value {
        json!({"type": TYPE, "settings": {"metric": {
            "name": "BytesIn",
            "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": ns}},
        }}})
    }

    #[test]
    fn cases() {
        let r = registry();
        // (name, input with "<ctrl>" for ctrl messages, the values written)
        let cases = [
            ("sums data lengths", vec!["ab", "cde", "<ctrl>"], vec![5]),
            (
                "a ctrl resets",
                vec!["abcd", "<ctrl>", "x", "<ctrl>"],
                vec![4, 1],
            ),
            ("no data is a zero", vec!["<ctrl>"], vec![0]),
            ("bytes, not characters", vec!["é", "<ctrl>"], vec![2]),
            ("empty data adds nothing", vec!["", "", "<ctrl>"], vec![0]),
        ];
        for (i, (name, input, want)) in cases.into_iter().enumerate() {
            let ns = format!("bytes-cases-{i}");
            let t = testing::build(&r, cfg(&ns)).unwrap();
            let msgs: Vec<Message> = input
                .iter()
                .map(|s| match *s {
                    "<ctrl>" => Message::ctrl(),
                    s => Message::new(s.as_bytes().to_vec()),
                })
                .collect();
            let p = sluice_engine::Pipeline::new(vec![(Arc::from("m"), t)]);
            let out = testing::block_on(p.apply(msgs)).unwrap();
            let datas: Vec<&str> = out
                .iter()
                .filter(|m| !m.is_ctrl())
                .map(|m| std::str::from_utf8(m.data()).unwrap())
                .collect();
            let sent: Vec<&str> = input.iter().copied().filter(|s| *s != "<ctrl>").collect();
            assert_eq!(datas, sent, "{name}: data passes unchanged");
            let got: Vec<u64> = lines(&test_capture(&ns))
                .iter()
                .map(|l| l["BytesIn"].as_u64().unwrap())
                .collect();
            assert_eq!(got, want, "{name}");
            for l in lines(&test_capture(&ns)) {
                assert_eq!(
                    l["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"], "Bytes",
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn config_errors_name_the_field() {
        testing::assert_config_errors(
            &registry(),
            TYPE,
            &[
                (json!({}), "settings.metric.name: missing required option"),
                (
                    json!({"metric": {"name": "N", "destination": {"type": "aws_cloudwatch_embedded_metric"}}}),
                    "settings.metric.destination.type: unknown metric destination",
                ),
                (
                    json!({"metric": {"name": "N", "attributes": ["a"], "destination": {"type": "aws_cloudwatch_embedded_metrics"}}}),
                    "settings.metric.attributes: invalid type",
                ),
            ],
        );
    }

    #[test]
    fn compliance() {
        testing::check_compliance(testing::build(&registry(), cfg("bytes-compliance")).unwrap());
    }
}
