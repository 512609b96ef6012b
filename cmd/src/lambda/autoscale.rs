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
//! 3. refuses when the last scaling (`LastScalingEvent`) is too recent, 3 minutes for an
//!    upscale and 30 for a downscale, by setting the alarm that fired to
//!    `INSUFFICIENT_DATA` (it fires again if the load persists);
//! 4. counts the open shards (ListShards) and computes the new count: upscale ×2 below 5
//!    shards, ×1.75 below 13, ×1.5 below 33, else ×1.25 (rounded down); downscale ÷2,
//!    ÷1.75, ÷1.5, ÷1.25 on the same steps (rounded up); then `MinimumShards` and
//!    `MaximumShards`, at least 1, and what UpdateShardCount accepts in one call (at most
//!    double, at least half the open count, at most 10,000). A limit never turns an
//!    upscale into a downscale or the reverse: the count is then left as it is;
//! 5. calls UpdateShardCount (uniform scaling), waits until the stream is no longer
//!    `UPDATING` (polling every second, until shortly before the invocation's deadline),
//!    tags the stream `LastScalingEvent` = now (RFC 3339), and rewrites both alarms for the
//!    new count (PutMetricAlarm), each set to `INSUFFICIENT_DATA`.
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
//! `upscaled`, `downscaled`, `unchanged`, `cooldown`, `skipped`. A record that is not
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

use std::time::{Duration, Instant};

use aws_sdk_cloudwatch::types::{
    ComparisonOperator, Dimension, Metric, MetricDataQuery, MetricStat, StateValue,
};
use aws_sdk_kinesis::types::{ScalingType, StreamStatus};
use chrono::{DateTime, Utc};
use lambda_runtime::LambdaEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_transforms::aws::{AwsTarget, describe_error};
use tracing::Instrument;

use super::{Error, HandlerKind, parse_event};

/// The default threshold (`AUTOSCALE_KINESIS_THRESHOLD`).
pub const THRESHOLD_ENV: &str = "AUTOSCALE_KINESIS_THRESHOLD";
/// The default upscale datapoints.
pub const UPSCALE_DATAPOINTS_ENV: &str = "AUTOSCALE_KINESIS_UPSCALE_DATAPOINTS";
/// The default downscale datapoints.
pub const DOWNSCALE_DATAPOINTS_ENV: &str = "AUTOSCALE_KINESIS_DOWNSCALE_DATAPOINTS";

/// A stream's threshold.
pub const THRESHOLD_TAG: &str = "AutoscaleThreshold";
/// A stream's upscale datapoints.
pub const UPSCALE_DATAPOINTS_TAG: &str = "AutoscaleUpscaleDatapoints";
/// A stream's downscale datapoints.
pub const DOWNSCALE_DATAPOINTS_TAG: &str = "AutoscaleDownscaleDatapoints";
/// The fewest shards a downscale leaves.
pub const MINIMUM_SHARDS_TAG: &str = "MinimumShards";
/// The most shards an upscale makes.
pub const MAXIMUM_SHARDS_TAG: &str = "MaximumShards";
/// When the stream was last scaled (RFC 3339).
pub const LAST_SCALING_EVENT_TAG: &str = "LastScalingEvent";

/// The thresholds allowed.
const THRESHOLD_MIN: f64 = 0.4;
const THRESHOLD_MAX: f64 = 0.9;
/// The datapoints allowed: CloudWatch evaluates at most a day of 60-second periods.
const DATAPOINTS_MAX: u32 = 1440;
/// How far below the upscale threshold the downscale alarm's is.
const DOWNSCALE_GAP: f64 = 0.35;
/// The alarms' period, in seconds.
const PERIOD: i32 = 60;
/// The least time between a scaling and an upscale.
const UPSCALE_COOLDOWN: Duration = Duration::from_secs(3 * 60);
/// The least time between a scaling and a downscale.
const DOWNSCALE_COOLDOWN: Duration = Duration::from_secs(30 * 60);
/// UpdateShardCount's most shards in a stream.
const UPDATE_MAX_SHARDS: u32 = 10_000;
/// How often the stream's status is read while it is updating.
const POLL: Duration = Duration::from_secs(1);
/// How long before the invocation's deadline the wait gives up, leaving time to answer.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);
/// The longest wait outside an invocation with a deadline (Lambda's longest timeout).
const MAX_WAIT: Duration = Duration::from_secs(15 * 60);

/// Which way an alarm asks to scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `<stream>_upscale`: more shards.
    Up,
    /// `<stream>_downscale`: fewer shards.
    Down,
}

impl Direction {
    /// The direction named by an alarm's suffix, if it has one.
    pub fn of_alarm(name: &str) -> Option<Direction> {
        if name.ends_with("_upscale") {
            Some(Direction::Up)
        } else if name.ends_with("_downscale") {
            Some(Direction::Down)
        } else {
            None
        }
    }

    fn word(self) -> &'static str {
        match self {
            Direction::Up => "upscale",
            Direction::Down => "downscale",
        }
    }

    fn cooldown(self) -> Duration {
        match self {
            Direction::Up => UPSCALE_COOLDOWN,
            Direction::Down => DOWNSCALE_COOLDOWN,
        }
    }
}

