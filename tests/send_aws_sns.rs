//! `send_aws_sns` through the real `sluice` binary against moto's SNS: lines go in and
//! every message is read back from an SQS queue subscribed to the topic with raw message
//! delivery. A FIFO topic (with a FIFO queue) keeps one message per deduplication id.

use crate::common::{Output, dynamodb::unique_table, moto, runtime};

/// Runs `input` (lines) through `send_aws_sns` with `settings` (Jsonnet, inside the
/// function's braces).
fn run(endpoint: &str, settings: &str, input: &[String]) -> Output {
    moto::run_send(endpoint, "sns", settings, input)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn every_message_reaches_the_subscribed_queue_once() {
    let endpoint = moto::endpoint();
    let rt = runtime();
    let topic = unique_table("sluice-sns");
    let queue = unique_table("sluice-sns-q");
    let (arn, url) = rt.block_on(moto::create_topic_to_queue(&endpoint, &topic, &queue));
    let input: Vec<String> = (0..123)
        .map(|i| format!(r#"{{"n":{i},"k":"{}"}}"#, i % 3))
        .collect();
    run(
        &endpoint,
        &format!("aws: {{ arn: '{arn}' }}, object: {{ batch_key: 'k' }}"),
        &input,
    )
    .assert_clean_success();
    let got = rt.block_on(moto::receive(&endpoint, &url, input.len()));
    assert_eq!(got.len(), input.len(), "every message once");
    assert_eq!(sorted(got), sorted(input), "raw delivery: the data as sent");
}

#[test]
fn a_fifo_topic_keeps_one_message_per_deduplication_id() {
    let endpoint = moto::endpoint();
    let rt = runtime();
    let topic = format!("{}.fifo", unique_table("sluice-sns"));
    let queue = format!("{}.fifo", unique_table("sluice-sns-q"));
    let (arn, url) = rt.block_on(moto::create_topic_to_queue(&endpoint, &topic, &queue));
    let input: Vec<String> = (0..15).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
    let twice: Vec<String> = input.iter().chain(&input).cloned().collect();
    run(&endpoint, &format!("aws: {{ arn: '{arn}' }}"), &twice).assert_clean_success();
    let got = rt.block_on(moto::receive(&endpoint, &url, input.len()));
    assert_eq!(
        got.len(),
        input.len(),
        "one message per distinct line: {got:?}"
    );
    assert_eq!(sorted(got), sorted(input));
}

#[test]
fn a_missing_topic_is_an_error_naming_it() {
    let endpoint = moto::endpoint();
    let topic = unique_table("sluice-sns-missing");
    let arn = format!("arn:aws:sns:us-east-1:{}:{topic}", moto::ACCOUNT);
    let out = run(
        &endpoint,
        &format!("aws: {{ arn: '{arn}' }}"),
        &["x".into()],
    );
    out.assert_code(1);
    assert!(
        out.stderr
            .contains(&format!("sns topic {topic}: PublishBatch failed")),
        "{}",
        out.stderr
    );
}
