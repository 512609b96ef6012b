//! `AWS_KINESIS_AUTOSCALE`: resizes Kinesis data streams when their CloudWatch alarms fire,
//! as Substation's `autoscale` function does, without a config or a pipeline.
//!
//! Each stream has two alarms, `<stream>_upscale` and `<stream>_downscale`, that notify an
//! SNS topic this function is subscribed to. Their metric is the stream's use of its shards:
//! the larger of incoming records per second over 1,000 per shard and incoming bytes per
//! second over 1 MiB per shard, per minute. On an SNS record whose `Message` is an alarm's
//! change to `ALARM`, the function
//!
//! 1. finds the stream in the alarm's metric dimensions (`StreamName`, in the metric-math
//!    `Trigger.Metrics[].MetricStat.Metric.Dimensions` or a classic alarm's
//!    `Trigger.Dimensions`) and the direction in the alarm name's suffix (`_upscale`,
//!    `_downscale`);
//! 2. reads the stream's tags (below); a tag with a bad value is logged with the stream,
//!    the tag and the value, and the stream is not scaled;
//! 3. leaves a stream that is still `UPDATING` (an earlier resharding) alone, resetting the
//!    alarm that fired to `INSUFFICIENT_DATA` (it fires again if the load persists);
//! 4. counts the open shards (ListShards) and reads the alarm (DescribeAlarms): one whose
//!    metric math was written for another count (an invocation that timed out while the
//!    stream resharded left the old alarms, which measure the stream against the old
//!    capacity) gets both alarms rewritten for the stream's count, and nothing is
//!    resharded, so that one burst of load never scales twice;
//! 5. refuses when the last scaling (`LastScalingEvent`) is too recent, 3 minutes for an
//!    upscale and 30 for a downscale, by resetting the alarm that fired;
//! 6. computes the new count: upscale ×2 below 5 shards, ×1.75 below 13, ×1.5 below 33,
//!    else ×1.25 (rounded down); downscale ÷2, ÷1.75, ÷1.5, ÷1.25 on the same steps
//!    (rounded up); then `MinimumShards` and `MaximumShards`, at least 1, and what
//!    UpdateShardCount accepts in one call (at most double, at least half the open count, at
//!    most 10,000). A limit never turns an upscale into a downscale or the reverse: the
//!    count is then left as it is;
//! 7. calls UpdateShardCount (uniform scaling), tags the stream `LastScalingEvent` = now
//!    (RFC 3339) at once, so that a retry of an invocation that times out is refused by the
//!    cooldown, waits until the stream is no longer `UPDATING` (polling every second, until
//!    shortly before the invocation's deadline), and rewrites both alarms for the new count
//!    (PutMetricAlarm), each set to `INSUFFICIENT_DATA`.
//!
//! An unchanged count changes nothing, and the alarm stays in `ALARM` (as in Substation):
//! the next scaling, or an operator, resets it.
//!
//! Settings: the environment gives the defaults, a stream's tags override them for that
//! stream, so that bursty and steady streams share one function.
//!
//! | environment | stream tag | default | allowed |
//! |---|---|---|---|
//! | `AUTOSCALE_KINESIS_THRESHOLD` | `AutoscaleThreshold` | 0.70 | 0.4 to 0.9 |
//! | `AUTOSCALE_KINESIS_UPSCALE_DATAPOINTS` | `AutoscaleUpscaleDatapoints` | 5 | 1 to 1440 |
//! | `AUTOSCALE_KINESIS_DOWNSCALE_DATAPOINTS` | `AutoscaleDownscaleDatapoints` | 60 | 1 to 1440 |
//! | | `MinimumShards`, `MaximumShards` | none | a whole number; 0 is none |
//! | | `LastScalingEvent` (written here) | none | RFC 3339 |
//!
//! The upscale alarm fires at or above the threshold, the downscale alarm at or below the
//! threshold − 0.35, each after its datapoints (one a minute, all of them breaching). 1440
//! is CloudWatch's own bound: an alarm evaluates at most one day of 60-second periods. A bad
//! environment value fails the init with one log line naming the variable, its value and
//! what is allowed.
//!
//! Every SNS record is handled. The response is a summary, one entry per record:
//! `{"results":[{"alarm","stream","action","from","to","reason"}]}`, `action` one of
//! `upscaled`, `downscaled`, `unchanged`, `cooldown`, `realigned`, `skipped`. A record that is not
//! for this function (another state, no stream, a bad tag) is skipped and logged, not an
//! error: SNS would only retry it. A failed AWS call is a function error naming the
//! service, the operation, the stream or alarm and the cause; the records after it are
//! still handled.
//!
//! Where Substation differs: it reads only the first SNS record, acts on any notification
//! (an `OK` too), takes the direction from anywhere in the alarm name, panics on a
//! non-numeric environment value and ignores an out-of-range threshold, fails on a bad
//! tag (so SNS retries it), waits for the stream without a bound, and parses
//! `MinimumShards`/`MaximumShards` into shadowed variables, so that they never apply.

// The handler's AWS calls (Kinesis and CloudWatch clients) are in `handler`, built with the
// `aws` feature; what reads a notification and decides is in `policy`, which needs no SDK
// (the `lambda` fuzz target builds without one).
#[cfg(feature = "aws")]
mod handler;
mod policy;
#[cfg(all(test, feature = "aws"))]
mod tests;

#[cfg(feature = "aws")]
pub use handler::{Autoscaler, main, metric_queries};
pub use policy::*;

use serde::Serialize;

/// What became of one SNS record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The stream got more shards.
    Upscaled,
    /// The stream got fewer shards.
    Downscaled,
    /// The new count is the current one.
    Unchanged,
    /// The last scaling is too recent, or the stream is still resharding; the alarm was
    /// reset.
    Cooldown,
    /// The alarm was written for another shard count than the stream has (a resharding
    /// that outlasted the invocation that asked for it): both alarms were rewritten for the
    /// stream's count, and nothing was resharded.
    Realigned,
    /// Nothing to do for this record (see the reason).
    Skipped,
}

/// One entry of the response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The alarm that fired (empty when the message named none).
    pub alarm: String,
    /// Its stream, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// What was done.
    pub action: Action,
    /// The open shards before, when counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
    /// The open shards after, when counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<u32>,
    /// Why, in words.
    pub reason: String,
}

/// A failure that makes the invocation a function error.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    /// An AWS call failed.
    #[error("{service} {operation} of {target} failed: {cause}")]
    Aws {
        /// `Kinesis` or `CloudWatch`.
        service: &'static str,
        /// The operation.
        operation: &'static str,
        /// `stream NAME` or `alarm NAME`.
        target: String,
        /// The cause, in words.
        cause: String,
    },
    /// The stream was still resharding when the invocation had to answer.
    #[error(
        "Kinesis stream {stream} was still UPDATING to {to} shards at the invocation's \
         deadline: its alarms were not rewritten (the next alarm rewrites them for the new \
         count; give the function a longer timeout)"
    )]
    StillUpdating {
        /// The stream.
        stream: String,
        /// The count asked for.
        to: u32,
    },
}