/// How a stream's alarms are written: from the environment, or a stream's tags.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The upscale threshold; the downscale one is 0.35 below it.
    pub threshold: f64,
    /// The minutes above the threshold before an upscale.
    pub upscale_datapoints: u32,
    /// The minutes below the downscale threshold before a downscale.
    pub downscale_datapoints: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            threshold: 0.70,
            upscale_datapoints: 5,
            downscale_datapoints: 60,
        }
    }
}

impl Settings {
    /// The downscale alarm's threshold (rounded to 6 places, so that 0.5 gives 0.15).
    pub fn downscale_threshold(&self) -> f64 {
        ((self.threshold - DOWNSCALE_GAP) * 1e6).round() / 1e6
    }
}

/// A setting (an environment variable or a stream tag) with a value that is not allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{name} is {value:?}: expected {allowed}")]
pub struct BadSetting {
    /// The variable or tag.
    pub name: String,
    /// Its value.
    pub value: String,
    /// What is allowed.
    pub allowed: String,
}

fn bad(name: &str, value: &str, allowed: impl Into<String>) -> BadSetting {
    BadSetting {
        name: name.to_string(),
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

fn parse_threshold(name: &str, value: &str) -> Result<f64, BadSetting> {
    match value.trim().parse::<f64>() {
        Ok(t) if (THRESHOLD_MIN..=THRESHOLD_MAX).contains(&t) => Ok(t),
        _ => Err(bad(
            name,
            value,
            format!("a number from {THRESHOLD_MIN} to {THRESHOLD_MAX}"),
        )),
    }
}

fn parse_datapoints(name: &str, value: &str) -> Result<u32, BadSetting> {
    match value.trim().parse::<u32>() {
        Ok(n) if (1..=DATAPOINTS_MAX).contains(&n) => Ok(n),
        _ => Err(bad(
            name,
            value,
            format!("a whole number from 1 to {DATAPOINTS_MAX}"),
        )),
    }
}

/// A shard bound; 0 (as in Substation) is none.
fn parse_shards(name: &str, value: &str) -> Result<Option<u32>, BadSetting> {
    value
        .trim()
        .parse::<u32>()
        .map(|n| (n > 0).then_some(n))
        .map_err(|_| bad(name, value, "a whole number of shards (0 for none)"))
}

/// The defaults from the environment (`lookup` reads a variable).
pub fn settings_from(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, BadSetting> {
    let mut s = Settings::default();
    if let Some(v) = lookup(THRESHOLD_ENV) {
        s.threshold = parse_threshold(THRESHOLD_ENV, &v)?;
    }
    if let Some(v) = lookup(UPSCALE_DATAPOINTS_ENV) {
        s.upscale_datapoints = parse_datapoints(UPSCALE_DATAPOINTS_ENV, &v)?;
    }
    if let Some(v) = lookup(DOWNSCALE_DATAPOINTS_ENV) {
        s.downscale_datapoints = parse_datapoints(DOWNSCALE_DATAPOINTS_ENV, &v)?;
    }
    Ok(s)
}

/// What a stream's tags say.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTags {
    /// The defaults with the stream's overrides.
    pub settings: Settings,
    /// `MinimumShards`.
    pub minimum: Option<u32>,
    /// `MaximumShards`.
    pub maximum: Option<u32>,
    /// `LastScalingEvent`.
    pub last_scaling_event: Option<DateTime<Utc>>,
}

impl StreamTags {
    /// Reads `tags` (key, value) over `defaults`; other tags are ignored.
    pub fn parse(defaults: Settings, tags: &[(String, String)]) -> Result<StreamTags, BadSetting> {
        let mut t = StreamTags {
            settings: defaults,
            minimum: None,
            maximum: None,
            last_scaling_event: None,
        };
        for (k, v) in tags {
            match k.as_str() {
                THRESHOLD_TAG => t.settings.threshold = parse_threshold(k, v)?,
                UPSCALE_DATAPOINTS_TAG => t.settings.upscale_datapoints = parse_datapoints(k, v)?,
                DOWNSCALE_DATAPOINTS_TAG => {
                    t.settings.downscale_datapoints = parse_datapoints(k, v)?
                }
                MINIMUM_SHARDS_TAG => t.minimum = parse_shards(k, v)?,
                MAXIMUM_SHARDS_TAG => t.maximum = parse_shards(k, v)?,
                LAST_SCALING_EVENT_TAG => {
                    let at = DateTime::parse_from_rfc3339(v.trim())
                        .map_err(|_| bad(k, v, "an RFC 3339 time"))?;
                    t.last_scaling_event = Some(at.with_timezone(&Utc));
                }
                _ => {}
            }
        }
        if let (Some(min), Some(max)) = (t.minimum, t.maximum)
            && min > max
        {
            return Err(bad(
                MINIMUM_SHARDS_TAG,
                &min.to_string(),
                format!("at most {MAXIMUM_SHARDS_TAG} ({max})"),
            ));
        }
        Ok(t)
    }
}

/// How long a scaling in `direction` must still wait after the last one, at `now`; `None`
/// when it need not.
pub fn cooldown_left(
    direction: Direction,
    last: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<Duration> {
    let last = last?;
    let since = (now - last).to_std().unwrap_or(Duration::ZERO);
    direction
        .cooldown()
        .checked_sub(since)
        .filter(|d| !d.is_zero())
}

/// The count Substation's factors give for `current` open shards.
pub fn factor_count(current: u32, direction: Direction) -> u32 {
    let factor = match current {
        0..=4 => 2.0,
        5..=12 => 1.75,
        13..=32 => 1.5,
        _ => 1.25,
    };
    let n = f64::from(current);
    match direction {
        Direction::Up => (n * factor).floor() as u32,
        Direction::Down => (n / factor).ceil() as u32,
    }
}

/// A new shard count, and what limited it (if anything did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The count.
    pub to: u32,
    /// The limit that set it, in words.
    pub limited_by: Option<String>,
}

/// The count to scale `current` open shards (at least 1) to, in `direction`, within
/// `minimum` and `maximum` and what one UpdateShardCount accepts.
pub fn target_count(
    current: u32,
    direction: Direction,
    minimum: Option<u32>,
    maximum: Option<u32>,
) -> Target {
    let mut to = factor_count(current, direction);
    let mut limited_by = None;
    if let Some(min) = minimum
        && to < min
    {
        to = min;
        limited_by = Some(format!("{MINIMUM_SHARDS_TAG} is {min}"));
    }
    if let Some(max) = maximum
        && to > max
    {
        to = max;
        limited_by = Some(format!("{MAXIMUM_SHARDS_TAG} is {max}"));
    }
    if to < 1 {
        to = 1;
        limited_by = Some("a stream has at least 1 shard".into());
    }
    let most = current.saturating_mul(2).min(UPDATE_MAX_SHARDS);
    let least = current.div_ceil(2);
    if to > most {
        to = most;
        limited_by = Some(format!(
            "UpdateShardCount allows at most {most} from {current}"
        ));
    }
    if to < least {
        to = least;
        limited_by = Some(format!(
            "UpdateShardCount allows at least {least} from {current}"
        ));
    }
    let reversed = match direction {
        Direction::Up => to < current,
        Direction::Down => to > current,
    };
    if reversed {
        limited_by = limited_by
            .map(|why| format!("{why}, and a {} never goes the other way", direction.word()));
        to = current;
    }
    Target { to, limited_by }
}

/// What an alarm's state-change notification (an SNS `Message`) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// `AlarmName`.
    pub alarm: String,
    /// `NewStateValue`.
    pub state: String,
    /// The `StreamName` dimension of its metrics, if one has it.
    pub stream: Option<String>,
}

/// Reads an alarm notification; the error says why it is not one.
pub fn parse_notification(message: &str) -> Result<Notification, String> {
    let v: Value = serde_json::from_str(message)
        .map_err(|e| format!("the SNS message is not an alarm notification (JSON): {e}"))?;
    let alarm = v["AlarmName"]
        .as_str()
        .ok_or("the SNS message is not an alarm notification: no AlarmName")?
        .to_string();
    let state = v["NewStateValue"].as_str().unwrap_or_default().to_string();
    let trigger = &v["Trigger"];
    let metric_dimensions = trigger["Metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| &m["MetricStat"]["Metric"]["Dimensions"]);
    let stream = metric_dimensions
        .chain(std::iter::once(&trigger["Dimensions"]))
        .filter_map(Value::as_array)
        .flatten()
        .find_map(|d| {
            let name = d.get("name").or_else(|| d.get("Name"))?.as_str()?;
            let value = d.get("value").or_else(|| d.get("Value"))?.as_str()?;
            (name == "StreamName" && !value.is_empty()).then(|| value.to_string())
        });
    Ok(Notification {
        alarm,
        state,
        stream,
    })
}

/// The direction and stream a notification asks to scale, or why it asks nothing.
pub fn trigger(n: &Notification) -> Result<(Direction, &str), String> {
    if n.state != "ALARM" {
        return Err(format!("the alarm's new state is {:?}, not ALARM", n.state));
    }
    let direction = Direction::of_alarm(&n.alarm)
        .ok_or("the alarm's name ends in neither _upscale nor _downscale")?;
    let stream = n
        .stream
        .as_deref()
        .ok_or("the alarm's metrics have no StreamName dimension")?;
    Ok((direction, stream))
}

/// The alarms' metric queries for `stream` with `shards` shards: the stream's use of its
/// shards (records and bytes), as Substation writes them.
pub fn metric_queries(stream: &str, shards: u32) -> Vec<MetricDataQuery> {
    let metric = |id: &str, name: &str| {
        MetricDataQuery::builder()
            .id(id)
            .label(name)
            .metric_stat(
                MetricStat::builder()
                    .metric(
                        Metric::builder()
                            .namespace("AWS/Kinesis")
                            .metric_name(name)
                            .dimensions(
                                Dimension::builder()
                                    .name("StreamName")
                                    .value(stream)
                                    .build(),
                            )
                            .build(),
                    )
                    .period(PERIOD)
                    .stat("Sum")
                    .build(),
            )
            .return_data(false)
            .build()
    };
    let expression = |id: &str, label: &str, expr: String, returned: bool| {
        MetricDataQuery::builder()
            .id(id)
            .label(label)
            .expression(expr)
            .return_data(returned)
            .build()
    };
    vec![
        metric("m1", "IncomingRecords"),
        metric("m2", "IncomingBytes"),
        expression(
            "e1",
            "FillMissingDataPointsForIncomingRecords",
            "FILL(m1,REPEAT)".into(),
            false,
        ),
        expression(
            "e2",
            "FillMissingDataPointsForIncomingBytes",
            "FILL(m2,REPEAT)".into(),
            false,
        ),
        expression(
            "e3",
            "IncomingRecordsPercent",
            format!("e1/(1000*{shards}*{PERIOD})"),
            false,
        ),
        expression(
            "e4",
            "IncomingBytesPercent",
            format!("e2/(1048576*{shards}*{PERIOD})"),
            false,
        ),
        expression("e5", "IncomingMax", "MAX([e3,e4])".into(), true),
    ]
}

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
    /// The last scaling is too recent; the alarm was reset.
    Cooldown,
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

impl Outcome {
    fn skipped(alarm: &str, stream: Option<&str>, reason: impl Into<String>) -> Outcome {
        Outcome {
            alarm: alarm.to_string(),
            stream: stream.map(str::to_string),
            action: Action::Skipped,
            from: None,
            to: None,
            reason: reason.into(),
        }
    }
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
         deadline: its LastScalingEvent tag and alarms were not updated (give the function \
         a longer timeout)"
    )]
    StillUpdating {
        /// The stream.
        stream: String,
        /// The count asked for.
        to: u32,
    },
}

