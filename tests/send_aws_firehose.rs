//! `send_aws_data_firehose` through the real `sluice` binary against moto's Firehose: a few
//! thousand lines go in, and the S3 objects moto's delivery stream wrote are read back.

use crate::common::{Dir, dynamodb::unique_table, moto, runtime};

/// Everything the bucket holds, as lines.
fn delivered(endpoint: &str, bucket: &str) -> (usize, Vec<String>) {
    let objects = moto::bucket_objects(endpoint, bucket);
    let text: String = objects
        .iter()
        .map(|o| String::from_utf8(o.clone()).expect("UTF-8 objects"))
        .collect();
    (objects.len(), text.lines().map(String::from).collect())
}

fn run(endpoint: &str, arn: &str, extra: &str, input: &[String]) {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        format!(
            r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.send.aws.data_firehose({{
      aws: {{ arn: '{arn}' }},
      // Firehose adds no separator: one line per record.
      aux_tforms: [sub.tf.str.append({{ suffix: '\n' }})],
      {extra}
    }}),
    sub.tf.util.drop(),
  ],
}}
"#
        ),
    );
    let stdin: String = input.iter().map(|l| format!("{l}\n")).collect();
    d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        stdin,
        &moto::process_env(endpoint),
    )
    .assert_clean_success();
}

#[test]
fn every_record_is_delivered_to_s3_once() {
    let endpoint = moto::endpoint();
    let name = unique_table("sluice-firehose");
    let bucket = unique_table("sluice-firehose-bucket");
    runtime().block_on(moto::create_delivery_stream(&endpoint, &name, &bucket));
    let input: Vec<String> = (0..3000).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
    let arn = format!(
        "arn:aws:firehose:us-east-1:{}:deliverystream/{name}",
        moto::ACCOUNT
    );
    run(&endpoint, &arn, "", &input);
    let (objects, mut lines) = delivered(&endpoint, &bucket);
    // The library's batch count (1000) is capped at 500 records per call; moto writes one
    // object per call.
    assert_eq!(objects, 6, "one object per PutRecordBatch");
    lines.sort_by_key(|l| {
        serde_json::from_str::<serde_json::Value>(l).unwrap()["n"]
            .as_u64()
            .unwrap()
    });
    assert_eq!(lines, input, "every record once, content intact");
}

#[test]
fn a_bare_delivery_stream_name_with_batch_keys() {
    let endpoint = moto::endpoint();
    let name = unique_table("sluice-firehose-name");
    let bucket = unique_table("sluice-firehose-bucket");
    runtime().block_on(moto::create_delivery_stream(&endpoint, &name, &bucket));
    let input: Vec<String> = (0..1000)
        .map(|i| format!(r#"{{"n":{i},"k":"{}"}}"#, i % 3))
        .collect();
    run(&endpoint, &name, "object: { batch_key: 'k' },", &input);
    let (objects, mut lines) = delivered(&endpoint, &bucket);
    assert_eq!(objects, 3, "one batch per key");
    let mut want = input.clone();
    want.sort();
    lines.sort();
    assert_eq!(lines, want);
}
