//! Metrics: the `metric` settings the metric transforms share (`utility_metric_bytes`,
//! `utility_metric_count`, `utility_metric_freshness`, `meta_metric_duration`), the
//! destinations a metric is written to. The EMF encoder is `sluice_platform::emf`, which
//! the Lambda function's telemetry writes with too.
//!
//! Substation's `metric` is `{name, attributes, destination}`: `attributes` (a map of
//! strings) become the metric's dimensions, and `destination` is a `{type, settings}`
//! config; its one type is `aws_cloudwatch_embedded_metrics`
//! ([`aws_cloudwatch_embedded_metrics`]). Differences (`reference/substation.md` §2.5):
//!
//! - `name` and `destination` are required and checked when the transform is built, with
//!   the field named; Substation accepts an empty name and writes a document CloudWatch
//!   rejects.
//! - `attributes` must be strings, and the names must make a valid EMF document (see
//!   [`emf::check`]); they keep the order they are written in (Substation's come out in Go's
//!   random map order).
//! - The transforms count in 64 bits (Substation's `uint32` counters wrap at 4 GiB).

pub(crate) mod aws_cloudwatch_embedded_metrics;

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, TransformError};
use sluice_platform::emf;

pub(crate) use aws_cloudwatch_embedded_metrics::CloudWatchEmf;

/// The `metric` settings: what the metric is called, its dimensions, and where it goes.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct MetricSettings {
    /// The metric's name (Substation suggests UpperCamelCase).
    pub(crate) name: Option<String>,
    /// Dimensions, `{name: value}`; values must be strings.
    pub(crate) attributes: Option<serde_json::Map<String, serde_json::Value>>,
    /// Where the metric is written: `{type, settings}`.
    pub(crate) destination: Option<serde_json::Value>,
}

/// A metric destination.
#[derive(Debug, Clone)]
pub(crate) enum Destination {
    /// `aws_cloudwatch_embedded_metrics`.
    CloudWatchEmf(CloudWatchEmf),
}

impl Destination {
    fn write(
        &self,
        metric: &Metric,
        extra: Option<(&str, &str)>,
        value: u64,
        unit: Option<emf::Unit>,
    ) -> Result<(), TransformError> {
        match self {
            Destination::CloudWatchEmf(d) => d.write(metric, extra, value, unit),
        }
    }
}

/// A configured metric: its name, dimensions and destination.
#[derive(Debug, Clone)]
pub(crate) struct Metric {
    name: String,
    attributes: Vec<(String, String)>,
    destination: Destination,
}

impl Metric {
    /// Builds the metric from the transform's `metric` settings. `extra` names dimensions
    /// the transform adds itself (`FreshnessType`), which must not collide with the user's.
    pub(crate) fn build(
        b: &Build<'_>,
        s: MetricSettings,
        extra: &[&str],
    ) -> Result<Metric, ConfigError> {
        let name = match s.name {
            Some(n) if !n.trim().is_empty() => n,
            Some(_) => return Err(b.field_error("metric.name", "must not be empty")),
            None => {
                return Err(b.field_error(
                    "metric.name",
                    "missing required option: the metric's name, e.g. \"MessagesIn\"",
                ));
            }
        };
        let mut attributes = Vec::new();
        for (k, v) in s.attributes.unwrap_or_default() {
            match v {
                serde_json::Value::String(v) => attributes.push((k, v)),
                other => {
                    return Err(b.field_error(
                        &format!("metric.attributes.{k}"),
                        format!(
                            "must be a string (a dimension value), found {}",
                            kind_of(&other)
                        ),
                    ));
                }
            }
        }
        emf::check(
            attributes
                .iter()
                .map(|(k, _)| k.as_str())
                .chain(extra.iter().copied()),
            [name.as_str()],
        )
        .map_err(|e| b.field_error("metric.attributes", e))?;
        let destination = match s.destination {
            None | Some(serde_json::Value::Null) => {
                return Err(b.field_error(
                    "metric.destination",
                    "missing required option: where the metric goes, e.g. {\"type\": \"aws_cloudwatch_embedded_metrics\"}",
                ));
            }
            Some(d) => build_destination(b, &d)?,
        };
        Ok(Metric {
            name,
            attributes,
            destination,
        })
    }

    /// The metric's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The configured dimensions, in order.
    pub(crate) fn attributes(&self) -> &[(String, String)] {
        &self.attributes
    }

    /// Writes one value, with `extra` as one more dimension when given.
    pub(crate) fn emit(
        &self,
        value: u64,
        unit: Option<emf::Unit>,
        extra: Option<(&str, &str)>,
    ) -> Result<(), TransformError> {
        self.destination.write(self, extra, value, unit)
    }
}

/// A running sum written as one metric at each ctrl and then reset: what
/// `utility_metric_bytes` and `utility_metric_count` keep. The sum is taken and reset in
/// one atomic step, so nothing is lost or counted twice when messages arrive during a
/// write, and put back when the write fails, so the next ctrl reports it.
pub(crate) struct Tally {
    metric: Metric,
    unit: emf::Unit,
    sum: AtomicU64,
}

impl Tally {
    /// A sum of zero, written as `metric` in `unit`.
    pub(crate) fn new(metric: Metric, unit: emf::Unit) -> Tally {
        Tally {
            metric,
            unit,
            sum: AtomicU64::new(0),
        }
    }

    /// Adds `n`.
    pub(crate) fn add(&self, n: u64) {
        self.sum.fetch_add(n, Ordering::AcqRel);
    }

    /// Writes the sum and starts again from zero.
    pub(crate) fn emit(&self) -> Result<(), TransformError> {
        let n = self.sum.swap(0, Ordering::AcqRel);
        self.metric.emit(n, Some(self.unit), None).inspect_err(|_| {
            self.sum.fetch_add(n, Ordering::AcqRel);
        })
    }
}

fn build_destination(b: &Build<'_>, cfg: &serde_json::Value) -> Result<Destination, ConfigError> {
    let obj = cfg.as_object().ok_or_else(|| {
        b.field_error(
            "metric.destination",
            format!(
                "must be an object {{\"type\": ..., \"settings\": {{...}}}}, found {}",
                kind_of(cfg)
            ),
        )
    })?;
    let type_name = match obj.get("type") {
        Some(serde_json::Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(b.field_error(
                "metric.destination.type",
                format!("must be a string, found {}", kind_of(other)),
            ));
        }
        None => {
            return Err(b.field_error(
                "metric.destination.type",
                "missing required option: \"aws_cloudwatch_embedded_metrics\"",
            ));
        }
    };
    let settings = obj
        .get("settings")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    match type_name {
        "aws_cloudwatch_embedded_metrics" => {
            CloudWatchEmf::build(b, "metric.destination.settings", &settings)
                .map(Destination::CloudWatchEmf)
        }
        other => Err(b.field_error(
            "metric.destination.type",
            format!(
                "unknown metric destination {other:?}; the one destination is \"aws_cloudwatch_embedded_metrics\""
            ),
        )),
    }
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Test helpers: reading what a destination wrote.
#[cfg(test)]
pub(crate) mod test_support {
    use std::sync::{Arc, Mutex};

    /// The lines written to a buffer, parsed.
    pub(crate) fn lines(buf: &Arc<Mutex<Vec<String>>>) -> Vec<serde_json::Value> {
        buf.lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str(l).expect("an EMF line is JSON"))
            .collect()
    }
}
