//! `AWS_KINESIS_AUTOSCALE` end to end: the `sluice-lambda` bootstrap, without a config,
//! run through the Lambda runtime API (cargo-lambda's emulator, as in `lambda_e2e`) and
//! invoked with SNS events carrying CloudWatch alarm notifications; the streams are moto's
//! Kinesis streams and the alarms moto's CloudWatch alarms (reached through the CBOR proxy
//! of `common::cloudwatch`, since moto does not speak the CloudWatch SDK's protocol).
//!
//! Each test makes its own streams and alarms (unique names), as a deployment would: two
//! alarms per stream, notifying a topic the function is subscribed to.

use std::io::Read;
use std::process::Child;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::common::{Dir, cloudwatch, dynamodb, moto, runtime};
use crate::lambda_e2e::{
    Proc, bootstrap_command, free_port, function_error, invoke, runtime_api, try_invoke,
};

const TOPIC: &str = "arn:aws:sns:us-east-1:123456789012:sluice-autoscale";

/// A function under test: moto, the runtime API and the bootstrap, with `env` added.
struct Function {
    moto: String,
    port: u16,
    proc: Proc,
    _api: Proc,
    dir: Dir,
    rt: tokio::runtime::Runtime,
}

impl Function {
    fn start(env: &[(&str, &str)]) -> Function {
        let moto = moto::endpoint();
        let mut all = moto::process_env(&moto);
        all.push((
            "AWS_ENDPOINT_URL_CLOUDWATCH".into(),
            cloudwatch::cbor_endpoint(&moto),
        ));
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let (api, port) = runtime_api();
        let proc = Proc(spawn(port, &all));
        Function {
            moto,
            port,
            proc,
            _api: api,
            dir: Dir::new(),
            rt: runtime(),
        }
    }

    /// Invokes it with an SNS event of `records` (alarm, stream, state); answers `results`.
    fn invoke(&mut self, records: &[(&str, &str, &str)]) -> Vec<Value> {
        let event = self.dir.write("event.json", sns_event(records).to_string());
        let resp = invoke(self.port, &event, &mut self.proc);
        resp["results"]
            .as_array()
            .unwrap_or_else(|| panic!("no results: {resp}"))
            .clone()
    }

    /// A stream of `shards` shards with `tags`, and its two alarms as a deployment writes
    /// them for that count.
    fn stream(&self, prefix: &str, shards: i32, tags: &[(&str, &str)]) -> String {
        let name = dynamodb::unique_table(prefix);
        self.rt.block_on(async {
            moto::create_stream(&self.moto, &name, shards).await;
            if !tags.is_empty() {
                let mut req = moto::kinesis(&self.moto)
                    .add_tags_to_stream()
                    .stream_name(&name);
                for (k, v) in tags {
                    req = req.tags(*k, *v);
                }
                req.send().await.expect("tagging the stream");
            }
        });
        self.alarms(&name, shards);
        name
    }

    /// The stream's two alarms as a deployment writes them for `shards` shards.
    fn alarms(&self, name: &str, shards: i32) {
        for (suffix, op, threshold, datapoints) in [
            ("upscale", "GreaterThanOrEqualToThreshold", 0.7, 5),
            ("downscale", "LessThanOrEqualToThreshold", 0.35, 60),
        ] {
            cloudwatch::call(
                &self.moto,
                "PutMetricAlarm",
                &json!({
                    "AlarmName": format!("{name}_{suffix}"),
                    "AlarmDescription": name,
                    "ActionsEnabled": true,
                    "AlarmActions": [TOPIC],
                    "EvaluationPeriods": datapoints,
                    "DatapointsToAlarm": datapoints,
                    "Threshold": threshold,
                    "ComparisonOperator": op,
                    "TreatMissingData": "ignore",
                    "Metrics": [
                        metric("m1", "IncomingRecords", name),
                        {"Id": "e1", "Expression": format!("m1/(1000*{shards}*60)"),
                         "Label": "IncomingRecordsPercent", "ReturnData": true},
                    ],
                }),
            );
        }
    }

    /// The stream's open shards.
    fn open_shards(&self, stream: &str) -> usize {
        self.rt.block_on(async {
            moto::kinesis(&self.moto)
                .list_shards()
                .stream_name(stream)
                .send()
                .await
                .expect("listing shards")
                .shards()
                .iter()
                .filter(|s| {
                    s.sequence_number_range()
                        .and_then(|r| r.ending_sequence_number())
                        .is_none()
                })
                .count()
        })
    }

