//! `send_aws_sqs` through the real `sluice` binary against moto's SQS: lines go in and
//! every message is received back from the queue, which is named by ARN (its URL asked of
//! the emulator with GetQueueUrl), by URL or by name. A FIFO queue drops what was sent
//! twice, by the deduplication id sluice sets. Messages SQS cannot take and a missing queue
//! are errors that name the rule or the queue.

use crate::common::{Output, dynamodb::unique_table, moto, runtime};

/// Runs `input` (lines) through `send_aws_sqs` with `settings` (Jsonnet, inside the
/// function's braces).
fn run(endpoint: &str, settings: &str, input: &[String]) -> Output {
    moto::run_send(endpoint, "sqs", settings, input)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn every_message_arrives_once_by_arn() {
    let endpoint = moto::endpoint();
    let rt = runtime();
    let name = unique_table("sluice-sqs");
    let url = rt.block_on(moto::create_queue(&endpoint, &name));
    let input: Vec<String> = (0..250)
        .map(|i| format!(r#"{{"n":{i},"text":"ünïcödé ✓"}}"#))
        .collect();
    let arn = moto::queue_arn(&name);
    run(&endpoint, &format!("aws: {{ arn: '{arn}' }}"), &input).assert_clean_success();
    let got = rt.block_on(moto::receive(&endpoint, &url, input.len()));
    assert_eq!(got.len(), input.len(), "every message once");
    assert_eq!(sorted(got), sorted(input), "content intact");
}

#[test]
fn a_queue_url_and_batch_keys() {
    let endpoint = moto::endpoint();
    let rt = runtime();
    let name = unique_table("sluice-sqs-url");
    let url = rt.block_on(moto::create_queue(&endpoint, &name));
    let input: Vec<String> = (0..45)
        .map(|i| format!(r#"{{"n":{i},"k":"{}"}}"#, i % 4))
        .collect();
    run(
        &endpoint,
        &format!("aws: {{ arn: '{url}' }}, object: {{ batch_key: 'k' }}"),
        &input,
    )
    .assert_clean_success();
    let got = rt.block_on(moto::receive(&endpoint, &url, input.len()));
    assert_eq!(sorted(got), sorted(input));
}

#[test]
fn a_fifo_queue_drops_what_was_sent_twice() {
    let endpoint = moto::endpoint();
    let rt = runtime();
    let name = format!("{}.fifo", unique_table("sluice-sqs"));
    let url = rt.block_on(moto::create_queue(&endpoint, &name));
    let input: Vec<String> = (0..25).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
    // By name; the same lines twice in one run and once more in another: the
    // deduplication id (the data's SHA-256) makes SQS keep one of each.
    let twice: Vec<String> = input.iter().chain(&input).cloned().collect();
    let settings = format!("aws: {{ arn: '{name}' }}");
    run(&endpoint, &settings, &twice).assert_clean_success();
    run(&endpoint, &settings, &input[..5]).assert_clean_success();
    let got = rt.block_on(moto::receive(&endpoint, &url, input.len()));
    assert_eq!(
        got.len(),
        input.len(),
        "one message per distinct line: {got:?}"
    );
    assert_eq!(sorted(got), sorted(input));
}

#[test]
fn a_fifo_queue_deduplicates_by_the_deduplication_key() {
    let endpoint = moto::endpoint();
    let rt = runtime();
    let name = format!("{}.fifo", unique_table("sluice-sqs-key"));
    let url = rt.block_on(moto::create_queue(&endpoint, &name));
    let input: Vec<String> = vec![
        r#"{"id":"a","k":"g1","try":1}"#.into(),
        r#"{"id":"b","k":"g2","try":1}"#.into(),
        r#"{"id":"a","k":"g1","try":2}"#.into(),
        r#"{"id":"c","k":"g1","try":1}"#.into(),
    ];
    let arn = moto::queue_arn(&name);
    run(
        &endpoint,
        &format!("aws: {{ arn: '{arn}' }}, object: {{ batch_key: 'k', deduplication_key: 'id' }}"),
        &input,
    )
    .assert_clean_success();
    let got = rt.block_on(moto::receive(&endpoint, &url, 3));
    assert_eq!(
        sorted(got),
        sorted(vec![input[0].clone(), input[1].clone(), input[3].clone()]),
        "the second \"a\" is a duplicate"
    );
}

#[test]
fn messages_sqs_cannot_take_and_missing_queues_are_errors() {
    let endpoint = moto::endpoint();
    let rt = runtime();
    let name = unique_table("sluice-sqs-bad");
    rt.block_on(moto::create_queue(&endpoint, &name));
    let out = run(
        &endpoint,
        &format!("aws: {{ arn: '{name}' }}"),
        &["fine".into(), "bell \u{7}".into()],
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains("takes only the characters XML allows")
            && out.stderr.contains("U+0007"),
        "{}",
        out.stderr
    );

    let missing = unique_table("sluice-sqs-missing");
    let out = run(
        &endpoint,
        &format!("aws: {{ arn: '{}' }}", moto::queue_arn(&missing)),
        &["x".into()],
    );
    out.assert_code(1);
    assert!(
        out.stderr
            .contains(&format!("sqs queue {missing}: GetQueueUrl failed")),
        "{}",
        out.stderr
    );
}
