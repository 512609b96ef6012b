//! Tests of `aws_sqs`.

use super::*;
use crate::registry;
use crate::send::aws_destination::{AwsSend, RetryPolicy};
use crate::send::batcher::Undelivered;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::operation::get_queue_url::{GetQueueUrlInput, GetQueueUrlOutput};
use aws_sdk_sqs::operation::send_message_batch::{SendMessageBatchInput, SendMessageBatchOutput};
use aws_sdk_sqs::types::{BatchResultErrorEntry, SendMessageBatchResultEntry};
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use sluice_engine::StatefulTransform;
use sluice_engine::ack::{AckStatus, AckTracker};
use sluice_engine::batch::BatchLimits;
use sluice_engine::{Key, Message, Transform, json, testing};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ARN: &str = "arn:aws:sqs:eu-west-1:123456789012:events";
const URL: &str = "https://sqs.eu-west-1.amazonaws.com/123456789012/events";

const FAST: RetryPolicy = RetryPolicy {
    attempts: 3,
    base: Duration::from_millis(1),
    max: Duration::from_millis(2),
};

fn client(rules: &[&Rule]) -> Client {
    mock_client!(aws_sdk_sqs, RuleMode::MatchAny, rules, |b| b.retry_config(
        RetryConfig::standard()
            .with_max_attempts(3)
            .with_initial_backoff(Duration::from_millis(1))
    ))
}

fn sqs_for(arn: &str, ids: MessageIds, rules: &[&Rule]) -> Sqs {
    let q = parse_queue(Some(arn.into())).unwrap();
    Sqs::new(
        q.queue,
        q.name,
        ids,
        AwsTarget {
            region: q.region,
            ..Default::default()
        },
    )
    .with_client(client(rules))
    .with_retry(FAST)
}

/// A standard queue known by URL (no GetQueueUrl).
fn sqs(rules: &[&Rule]) -> Sqs {
    sqs_for(URL, MessageIds::Standard, rules)
}

fn batch(key: &str, items: &[&str]) -> Outgoing {
    Outgoing {
        key: key.to_string(),
        items: items.iter().map(|i| Bytes::from(i.to_string())).collect(),
        ..Default::default()
    }
}

/// An answer: entry `i` failed with `codes[i]` when it is set.
fn results(codes: &[Option<&str>]) -> SendMessageBatchOutput {
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for (i, c) in codes.iter().enumerate() {
        match c {
            None => ok.push(
                SendMessageBatchResultEntry::builder()
                    .id(i.to_string())
                    .message_id(format!("m{i}"))
                    .md5_of_message_body("x")
                    .build()
                    .unwrap(),
            ),
            Some(code) => failed.push(
                BatchResultErrorEntry::builder()
                    .id(i.to_string())
                    .code(*code)
                    .message("try again")
                    .sender_fault(false)
                    .build()
                    .unwrap(),
            ),
        }
    }
    SendMessageBatchOutput::builder()
        .set_successful(Some(ok))
        .set_failed(Some(failed))
        .build()
        .unwrap()
}

fn ok(n: usize) -> SendMessageBatchOutput {
    results(&vec![None; n])
}

/// What each call sent: (queue URL, [(body, group id, dedup id)]).
type Call = (String, Vec<(String, Option<String>, Option<String>)>);
type Seen = Arc<Mutex<Vec<Call>>>;

fn recorder() -> (
    Seen,
    impl Fn(&SendMessageBatchInput) -> bool + Send + Sync + 'static,
) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    (seen, move |r: &SendMessageBatchInput| {
        let entries = r
            .entries()
            .iter()
            .map(|e| {
                (
                    e.message_body().to_string(),
                    e.message_group_id().map(String::from),
                    e.message_deduplication_id().map(String::from),
                )
            })
            .collect();
        s.lock()
            .unwrap()
            .push((r.queue_url().unwrap_or("").to_string(), entries));
        true
    })
}

fn bodies(call: &Call) -> Vec<&str> {
    call.1.iter().map(|(b, _, _)| b.as_str()).collect()
}