fn kinesis_error<E>(
    operation: &'static str,
    stream: &str,
) -> impl FnOnce(
    aws_sdk_kinesis::error::SdkError<E, aws_sdk_kinesis::config::http::HttpResponse>,
) -> ScaleError
where
    E: aws_sdk_kinesis::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    let target = format!("stream {stream}");
    move |e| ScaleError::Aws {
        service: "Kinesis",
        operation,
        target,
        cause: describe_error(&e),
    }
}

fn cloudwatch_error<E>(
    operation: &'static str,
    alarm: &str,
) -> impl FnOnce(
    aws_sdk_cloudwatch::error::SdkError<E, aws_sdk_cloudwatch::config::http::HttpResponse>,
) -> ScaleError
where
    E: aws_sdk_cloudwatch::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    let target = format!("alarm {alarm}");
    move |e| ScaleError::Aws {
        service: "CloudWatch",
        operation,
        target,
        cause: describe_error(&e),
    }
}

/// The SNS event, as much of it as the handler reads.
#[derive(Debug, Deserialize)]
struct SnsEvent {
    #[serde(rename = "Records")]
    records: Vec<SnsRecord>,
}

#[derive(Debug, Deserialize)]
struct SnsRecord {
    #[serde(rename = "Sns")]
    sns: SnsMessage,
}

