//! The autoscaler's AWS side: its Kinesis and CloudWatch clients, the calls of one
//! scaling (see the module above for the steps), the alarms' metric math, and the
//! bootstrap.

use std::time::{Duration, Instant};

use aws_sdk_cloudwatch::types::{
    ComparisonOperator, Dimension, Metric, MetricDataQuery, MetricStat, StateValue,
};
use aws_sdk_kinesis::types::{ScalingType, StreamStatus};
use chrono::Utc;
use lambda_runtime::LambdaEvent;
use serde::Deserialize;
use serde_json::Value;
use sluice_platform::aws::{AwsTarget, describe_error};
use tracing::Instrument;

use super::*;
use crate::bootstrap::{build_runtime, serve};
use crate::{Event, HandlerError, HandlerKind, parse_event};

/// The alarms' period, in seconds.
pub(crate) const PERIOD: i32 = 60;
/// How often the stream's status is read while it is updating.
const POLL: Duration = Duration::from_secs(1);
/// How long before the invocation's deadline the wait gives up, leaving time to answer.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);
/// The longest wait outside an invocation with a deadline (Lambda's longest timeout).
const MAX_WAIT: Duration = Duration::from_secs(15 * 60);

impl Outcome {
    pub(super) fn skipped(alarm: &str, stream: Option<&str>, reason: impl Into<String>) -> Outcome {
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
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, HandlerError> {
        self.handle_event(LambdaEvent::new(Event::Json(event.payload), event.context))
            .await
    }

    /// [`Autoscaler::handle`] for the event as the bootstrap reads it ([`Event`]: JSON, or
    /// why the body is not JSON).
    pub async fn handle_event(&self, event: LambdaEvent<Event>) -> Result<Value, HandlerError> {
        let span = tracing::info_span!("invocation", request_id = %event.context.request_id);
        let work = async {
            let r = match event.payload {
                Event::Json(payload) => self.handle_payload(payload).await,
                Event::Invalid(why) => Err(HandlerError::invalid_event(
                    HandlerKind::KinesisAutoscale,
                    why,
                )),
                // Only the Kinesis data stream handler reads its events as Kinesis events.
                Event::Kinesis(_) => Err(HandlerError::invalid_event(
                    HandlerKind::KinesisAutoscale,
                    "a Kinesis event, not SNS notifications",
                )),
            };
            if let Err(e) = &r {
                tracing::error!(error_type = e.kind(), error = %e, "invocation failed");
            }
            r
        };
        match crate::deadline_instant(event.context.deadline) {
            Some(d) => {
                sluice_engine::invocation::with_deadline(d, work)
                    .instrument(span)
                    .await
            }
            None => work.instrument(span).await,
        }
    }

    async fn handle_payload(&self, payload: Value) -> Result<Value, HandlerError> {
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
            Some(first) if total == 1 => Err(HandlerError::scale(first, first.to_string())),
            Some(first) => Err(HandlerError::scale(
                first,
                format!(
                    "{} of {total} alarms could not be handled (first: {first})",
                    failures.len()
                ),
            )),
        }
    }

    /// Handles the alarm notification `message` that came through topic `topic`.
    pub(super) async fn record(&self, topic: &str, message: &str) -> Result<Outcome, ScaleError> {
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
        // A stream that is still resharding (an earlier invocation's UpdateShardCount that
        // outlasted it) is left to finish: its count is not the one to scale from.
        if self.stream_status(stream).await? == Some(StreamStatus::Updating) {
            let reason = "the stream is still resharding (UPDATING): it is scaled, if the load \
                          persists, once that ends"
                .to_string();
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
        // An alarm written for another count measures the stream's use against the wrong
        // capacity: an invocation that timed out while the stream resharded left the old
        // alarms, which fire again at once. Scaling on them would scale twice.
        if let Some(written_for) = self.alarm_shards(&n.alarm).await?
            && written_for != from
        {
            self.rewrite_alarms(stream, topic, from, &tags.settings)
                .await?;
            let reason = format!(
                "the alarm was written for {written_for} shards and the stream has {from} (a \
                 resharding that outlasted its invocation): both alarms were rewritten for \
                 {from} shards, and nothing was resharded"
            );
            tracing::warn!(alarm = %n.alarm, stream, reason = %reason, "realigned");
            return Ok(outcome(
                Action::Realigned,
                Some(written_for),
                Some(from),
                reason,
            ));
        }
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

    /// The stream's status.
    async fn stream_status(&self, stream: &str) -> Result<Option<StreamStatus>, ScaleError> {
        let summary = self
            .kinesis
            .describe_stream_summary()
            .stream_name(stream)
            .send()
            .await
            .map_err(kinesis_error("DescribeStreamSummary", stream))?;
        Ok(summary
            .stream_description_summary()
            .map(|s| s.stream_status().clone()))
    }

    /// The shard count alarm `name`'s metric math was written for ([`alarm_shards`]); `None`
    /// when there is no such alarm or its math has no count.
    async fn alarm_shards(&self, name: &str) -> Result<Option<u32>, ScaleError> {
        let found = self
            .cloudwatch
            .describe_alarms()
            .alarm_names(name)
            .send()
            .await
            .map_err(cloudwatch_error("DescribeAlarms", name))?;
        Ok(found
            .metric_alarms()
            .first()
            .and_then(|a| alarm_shards(a.metrics().iter().filter_map(|q| q.expression()))))
    }

    /// Asks for `to` shards, tags the stream `LastScalingEvent` at once (so that a retry of
    /// this invocation, should it time out while the stream reshards, is refused by the
    /// cooldown), and waits until the stream is no longer updating, until shortly before the
    /// invocation's deadline.
    async fn reshard(&self, stream: &str, to: u32) -> Result<(), ScaleError> {
        self.kinesis
            .update_shard_count()
            .stream_name(stream)
            .target_shard_count(to as i32)
            .scaling_type(ScalingType::UniformScaling)
            .send()
            .await
            .map_err(kinesis_error("UpdateShardCount", stream))?;
        self.kinesis
            .add_tags_to_stream()
            .stream_name(stream)
            .tags(LAST_SCALING_EVENT_TAG, Utc::now().to_rfc3339())
            .send()
            .await
            .map_err(kinesis_error("AddTagsToStream", stream))?;
        let give_up = sluice_engine::invocation::deadline()
            .map(|d| d.checked_sub(DEADLINE_MARGIN).unwrap_or(d))
            .unwrap_or_else(|| Instant::now() + MAX_WAIT);
        loop {
            if self.stream_status(stream).await? != Some(StreamStatus::Updating) {
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
    let Some(runtime) = build_runtime(&mut tokio::runtime::Builder::new_current_thread()) else {
        return ExitCode::FAILURE;
    };
    let conf = runtime.block_on(sluice_platform::aws::load(&AwsTarget::default()));
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
    serve(&runtime, move |event| {
        let s = scaler.clone();
        async move { s.handle_event(event).await }
    })
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