    /// The stream's tag `key`.
    fn tag(&self, stream: &str, key: &str) -> Option<String> {
        self.rt.block_on(async {
            moto::kinesis(&self.moto)
                .list_tags_for_stream()
                .stream_name(stream)
                .send()
                .await
                .expect("listing tags")
                .tags()
                .iter()
                .find(|t| t.key() == key)
                .and_then(|t| t.value().map(String::from))
        })
    }

    fn alarm(&self, name: &str) -> Value {
        cloudwatch::alarm(&self.moto, name)
    }

    /// Stops the function and answers what it logged.
    fn logs(mut self) -> String {
        let _ = self.proc.0.kill();
        let _ = self.proc.0.wait();
        let mut out = String::new();
        if let Some(mut s) = self.proc.0.stdout.take() {
            let _ = s.read_to_string(&mut out);
        }
        out
    }
}

fn spawn(port: u16, env: &[(String, String)]) -> Child {
    bootstrap_command(port, "AWS_KINESIS_AUTOSCALE", env)
        .spawn()
        .expect("sluice-lambda")
}

fn metric(id: &str, name: &str, stream: &str) -> Value {
    json!({
        "Id": id,
        "Label": name,
        "MetricStat": {
            "Metric": {
                "Namespace": "AWS/Kinesis",
                "MetricName": name,
                "Dimensions": [{"Name": "StreamName", "Value": stream}],
            },
            "Period": 60,
            "Stat": "Sum",
        },
        "ReturnData": false,
    })
}

/// An SNS event with one record per (alarm, stream, new state): CloudWatch's state-change
/// notification of a metric-math alarm on the stream, as SNS delivers it to Lambda.
fn sns_event(records: &[(&str, &str, &str)]) -> Value {
    let records: Vec<Value> = records
        .iter()
        .map(|(alarm, stream, state)| {
            let dims = json!([{"value": stream, "name": "StreamName"}]);
            let message = json!({
                "AlarmName": alarm,
                "AlarmDescription": stream,
                "AWSAccountId": moto::ACCOUNT,
                "NewStateValue": state,
                "NewStateReason": "Threshold Crossed: 5 out of the last 5 datapoints",
                "StateChangeTime": "2025-01-01T00:00:00.000+0000",
                "Region": "US East (N. Virginia)",
                "AlarmArn": format!("arn:aws:cloudwatch:us-east-1:{}:alarm:{alarm}", moto::ACCOUNT),
                "OldStateValue": "INSUFFICIENT_DATA",
                "AlarmActions": [TOPIC],
                "Trigger": {
                    "Period": 60,
                    "EvaluationPeriods": 5,
                    "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                    "Threshold": 0.7,
                    "TreatMissingData": "ignore",
                    "Metrics": [
                        {"Id": "m1", "Label": "IncomingRecords", "ReturnData": false,
                         "MetricStat": {"Metric": {"Dimensions": dims, "MetricName": "IncomingRecords",
                                                   "Namespace": "AWS/Kinesis"},
                                        "Period": 60, "Stat": "Sum"}},
                        {"Id": "e5", "Expression": "MAX([e3,e4])", "Label": "IncomingMax",
                         "ReturnData": true},
                    ],
                },
            });
            json!({
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": format!("{TOPIC}:2bcfbf39-05c3-41de-beaa-fcfcc21c8f55"),
                "Sns": {
                    "Type": "Notification",
                    "MessageId": "95df01b4-ee98-5cb9-9903-4c221d41eb5e",
                    "TopicArn": TOPIC,
                    "Subject": format!("ALARM: \"{alarm}\" in US East (N. Virginia)"),
                    "Message": message.to_string(),
                    "Timestamp": "2025-01-01T00:00:05.000Z",
                    "SignatureVersion": "1",
                    "Signature": "EXAMPLE",
                    "SigningCertUrl": "https://sns.us-east-1.amazonaws.com/cert.pem",
                    "UnsubscribeUrl": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
                    "MessageAttributes": {},
                },
            })
        })
        .collect();
    json!({ "Records": records })
}