#[derive(Debug, Deserialize)]
struct SnsMessage {
    #[serde(rename = "TopicArn", default)]
    topic_arn: String,
    #[serde(rename = "Message", default)]
    message: String,
}

/// The function: its SDK clients, made once at init, and the default settings.
pub struct Autoscaler {
    kinesis: aws_sdk_kinesis::Client,
    cloudwatch: aws_sdk_cloudwatch::Client,
    defaults: Settings,
}

impl Autoscaler {
    /// An autoscaler over these clients, with `defaults` for streams without tags.
    pub fn new(
        kinesis: aws_sdk_kinesis::Client,
        cloudwatch: aws_sdk_cloudwatch::Client,
        defaults: Settings,
    ) -> Autoscaler {
        Autoscaler {
            kinesis,
            cloudwatch,
            defaults,
        }
    }

    /// Handles one invocation, inside its deadline: every SNS record, then the summary, or
    /// a function error when an AWS call failed.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, Error> {
        let span = tracing::info_span!("invocation", request_id = %event.context.request_id);
        let work = async {
            let r = self.handle_payload(event.payload).await;
            if let Err(e) = &r {
                tracing::error!(error = %e, "invocation failed");
            }
            r
        };
        match super::deadline_instant(event.context.deadline) {
            Some(d) => {
                sluice_engine::invocation::with_deadline(d, work)
                    .instrument(span)
                    .await
            }
            None => work.instrument(span).await,
        }
    }

    async fn handle_payload(&self, payload: Value) -> Result<Value, Error> {
        let event: SnsEvent = parse_event(HandlerKind::KinesisAutoscale, payload)?;
        let total = event.records.len();
        let mut results = Vec::with_capacity(total);
        let mut failures: Vec<ScaleError> = Vec::new();
        for r in event.records {
            match self.record(&r.sns.topic_arn, &r.sns.message).await {
                Ok(o) => results.push(o),
                Err(e) => {
                    // The invocation's error names the first; the others are logged here.
                    if total > 1 {
                        tracing::error!(error = %e, "an alarm could not be handled");
                    }
                    failures.push(e);
                }
            }
        }
        tracing::info!(records = total, failed = failures.len(), "invocation done");
        match failures.first() {
            None => Ok(serde_json::json!({ "results": results })),
            Some(first) if total == 1 => Err(first.to_string().into()),
            Some(first) => Err(format!(
                "{} of {total} alarms could not be handled (first: {first})",
                failures.len()
            )
            .into()),
        }
    }

    /// Handles the alarm notification `message` that came through topic `topic`.
    async fn record(&self, topic: &str, message: &str) -> Result<Outcome, ScaleError> {
        let n = match parse_notification(message) {
            Ok(n) => n,
            Err(why) => {
                tracing::warn!(reason = %why, "skipped");
                return Ok(Outcome::skipped("", None, why));
            }
        };
        let (direction, stream) = match trigger(&n) {
            Ok(t) => t,
            Err(why) => {
                tracing::info!(alarm = %n.alarm, reason = %why, "skipped");
                return Ok(Outcome::skipped(&n.alarm, n.stream.as_deref(), why));
            }
        };
        if topic.is_empty() {
            let why = "the SNS record has no TopicArn for the rewritten alarms to notify";
            tracing::error!(alarm = %n.alarm, stream, reason = why, "skipped");
            return Ok(Outcome::skipped(&n.alarm, Some(stream), why));
        }
        tracing::info!(alarm = %n.alarm, stream, direction = direction.word(), "alarm");
        let tags = self.tags(stream).await?;
        let tags = match StreamTags::parse(self.defaults, &tags) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(
                    alarm = %n.alarm,
                    stream,
                    tag = %e.name,
                    value = %e.value,
                    "a tag of the stream has a bad value: the stream is not scaled ({e})"
                );
                return Ok(Outcome::skipped(&n.alarm, Some(stream), format!("tag {e}")));
            }
        };
        let outcome = |action, from, to, reason: String| Outcome {
            alarm: n.alarm.clone(),
            stream: Some(stream.to_string()),
            action,
            from,
            to,
            reason,
        };
        if let Some(left) = cooldown_left(direction, tags.last_scaling_event, Utc::now()) {
            let last = tags
                .last_scaling_event
                .map(|t| t.to_rfc3339())
                .unwrap_or_default();
            let reason = format!(
                "Last scaling event is too recent ({last}): a {} waits {} minutes after it, \
                 {}s left",
                direction.word(),
                direction.cooldown().as_secs() / 60,
                left.as_secs()
            );
            self.set_insufficient_data(&n.alarm, &reason).await?;
            tracing::info!(alarm = %n.alarm, stream, reason = %reason, "cooldown");
            return Ok(outcome(Action::Cooldown, None, None, reason));
        }
        let from = self.open_shards(stream).await?;
        if from == 0 {
            let why = "the stream has no open shards";
            tracing::warn!(alarm = %n.alarm, stream, reason = why, "skipped");
            return Ok(Outcome::skipped(&n.alarm, Some(stream), why));
        }
        let target = target_count(from, direction, tags.minimum, tags.maximum);
        let to = target.to;
        if to == from {
            let reason = target.limited_by.unwrap_or_else(|| {
                format!("a {} of {from} shards leaves {from}", direction.word())
            });
            tracing::info!(alarm = %n.alarm, stream, shards = from, reason = %reason, "unchanged");
            return Ok(outcome(Action::Unchanged, Some(from), Some(to), reason));
        }
        self.reshard(stream, to).await?;
        self.kinesis
            .add_tags_to_stream()
            .stream_name(stream)
            .tags(LAST_SCALING_EVENT_TAG, Utc::now().to_rfc3339())
            .send()
            .await
            .map_err(kinesis_error("AddTagsToStream", stream))?;
        self.rewrite_alarms(stream, topic, to, &tags.settings)
            .await?;
        let action = if to > from {
            Action::Upscaled
        } else {
            Action::Downscaled
        };
        let reason = match target.limited_by {
            Some(why) => format!("{} alarm; {why}", direction.word()),
            None => format!("{} alarm", direction.word()),
        };
        tracing::info!(alarm = %n.alarm, stream, from, to, reason = %reason, "scaled");
        Ok(outcome(action, Some(from), Some(to), reason))
    }

    /// The stream's tags (key, value), every page.
    async fn tags(&self, stream: &str) -> Result<Vec<(String, String)>, ScaleError> {
        let mut out = Vec::new();
        let mut start: Option<String> = None;
        loop {
            let page = self
                .kinesis
                .list_tags_for_stream()
                .stream_name(stream)
                .set_exclusive_start_tag_key(start.take())
                .send()
                .await
                .map_err(kinesis_error("ListTagsForStream", stream))?;
            out.extend(page.tags().iter().map(|t| {
                (
                    t.key().to_string(),
                    t.value().unwrap_or_default().to_string(),
                )
            }));
            match page.tags().last() {
                Some(last) if page.has_more_tags() => start = Some(last.key().to_string()),
                _ => return Ok(out),
            }
        }
    }

    /// The stream's open shards (those without an ending sequence number), every page.
    async fn open_shards(&self, stream: &str) -> Result<u32, ScaleError> {
        let mut open = 0;
        let mut token: Option<String> = None;
        loop {
            // A page after the first is named by its token alone.
            let req = match token.take() {
                Some(t) => self.kinesis.list_shards().next_token(t),
                None => self.kinesis.list_shards().stream_name(stream),
            };
            let page = req
                .send()
                .await
                .map_err(kinesis_error("ListShards", stream))?;
            open += page
                .shards()
                .iter()
                .filter(|s| {
                    s.sequence_number_range()
                        .and_then(|r| r.ending_sequence_number())
                        .is_none()
                })
                .count() as u32;
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_string()),
                _ => return Ok(open),
            }
        }
    }

    /// Asks for `to` shards and waits until the stream is no longer updating, until shortly
    /// before the invocation's deadline.
    async fn reshard(&self, stream: &str, to: u32) -> Result<(), ScaleError> {
        self.kinesis
            .update_shard_count()
            .stream_name(stream)
            .target_shard_count(to as i32)
            .scaling_type(ScalingType::UniformScaling)
            .send()
            .await
            .map_err(kinesis_error("UpdateShardCount", stream))?;
        let give_up = sluice_engine::invocation::deadline()
            .map(|d| d.checked_sub(DEADLINE_MARGIN).unwrap_or(d))
            .unwrap_or_else(|| Instant::now() + MAX_WAIT);
        loop {
            let summary = self
                .kinesis
                .describe_stream_summary()
                .stream_name(stream)
                .send()
                .await
                .map_err(kinesis_error("DescribeStreamSummary", stream))?;
            let status = summary
                .stream_description_summary()
                .map(|s| s.stream_status().clone());
            if status != Some(StreamStatus::Updating) {
                return Ok(());
            }
            if Instant::now() + POLL > give_up {
                return Err(ScaleError::StillUpdating {
                    stream: stream.to_string(),
                    to,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Writes `<stream>_upscale` and `<stream>_downscale` for `shards` shards, each reset to
    /// `INSUFFICIENT_DATA`.
    async fn rewrite_alarms(
        &self,
        stream: &str,
        topic: &str,
        shards: u32,
        s: &Settings,
    ) -> Result<(), ScaleError> {
        let queries = metric_queries(stream, shards);
        let alarms = [
            (
                format!("{stream}_downscale"),
                ComparisonOperator::LessThanOrEqualToThreshold,
                s.downscale_threshold(),
                s.downscale_datapoints,
            ),
            (
                format!("{stream}_upscale"),
                ComparisonOperator::GreaterThanOrEqualToThreshold,
                s.threshold,
                s.upscale_datapoints,
            ),
        ];
        for (name, comparison, threshold, datapoints) in alarms {
            self.cloudwatch
                .put_metric_alarm()
                .alarm_name(&name)
                .alarm_description(stream)
                .actions_enabled(true)
                .alarm_actions(topic)
                .evaluation_periods(datapoints as i32)
                .datapoints_to_alarm(datapoints as i32)
                .threshold(threshold)
                .comparison_operator(comparison)
                .treat_missing_data("ignore")
                .set_metrics(Some(queries.clone()))
                .send()
                .await
                .map_err(cloudwatch_error("PutMetricAlarm", &name))?;
            self.set_insufficient_data(&name, "Threshold updated")
                .await?;
        }
        Ok(())
    }

    async fn set_insufficient_data(&self, alarm: &str, reason: &str) -> Result<(), ScaleError> {
        self.cloudwatch
            .set_alarm_state()
            .alarm_name(alarm)
            .state_value(StateValue::InsufficientData)
            .state_reason(reason)
            .send()
            .await
            .map_err(cloudwatch_error("SetAlarmState", alarm))?;
        Ok(())
    }
}

/// The bootstrap of `AWS_KINESIS_AUTOSCALE`: the settings from the environment, the SDK
/// clients, then the runtime API loop. `started` is when the process started.
pub fn main(started: Instant) -> std::process::ExitCode {
    use std::process::ExitCode;
    let defaults = match settings_from(|k| std::env::var(k).ok()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "init failed");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "init failed: no tokio runtime");
            return ExitCode::FAILURE;
        }
    };
    let conf = runtime.block_on(sluice_transforms::aws::load(&AwsTarget::default()));
    if conf.region().is_none() {
        tracing::error!(
            error = "no AWS region: set AWS_REGION (Lambda sets it)",
            "init failed"
        );
        return ExitCode::FAILURE;
    }
    let scaler = std::sync::Arc::new(Autoscaler::new(
        aws_sdk_kinesis::Client::new(&conf),
        aws_sdk_cloudwatch::Client::new(&conf),
        defaults,
    ));
    tracing::info!(
        handler = HandlerKind::KinesisAutoscale.name(),
        threshold = defaults.threshold,
        upscale_datapoints = defaults.upscale_datapoints,
        downscale_datapoints = defaults.downscale_datapoints,
        init_ms = started.elapsed().as_secs_f64() * 1e3,
        "init done"
    );
    let r = runtime.block_on(lambda_runtime::run(lambda_runtime::service_fn(
        move |event: LambdaEvent<Value>| {
            let s = scaler.clone();
            async move { s.handle(event).await }
        },
    )));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the runtime loop ended");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Down, Up};
    use serde_json::json;

    /// (current, direction, MinimumShards, MaximumShards, expected)
    type ShardCase = (u32, Direction, Option<u32>, Option<u32>, u32);

    #[test]
    fn shard_counts() {
        let table: &[ShardCase] = &[
            // The factors, at each boundary.
            (1, Up, None, None, 2),
            (4, Up, None, None, 8),
            (5, Up, None, None, 8),   // 5 × 1.75 = 8.75
            (12, Up, None, None, 21), // 12 × 1.75 = 21
            (13, Up, None, None, 19), // 13 × 1.5 = 19.5
            (32, Up, None, None, 48),
            (33, Up, None, None, 41), // 33 × 1.25 = 41.25
            (1, Down, None, None, 1), // at least 1
            (4, Down, None, None, 2),
            (5, Down, None, None, 3),   // 5 / 1.75 = 2.86
            (12, Down, None, None, 7),  // 12 / 1.75 = 6.86
            (13, Down, None, None, 9),  // 13 / 1.5 = 8.67
            (32, Down, None, None, 22), // 32 / 1.5 = 21.3
            (33, Down, None, None, 27), // 33 / 1.25 = 26.4
            // MinimumShards and MaximumShards.
            (4, Up, None, Some(6), 6),
            (4, Up, None, Some(4), 4),
            (8, Down, Some(6), None, 6),
            (8, Down, Some(2), Some(20), 5),
            // UpdateShardCount: at most double, at least half.
            (1, Up, Some(10), None, 2),
            (10, Down, None, Some(3), 5),
            (9_000, Up, None, None, 10_000),
            // A limit never reverses the direction.
            (10, Up, None, Some(8), 10),
            (3, Down, Some(5), None, 3),
        ];
        for &(current, dir, min, max, want) in table {
            let got = target_count(current, dir, min, max);
            assert_eq!(got.to, want, "{current} {dir:?} min {min:?} max {max:?}");
        }
        assert_eq!(
            target_count(4, Up, None, Some(6)).limited_by.unwrap(),
            "MaximumShards is 6"
        );
        assert_eq!(target_count(4, Up, None, None).limited_by, None);
        assert_eq!(
            target_count(1, Up, Some(10), None).limited_by.unwrap(),
            "UpdateShardCount allows at most 2 from 1"
        );
        assert!(
            target_count(10, Up, None, Some(8))
                .limited_by
                .unwrap()
                .contains("never goes the other way")
        );
    }

    fn math_alarm(name: &str, state: &str, dimension: Value) -> String {
        let metric = |id: &str, metric: &str| {
            json!({
                "Id": id,
                "Label": metric,
                "MetricStat": {
                    "Metric": {
                        "Dimensions": [dimension.clone()],
                        "MetricName": metric,
                        "Namespace": "AWS/Kinesis",
                    },
                    "Period": 60,
                    "Stat": "Sum",
                },
                "ReturnData": false,
            })
        };
        json!({
            "AlarmName": name,
            "NewStateValue": state,
            "OldStateValue": "INSUFFICIENT_DATA",
            "Trigger": {
                "Period": 60,
                "EvaluationPeriods": 5,
                "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                "Threshold": 0.7,
                "Metrics": [
                    metric("m1", "IncomingRecords"),
                    metric("m2", "IncomingBytes"),
                    {"Id": "e5", "Expression": "MAX([e3,e4])", "Label": "IncomingMax", "ReturnData": true},
                ],
            },
        })
        .to_string()
    }

    #[test]
    fn alarm_notifications() {
        // A metric-math alarm, as CloudWatch sends it (lower-case dimension keys).
        let n = parse_notification(&math_alarm(
            "in_upscale",
            "ALARM",
            json!({"value": "in", "name": "StreamName"}),
        ))
        .unwrap();
        assert_eq!(n.stream.as_deref(), Some("in"));
        assert_eq!(trigger(&n), Ok((Up, "in")));
        // The API's spelling of dimensions.
        let n = parse_notification(&math_alarm(
            "in_downscale",
            "ALARM",
            json!({"Name": "StreamName", "Value": "in"}),
        ))
        .unwrap();
        assert_eq!(trigger(&n), Ok((Down, "in")));
        // A classic single-metric alarm.
        let classic = json!({
            "AlarmName": "logs_upscale",
            "NewStateValue": "ALARM",
            "Trigger": {
                "MetricName": "IncomingBytes",
                "Namespace": "AWS/Kinesis",
                "Dimensions": [{"value": "logs", "name": "StreamName"}],
            },
        });
        let n = parse_notification(&classic.to_string()).unwrap();
        assert_eq!(trigger(&n), Ok((Up, "logs")));
        // Back to OK: nothing to do.
        let n = parse_notification(&math_alarm(
            "in_upscale",
            "OK",
            json!({"value": "in", "name": "StreamName"}),
        ))
        .unwrap();
        assert!(trigger(&n).unwrap_err().contains("not ALARM"));
        // No stream among the dimensions.
        let n = parse_notification(&math_alarm(
            "in_upscale",
            "ALARM",
            json!({"value": "x", "name": "ShardId"}),
        ))
        .unwrap();
        assert_eq!(n.stream, None);
        assert!(trigger(&n).unwrap_err().contains("no StreamName"));
        // A name without the suffix: "upscale" elsewhere in it is not enough.
        let n = parse_notification(&math_alarm(
            "upscale_in",
            "ALARM",
            json!({"value": "in", "name": "StreamName"}),
        ))
        .unwrap();
        assert!(trigger(&n).unwrap_err().contains("neither"));
        // Not an alarm at all.
        assert!(parse_notification("hello").unwrap_err().contains("JSON"));
        assert!(
            parse_notification("{}")
                .unwrap_err()
                .contains("no AlarmName")
        );
    }

    fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn stream_tags_override_the_defaults() {
        let d = Settings::default();
        let t = StreamTags::parse(d, &tags(&[("team", "x")])).unwrap();
        assert_eq!(t.settings, d);
        assert_eq!(
            (t.minimum, t.maximum, t.last_scaling_event),
            (None, None, None)
        );
        let t = StreamTags::parse(
            d,
            &tags(&[
                ("AutoscaleThreshold", "0.5"),
                ("AutoscaleUpscaleDatapoints", "3"),
                ("AutoscaleDownscaleDatapoints", "1440"),
                ("MinimumShards", "2"),
                ("MaximumShards", "0"),
                ("LastScalingEvent", "2025-01-02T03:04:05Z"),
            ]),
        )
        .unwrap();
        assert_eq!(
            t.settings,
            Settings {
                threshold: 0.5,
                upscale_datapoints: 3,
                downscale_datapoints: 1440
            }
        );
        assert_eq!(t.settings.downscale_threshold(), 0.15);
        assert_eq!((t.minimum, t.maximum), (Some(2), None));
        assert_eq!(
            t.last_scaling_event.unwrap().to_rfc3339(),
            "2025-01-02T03:04:05+00:00"
        );
        for (tag, value, allowed) in [
            ("AutoscaleThreshold", "0.95", "a number from 0.4 to 0.9"),
            ("AutoscaleThreshold", "high", "a number from 0.4 to 0.9"),
            (
                "AutoscaleUpscaleDatapoints",
                "0",
                "a whole number from 1 to 1440",
            ),
            (
                "AutoscaleDownscaleDatapoints",
                "1441",
                "a whole number from 1 to 1440",
            ),
            (
                "MaximumShards",
                "-1",
                "a whole number of shards (0 for none)",
            ),
            ("LastScalingEvent", "yesterday", "an RFC 3339 time"),
        ] {
            let e = StreamTags::parse(d, &tags(&[(tag, value)])).unwrap_err();
            assert_eq!((e.name.as_str(), e.value.as_str()), (tag, value));
            assert_eq!(e.allowed, allowed, "{tag}={value}");
        }
        let e = StreamTags::parse(d, &tags(&[("MinimumShards", "5"), ("MaximumShards", "4")]))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "MinimumShards is \"5\": expected at most MaximumShards (4)"
        );
    }

    #[test]
    fn environment_defaults() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(settings_from(env(&[])).unwrap(), Settings::default());
        assert_eq!(Settings::default().downscale_threshold(), 0.35);
        let s = settings_from(env(&[
            ("AUTOSCALE_KINESIS_THRESHOLD", "0.9"),
            ("AUTOSCALE_KINESIS_UPSCALE_DATAPOINTS", "1"),
            ("AUTOSCALE_KINESIS_DOWNSCALE_DATAPOINTS", "30"),
        ]))
        .unwrap();
        assert_eq!(
            (s.threshold, s.upscale_datapoints, s.downscale_datapoints),
            (0.9, 1, 30)
        );
        let e = settings_from(env(&[("AUTOSCALE_KINESIS_THRESHOLD", "1.5")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "AUTOSCALE_KINESIS_THRESHOLD is \"1.5\": expected a number from 0.4 to 0.9"
        );
        let e =
            settings_from(env(&[("AUTOSCALE_KINESIS_UPSCALE_DATAPOINTS", "five")])).unwrap_err();
        assert_eq!(e.name, "AUTOSCALE_KINESIS_UPSCALE_DATAPOINTS");
        assert!(settings_from(env(&[("AUTOSCALE_KINESIS_THRESHOLD", "NaN")])).is_err());
    }

    #[test]
    fn cooldowns() {
        let now = DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let ago = |secs: i64| Some(now - chrono::Duration::seconds(secs));
        // (direction, last scaling event, seconds still to wait)
        type CooldownCase = (Direction, Option<DateTime<Utc>>, Option<u64>);
        let table: &[CooldownCase] = &[
            (Up, None, None),
            (Down, None, None),
            (Up, ago(60), Some(120)),
            (Up, ago(180), None),
            (Up, ago(179), Some(1)),
            (Down, ago(180), Some(1620)),
            (Down, ago(1799), Some(1)),
            (Down, ago(1800), None),
            (Down, ago(86_400), None),
            // A tag in the future (another clock): the whole cooldown.
            (Up, ago(-600), Some(180)),
        ];
        for &(dir, last, want) in table {
            assert_eq!(
                cooldown_left(dir, last, now).map(|d| d.as_secs()),
                want,
                "{dir:?} {last:?}"
            );
        }
    }

    #[test]
    fn the_alarm_metrics_name_the_shard_count() {
        let q = metric_queries("in", 3);
        let ids: Vec<&str> = q.iter().filter_map(|m| m.id()).collect();
        assert_eq!(ids, ["m1", "m2", "e1", "e2", "e3", "e4", "e5"]);
        let expr = |id: &str| q.iter().find(|m| m.id() == Some(id)).unwrap().expression();
        assert_eq!(expr("e3"), Some("e1/(1000*3*60)"));
        assert_eq!(expr("e4"), Some("e2/(1048576*3*60)"));
        assert_eq!(expr("e5"), Some("MAX([e3,e4])"));
        let returned: Vec<&str> = q
            .iter()
            .filter(|m| m.return_data() == Some(true))
            .filter_map(|m| m.id())
            .collect();
        assert_eq!(returned, ["e5"]);
        let m1 = q[0].metric_stat().unwrap();
        assert_eq!(m1.period(), Some(60));
        assert_eq!(m1.stat(), Some("Sum"));
        let dim = &m1.metric().unwrap().dimensions()[0];
        assert_eq!((dim.name(), dim.value()), (Some("StreamName"), Some("in")));
    }

    #[test]
    fn outcomes_serialise_without_absent_counts() {
        let o = Outcome::skipped("a_upscale", None, "why");
        assert_eq!(
            serde_json::to_value(&o).unwrap(),
            json!({"alarm": "a_upscale", "action": "skipped", "reason": "why"})
        );
    }
}
