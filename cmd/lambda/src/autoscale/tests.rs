//! The autoscaler's decisions as tables: shard counts, notifications, tags, settings,
//! cooldowns, alarm metrics.

use super::*;
use Direction::{Down, Up};
use aws_sdk_kinesis::types::StreamStatus;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

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
    let e =
        StreamTags::parse(d, &tags(&[("MinimumShards", "5"), ("MaximumShards", "4")])).unwrap_err();
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
    let e = settings_from(env(&[("AUTOSCALE_KINESIS_UPSCALE_DATAPOINTS", "five")])).unwrap_err();
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

#[test]
fn the_count_an_alarm_was_written_for() {
    // (the alarm's expressions, the count read from them)
    let cases: &[(&[&str], Option<u32>)] = &[
        // As metric_queries writes them.
        (
            &[
                "FILL(m1,REPEAT)",
                "FILL(m2,REPEAT)",
                "e1/(1000*4*60)",
                "e2/(1048576*4*60)",
                "MAX([e3,e4])",
            ],
            Some(4),
        ),
        // The bytes alone, spaced out; a deployment's single expression.
        (&["e2 / (1048576 * 12 * 60)"], Some(12)),
        (&["m1/(1000*1*60)"], Some(1)),
        // Math of another shape says nothing.
        (&["m1/60", "MAX([e3,e4])"], None),
        (&["m1/(1000*n*60)"], None),
        (&[], None),
    ];
    for (expressions, want) in cases {
        assert_eq!(
            alarm_shards(expressions.iter().copied()),
            *want,
            "{expressions:?}"
        );
    }
    // What metric_queries writes reads back as its count.
    for shards in [1, 3, 10_000] {
        let queries = metric_queries("s", shards);
        assert_eq!(
            alarm_shards(queries.iter().filter_map(|q| q.expression())),
            Some(shards)
        );
    }
}

/// A stream still resharding (an earlier invocation's UpdateShardCount that outlasted it,
/// which moto cannot show: it reshards at once) is left to finish: the alarm is reset, and
/// neither the shards nor the alarms are touched.
#[tokio::test]
async fn a_stream_still_resharding_is_left_alone() {
    use aws_sdk_cloudwatch::operation::set_alarm_state::SetAlarmStateOutput;
    use aws_sdk_kinesis::operation::describe_stream_summary::DescribeStreamSummaryOutput;
    use aws_sdk_kinesis::operation::list_tags_for_stream::ListTagsForStreamOutput;
    use aws_sdk_kinesis::types::StreamDescriptionSummary;
    use aws_smithy_mocks::{RuleMode, mock, mock_client};

    let tags = mock!(aws_sdk_kinesis::Client::list_tags_for_stream).then_output(|| {
        ListTagsForStreamOutput::builder()
            .set_tags(Some(Vec::new()))
            .has_more_tags(false)
            .build()
            .unwrap()
    });
    let summary = mock!(aws_sdk_kinesis::Client::describe_stream_summary).then_output(|| {
        DescribeStreamSummaryOutput::builder()
            .stream_description_summary(
                StreamDescriptionSummary::builder()
                    .stream_name("s")
                    .stream_arn("arn:aws:kinesis:us-east-1:123456789012:stream/s")
                    .stream_status(StreamStatus::Updating)
                    .retention_period_hours(24)
                    .stream_creation_timestamp(aws_sdk_kinesis::primitives::DateTime::from_secs(0))
                    .set_enhanced_monitoring(Some(Vec::new()))
                    .open_shard_count(2)
                    .build()
                    .unwrap(),
            )
            .build()
    });
    let kinesis = mock_client!(aws_sdk_kinesis, RuleMode::MatchAny, [&tags, &summary]);
    let reset = mock!(aws_sdk_cloudwatch::Client::set_alarm_state)
        .then_output(|| SetAlarmStateOutput::builder().build());
    let cloudwatch = mock_client!(aws_sdk_cloudwatch, [&reset]);
    let scaler = Autoscaler::new(kinesis, cloudwatch, Settings::default());
    let message = json!({
        "AlarmName": "s_upscale",
        "NewStateValue": "ALARM",
        "Trigger": {"Metrics": [{"Id": "m1", "MetricStat": {"Metric": {
            "Dimensions": [{"name": "StreamName", "value": "s"}]}}}]},
    });
    let out = scaler
        .record("arn:aws:sns:us-east-1:123456789012:t", &message.to_string())
        .await
        .unwrap();
    assert_eq!(out.action, Action::Cooldown);
    assert!(
        out.reason.contains("still resharding (UPDATING)"),
        "{out:?}"
    );
    assert_eq!(reset.num_calls(), 1, "the alarm is reset to fire again");
    // Any other call (ListShards, UpdateShardCount, DescribeAlarms) would have found no
    // rule and failed the record.
}