/// Asserts that `alarm` was rewritten for `shards` shards: comparison, threshold,
/// datapoints, the topic, the metric math, and reset to INSUFFICIENT_DATA.
fn assert_rewritten(
    a: &Value,
    stream: &str,
    shards: u32,
    upscale: bool,
    threshold: f64,
    datapoints: i64,
) {
    let name = a["AlarmName"].as_str().unwrap();
    let op = if upscale {
        "GreaterThanOrEqualToThreshold"
    } else {
        "LessThanOrEqualToThreshold"
    };
    assert_eq!(a["ComparisonOperator"], op, "{name}");
    assert_eq!(a["Threshold"].as_f64(), Some(threshold), "{name}");
    assert_eq!(a["EvaluationPeriods"], datapoints, "{name}");
    assert_eq!(a["DatapointsToAlarm"], datapoints, "{name}");
    assert_eq!(a["TreatMissingData"], "ignore", "{name}");
    assert_eq!(a["AlarmActions"], json!([TOPIC]), "{name}");
    assert_eq!(a["AlarmDescription"], stream, "{name}");
    assert_eq!(a["StateValue"], "INSUFFICIENT_DATA", "{name}");
    assert_eq!(a["StateReason"], "Threshold updated", "{name}");
    let queries = a["Metrics"].as_array().unwrap();
    let by_id = |id: &str| {
        queries
            .iter()
            .find(|q| q["Id"] == id)
            .unwrap_or_else(|| panic!("{name} has no {id}: {a}"))
    };
    assert_eq!(by_id("e1")["Expression"], "FILL(m1,REPEAT)");
    assert_eq!(by_id("e2")["Expression"], "FILL(m2,REPEAT)");
    assert_eq!(by_id("e3")["Expression"], format!("e1/(1000*{shards}*60)"));
    assert_eq!(
        by_id("e4")["Expression"],
        format!("e2/(1048576*{shards}*60)")
    );
    assert_eq!(by_id("e5")["Expression"], "MAX([e3,e4])");
    assert_eq!(by_id("e5")["ReturnData"], true);
    for (id, metric) in [("m1", "IncomingRecords"), ("m2", "IncomingBytes")] {
        let m = by_id(id);
        assert_eq!(m["ReturnData"], false);
        assert_eq!(m["MetricStat"]["Metric"]["MetricName"], metric);
        assert_eq!(m["MetricStat"]["Metric"]["Namespace"], "AWS/Kinesis");
        assert_eq!(
            m["MetricStat"]["Metric"]["Dimensions"],
            json!([{"Name": "StreamName", "Value": stream}])
        );
        assert_eq!(m["MetricStat"]["Period"], 60);
        assert_eq!(m["MetricStat"]["Stat"], "Sum");
    }
}

