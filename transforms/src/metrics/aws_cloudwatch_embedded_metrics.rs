//! `aws_cloudwatch_embedded_metrics`: the metric destination that writes each metric as a
//! CloudWatch embedded metric format (EMF) line on standard output. In AWS Lambda,
//! CloudWatch Logs reads the function's output and turns every such line into a metric, with
//! no API call from the function.
//!
//! Each value is one line: the metric's name as the metric, its `attributes` as the
//! dimensions (one dimension set, in the order written), in the namespace `Substation`
//! unless `settings.namespace` says otherwise, timestamped when it is written.
//!
//! Substation compatibility: the same type name, no required settings, the same namespace
//! and the same document. Differences: `namespace` is a sluice addition (Substation's is
//! fixed); counts carry `Unit: Count` and byte sums `Unit: Bytes` (Substation writes no
//! unit); a metric without attributes has an empty dimension set (Substation writes
//! `[null]`); and the line is written with one locked write, so under `sluice run` it never
//! interleaves mid-line with `send_stdout`'s output on the same standard output.

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, TransformError};

use super::Metric;
use sluice_platform::emf::{self, Datum, EmfOutput, Unit};

/// The namespace when `settings.namespace` is not set: Substation's, so dashboards and
/// alarms built on Substation's metrics keep working.
pub(crate) const DEFAULT_NAMESPACE: &str = "Substation";

/// Settings of the `aws_cloudwatch_embedded_metrics` destination.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The CloudWatch namespace (default `Substation`).
    pub(crate) namespace: Option<String>,
}

/// The `aws_cloudwatch_embedded_metrics` destination.
#[derive(Debug, Clone)]
pub(crate) struct CloudWatchEmf {
    namespace: String,
    output: EmfOutput,
}

impl CloudWatchEmf {
    /// Builds it from `settings`, found at `field` of the transform being built.
    pub(crate) fn build(
        b: &Build<'_>,
        field: &str,
        settings: &serde_json::Value,
    ) -> Result<Self, ConfigError> {
        let empty = serde_json::Value::Object(serde_json::Map::new());
        let settings = if settings.is_null() { &empty } else { settings };
        let (s, unknown) =
            sluice_engine::settings::decode::<Settings>(settings).map_err(|(f, msg)| {
                b.field_error(
                    &if f.is_empty() {
                        field.to_string()
                    } else {
                        format!("{field}.{f}")
                    },
                    msg,
                )
            })?;
        for k in unknown {
            b.warn(format!(
                "unknown setting \"{field}.{k}\" is ignored (aws_cloudwatch_embedded_metrics takes only \"namespace\")"
            ));
        }
        let namespace = match s.namespace {
            None => DEFAULT_NAMESPACE.to_string(),
            Some(n) if n.trim().is_empty() || n.len() > 1024 => {
                return Err(b.field_error(
                    &format!("{field}.namespace"),
                    "a CloudWatch namespace is 1 to 1024 characters",
                ));
            }
            Some(n) => n,
        };
        // The build context's output (what `sluice test` gives each test) stands in for
        // standard output, as for `send_stdout`.
        let output = match b.context().stdout() {
            Some(sink) => EmfOutput::Writer(sink.clone()),
            None => output_for(&namespace),
        };
        Ok(CloudWatchEmf { namespace, output })
    }

    /// Writes one value of `metric` as one line.
    pub(super) fn write(
        &self,
        metric: &Metric,
        extra: Option<(&str, &str)>,
        value: u64,
        unit: Option<Unit>,
    ) -> Result<(), TransformError> {
        let mut dims: Vec<(&str, &str)> = metric
            .attributes()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        dims.extend(extra);
        let line = emf::encode(
            &self.namespace,
            emf::now_ms(),
            &dims,
            &[Datum {
                name: metric.name(),
                unit,
                value: value.into(),
            }],
        );
        self.output
            .write_line(&line)
            .map_err(|e| TransformError::external("writing a metric to standard output", e))
    }
}

