//! The function's logs and metrics.
//!
//! Logs are `tracing` events written as JSON lines (one object per line, with the
//! invocation's `request_id` from its span), which CloudWatch Logs Insights queries by
//! field. The level comes from `SLUICE_LOG` (default `info`).
//!
//! Metrics are CloudWatch embedded metric format (EMF) lines on stdout, one per invocation:
//! CloudWatch turns them into metrics in the `sluice` namespace, by function name and
//! handler, with no API call from the function.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

/// Sets up JSON logs on stdout (what Lambda captures).
pub fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(std::io::stdout)
        .try_init();
}

/// What one invocation did.
#[derive(Debug, Default, Clone)]
pub struct Metrics {
    /// Source records in the event.
    pub records_in: u64,
    /// Messages made from them (more than records after KPL deaggregation or S3 lines).
    pub messages_in: u64,
    /// Messages out of the last transform.
    pub messages_out: u64,
    /// Records not delivered (a send failed, or the pipeline failed).
    pub records_failed: u64,
    /// Messages a `meta_kv_store_lock` found already processed.
    pub duplicates: u64,
    /// How long the ctrl message's flush took.
    pub flush: Duration,
}

/// Where EMF lines go.
#[derive(Debug, Clone)]
pub enum MetricsSink {
    /// Standard output (Lambda).
    Stdout,
    /// A buffer (tests).
    Buffer(Arc<Mutex<Vec<String>>>),
}

impl MetricsSink {
    /// Writes one EMF line for `m`.
    pub fn write(&self, m: &Metrics, function: &str, handler: &str) {
        let line = emf_line(m, function, handler, super::now_ms());
        match self {
            MetricsSink::Stdout => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
            }
            MetricsSink::Buffer(b) => {
                if let Ok(mut b) = b.lock() {
                    b.push(line);
                }
            }
        }
    }
}

/// The EMF document for `m`.
pub fn emf_line(m: &Metrics, function: &str, handler: &str, timestamp_ms: i64) -> String {
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": "sluice",
                "Dimensions": [["FunctionName", "Handler"]],
                "Metrics": [
                    {"Name": "RecordsIn", "Unit": "Count"},
                    {"Name": "MessagesIn", "Unit": "Count"},
                    {"Name": "MessagesOut", "Unit": "Count"},
                    {"Name": "RecordsFailed", "Unit": "Count"},
                    {"Name": "DuplicatesSkipped", "Unit": "Count"},
                    {"Name": "FlushDuration", "Unit": "Milliseconds"},
                ],
            }],
        },
        "FunctionName": function,
        "Handler": handler,
        "RecordsIn": m.records_in,
        "MessagesIn": m.messages_in,
        "MessagesOut": m.messages_out,
        "RecordsFailed": m.records_failed,
        "DuplicatesSkipped": m.duplicates,
        "FlushDuration": m.flush.as_secs_f64() * 1e3,
    })
    .to_string()
}

/// Duplicates found by the locks since the last call (the counter is process-wide).
pub fn take_duplicates() -> u64 {
    sluice_transforms::meta::kv_store_lock::DUPLICATES_SKIPPED.swap(0, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_names_every_metric_it_carries() {
        let m = Metrics {
            records_in: 3,
            messages_in: 5,
            messages_out: 4,
            records_failed: 1,
            duplicates: 2,
            flush: Duration::from_millis(7),
        };
        let v: serde_json::Value =
            serde_json::from_str(&emf_line(&m, "fn", "AWS_SQS", 1000)).unwrap();
        let names: Vec<&str> = v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["Name"].as_str().unwrap())
            .collect();
        for n in &names {
            assert!(v.get(*n).is_some(), "{n} has no value");
        }
        assert_eq!(v["RecordsFailed"], 1);
        assert_eq!(v["DuplicatesSkipped"], 2);
        assert_eq!(v["FlushDuration"], 7.0);
        assert_eq!(v["Handler"], "AWS_SQS");
        assert_eq!(v["_aws"]["Timestamp"], 1000);
    }
}