#[test]
fn an_upscale_doubles_a_one_shard_stream_and_a_second_one_waits_for_the_cooldown() {
    let mut f = Function::start(&[]);
    let s = f.stream("autoscale-up", 1, &[]);
    let up = format!("{s}_upscale");
    let down = format!("{s}_downscale");

    let before = Utc::now();
    let results = f.invoke(&[(&up, &s, "ALARM")]);
    assert_eq!(
        results,
        [
            json!({"alarm": up, "stream": s, "action": "upscaled", "from": 1, "to": 2,
                "reason": "upscale alarm"})
        ]
    );
    assert_eq!(f.open_shards(&s), 2);
    let last = f.tag(&s, "LastScalingEvent").expect("LastScalingEvent");
    let last: DateTime<Utc> = DateTime::parse_from_rfc3339(&last)
        .expect("RFC 3339")
        .into();
    assert!(
        last >= before - chrono::Duration::seconds(1) && last <= Utc::now(),
        "{last}"
    );
    assert_rewritten(&f.alarm(&up), &s, 2, true, 0.7, 5);
    assert_rewritten(&f.alarm(&down), &s, 2, false, 0.35, 60);

    // The alarm fires again at once: refused, and the alarm reset to fire again later.
    cloudwatch::call(
        &f.moto,
        "SetAlarmState",
        &json!({"AlarmName": up, "StateValue": "ALARM", "StateReason": "test"}),
    );
    let results = f.invoke(&[(&up, &s, "ALARM")]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["action"], "cooldown", "{results:?}");
    assert!(
        results[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("Last scaling event is too recent"),
        "{results:?}"
    );
    assert_eq!(f.open_shards(&s), 2);
    let a = f.alarm(&up);
    assert_eq!(a["StateValue"], "INSUFFICIENT_DATA");
    assert!(
        a["StateReason"]
            .as_str()
            .unwrap()
            .starts_with("Last scaling event is too recent"),
        "{a}"
    );
    // The rewritten thresholds stay.
    assert_rewritten(&f.alarm(&down), &s, 2, false, 0.35, 60);
}

/// An invocation that timed out while its stream resharded could not rewrite the alarms:
/// they still measure the stream against its old capacity and fire again. The next alarm
/// rewrites them for the stream's count instead of scaling a second time.
#[test]
fn an_alarm_left_for_the_old_count_is_realigned_not_scaled_again() {
    let mut f = Function::start(&[]);
    let s = f.stream("autoscale-stale", 2, &[]);
    f.alarms(&s, 1);
    let up = format!("{s}_upscale");
    let results = f.invoke(&[(&up, &s, "ALARM")]);
    assert_eq!(
        results,
        [
            json!({"alarm": up, "stream": s, "action": "realigned", "from": 1, "to": 2,
            "reason": "the alarm was written for 1 shards and the stream has 2 (a resharding \
                       that outlasted its invocation): both alarms were rewritten for 2 shards, \
                       and nothing was resharded"})
        ]
    );
    assert_eq!(f.open_shards(&s), 2, "not resharded");
    assert_eq!(f.tag(&s, "LastScalingEvent"), None);
    assert_rewritten(&f.alarm(&up), &s, 2, true, 0.7, 5);
    assert_rewritten(&f.alarm(&format!("{s}_downscale")), &s, 2, false, 0.35, 60);

    // Realigned, the next alarm scales as usual.
    let results = f.invoke(&[(&up, &s, "ALARM")]);
    assert_eq!(results[0]["action"], "upscaled", "{results:?}");
    assert_eq!(f.open_shards(&s), 4);
}

#[test]
fn maximum_shards_caps_an_upscale_and_a_failed_call_names_the_stream() {
    let mut f = Function::start(&[]);
    let s = f.stream("autoscale-max", 3, &[("MaximumShards", "4")]);
    let up = format!("{s}_upscale");
    let results = f.invoke(&[(&up, &s, "ALARM")]);
    assert_eq!(
        results,
        [
            json!({"alarm": up, "stream": s, "action": "upscaled", "from": 3, "to": 4,
                "reason": "upscale alarm; MaximumShards is 4"})
        ]
    );
    assert_eq!(f.open_shards(&s), 4);
    assert_rewritten(&f.alarm(&up), &s, 4, true, 0.7, 5);
    assert_rewritten(&f.alarm(&format!("{s}_downscale")), &s, 4, false, 0.35, 60);

    // At the maximum, a later upscale (after the cooldown) leaves the stream as it is.
    let t = f.stream("autoscale-at-max", 2, &[("MaximumShards", "2")]);
    let at_max = format!("{t}_upscale");
    let results = f.invoke(&[(&at_max, &t, "ALARM")]);
    assert_eq!(results[0]["action"], "unchanged", "{results:?}");
    assert_eq!(results[0]["reason"], "MaximumShards is 2");
    assert_eq!(f.open_shards(&t), 2);

    // An alarm that is gone while its stream cools down: a function error naming the call,
    // the alarm and why.
    let now = Utc::now().to_rfc3339();
    let cooling = f.stream("autoscale-cooling", 1, &[("LastScalingEvent", &now)]);
    let missing = format!("{cooling}_upscale-deleted_upscale");
    let event = f.dir.write(
        "missing.json",
        sns_event(&[(&missing, &cooling, "ALARM")]).to_string(),
    );
    let err = try_invoke(f.port, &event, &mut f.proc).unwrap_err();
    assert!(err.contains("CloudWatch SetAlarmState"), "{err}");
    assert_eq!(function_error(&err).0, "AwsCallFailed", "{err}");

    // A stream that does not exist: a function error naming the call, the stream and why.
    let gone = dynamodb::unique_table("autoscale-gone");
    let event = f.dir.write(
        "gone.json",
        sns_event(&[(&format!("{gone}_upscale"), &gone, "ALARM")]).to_string(),
    );
    let err = try_invoke(f.port, &event, &mut f.proc).unwrap_err();
    // cargo-lambda wraps the text it prints; the function's own log line has it whole.
    let printed: String = err
        .split_whitespace()
        .filter(|w| *w != "│")
        .collect::<Vec<_>>()
        .join(" ");
    let want = format!(
        "Kinesis ListTagsForStream of stream {gone} failed: ResourceNotFoundException \
         (Stream {gone} under account {} not found.)",
        moto::ACCOUNT
    );
    assert!(printed.contains(&want), "{err}");
    assert_eq!(function_error(&err).0, "AwsCallFailed", "{err}");
    let logs = f.logs();
    let errors: Vec<String> = logs
        .lines()
        .filter(|l| l.contains("invocation failed"))
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON log line");
            v["fields"]["error"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(errors.len(), 2, "{logs}");
    // moto's message is its generic one ("An unspecified service error occurred").
    assert!(
        errors[0].starts_with(&format!(
            "CloudWatch SetAlarmState of alarm {missing} failed: ResourceNotFound ("
        )),
        "{logs}"
    );
    assert_eq!(errors[1], want);
}

#[test]
fn stream_tags_set_each_streams_alarms_and_a_bad_tag_skips_only_its_stream() {
    // The environment's defaults for streams without tags of their own.
    let mut f = Function::start(&[
        ("AUTOSCALE_KINESIS_THRESHOLD", "0.8"),
        ("AUTOSCALE_KINESIS_DOWNSCALE_DATAPOINTS", "90"),
    ]);
    let bursty = f.stream(
        "autoscale-bursty",
        2,
        &[
            ("AutoscaleThreshold", "0.5"),
            ("AutoscaleUpscaleDatapoints", "2"),
            ("AutoscaleDownscaleDatapoints", "30"),
        ],
    );
    let an_hour_ago = (Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    let steady = f.stream("autoscale-steady", 4, &[("LastScalingEvent", &an_hour_ago)]);
    let broken = f.stream("autoscale-broken", 1, &[("AutoscaleThreshold", "2")]);

    let results = f.invoke(&[
        (&format!("{bursty}_upscale"), &bursty, "ALARM"),
        (&format!("{steady}_downscale"), &steady, "ALARM"),
        (&format!("{broken}_upscale"), &broken, "ALARM"),
        (&format!("{steady}_upscale"), &steady, "OK"),
    ]);
    assert_eq!(results.len(), 4, "every record: {results:?}");
    assert_eq!(
        results[0],
        json!({"alarm": format!("{bursty}_upscale"), "stream": bursty, "action": "upscaled",
               "from": 2, "to": 4, "reason": "upscale alarm"})
    );
    assert_eq!(
        results[1],
        json!({"alarm": format!("{steady}_downscale"), "stream": steady, "action": "downscaled",
               "from": 4, "to": 2, "reason": "downscale alarm"})
    );
    assert_eq!(
        results[2],
        json!({"alarm": format!("{broken}_upscale"), "stream": broken, "action": "skipped",
               "reason": "tag AutoscaleThreshold is \"2\": expected a number from 0.4 to 0.9"})
    );
    assert_eq!(results[3]["action"], "skipped");
    assert_eq!(
        results[3]["reason"],
        "the alarm's new state is \"OK\", not ALARM"
    );

    assert_eq!(f.open_shards(&bursty), 4);
    assert_rewritten(
        &f.alarm(&format!("{bursty}_upscale")),
        &bursty,
        4,
        true,
        0.5,
        2,
    );
    assert_rewritten(
        &f.alarm(&format!("{bursty}_downscale")),
        &bursty,
        4,
        false,
        0.15,
        30,
    );
    assert_eq!(f.open_shards(&steady), 2);
    assert_rewritten(
        &f.alarm(&format!("{steady}_upscale")),
        &steady,
        2,
        true,
        0.8,
        5,
    );
    assert_rewritten(
        &f.alarm(&format!("{steady}_downscale")),
        &steady,
        2,
        false,
        0.45,
        90,
    );
    assert_eq!(f.open_shards(&broken), 1);
    assert_eq!(f.tag(&broken, "LastScalingEvent"), None);
    // Its alarms are as the deployment wrote them.
    assert_eq!(
        f.alarm(&format!("{broken}_upscale"))["EvaluationPeriods"],
        5
    );
    assert_eq!(
        f.alarm(&format!("{broken}_upscale"))["Metrics"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let logs = f.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("bad value"))
        .unwrap_or_else(|| panic!("no log line for the bad tag: {logs}"));
    let v: Value = serde_json::from_str(line).expect("a JSON log line");
    assert_eq!(v["level"], "ERROR");
    assert_eq!(v["fields"]["stream"], broken.as_str());
    assert_eq!(v["fields"]["tag"], "AutoscaleThreshold");
    assert_eq!(v["fields"]["value"], "2");
}

#[test]
fn a_bad_environment_value_fails_the_init_with_one_log_line() {
    let mut env = moto::process_env("http://127.0.0.1:9");
    env.push(("AUTOSCALE_KINESIS_THRESHOLD".into(), "1.5".into()));
    // It fails before it asks the runtime API for an event: nothing needs to listen.
    let mut child = bootstrap_command(free_port(), "AWS_KINESIS_AUTOSCALE", &env)
        .spawn()
        .expect("sluice-lambda");
    assert!(!child.wait().unwrap().success());
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("init failed")).collect();
    assert_eq!(lines.len(), 1, "{out}");
    let v: Value = serde_json::from_str(lines[0]).expect("a JSON log line");
    assert_eq!(
        v["fields"]["error"],
        "AUTOSCALE_KINESIS_THRESHOLD is \"1.5\": expected a number from 0.4 to 0.9"
    );
}
