//! The metric transforms under `sluice run`: their EMF lines go to standard output with
//! the pipeline's own output, whole lines each, and CloudWatch's format.

use crate::common::Dir;

const CFG: &str = r#"local sub = std.extVar('sub');
local emf = { type: 'aws_cloudwatch_embedded_metrics' };
{
  transforms: [
    sub.tf.util.control({ batch: { count: 100 } }),
    sub.tf.util.metric.count({ metric: { name: 'MessagesIn', attributes: { Pipeline: 'p1' }, destination: emf } }),
    sub.tf.util.metric.bytes({ metric: { name: 'BytesIn', destination: emf } }),
    sub.tf.meta.metric.duration({
      metric: { name: 'CopyDuration', destination: emf },
      transforms: [sub.tf.obj.cp({ obj: { src: 'n', trg: 'm' } })],
    }),
    sub.tf.send.stdout({ batch: { count: 7 } }),
  ],
}
"#;

#[test]
fn metric_lines_and_data_lines_share_stdout_line_by_line() {
    let d = Dir::new();
    d.write("metrics.jsonnet", CFG);
    let input: String = (0..1000).map(|n| format!("{{\"n\":{n}}}\n")).collect();
    let out = d.sluice(
        &[
            "run",
            "--workers",
            "4",
            "--batch-messages",
            "64",
            "--config",
            "metrics.jsonnet",
        ],
        input.as_bytes(),
    );
    out.assert_code(0);
    let mut data = Vec::new();
    let mut counts = Vec::new();
    let mut bytes = 0;
    let mut durations = 0;
    for line in out.stdout_str().lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: not a whole line: {line}"));
        match v.get("_aws") {
            None => data.push(v["n"].as_u64().unwrap()),
            Some(aws) => {
                let directive = &aws["CloudWatchMetrics"][0];
                assert_eq!(directive["Namespace"], "Substation", "{line}");
                assert!(
                    aws["Timestamp"].as_i64().unwrap() > 1_600_000_000_000,
                    "{line}"
                );
                let name = directive["Metrics"][0]["Name"].as_str().unwrap();
                assert!(v[name].is_u64(), "{line}: the value is a root member");
                match name {
                    "MessagesIn" => {
                        assert_eq!(directive["Dimensions"], serde_json::json!([["Pipeline"]]));
                        assert_eq!(v["Pipeline"], "p1");
                        counts.push(v[name].as_u64().unwrap());
                    }
                    "BytesIn" => bytes += v[name].as_u64().unwrap(),
                    "CopyDuration" => durations += 1,
                    other => panic!("unexpected metric {other}"),
                }
            }
        }
    }
    assert_eq!(
        data,
        (0..1000).collect::<Vec<_>>(),
        "every message, in order"
    );
    // utility_control emits a ctrl before messages 101, 201, ... 901, and the end of the
    // input sends one more: ten windows of 100.
    assert_eq!(counts, vec![100; 10]);
    assert_eq!(
        bytes as usize,
        input.len() - 1000,
        "data bytes, without the newlines"
    );
    assert_eq!(durations, 10);
}

#[test]
fn a_metric_without_a_destination_is_a_config_error() {
    let d = Dir::new();
    d.write(
        "m.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.util.metric.count({ metric: { name: 'N' } })] }\n",
    );
    let out = d.sluice(&["run", "--config", "m.jsonnet"], "");
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("transforms[0] (utility_metric_count, id ")
            && out
                .stderr
                .contains("settings.metric.destination: missing required option"),
        "{}",
        out.stderr
    );
}
