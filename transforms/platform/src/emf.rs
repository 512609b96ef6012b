//! The one writer of CloudWatch embedded metric format (EMF) lines, used by the metric
//! transforms' `aws_cloudwatch_embedded_metrics` destination and by the Lambda function's
//! own per-invocation metrics (`sluice-cmd`'s `lambda::telemetry`).
//!
//! An EMF document is one JSON object on one line. Its `_aws` member tells CloudWatch Logs
//! what to extract: `Timestamp` (milliseconds since the epoch) and `CloudWatchMetrics`, a
//! list of directives, each with a `Namespace`, `Dimensions` (a list of dimension sets, each
//! a list of names of root members holding string values) and `Metrics` (`Name` and an
//! optional `Unit`, each naming a root member holding a number). Every dimension and metric
//! named must be a member of the root object, which is what [`encode`] writes.
//!
//! The specification's limits that a config could break (at most 30 dimensions per set,
//! 100 metrics per directive, names that are not empty and that do not collide with each
//! other or with `_aws`) are checked by [`check`] when a transform is built, so writing a
//! line cannot fail for them.
//!
//! A line is written with one locked write of the whole line and its newline
//! ([`EmfOutput::write_line`]), the same lock `send_stdout` holds for a whole batch, so
//! metric lines and data lines printed to the same standard output never interleave
//! mid-line.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Number, Value, json};

/// The most dimensions one dimension set may have (the EMF specification's limit).
pub const MAX_DIMENSIONS: usize = 30;
/// The most metrics one directive may have (the EMF specification's limit).
pub const MAX_METRICS: usize = 100;

/// A CloudWatch unit, written as the EMF `Unit` of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// `Count`.
    Count,
    /// `Bytes`.
    Bytes,
    /// `Milliseconds`.
    Milliseconds,
}

impl Unit {
    /// The name CloudWatch knows it by.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Bytes => "Bytes",
            Unit::Milliseconds => "Milliseconds",
        }
    }
}

/// One metric value of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Datum<'a> {
    /// The metric's name (a root member of the document).
    pub name: &'a str,
    /// Its unit, when it has one (`None`: CloudWatch records `None`).
    pub unit: Option<Unit>,
    /// The value.
    pub value: Number,
}

/// Checks that `dimensions` and `metrics` names make a valid document: each name not
/// empty, not `_aws`, used once across both lists, and within the specification's limits.
/// The error says which name is wrong.
pub fn check<'n>(
    dimensions: impl IntoIterator<Item = &'n str>,
    metrics: impl IntoIterator<Item = &'n str>,
) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut dims = 0;
    for d in dimensions {
        dims += 1;
        check_name("dimension", d, &mut seen)?;
    }
    if dims > MAX_DIMENSIONS {
        return Err(format!(
            "{dims} dimensions; CloudWatch accepts at most {MAX_DIMENSIONS} per metric"
        ));
    }
    let mut count = 0;
    for m in metrics {
        count += 1;
        check_name("metric", m, &mut seen)?;
    }
    if count > MAX_METRICS {
        return Err(format!(
            "{count} metrics; an EMF directive holds at most {MAX_METRICS}"
        ));
    }
    Ok(())
}

fn check_name<'n>(
    what: &str,
    name: &'n str,
    seen: &mut std::collections::BTreeSet<&'n str>,
) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err(format!("a {what} name must not be empty"));
    }
    if name == "_aws" {
        return Err(format!(
            "a {what} may not be named \"_aws\" (EMF's metadata member)"
        ));
    }
    if !seen.insert(name) {
        return Err(format!(
            "{name:?} is used twice (dimensions and metrics are members of one JSON object)"
        ));
    }
    Ok(())
}

/// The EMF document (one line, no newline) for `metrics` in `namespace` at `timestamp_ms`,
/// with one dimension set made of `dimensions` (name, value), in the order given. No
/// dimensions gives an empty dimension set: metrics without dimensions.
pub fn encode(
    namespace: &str,
    timestamp_ms: i64,
    dimensions: &[(&str, &str)],
    metrics: &[Datum<'_>],
) -> String {
    let definitions: Vec<Value> = metrics
        .iter()
        .map(|m| match m.unit {
            Some(u) => json!({"Name": m.name, "Unit": u.as_str()}),
            None => json!({"Name": m.name}),
        })
        .collect();
    let mut root = Map::new();
    root.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [dimensions.iter().map(|(k, _)| *k).collect::<Vec<_>>()],
                "Metrics": definitions,
            }],
        }),
    );
    for (k, v) in dimensions {
        root.insert((*k).to_string(), Value::String((*v).to_string()));
    }
    for m in metrics {
        root.insert(m.name.to_string(), Value::Number(m.value.clone()));
    }
    Value::Object(root).to_string()
}

