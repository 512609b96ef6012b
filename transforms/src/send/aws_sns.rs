//! `send_aws_sns`: publishes each batch to an Amazon SNS topic with `PublishBatch`.
//!
//! Substation compatibility: the same type name and settings (`aws.arn`,
//! `aws.assume_role_arn`, `batch`, `auxiliary_transforms`, `object.batch_key`) and default
//! id (the type name). `aws.arn` is the topic's ARN (`arn:aws:sns:REGION:ACCOUNT:NAME`),
//! sent as `TopicArn`, whose region is used. Each item is one message, the item's data.
//!
//! Where sluice differs from Substation (`reference/substation.md` §2.1 row 56):
//!
//! - **Limits** (the API's defaults): at most 10 messages and 256 KiB (262,144 bytes, the
//!   sum of the messages) per call; a message is at most 256 KiB, not empty, and UTF-8. A
//!   message that breaks a rule is an error naming it when it arrives, so it never blocks
//!   a batch. (A topic may raise its `MaximumMessageSize` to 1 MiB; sluice keeps to the
//!   default, which every topic takes.)
//! - **FIFO topics** (`.fifo`): a `MessageGroupId` (the batch key, else one random id per
//!   batch as in Substation) and a `MessageDeduplicationId` per message (the value at
//!   `object.deduplication_key`, else the SHA-256 of the data), so SNS itself drops a
//!   message published twice within 5 minutes ([`super::aws_messages`]). Substation sets no
//!   deduplication id, so it needs content-based deduplication on the topic.
//! - **Partial failures**: the messages a call reports in `Failed` are published again,
//!   only those, with exponential backoff and full jitter and a bound
//!   (`RetryPolicy::DEFAULT`); throttling and 5xx of the whole call are retried by the SDK
//!   (`sluice_platform::aws`). What still fails is reported to the batcher as exactly those items, so
//!   only their messages' acknowledgements fail, and the error names the topic and the
//!   error codes. A failed call fails the messages it carried and those of the later calls
//!   of the batch. Substation retries recursively, without bound or backoff.

use super::aws_destination::{AwsDestination, aws_send, send_calls};
use super::aws_messages::{
    FifoIds, MAX_ENTRIES, MessageIds, MessageObject, check_text, entries, results_by_id,
};
use super::aws_records::{
    self, AttemptWatch, AwsSettings, CallError, PutFailure, Stream, cannot_make, check_role,
    non_empty, put_with_retries,
};
use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use aws_sdk_sns::Client;
use aws_sdk_sns::types::PublishBatchRequestEntry;
use bytes::Bytes;
use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, Value, async_trait};
use sluice_platform::aws::{Arn, AwsTarget};