#[test]
fn queue_forms_table() {
    let q = |queue: QueueRef, name: &str, region: Option<&str>| Queue {
        queue,
        name: name.into(),
        region: region.map(String::from),
    };
    let name = |n: &str, o: Option<&str>| QueueRef::Name {
        name: n.into(),
        owner: o.map(String::from),
    };
    let table = [
        (
            ARN,
            q(
                name("events", Some("123456789012")),
                "events",
                Some("eu-west-1"),
            ),
        ),
        (
            "arn:aws:sqs:us-east-1:1:jobs.fifo",
            q(name("jobs.fifo", Some("1")), "jobs.fifo", Some("us-east-1")),
        ),
        (
            URL,
            q(QueueRef::Url(URL.into()), "events", Some("eu-west-1")),
        ),
        (
            "http://localhost:4566/000000000000/local-q/",
            q(
                QueueRef::Url("http://localhost:4566/000000000000/local-q/".into()),
                "local-q",
                None,
            ),
        ),
        (
            "events_1-x",
            q(name("events_1-x", None), "events_1-x", None),
        ),
    ];
    for (arn, want) in table {
        assert_eq!(parse_queue(Some(arn.into())).unwrap(), want, "{arn}");
    }
}

#[test]
fn settings_table() {
    let r = registry();
    for s in [
        json!({"aws": {"arn": ARN}}),
        json!({"aws": {"arn": URL}}),
        json!({"aws": {"arn": "events"}}),
        json!({"aws": {"arn": "jobs.fifo"}, "object": {"batch_key": "k", "deduplication_key": "id"}}),
        json!({"aws": {"arn": ARN}, "batch": {"count": 1000, "size": 100000000}}),
    ] {
        testing::build(&r, json!({"type": "send_aws_sqs", "settings": s}))
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    testing::assert_config_errors(
        &r,
        "send_aws_sqs",
        &[
            (json!({}), "aws.arn: missing required option"),
            (
                json!({"aws": {"arn": "arn:aws:sns:us-east-1:1:topic"}}),
                "is not an SQS queue ARN",
            ),
            (
                json!({"aws": {"arn": "arn:aws:sqs::1:q"}}),
                "is not an SQS queue ARN",
            ),
            (
                json!({"aws": {"arn": "arn:aws:sqs:us-east-1::q"}}),
                "is not an SQS queue ARN",
            ),
            (
                json!({"aws": {"arn": "https://sqs.us-east-1.amazonaws.com/"}}),
                "is not an SQS queue URL",
            ),
            (json!({"aws": {"arn": "a b"}}), "is not a queue ARN"),
            (
                json!({"aws": {"arn": "x".repeat(81)}}),
                "is not a queue ARN",
            ),
            (json!({"aws": {"arn": ".fifo"}}), "is not a queue ARN"),
            (
                json!({"aws": {"arn": ARN, "assume_role_arn": "arn:aws:s3:::b"}}),
                "aws.assume_role_arn",
            ),
            (
                json!({"aws": {"arn": "q.fifo"}, "object": {"deduplication_key": "meta id"}}),
                "object.deduplication_key: must be a key in the data",
            ),
        ],
    );
}

#[test]
fn a_deduplication_key_on_a_standard_queue_warns() {
    let r = registry();
    let built = r
        .build_pipeline(
            &json!([{"type": "send_aws_sqs", "settings": {"aws": {"arn": ARN}, "object": {"deduplication_key": "id"}}}]),
            "transforms",
        )
        .unwrap();
    let w: Vec<String> = built.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        w.iter()
            .any(|w| w.contains("events is not a FIFO queue or topic")),
        "{w:?}"
    );
}

#[test]
fn caps_bound_the_batch_settings() {
    let t = testing::build(
        &registry(),
        json!({"type": "send_aws_sqs", "settings": {"aws": {"arn": ARN}, "batch": {"count": 1000, "size": 100000000}}}),
    );
    assert!(t.is_ok());
    let l = BatchLimits::from(BatchSettings {
        count: 1000,
        size: 100_000_000,
        ..Default::default()
    })
    .capped(MAX_ENTRIES, MAX_CALL_BYTES);
    assert_eq!((l.count, l.size), (10, 1_048_576));
}

