//! The function's logs and metrics.
//!
//! Logs are `tracing` events written as JSON lines (one object per line, with the
//! invocation's `request_id` from its span), which CloudWatch Logs Insights queries by
//! field. The level comes from `SLUICE_LOG` (default `info`). A failed invocation is one
//! ERROR line, the handler's `invocation failed` (with `error_type` and `error`):
//! lambda_runtime's own line for the same error is not written ([`init_logs`]).
//!
//! Metrics are CloudWatch embedded metric format (EMF) lines on stdout, one per invocation:
//! CloudWatch turns them into metrics in the `sluice` namespace, by function name and
//! handler, with no API call from the function. The lines are encoded and written by
//! `sluice_platform::emf`, the same writer the metric transforms use.

use std::time::Duration;

use serde_json::Number;
use sluice_platform::emf::{self, Datum, EmfOutput, Unit};

/// The namespace of the function's own metrics (the metric transforms' default is
/// Substation's, `Substation`).
pub const NAMESPACE: &str = "sluice";

/// Sets up JSON logs on stdout (what Lambda captures).
pub fn init_logs() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(std::io::stdout)
        .finish()
        .with(tracing_subscriber::filter::filter_fn(|m| {
            !is_runtime_copy_of_handler_error(m)
        }))
        .try_init();
}

/// Whether `m` is lambda_runtime's log of an error a handler returned: 1.5 logs it, from
/// its panic-catching layer, as `error!("{error:?}")`, a line with no field but the
/// message, outside the invocation's span (no `request_id`). The handler has already
/// logged that failure as `invocation failed`, with its type and message in fields, so
/// that line would only say it twice. The same layer's `user handler panicked` (a field
/// `error`) is kept: a panic is logged nowhere else.
fn is_runtime_copy_of_handler_error(m: &tracing::Metadata<'_>) -> bool {
    m.is_event()
        && m.target() == "lambda_runtime::layers::panic"
        && m.fields().field("error").is_none()
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

/// Where EMF lines go: standard output (Lambda) or a buffer (tests). The one EMF writer,
/// shared with the metric transforms' `aws_cloudwatch_embedded_metrics` destination.
pub type MetricsSink = EmfOutput;

/// Writes one EMF line for `m` to `sink`. A failed write is logged, not returned: the
/// invocation's records were already processed and reported.
pub fn write(sink: &MetricsSink, m: &Metrics, function: &str, handler: &str) {
    let line = emf_line(m, function, handler, emf::now_ms());
    if let Err(e) = sink.write_line(&line) {
        tracing::warn!(error = %e, "the invocation's metrics could not be written");
    }
}

/// The EMF document for `m`.
pub fn emf_line(m: &Metrics, function: &str, handler: &str, timestamp_ms: i64) -> String {
    let ms = Number::from_f64(m.flush.as_secs_f64() * 1e3).unwrap_or_else(|| 0.into());
    let count = |name, v: u64| Datum {
        name,
        unit: Some(Unit::Count),
        value: v.into(),
    };
    emf::encode(
        NAMESPACE,
        timestamp_ms,
        &[("FunctionName", function), ("Handler", handler)],
        &[
            count("RecordsIn", m.records_in),
            count("MessagesIn", m.messages_in),
            count("MessagesOut", m.messages_out),
            count("RecordsFailed", m.records_failed),
            count("DuplicatesSkipped", m.duplicates),
            Datum {
                name: "FlushDuration",
                unit: Some(Unit::Milliseconds),
                value: ms,
            },
        ],
    )
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