/// Most bytes (the sum of the messages) in one `PublishBatch` call.
pub(crate) const MAX_CALL_BYTES: usize = 256 * 1024;
/// Most bytes of one message (the default `MaximumMessageSize` of a topic).
pub(crate) const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Settings of `send_aws_sns`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The topic and the role.
    pub aws: AwsSettings,
    /// Batch limits (capped at 10 messages and 256 KiB).
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is sent.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`, `deduplication_key`.
    pub object: MessageObject,
}

/// SNS topic names: 1 to 256 letters, digits, `-` and `_`, `.fifo` included for FIFO
/// topics.
fn valid_topic_name(name: &str) -> bool {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    (1..=256).contains(&name.len())
        && !base.is_empty()
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The topic named by `aws.arn`: its ARN, its name and its region.
pub(crate) fn parse_topic(arn: Option<String>) -> Result<(String, String, String), String> {
    let arn = non_empty(arn)
        .ok_or("missing required option: the topic's ARN (arn:aws:sns:REGION:ACCOUNT:NAME)")?;
    let bad =
        || format!("{arn:?} is not an SNS topic ARN (expected arn:aws:sns:REGION:ACCOUNT:NAME)");
    let a = Arn::parse(&arn).map_err(|_| bad())?;
    if a.service != "sns"
        || a.region.is_empty()
        || a.account.is_empty()
        || !valid_topic_name(&a.resource)
    {
        return Err(bad());
    }
    Ok((arn.clone(), a.resource, a.region))
}

/// An SNS topic as a destination.
pub(crate) struct Sns {
    aws: AwsDestination<Client>,
    arn: String,
    ids: MessageIds,
}

impl Sns {
    /// The topic `arn` (named `name`), its messages identified by `ids`, reached with
    /// `target`.
    pub(crate) fn new(arn: String, name: String, ids: MessageIds, target: AwsTarget) -> Self {
        Sns {
            // A topic's ARN always carries its region: nothing to add when there is none.
            aws: AwsDestination::new("sns topic", name, target, ""),
            arn,
            ids,
        }
    }

    /// Publishes `items` (one call's worth, with their FIFO ids) until each was accepted
    /// or the attempts are spent. On failure: the indexes (into `items`) not accepted,
    /// why, and whether they may have been applied.
    async fn put(
        &self,
        client: &Client,
        items: &[Bytes],
        fifo: Option<(&str, &[String])>,
    ) -> Result<(), PutFailure> {
        let stream = Stream {
            kind: self.aws.kind(),
            name: self.aws.name(),
            operation: "PublishBatch",
            records: "messages",
        };
        put_with_retries(stream, self.aws.retry(), items.len(), |pending| {
            let entries: Result<Vec<PublishBatchRequestEntry>, _> = entries(pending, items, fifo)
                .map(|e| {
                    PublishBatchRequestEntry::builder()
                        .id(e.id)
                        .message(e.text)
                        .set_message_group_id(e.group.map(String::from))
                        .set_message_deduplication_id(e.dedup.map(String::from))
                        .build()
                })
                .collect();
            let count = pending.len();
            let watch = AttemptWatch::default();
            let req = entries.map(|entries| {
                client
                    .publish_batch()
                    .topic_arn(&self.arn)
                    .set_publish_batch_request_entries(Some(entries))
                    .customize()
                    .interceptor(watch.clone())
                    .send()
            });
            async move {
                let req = req.map_err(|e| cannot_make(&e))?;
                let out = req.await.map_err(|e| CallError::sdk(&e, &watch))?;
                Ok(results_by_id(
                    count,
                    out.successful().iter().filter_map(|s| s.id()),
                    out.failed().iter().map(|f| (f.id(), f.code(), f.message())),
                ))
            }
        })
        .await
    }
}

/// Splits `items` into calls of at most 10 messages and [`MAX_CALL_BYTES`].
fn calls(items: &[Bytes]) -> Vec<std::ops::Range<usize>> {
    aws_records::calls(items, Bytes::len, MAX_ENTRIES, MAX_CALL_BYTES)
}

#[async_trait]
impl Destination for Sns {
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let client = self.aws.client(Client::new).await?;
        let ids: Option<FifoIds> = self.ids.of(&batch.key, &batch.items);
        send_calls(calls(&batch.items), batch.items.len(), |range| {
            let fifo = ids
                .as_ref()
                .map(|f| (f.group.as_str(), &f.dedup[range.clone()]));
            self.put(client, &batch.items[range], fifo)
        })
        .await
    }

    fn check(&self, item: &[u8]) -> Result<(), String> {
        check_text(item, false).map_err(|rule| format!("sns topic {} {rule}", self.aws.name()))
    }
}

aws_send!(Sns, Client);

/// The `send_aws_sns` transform.
pub(crate) type SendAwsSns = Sender<Sns>;

impl Sender<Sns> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let (arn, name, region) =
            parse_topic(s.aws.arn).map_err(|m| b.field_error("aws.arn", m))?;
        let role = non_empty(s.aws.assume_role_arn);
        check_role(&role).map_err(|m| b.field_error("aws.assume_role_arn", m))?;
        let ids = MessageIds::from_settings(b, &name, s.object.deduplication_key)?;
        let target = AwsTarget {
            region: Some(region),
            assume_role_arn: role,
            ..Default::default()
        };
        Sender::new(
            b,
            SendOptions {
                batch: s.batch,
                auxiliary_transforms: s.auxiliary_transforms,
                object: ObjectSettings {
                    source_key: None,
                    target_key: None,
                    batch_key: s.object.batch_key,
                },
            },
            Caps {
                count: MAX_ENTRIES,
                size: MAX_CALL_BYTES,
                item_size: MAX_MESSAGE_BYTES,
            },
            Sns::new(arn, name, ids, target),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use crate::send::aws_destination::{AwsSend, RetryPolicy};
    use crate::send::batcher::Undelivered;
    use aws_sdk_sns::config::retry::RetryConfig;
    use aws_sdk_sns::operation::publish_batch::{PublishBatchInput, PublishBatchOutput};
    use aws_sdk_sns::types::{BatchResultErrorEntry, PublishBatchResultEntry};
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use sluice_engine::StatefulTransform;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::batch::BatchLimits;
    use sluice_engine::{Key, Message, Transform, json, testing};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    const ARN: &str = "arn:aws:sns:eu-west-1:123456789012:alerts";
    const FIFO_ARN: &str = "arn:aws:sns:eu-west-1:123456789012:alerts.fifo";

    const FAST: RetryPolicy = RetryPolicy {
        attempts: 3,
        base: Duration::from_millis(1),
        max: Duration::from_millis(2),
    };

    fn sns_for(arn: &str, ids: MessageIds, rules: &[&Rule]) -> Sns {
        let client = mock_client!(aws_sdk_sns, RuleMode::MatchAny, rules, |b| b.retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(1))
        ));
        let (arn, name, region) = parse_topic(Some(arn.into())).unwrap();
        Sns::new(
            arn,
            name,
            ids,
            AwsTarget {
                region: Some(region),
                ..Default::default()
            },
        )
        .with_client(client)
        .with_retry(FAST)
    }

    fn sns(rules: &[&Rule]) -> Sns {
        sns_for(ARN, MessageIds::Standard, rules)
    }

    fn batch(key: &str, items: &[&str]) -> Outgoing {
        Outgoing {
            key: key.to_string(),
            items: items.iter().map(|i| Bytes::from(i.to_string())).collect(),
            ..Default::default()
        }
    }

    fn results(codes: &[Option<&str>]) -> PublishBatchOutput {
        let mut ok = Vec::new();
        let mut failed = Vec::new();
        for (i, c) in codes.iter().enumerate() {
            match c {
                None => ok.push(
                    PublishBatchResultEntry::builder()
                        .id(i.to_string())
                        .message_id(format!("m{i}"))
                        .build(),
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
        PublishBatchOutput::builder()
            .set_successful(Some(ok))
            .set_failed(Some(failed))
            .build()
    }

    fn ok(n: usize) -> PublishBatchOutput {
        results(&vec![None; n])
    }

    /// What each call sent: (topic ARN, [(message, group id, dedup id)]).
    type Call = (String, Vec<(String, Option<String>, Option<String>)>);
    type Seen = Arc<Mutex<Vec<Call>>>;

    fn recorder() -> (
        Seen,
        impl Fn(&PublishBatchInput) -> bool + Send + Sync + 'static,
    ) {
        let seen: Seen = Arc::default();
        let s = seen.clone();
        (seen, move |r: &PublishBatchInput| {
            let entries = r
                .publish_batch_request_entries()
                .iter()
                .map(|e| {
                    (
                        e.message().to_string(),
                        e.message_group_id().map(String::from),
                        e.message_deduplication_id().map(String::from),
                    )
                })
                .collect();
            s.lock()
                .unwrap()
                .push((r.topic_arn().unwrap_or("").to_string(), entries));
            true
        })
    }

    fn messages(call: &Call) -> Vec<&str> {
        call.1.iter().map(|(m, _, _)| m.as_str()).collect()
    }

    fn entries(r: &PublishBatchInput) -> usize {
        r.publish_batch_request_entries().len()
    }

    #[test]
    fn settings_table() {
        let r = registry();
        for s in [
            json!({"aws": {"arn": ARN}}),
            json!({"aws": {"arn": FIFO_ARN}, "object": {"batch_key": "k", "deduplication_key": "id"}}),
            json!({"aws": {"arn": ARN}, "batch": {"count": 1000, "size": 100000000}}),
        ] {
            testing::build(&r, json!({"type": "send_aws_sns", "settings": s}))
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        testing::assert_config_errors(
            &r,
            "send_aws_sns",
            &[
                (json!({}), "aws.arn: missing required option"),
                (json!({"aws": {"arn": "alerts"}}), "is not an SNS topic ARN"),
                (
                    json!({"aws": {"arn": "arn:aws:sqs:us-east-1:1:q"}}),
                    "is not an SNS topic ARN",
                ),
                (
                    json!({"aws": {"arn": "arn:aws:sns::1:alerts"}}),
                    "is not an SNS topic ARN",
                ),
                (
                    json!({"aws": {"arn": "arn:aws:sns:us-east-1:1:a.b"}}),
                    "is not an SNS topic ARN",
                ),
                (
                    json!({"aws": {"arn": ARN, "assume_role_arn": "role"}}),
                    "aws.assume_role_arn",
                ),
                (
                    json!({"aws": {"arn": FIFO_ARN}, "object": {"deduplication_key": "meta id"}}),
                    "object.deduplication_key: must be a key in the data",
                ),
            ],
        );
        assert_eq!(
            parse_topic(Some(FIFO_ARN.into())).unwrap(),
            (
                FIFO_ARN.to_string(),
                "alerts.fifo".to_string(),
                "eu-west-1".to_string()
            )
        );
    }

    #[test]
    fn messages_sns_cannot_take_are_errors_naming_the_rule() {
        let t = testing::build(
            &registry(),
            json!({"type": "send_aws_sns", "settings": {"aws": {"arn": ARN}}}),
        )
        .unwrap();
        let table: Vec<(Vec<u8>, &str)> = vec![
            (
                vec![b'x'; MAX_MESSAGE_BYTES + 1],
                "item size limit of 262144 bytes",
            ),
            (b"\xc3".to_vec(), "sns topic alerts takes only UTF-8 text"),
            (Vec::new(), "sns topic alerts takes no empty message"),
        ];
        for (data, want) in table {
            let e = testing::block_on(t.transform(Message::new(data), &mut Vec::new()))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        }
        testing::block_on(
            t.transform(Message::new(vec![b'x'; MAX_MESSAGE_BYTES]), &mut Vec::new()),
        )
        .unwrap();
    }

    #[tokio::test]
    async fn calls_hold_at_most_10_messages_and_256_kib() {
        let (seen, m) = recorder();
        let rule = mock!(Client::publish_batch)
            .match_requests(m)
            .then_compute_output(|r| ok(entries(r)));
        let t = sns(&[&rule]);
        let items: Vec<String> = (0..11).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        t.send(&batch("", &refs)).await.unwrap();
        let big = "x".repeat(100 * 1024);
        t.send(&batch("", &[big.as_str(); 3])).await.unwrap();
        let seen = seen.lock().unwrap();
        let sizes: Vec<usize> = seen.iter().map(|c| c.1.len()).collect();
        assert_eq!(sizes, vec![10, 1, 2, 1]);
        assert!(seen.iter().all(|c| c.0 == ARN), "TopicArn");
        assert!(seen[0].1.iter().all(|(_, g, d)| g.is_none() && d.is_none()));
    }

    #[tokio::test]
    async fn fifo_ids_group_by_batch_key_and_dedup_by_key_or_data() {
        let (seen, m) = recorder();
        let rule = mock!(Client::publish_batch)
            .match_requests(m)
            .then_compute_output(|r| ok(entries(r)));
        let t = sns_for(
            FIFO_ARN,
            MessageIds::Fifo(Some(Key::parse("id").unwrap())),
            &[&rule],
        );
        t.send(&batch("k1", &[r#"{"id":"e-1"}"#, "plain"]))
            .await
            .unwrap();
        let seen = seen.lock().unwrap();
        let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"plain"));
        assert_eq!(
            seen[0].1,
            vec![
                (
                    r#"{"id":"e-1"}"#.to_string(),
                    Some("k1".to_string()),
                    Some("e-1".to_string())
                ),
                ("plain".to_string(), Some("k1".to_string()), Some(sha)),
            ]
        );
    }

    #[tokio::test]
    async fn partial_failures_resend_only_the_failed_messages() {
        let (seen, m) = recorder();
        let rule = mock!(Client::publish_batch)
            .match_requests(m)
            .sequence()
            .output(|| results(&[Some("Throttled"), None, Some("InternalError")]))
            .output(|| ok(2))
            .build();
        let t = sns(&[&rule]);
        t.send(&batch("", &["a", "b", "c"])).await.unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(messages(&seen[1]), vec!["a", "c"]);
    }

    #[tokio::test]
    async fn persistent_failures_are_exactly_the_undelivered_items() {
        let rule = mock!(Client::publish_batch).then_compute_output(|r| {
            let codes: Vec<Option<&str>> = r
                .publish_batch_request_entries()
                .iter()
                .map(|e| (e.message() == "b").then_some("KMSThrottling"))
                .collect();
            results(&codes)
        });
        let t = sns(&[&rule]);
        let e = t.send(&batch("", &["a", "b", "c"])).await.unwrap_err();
        assert_eq!(e.undelivered, Undelivered::Items(vec![1]));
        let text = e.error.to_string();
        assert!(
            text.contains("sns topic alerts: 1 of 3 messages not accepted after 3 PublishBatch attempts: 1 × KMSThrottling (try again)"),
            "{text}"
        );
        assert_eq!(rule.num_calls(), 3);
    }

    #[tokio::test]
    async fn a_failed_call_fails_it_and_the_calls_after_it() {
        let rule_ok = mock!(Client::publish_batch)
            .sequence()
            .output(|| ok(10))
            .build();
        let rule_err = mock!(Client::publish_batch)
            .sequence()
            .http_status(
                404,
                Some(
                    r#"<ErrorResponse><Error><Type>Sender</Type><Code>NotFound</Code><Message>Topic does not exist</Message></Error></ErrorResponse>"#
                        .into(),
                ),
            )
            .build();
        let t = sns(&[&rule_ok, &rule_err]);
        let items: Vec<String> = (0..15).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let e = t.send(&batch("", &refs)).await.unwrap_err();
        assert_eq!(e.undelivered, Undelivered::Items((10..15).collect()));
        let text = e.error.to_string();
        assert!(
            text.contains("sns topic alerts: PublishBatch failed"),
            "{text}"
        );
        assert!(text.contains("NotFound"), "{text}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn acks_fail_for_exactly_the_undelivered_messages() {
        let rule = mock!(Client::publish_batch).then_compute_output(|r| {
            let codes: Vec<Option<&str>> = r
                .publish_batch_request_entries()
                .iter()
                .map(|e| (e.message() == "b").then_some("InternalError"))
                .collect();
            results(&codes)
        });
        let s = Sender::from_parts(
            sns(&[&rule]),
            BatchLimits::from(BatchSettings::default()).capped(MAX_ENTRIES, MAX_CALL_BYTES),
            MAX_MESSAGE_BYTES,
            None,
            None,
        );
        let mut trackers = Vec::new();
        let mut out = Vec::new();
        for d in ["a", "b", "c"] {
            let (t, tok) = AckTracker::new();
            let mut m = Message::new(d.as_bytes().to_vec());
            m.add_ack(tok);
            s.transform(m, &mut out).await.unwrap();
            trackers.push(t);
        }
        drop(out);
        assert!(s.transform(Message::ctrl(), &mut Vec::new()).await.is_err());
        assert_eq!(trackers[0].status(), AckStatus::Delivered);
        assert_eq!(trackers[1].status(), AckStatus::Pending);
        assert_eq!(trackers[2].status(), AckStatus::Delivered);
        s.abort("gave up").await;
        assert_eq!(trackers[1].status(), AckStatus::Failed);
    }

    #[test]
    fn compliance() {
        let rule = mock!(Client::publish_batch).then_compute_output(|r| ok(entries(r)));
        let t = Transform::stateful(Sender::from_parts(
            sns(&[&rule]),
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
            let mut seq = mock!(Client::publish_batch).sequence();
            for status in first {
                seq = seq.http_status(*status, None);
            }
            let rule = seq.http_status(*last, None).repeatedly().build();
            let d = sns(&[&rule]);
            let e = d.send(&batch("", &["a", "b"])).await.unwrap_err();
            assert_eq!(e.uncertain, *want, "{answers:?}: {}", e.error);
        }
    }
}