/// (data, the error's distinctive part): each is refused when it arrives.
#[test]
fn messages_sqs_cannot_take_are_errors_naming_the_rule() {
    let t = testing::build(
        &registry(),
        json!({"type": "send_aws_sqs", "settings": {"aws": {"arn": ARN}}}),
    )
    .unwrap();
    let table: Vec<(Vec<u8>, &str)> = vec![
        (
            vec![b'x'; MAX_MESSAGE_BYTES + 1],
            "item size limit of 1048576 bytes",
        ),
        (
            b"\xff\xfe".to_vec(),
            "sqs queue events takes only UTF-8 text",
        ),
        (
            b"bell \x07".to_vec(),
            "sqs queue events takes only the characters XML allows",
        ),
        (Vec::new(), "sqs queue events takes no empty message"),
    ];
    for (data, want) in table {
        let e = testing::block_on(t.transform(Message::new(data), &mut Vec::new()))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
        assert!(e.contains("data could not be sent"), "{e}");
    }
    // Nothing is held: a message at the limit still goes through.
    testing::block_on(t.transform(Message::new(vec![b'x'; MAX_MESSAGE_BYTES]), &mut Vec::new()))
        .unwrap();
}

#[tokio::test]
async fn calls_hold_at_most_10_messages_and_1_mib() {
    let (seen, m) = recorder();
    let rule = mock!(Client::send_message_batch)
        .match_requests(m)
        .then_compute_output(|r| ok(r.entries().len()));
    let q = sqs(&[&rule]);
    let items: Vec<String> = (0..23).map(|i| i.to_string()).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    q.send(&batch("", &refs)).await.unwrap();
    let big = "x".repeat(400 * 1024);
    q.send(&batch("", &[big.as_str(); 3])).await.unwrap();
    let seen = seen.lock().unwrap();
    let sizes: Vec<usize> = seen.iter().map(|c| c.1.len()).collect();
    assert_eq!(sizes, vec![10, 10, 3, 2, 1]);
    assert!(seen.iter().all(|c| c.0 == URL), "the URL as given");
    assert_eq!(bodies(&seen[2]), vec!["20", "21", "22"]);
    // Standard queue: no FIFO ids.
    assert!(seen[0].1.iter().all(|(_, g, d)| g.is_none() && d.is_none()));
}

#[tokio::test]
async fn the_url_is_asked_once_with_the_owner_from_the_arn() {
    /// (queue name, owner account) of each GetQueueUrl.
    type Asked = Arc<Mutex<Vec<(String, Option<String>)>>>;
    let asked: Asked = Arc::default();
    let a = asked.clone();
    let get_url = mock!(Client::get_queue_url)
        .match_requests(move |r: &GetQueueUrlInput| {
            a.lock().unwrap().push((
                r.queue_name().unwrap_or("").to_string(),
                r.queue_owner_aws_account_id().map(String::from),
            ));
            true
        })
        .then_output(|| {
            GetQueueUrlOutput::builder()
                .queue_url("http://127.0.0.1:4566/123456789012/events")
                .build()
        });
    let (seen, m) = recorder();
    let send = mock!(Client::send_message_batch)
        .match_requests(m)
        .then_compute_output(|r| ok(r.entries().len()));
    let q = sqs_for(ARN, MessageIds::Standard, &[&get_url, &send]);
    q.send(&batch("", &["a"])).await.unwrap();
    q.send(&batch("", &["b"])).await.unwrap();
    assert_eq!(
        *asked.lock().unwrap(),
        vec![("events".to_string(), Some("123456789012".to_string()))]
    );
    let seen = seen.lock().unwrap();
    assert!(
        seen.iter()
            .all(|c| c.0 == "http://127.0.0.1:4566/123456789012/events")
    );
}

#[tokio::test]
async fn a_failed_url_lookup_fails_the_batch_and_is_asked_again() {
    let get_url = mock!(Client::get_queue_url)
        .sequence()
        .http_status(
            400,
            Some(r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}"#.into()),
        )
        .output(|| GetQueueUrlOutput::builder().queue_url(URL).build())
        .build();
    let send = mock!(Client::send_message_batch).then_compute_output(|r| ok(r.entries().len()));
    let q = sqs_for("events", MessageIds::Standard, &[&get_url, &send]);
    let e = q.send(&batch("", &["a"])).await.unwrap_err();
    assert_eq!(e.undelivered, Undelivered::All);
    let text = e.error.to_string();
    assert!(
        text.contains("sqs queue events: GetQueueUrl failed"),
        "{text}"
    );
    assert!(text.contains("QueueDoesNotExist"), "{text}");
    q.send(&batch("", &["a"])).await.unwrap();
    assert_eq!(get_url.num_calls(), 2);
}

