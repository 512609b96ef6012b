//! `send_aws_eventbridge` through the real `sluice` binary against moto's EventBridge: JSON
//! lines go in as events on a bus whose rule targets an SQS queue, and every event is read
//! back from the queue with its source, detail type and detail.

use crate::common::{Output, dynamodb::unique_table, moto, runtime};

/// Runs `input` (lines) through `send_aws_eventbridge` with `settings` (Jsonnet, inside the
/// function's braces).
fn run(endpoint: &str, settings: &str, input: &[String]) -> Output {
    moto::run_send(endpoint, "eventbridge", settings, input)
}

#[test]
fn every_event_reaches_the_rule_target_once() {
    let endpoint = moto::endpoint();
    let rt = runtime();
    let bus = unique_table("sluice-bus");
    let queue = unique_table("sluice-bus-q");
    let id = unique_table("to-bus");
    let source = format!("substation.{id}");
    let (arn, url) = rt.block_on(moto::create_bus_to_queue(&endpoint, &bus, &source, &queue));
    let input: Vec<String> = (0..57)
        .map(|i| format!(r#"{{"n":{i},"who":"ünï"}}"#))
        .collect();
    // By ARN, with the id that makes the Source, and a description for the DetailType.
    run(
        &endpoint,
        &format!("id: '{id}', aws: {{ arn: '{arn}' }}, description: 'sluice test'"),
        &input,
    )
    .assert_clean_success();
    let got = rt.block_on(moto::receive(&endpoint, &url, input.len()));
    assert_eq!(got.len(), input.len(), "every event once");
    let mut ns: Vec<u64> = got
        .iter()
        .map(|body| {
            let e: serde_json::Value = serde_json::from_str(body).expect("an event");
            assert_eq!(e["source"], source.as_str(), "{body}");
            assert_eq!(e["detail-type"], "sluice test", "{body}");
            assert_eq!(e["detail"]["who"], "ünï", "{body}");
            e["detail"]["n"].as_u64().expect("detail.n")
        })
        .collect();
    ns.sort_unstable();
    assert_eq!(ns, (0..57).collect::<Vec<u64>>());
}

#[test]
fn a_bus_name_and_the_default_detail_type() {
    let endpoint = moto::endpoint();
    let rt = runtime();
    let bus = unique_table("sluice-bus-name");
    let queue = unique_table("sluice-bus-q");
    let id = unique_table("by-name");
    let source = format!("substation.{id}");
    let (_, url) = rt.block_on(moto::create_bus_to_queue(&endpoint, &bus, &source, &queue));
    let input: Vec<String> = (0..3).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
    run(
        &endpoint,
        &format!("id: '{id}', aws: {{ arn: '{bus}' }}"),
        &input,
    )
    .assert_clean_success();
    let got = rt.block_on(moto::receive(&endpoint, &url, input.len()));
    assert_eq!(got.len(), 3);
    for body in got {
        let e: serde_json::Value = serde_json::from_str(&body).expect("an event");
        assert_eq!(e["detail-type"], "Substation Transform", "{body}");
    }
}

#[test]
fn data_that_is_not_a_json_object_is_an_error() {
    let endpoint = moto::endpoint();
    let out = run(&endpoint, "", &[r#"{"ok":1}"#.into(), "[1,2]".into()]);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("eventbridge bus default: an event's Detail must be a JSON object"),
        "{}",
        out.stderr
    );
}
