//! `utility_metric_count`: counts the data messages that pass and, on each ctrl message,
//! writes the count as a metric and starts again from zero.
//!
//! Substation compatibility: the same settings (`metric.name`, `metric.attributes`,
//! `metric.destination`) and behaviour; messages pass unchanged. Differences: the count is
//! 64 bits (Substation's wraps at 2^32); a count is never lost or counted twice when
//! messages arrive while a ctrl is writing it (it is taken and reset in one atomic step,
//! and put back if the write fails, so the next ctrl reports it); and the metric carries
//! `Unit: Count`. See `crate::metrics` for the `metric` settings.

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Message, StatefulTransform, TransformError, async_trait};

use crate::metrics::{Metric, MetricSettings, Tally};
use sluice_platform::emf::Unit;

/// Settings of `utility_metric_count`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The metric: `name`, `attributes`, `destination`.
    pub metric: MetricSettings,
}

/// The `utility_metric_count` transform.
pub(crate) struct UtilityMetricCount {
    tally: Tally,
}

impl UtilityMetricCount {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(UtilityMetricCount {
            tally: Tally::new(Metric::build(b, s.metric, &[])?, Unit::Count),
        })
    }
}

#[async_trait]
impl StatefulTransform for UtilityMetricCount {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            self.tally.emit()?;
        } else {
            self.tally.add(1);
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `utility_metric_count` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "utility_metric_count",
    aliases: &[],
    library: "sub.tf.util.metric.count",
    summary: "counts data messages; writes the count as a metric on ctrl",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"metric": {"name": "C", "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": "compliance"}}}}"#,
};

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::metrics::aws_cloudwatch_embedded_metrics::test_capture;
    use crate::metrics::test_support::lines;
    use crate::registry;
    use sluice_engine::{Message, Value, json, testing};

    const TYPE: &str = "utility_metric_count";

    fn cfg(ns: &str, attributes: Value) -> Value {
        json!({"type": TYPE, "settings": {"metric": {
            "name": "MessagesIn",
            "attributes": attributes,
            "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": ns}},
        }}})
    }

    #[test]
    fn cases() {
        let r = registry();
        // (name, input with "<ctrl>" for ctrl messages, the values written)
        let cases = [
            (
                "counts data messages",
                vec!["a", "b", "c", "<ctrl>"],
                vec![3],
            ),
            (
                "a ctrl resets",
                vec!["a", "<ctrl>", "b", "<ctrl>"],
                vec![1, 1],
            ),
            ("no data is a zero", vec!["<ctrl>"], vec![0]),
            (
                "empty and non-JSON data count",
                vec!["", "\u{1}", "<ctrl>", "<ctrl>"],
                vec![2, 0],
            ),
        ];
        for (i, (name, input, want)) in cases.into_iter().enumerate() {
            let ns = format!("count-cases-{i}");
            let t = testing::build(&r, cfg(&ns, json!({"Team": "a"}))).unwrap();
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
            let got: Vec<u64> = lines(&test_capture(&ns))
                .iter()
                .map(|l| l["MessagesIn"].as_u64().unwrap())
                .collect();
            assert_eq!(got, want, "{name}");
            for l in lines(&test_capture(&ns)) {
                assert_eq!(l["Team"], "a", "{name}");
            }
        }
    }

    #[test]
    fn concurrent_counts_are_exact() {
        // The transform shared by many tasks at once (as concurrent Lambda invocations or
        // meta_switch cases would share it): no count is lost.
        let r = registry();
        let t = testing::build(&r, cfg("count-concurrent", json!({}))).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        rt.block_on(async {
            let mut tasks = Vec::new();
            for _ in 0..8 {
                let t = t.clone();
                tasks.push(tokio::spawn(async move {
                    for _ in 0..1000 {
                        t.transform(Message::new(&b"x"[..]), &mut Vec::new())
                            .await
                            .unwrap();
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            t.transform(Message::ctrl(), &mut Vec::new()).await.unwrap();
        });
        let got = lines(&test_capture("count-concurrent"));
        assert_eq!(got[0]["MessagesIn"], 8000);
    }

    #[test]
    fn config_errors_name_the_field() {
        let dest = json!({"type": "aws_cloudwatch_embedded_metrics"});
        testing::assert_config_errors(
            &registry(),
            TYPE,
            &[
                (json!({}), "settings.metric.name: missing required option"),
                (
                    json!({"metric": {"destination": dest}}),
                    "settings.metric.name",
                ),
                (
                    json!({"metric": {"name": " ", "destination": dest}}),
                    "settings.metric.name: must not be empty",
                ),
                (
                    json!({"metric": {"name": "N"}}),
                    "settings.metric.destination: missing required option",
                ),
                (
                    json!({"metric": {"name": 5, "destination": dest}}),
                    "settings.metric.name: invalid type",
                ),
                (
                    json!({"metric": {"name": "N", "attributes": {"Team": 1}, "destination": dest}}),
                    "settings.metric.attributes.Team: must be a string",
                ),
                (
                    json!({"metric": {"name": "N", "attributes": {"N": "x"}, "destination": dest}}),
                    "settings.metric.attributes: \"N\" is used twice",
                ),
                (json!({"metric": "N"}), "settings.metric: invalid type"),
            ],
        );
    }

    #[test]
    fn compliance() {
        testing::check_compliance(
            testing::build(&registry(), cfg("count-compliance", json!({}))).unwrap(),
        );
    }
}