/// Milliseconds since the Unix epoch, now (EMF's `Timestamp`).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Where EMF lines go.
#[derive(Clone, Default)]
pub enum EmfOutput {
    /// Standard output: in Lambda, CloudWatch Logs reads it and extracts the metrics.
    #[default]
    Stdout,
    /// A list of lines (tests).
    Buffer(Arc<Mutex<Vec<String>>>),
    /// The output the build context names instead of standard output (`sluice test`
    /// keeps each test's output with it).
    Writer(sluice_engine::context::OutputSink),
}

impl std::fmt::Debug for EmfOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EmfOutput::Stdout => "Stdout",
            EmfOutput::Buffer(_) => "Buffer",
            EmfOutput::Writer(_) => "Writer",
        })
    }
}

impl EmfOutput {
    /// Writes one line with its newline in one locked write, so it never interleaves with
    /// other output written the same way (`send_stdout`'s batches, other metric lines).
    pub fn write_line(&self, line: &str) -> std::io::Result<()> {
        match self {
            EmfOutput::Stdout => {
                let mut buf = Vec::with_capacity(line.len() + 1);
                buf.extend_from_slice(line.as_bytes());
                buf.push(b'\n');
                let mut out = std::io::stdout().lock();
                out.write_all(&buf)?;
                out.flush()
            }
            EmfOutput::Buffer(b) => {
                b.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(line.to_string());
                Ok(())
            }
            EmfOutput::Writer(w) => {
                let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
                w.write_all(line.as_bytes())?;
                w.write_all(b"\n")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Value {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn documents() {
        // (name, dimensions, metrics, the document)
        let cases = [
            (
                "one metric, two dimensions, in the order given",
                vec![("Team", "ingest"), ("Env", "prod")],
                vec![Datum {
                    name: "Events",
                    unit: Some(Unit::Count),
                    value: 3.into(),
                }],
                json!({
                    "_aws": {"Timestamp": 1000, "CloudWatchMetrics": [{
                        "Namespace": "ns",
                        "Dimensions": [["Team", "Env"]],
                        "Metrics": [{"Name": "Events", "Unit": "Count"}],
                    }]},
                    "Team": "ingest", "Env": "prod", "Events": 3,
                }),
            ),
            (
                "no dimensions is an empty dimension set; no unit is no Unit",
                vec![],
                vec![
                    Datum {
                        name: "A",
                        unit: None,
                        value: 0.into(),
                    },
                    Datum {
                        name: "B",
                        unit: Some(Unit::Milliseconds),
                        value: Number::from_f64(1.5).unwrap(),
                    },
                ],
                json!({
                    "_aws": {"Timestamp": 1000, "CloudWatchMetrics": [{
                        "Namespace": "ns",
                        "Dimensions": [[]],
                        "Metrics": [{"Name": "A"}, {"Name": "B", "Unit": "Milliseconds"}],
                    }]},
                    "A": 0, "B": 1.5,
                }),
            ),
        ];
        for (name, dims, metrics, want) in cases {
            let line = encode("ns", 1000, &dims, &metrics);
            assert!(!line.contains('\n'), "{name}: one line");
            assert_eq!(parse(&line), want, "{name}");
            assert!(line.starts_with("{\"_aws\""), "{name}: metadata first");
        }
    }

    #[test]
    fn checks() {
        let ok: [(&[&str], &[&str]); 2] = [(&["Team"], &["Events"]), (&[], &["Events"])];
        for (d, m) in ok {
            assert_eq!(check(d.iter().copied(), m.iter().copied()), Ok(()));
        }
        let many: Vec<String> = (0..31).map(|i| format!("D{i}")).collect();
        let cases: [(Vec<&str>, Vec<&str>, &str); 5] = [
            (vec![""], vec!["M"], "dimension name must not be empty"),
            (vec![], vec![" "], "metric name must not be empty"),
            (vec!["_aws"], vec!["M"], "\"_aws\""),
            (vec!["M"], vec!["M"], "\"M\" is used twice"),
            (
                many.iter().map(String::as_str).collect(),
                vec!["M"],
                "at most 30",
            ),
        ];
        for (d, m, want) in cases {
            let err = check(d, m).unwrap_err();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn buffer_output_keeps_lines() {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let out = EmfOutput::Buffer(buf.clone());
        out.write_line("{\"a\":1}").unwrap();
        out.write_line("{\"b\":2}").unwrap();
        assert_eq!(*buf.lock().unwrap(), vec!["{\"a\":1}", "{\"b\":2}"]);
    }
}
