//! examples/lambda/template.yaml against the autoscaler it deploys: the two alarms the
//! template creates must be the ones `AWS_KINESIS_AUTOSCALE` rewrites after a scaling
//! (the same metric queries for the initial shard count, the same thresholds and default
//! datapoints), or the first scaling would silently change what the alarms measure.
//!
//! The template is read with cfn-lint's own loader (installed by `scripts/emulators.sh
//! install`), which understands CloudFormation's `!Sub`/`!Ref` tags; the few intrinsic
//! functions the alarms use are resolved here for the template's default parameters.

use std::process::Command;

use serde_json::{Value, json};
use sluice_lambda::autoscale::{Settings, metric_queries};

use crate::common::workspace_root;

/// The template as JSON, through cfn-lint's decoder.
fn template() -> Value {
    let python = workspace_root().join(".emulators/venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/emulators.sh install",
        python.display()
    );
    let out = Command::new(python)
        .args([
            "-c",
            "import json, sys\n\
             from cfnlint.decode import decode\n\
             t, problems = decode(sys.argv[1])\n\
             assert not problems, problems\n\
             print(json.dumps(t))",
        ])
        .arg(workspace_root().join("examples/lambda/template.yaml"))
        .output()
        .expect("running cfn-lint's decoder");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the template as JSON")
}

/// `v` with `Ref` and `Fn::Sub` resolved against `params` (a `Ref` to the stream resource
/// is its name, as CloudFormation answers it; to another resource, `<LogicalId>`).
fn resolve(v: &Value, params: &serde_json::Map<String, Value>) -> Value {
    match v {
        Value::Object(o) if o.len() == 1 && o.contains_key("Ref") => {
            let name = o["Ref"].as_str().unwrap();
            let name = if name == "Events" { "StreamName" } else { name };
            // Another resource: its logical id, marked.
            params
                .get(name)
                .cloned()
                .unwrap_or_else(|| Value::String(format!("<{name}>")))
        }
        Value::Object(o) if o.len() == 1 && o.contains_key("Fn::Sub") => {
            let mut text = o["Fn::Sub"].as_str().unwrap().to_string();
            for (k, v) in params {
                let with = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                text = text.replace(&format!("${{{k}}}"), &with);
            }
            assert!(!text.contains("${"), "unresolved: {text}");
            Value::String(text)
        }
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), resolve(v, params)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| resolve(v, params)).collect()),
        other => other.clone(),
    }
}

/// The handler's metric queries for `stream` and `shards`, in the template's JSON shape.
fn handler_metrics(stream: &str, shards: u32) -> Value {
    let queries: Vec<Value> = metric_queries(stream, shards)
        .iter()
        .map(|q| {
            let mut o = serde_json::Map::new();
            o.insert("Id".into(), json!(q.id()));
            if let Some(l) = q.label() {
                o.insert("Label".into(), json!(l));
            }
            if let Some(r) = q.return_data() {
                o.insert("ReturnData".into(), json!(r));
            }
            if let Some(e) = q.expression() {
                o.insert("Expression".into(), json!(e));
            }
            if let Some(s) = q.metric_stat() {
                let m = s.metric().expect("a metric");
                let dims: Vec<Value> = m
                    .dimensions()
                    .iter()
                    .map(|d| json!({"Name": d.name(), "Value": d.value()}))
                    .collect();
                o.insert(
                    "MetricStat".into(),
                    json!({
                        "Metric": {
                            "Namespace": m.namespace(),
                            "MetricName": m.metric_name(),
                            "Dimensions": dims,
                        },
                        "Period": s.period(),
                        "Stat": s.stat(),
                    }),
                );
            }
            Value::Object(o)
        })
        .collect();
    Value::Array(queries)
}

#[test]
fn the_templates_alarms_are_the_ones_the_autoscaler_writes() {
    let t = template();
    let mut params = serde_json::Map::new();
    for (name, p) in t["Parameters"].as_object().expect("parameters") {
        if let Some(d) = p.get("Default") {
            params.insert(name.clone(), d.clone());
        }
    }
    let stream = params["StreamName"].as_str().unwrap().to_string();
    let shards: u32 = match &params["ShardCount"] {
        Value::Number(n) => n.as_u64().unwrap() as u32,
        Value::String(s) => s.parse().unwrap(),
        other => panic!("ShardCount default {other}"),
    };
    let defaults = Settings::default();
    let want_metrics = handler_metrics(&stream, shards);
    for (resource, suffix, threshold, datapoints, comparison) in [
        (
            "UpscaleAlarm",
            "_upscale",
            defaults.threshold,
            defaults.upscale_datapoints,
            "GreaterThanOrEqualToThreshold",
        ),
        (
            "DownscaleAlarm",
            "_downscale",
            defaults.downscale_threshold(),
            defaults.downscale_datapoints,
            "LessThanOrEqualToThreshold",
        ),
    ] {
        let alarm = resolve(&t["Resources"][resource]["Properties"], &params);
        assert_eq!(alarm["AlarmName"], json!(format!("{stream}{suffix}")));
        assert_eq!(alarm["Metrics"], want_metrics, "{resource}");
        let got_threshold = alarm["Threshold"].as_f64().expect("a threshold");
        assert!(
            (got_threshold - threshold).abs() < 1e-9,
            "{resource}: {got_threshold} against {threshold}"
        );
        for field in ["EvaluationPeriods", "DatapointsToAlarm"] {
            let got = match &alarm[field] {
                Value::Number(n) => n.as_u64().unwrap() as u32,
                Value::String(s) => s.parse().unwrap(),
                other => panic!("{resource}.{field}: {other}"),
            };
            assert_eq!(got, datapoints, "{resource}.{field}");
        }
        assert_eq!(alarm["ComparisonOperator"], comparison, "{resource}");
        assert_eq!(alarm["TreatMissingData"], "ignore", "{resource}");
        assert_eq!(alarm["AlarmDescription"], json!(stream), "{resource}");
        // They notify the topic the autoscaler is subscribed to.
        assert_eq!(
            alarm["AlarmActions"],
            json!(["<AutoscaleTopic>"]),
            "{resource}"
        );
    }
    // The autoscaler's own defaults are what the template sets.
    let env = resolve(
        &t["Resources"]["AutoscaleFunction"]["Properties"]["Environment"]["Variables"],
        &params,
    );
    let number = |v: &Value| -> f64 {
        match v {
            Value::Number(n) => n.as_f64().unwrap(),
            Value::String(s) => s.parse().unwrap(),
            other => panic!("{other}"),
        }
    };
    assert_eq!(env["SLUICE_LAMBDA_HANDLER"], "AWS_KINESIS_AUTOSCALE");
    let events = resolve(
        &t["Resources"]["AutoscaleFunction"]["Properties"]["Events"],
        &params,
    );
    let topics: Vec<&Value> = events
        .as_object()
        .expect("the function's events")
        .values()
        .filter(|e| e["Type"] == "SNS")
        .map(|e| &e["Properties"]["Topic"])
        .collect();
    assert_eq!(topics, [&json!("<AutoscaleTopic>")]);
    assert!((number(&env["AUTOSCALE_KINESIS_THRESHOLD"]) - defaults.threshold).abs() < 1e-9);
    assert_eq!(
        number(&env["AUTOSCALE_KINESIS_UPSCALE_DATAPOINTS"]) as u32,
        defaults.upscale_datapoints
    );
    assert_eq!(
        number(&env["AUTOSCALE_KINESIS_DOWNSCALE_DATAPOINTS"]) as u32,
        defaults.downscale_datapoints
    );
}