/// Standard output; in unit tests, a buffer per namespace ([`test_capture`]), so that
/// tests running at the same time each read their own lines.
#[cfg(not(test))]
fn output_for(_namespace: &str) -> EmfOutput {
    EmfOutput::Stdout
}

#[cfg(test)]
fn output_for(namespace: &str) -> EmfOutput {
    EmfOutput::Buffer(test_capture(namespace))
}

/// The buffer the destinations of `namespace` write to in unit tests.
#[cfg(test)]
pub(crate) fn test_capture(namespace: &str) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    use std::collections::HashMap;
    use std::sync::{Arc, LazyLock, Mutex};
    type Captures = Mutex<HashMap<String, Arc<Mutex<Vec<String>>>>>;
    static CAPTURES: LazyLock<Captures> = LazyLock::new(Default::default);
    CAPTURES
        .lock()
        .unwrap()
        .entry(namespace.to_string())
        .or_default()
        .clone()
}

#[cfg(test)]
mod tests {
    use crate::metrics::test_support::lines;
    use crate::registry;
    use sluice_engine::{json, testing};

    use super::test_capture;

    fn count(destination: sluice_engine::Value) -> sluice_engine::Value {
        json!({"type": "utility_metric_count", "settings": {
            "metric": {"name": "Events", "attributes": {"Team": "ingest"}, "destination": destination},
        }})
    }

    #[test]
    fn documents() {
        let r = registry();
        let t = testing::build(
            &r,
            count(json!({"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": "emf-dest-doc"}})),
        )
        .unwrap();
        testing::run(t, &["a", "b"]).unwrap();
        let got = lines(&test_capture("emf-dest-doc"));
        assert_eq!(got.len(), 1);
        let line = &got[0];
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"],
            serde_json::json!([{
                "Namespace": "emf-dest-doc",
                "Dimensions": [["Team"]],
                "Metrics": [{"Name": "Events", "Unit": "Count"}],
            }])
        );
        assert_eq!(line["Team"], "ingest");
        assert_eq!(line["Events"], 2);
        let ts = line["_aws"]["Timestamp"].as_i64().unwrap();
        assert!((ts - super::emf::now_ms()).abs() < 60_000, "{ts} is now");
    }

    #[test]
    fn default_namespace_is_substations() {
        let r = registry();
        // No destination settings at all, as Substation's configs write it. Only this test
        // writes to the default namespace.
        let t = testing::build(
            &r,
            count(json!({"type": "aws_cloudwatch_embedded_metrics"})),
        )
        .unwrap();
        testing::run(t, &["a", "b", "c"]).unwrap();
        let got = lines(&test_capture(super::DEFAULT_NAMESPACE));
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"],
            "Substation"
        );
        assert_eq!(got[0]["Events"], 3);
    }

    #[test]
    fn config_errors_name_the_field() {
        let r = registry();
        let cases = [
            (
                json!(null),
                "settings.metric.destination: missing required option",
            ),
            (
                json!("stdout"),
                "settings.metric.destination: must be an object",
            ),
            (
                json!({}),
                "settings.metric.destination.type: missing required option",
            ),
            (
                json!({"type": 1}),
                "settings.metric.destination.type: must be a string",
            ),
            (
                json!({"type": "datadog"}),
                "settings.metric.destination.type: unknown metric destination \"datadog\"",
            ),
            (
                json!({"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": ""}}),
                "settings.metric.destination.settings.namespace: a CloudWatch namespace",
            ),
            (
                json!({"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": 5}}),
                "settings.metric.destination.settings.namespace: invalid type",
            ),
        ];
        for (destination, want) in cases {
            let err = testing::build(&r, count(destination))
                .err()
                .unwrap_or_else(|| panic!("{want}: expected an error"))
                .to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn unknown_destination_settings_warn() {
        let r = registry();
        let built = r
            .build_transform(
                &serde_json::json!({"type": "utility_metric_count", "settings": {"metric": {
                    "name": "N",
                    "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespce": "x"}},
                }}}),
                "transforms[0]",
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let w: Vec<String> = built.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("metric.destination.settings.namespce"),
            "{w:?}"
        );
    }
}