#[tokio::test]
async fn fifo_ids_group_by_batch_key_and_dedup_by_data() {
    let (seen, m) = recorder();
    let rule = mock!(Client::send_message_batch)
        .match_requests(m)
        .then_compute_output(|r| ok(r.entries().len()));
    let q = sqs_for(
        "https://sqs.eu-west-1.amazonaws.com/1/jobs.fifo",
        MessageIds::Fifo(Some(Key::parse("id").unwrap())),
        &[&rule],
    );
    q.send(&batch("tenant-a", &[r#"{"id":"x1"}"#, r#"{"v":1}"#]))
        .await
        .unwrap();
    q.send(&batch("", &["a", "b"])).await.unwrap();
    let seen = seen.lock().unwrap();
    let sha = |s: &str| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(s.as_bytes()));
    assert_eq!(
        seen[0].1,
        vec![
            (
                r#"{"id":"x1"}"#.to_string(),
                Some("tenant-a".to_string()),
                Some("x1".to_string())
            ),
            (
                r#"{"v":1}"#.to_string(),
                Some("tenant-a".to_string()),
                Some(sha(r#"{"v":1}"#))
            ),
        ]
    );
    // No batch key: one random group for the whole batch.
    let (g0, g1) = (&seen[1].1[0].1, &seen[1].1[1].1);
    assert_eq!(g0, g1);
    assert_eq!(g0.as_ref().unwrap().len(), 36);
    assert_eq!(seen[1].1[1].2.as_deref(), Some(sha("b").as_str()));
}

#[tokio::test]
async fn partial_failures_resend_only_the_failed_messages_with_the_same_ids() {
    let (seen, m) = recorder();
    let rule = mock!(Client::send_message_batch)
        .match_requests(m)
        .sequence()
        .output(|| {
            results(&[
                None,
                Some("InternalError"),
                None,
                Some("ServiceUnavailable"),
            ])
        })
        .output(|| ok(2))
        .build();
    let q = sqs_for(
        "https://sqs.eu-west-1.amazonaws.com/1/jobs.fifo",
        MessageIds::Fifo(None),
        &[&rule],
    );
    q.send(&batch("g", &["a", "b", "c", "d"])).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(bodies(&seen[1]), vec!["b", "d"]);
    // The retry carries the same deduplication ids, so SQS drops a duplicate.
    assert_eq!(seen[1].1[0].2, seen[0].1[1].2);
    assert_eq!(seen[1].1[1].2, seen[0].1[3].2);
}

#[tokio::test]
async fn a_throttled_call_is_retried_by_the_sdk() {
    let throttled = r#"{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Slow down."}"#;
    let rule = mock!(Client::send_message_batch)
        .sequence()
        .http_status(503, Some(throttled.into()))
        .times(2)
        .output(|| ok(1))
        .build();
    let q = sqs(&[&rule]);
    q.send(&batch("", &["a"])).await.unwrap();
    assert_eq!(rule.num_calls(), 3);
}

#[tokio::test]
async fn persistent_failures_are_exactly_the_undelivered_items() {
    let rule = mock!(Client::send_message_batch).then_compute_output(|r| {
        let codes: Vec<Option<&str>> = r
            .entries()
            .iter()
            .map(|e| (e.message_body() == "c").then_some("InternalError"))
            .collect();
        results(&codes)
    });
    let q = sqs(&[&rule]);
    let e = q.send(&batch("", &["a", "b", "c", "d"])).await.unwrap_err();
    assert_eq!(e.undelivered, Undelivered::Items(vec![2]));
    let text = e.error.to_string();
    assert!(
        text.contains("sqs queue events: 1 of 4 messages not accepted after 3 SendMessageBatch attempts: 1 × InternalError (try again)"),
        "{text}"
    );
    assert_eq!(rule.num_calls(), 3);
}

#[tokio::test]
async fn an_entry_without_a_result_counts_as_failed() {
    let rule = mock!(Client::send_message_batch)
        .sequence()
        .output(|| {
            SendMessageBatchOutput::builder()
                .set_successful(Some(vec![]))
                .set_failed(Some(vec![]))
                .build()
                .unwrap()
        })
        .output(|| ok(1))
        .build();
    let q = sqs(&[&rule]);
    q.send(&batch("", &["a"])).await.unwrap();
    assert_eq!(rule.num_calls(), 2);
}

#[tokio::test]
async fn a_failed_call_fails_it_and_the_calls_after_it() {
    let rule_ok = mock!(Client::send_message_batch)
        .sequence()
        .output(|| ok(10))
        .build();
    let rule_err = mock!(Client::send_message_batch)
        .sequence()
        .http_status(
            400,
            Some(
                r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no such queue"}"#
                    .into(),
            ),
        )
        .build();
    let q = sqs(&[&rule_ok, &rule_err]);
    let items: Vec<String> = (0..25).map(|i| i.to_string()).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let e = q.send(&batch("", &refs)).await.unwrap_err();
    assert_eq!(e.undelivered, Undelivered::Items((10..25).collect()));
    let text = e.error.to_string();
    assert!(
        text.contains("sqs queue events: SendMessageBatch failed"),
        "{text}"
    );
    assert!(text.contains("QueueDoesNotExist"), "{text}");
}

#[tokio::test(flavor = "current_thread")]
async fn acks_fail_for_exactly_the_undelivered_messages() {
    let rule = mock!(Client::send_message_batch).then_compute_output(|r| {
        let codes: Vec<Option<&str>> = r
            .entries()
            .iter()
            .map(|e| (e.message_body() == "a").then_some("InternalError"))
            .collect();
        results(&codes)
    });
    let s = Sender::from_parts(
        sqs(&[&rule]),
        BatchLimits::from(BatchSettings::default()).capped(MAX_ENTRIES, MAX_CALL_BYTES),
        MAX_MESSAGE_BYTES,
        None,
        None,
    );
    let mut trackers = Vec::new();
    let mut out = Vec::new();
    for d in ["a", "b"] {
        let (t, tok) = AckTracker::new();
        let mut m = Message::new(d.as_bytes().to_vec());
        m.add_ack(tok);
        s.transform(m, &mut out).await.unwrap();
        trackers.push(t);
    }
    drop(out);
    assert!(s.transform(Message::ctrl(), &mut Vec::new()).await.is_err());
    assert_eq!(trackers[0].status(), AckStatus::Pending);
    assert_eq!(trackers[1].status(), AckStatus::Delivered);
    s.abort("gave up").await;
    assert_eq!(trackers[0].status(), AckStatus::Failed);
}

#[test]
fn auxiliary_outputs_sqs_cannot_take_fail_their_batch() {
    let rule = mock!(Client::send_message_batch).then_compute_output(|r| ok(r.entries().len()));
    let aux = testing::build_pipeline(
        &registry(),
        json!([{"type": "string_append", "settings": {"suffix": "\u{0}"}}]),
    )
    .unwrap();
    let s = Sender::from_parts(
        sqs(&[&rule]),
        BatchLimits::from(BatchSettings::default()).capped(MAX_ENTRIES, MAX_CALL_BYTES),
        MAX_MESSAGE_BYTES,
        None,
        Some(aux),
    );
    testing::block_on(s.transform(Message::new(&b"a"[..]), &mut Vec::new())).unwrap();
    let e = testing::block_on(s.transform(Message::ctrl(), &mut Vec::new()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("takes only the characters XML allows"), "{e}");
    assert_eq!(rule.num_calls(), 0);
    assert_eq!(s.undelivered(), 1);
}

#[test]
fn compliance() {
    let rule = mock!(Client::send_message_batch).then_compute_output(|r| ok(r.entries().len()));
    let t = Transform::stateful(Sender::from_parts(
        sqs(&[&rule]),
        BatchLimits::from(BatchSettings::default()).capped(MAX_ENTRIES, MAX_CALL_BYTES),
        MAX_MESSAGE_BYTES,
        None,
        None,
    ));
    testing::check_compliance(t);
}

#[tokio::test]
async fn failures_say_whether_they_may_have_been_applied() {
    for (answers, want) in sluice_platform::aws::outcome::ANSWERS_TABLE {
        let (last, first) = answers.split_last().unwrap();
        let mut seq = mock!(Client::send_message_batch).sequence();
        for status in first {
            seq = seq.http_status(*status, None);
        }
        let rule = seq.http_status(*last, None).repeatedly().build();
        let d = sqs(&[&rule]);
        let e = d.send(&batch("", &["a", "b"])).await.unwrap_err();
        assert_eq!(e.uncertain, *want, "{answers:?}: {}", e.error);
    }
}
