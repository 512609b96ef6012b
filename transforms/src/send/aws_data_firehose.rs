//! `send_aws_data_firehose`: puts each batch into an Amazon Data Firehose delivery stream
//! with `PutRecordBatch`.
//!
//! Substation compatibility: the same type name and settings (`aws.arn`,
//! `aws.assume_role_arn`, `batch`, `auxiliary_transforms`, `object.batch_key`). `aws.arn`
//! is the delivery stream's ARN (`arn:aws:firehose:REGION:ACCOUNT:deliverystream/NAME`),
//! from which the `DeliveryStreamName` and the region are taken, or its bare name (the
//! region then comes from `AWS_REGION`); Substation passes the whole ARN as the name. Each
//! item is one Firehose record, sent as is (Firehose adds no separator: add one with
//! auxiliary transforms). The default id is the type name; Substation's Go code defaults it
//! to `send_aws_kinesis_data_firehose` (a copy-paste slip), which sluice does not copy.
//!
//! Where sluice differs from Substation (`reference/substation.md` §2.1 row 50):
//!
//! - **Limits**: at most 500 records and 4 MiB per call; a batch that exceeds either (after
//!   auxiliary transforms) is split into several calls, in order. A record is at most
//!   1,000 KiB (1,024,000 bytes); a larger message is an error naming the limit when it
//!   arrives, so it never blocks a batch.
//! - **Partial failures**: the records a call reports with an `ErrorCode`
//!   (`RequestResponses[i]`) are sent again, only those, with exponential backoff and full
//!   jitter and a bound (`RetryPolicy::DEFAULT`); throttling and 5xx of the whole call
//!   are retried by the SDK (`sluice_platform::aws`). What still fails is reported to the batcher as
//!   exactly those items, so only their messages' acknowledgements fail, and the error
//!   names the delivery stream and the error codes. Substation retries recursively without
//!   bound or backoff, and dereferences a nil response when the call itself fails.

use super::aws_destination::{AwsDestination, aws_send, send_calls};
use super::aws_records::{
    self, AttemptWatch, AwsSettings, CallError, PutFailure, Stream, cannot_make, check_role,
    non_empty, put_with_retries, record_result, valid_stream_name,
};
use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use aws_sdk_firehose::Client;
use aws_sdk_firehose::primitives::Blob;
use aws_sdk_firehose::types::Record;
use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, Value, async_trait};
use sluice_platform::aws::{Arn, AwsTarget};

/// Most records in one `PutRecordBatch` call.
pub(crate) const MAX_RECORDS: usize = 500;
/// Most bytes in one `PutRecordBatch` call.
pub(crate) const MAX_CALL_BYTES: usize = 4 * 1024 * 1024;
/// Most bytes of one record (1,000 KiB).
pub(crate) const MAX_RECORD_BYTES: usize = 1_024_000;

/// Settings of `send_aws_data_firehose`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The delivery stream and the role.
    pub aws: AwsSettings,
    /// Batch limits (capped at 500 records and 4 MiB).
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is sent.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`.
    pub object: ObjectSettings,
}

/// The delivery stream named by `aws.arn`: its name and its region (from an ARN).
pub(crate) fn parse_delivery_stream(
    arn: Option<String>,
) -> Result<(String, Option<String>), String> {
    let arn = non_empty(arn).ok_or(
        "missing required option: the delivery stream's ARN \
         (arn:aws:firehose:REGION:ACCOUNT:deliverystream/NAME) or its name",
    )?;
    if arn.starts_with("arn:") {
        let a = Arn::parse(&arn)?;
        let name = a.resource.strip_prefix("deliverystream/").unwrap_or("");
        if a.service != "firehose" || !valid_stream_name(name, 64) || a.region.is_empty() {
            return Err(format!(
                "{arn:?} is not a Firehose delivery stream ARN \
                 (expected arn:aws:firehose:REGION:ACCOUNT:deliverystream/NAME)"
            ));
        }
        Ok((name.to_string(), Some(a.region)))
    } else if valid_stream_name(&arn, 64) {
        Ok((arn, None))
    } else {
        Err(format!(
            "{arn:?} is neither a Firehose delivery stream ARN \
             (arn:aws:firehose:REGION:ACCOUNT:deliverystream/NAME) nor a delivery stream \
             name (1 to 64 letters, digits, '_', '-', '.')"
        ))
    }
}

/// A Firehose delivery stream as a destination.
pub(crate) struct Firehose {
    aws: AwsDestination<Client>,
}

impl Firehose {
    /// The delivery stream `name`, reached with `target`.
    pub(crate) fn new(name: String, target: AwsTarget) -> Self {
        Firehose {
            aws: AwsDestination::new(
                "firehose delivery stream",
                name,
                target,
                "give the delivery stream's ARN in aws.arn or set AWS_REGION",
            ),
        }
    }

    /// Puts `items` (one call's worth) until each was accepted or the attempts are spent.
    /// On failure: the indexes (into `items`) not accepted, why, and whether they may have been applied.
    async fn put(&self, client: &Client, items: &[bytes::Bytes]) -> Result<(), PutFailure> {
        let stream = Stream {
            kind: self.aws.kind(),
            name: self.aws.name(),
            operation: "PutRecordBatch",
            records: "records",
        };
        put_with_retries(stream, self.aws.retry(), items.len(), |pending| {
            let records: Result<Vec<Record>, _> = pending
                .iter()
                .map(|&i| Record::builder().data(Blob::new(items[i].to_vec())).build())
                .collect();
            let watch = AttemptWatch::default();
            let req = records.map(|records| {
                client
                    .put_record_batch()
                    .delivery_stream_name(self.aws.name())
                    .set_records(Some(records))
                    .customize()
                    .interceptor(watch.clone())
                    .send()
            });
            async move {
                let req = req.map_err(|e| cannot_make(&e))?;
                let out = req.await.map_err(|e| CallError::sdk(&e, &watch))?;
                Ok(out
                    .request_responses()
                    .iter()
                    .map(|r| record_result(r.error_code(), r.error_message()))
                    .collect())
            }
        })
        .await
    }
}

/// Splits `items` into calls of at most [`MAX_RECORDS`] records and [`MAX_CALL_BYTES`].
fn calls(items: &[bytes::Bytes]) -> Vec<std::ops::Range<usize>> {
    aws_records::calls(items, bytes::Bytes::len, MAX_RECORDS, MAX_CALL_BYTES)
}

#[async_trait]
impl Destination for Firehose {
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let client = self.aws.client(Client::new).await?;
        send_calls(calls(&batch.items), batch.items.len(), |range| {
            self.put(client, &batch.items[range])
        })
        .await
    }
}

aws_send!(Firehose, Client);

/// The `send_aws_data_firehose` transform.
pub(crate) type SendAwsDataFirehose = Sender<Firehose>;

impl Sender<Firehose> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let (name, region) =
            parse_delivery_stream(s.aws.arn).map_err(|m| b.field_error("aws.arn", m))?;
        let role = non_empty(s.aws.assume_role_arn);
        check_role(&role).map_err(|m| b.field_error("aws.assume_role_arn", m))?;
        let target = AwsTarget {
            region,
            assume_role_arn: role,
            ..Default::default()
        };
        Sender::new(
            b,
            SendOptions {
                batch: s.batch,
                auxiliary_transforms: s.auxiliary_transforms,
                object: s.object,
            },
            Caps {
                count: MAX_RECORDS,
                size: MAX_CALL_BYTES,
                item_size: MAX_RECORD_BYTES,
            },
            Firehose::new(name, target),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use crate::send::aws_destination::{AwsSend, RetryPolicy};
    use crate::send::batcher::Undelivered;
    use aws_sdk_firehose::config::retry::RetryConfig;
    use aws_sdk_firehose::operation::put_record_batch::{
        PutRecordBatchInput, PutRecordBatchOutput,
    };
    use aws_sdk_firehose::types::PutRecordBatchResponseEntry;
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use bytes::Bytes;
    use sluice_engine::StatefulTransform;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::batch::BatchLimits;
    use sluice_engine::{Message, Transform, json, testing};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    const ARN: &str = "arn:aws:firehose:eu-west-1:123456789012:deliverystream/logs";

    const FAST: RetryPolicy = RetryPolicy {
        attempts: 3,
        base: Duration::from_millis(1),
        max: Duration::from_millis(2),
    };

    fn firehose(rules: &[&Rule]) -> Firehose {
        let client = mock_client!(aws_sdk_firehose, RuleMode::MatchAny, rules, |b| b
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(1))
            ));
        let (name, region) = parse_delivery_stream(Some(ARN.into())).unwrap();
        Firehose::new(
            name,
            AwsTarget {
                region,
                ..Default::default()
            },
        )
        .with_client(client)
        .with_retry(FAST)
    }

    fn batch(items: &[&str]) -> Outgoing {
        Outgoing {
            key: String::new(),
            items: items.iter().map(|i| Bytes::from(i.to_string())).collect(),
            ..Default::default()
        }
    }

    fn results(codes: &[Option<&str>]) -> PutRecordBatchOutput {
        let failed = codes.iter().filter(|c| c.is_some()).count() as i32;
        let entries = codes
            .iter()
            .map(|c| match c {
                None => PutRecordBatchResponseEntry::builder()
                    .record_id("id")
                    .build(),
                Some(code) => PutRecordBatchResponseEntry::builder()
                    .error_code(*code)
                    .error_message("slow down")
                    .build(),
            })
            .collect();
        PutRecordBatchOutput::builder()
            .failed_put_count(failed)
            .set_request_responses(Some(entries))
            .build()
            .unwrap()
    }

    fn ok(n: usize) -> PutRecordBatchOutput {
        results(&vec![None; n])
    }

    type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

    fn recorder() -> (
        Seen,
        impl Fn(&PutRecordBatchInput) -> bool + Send + Sync + 'static,
    ) {
        let seen: Seen = Arc::default();
        let s = seen.clone();
        (seen, move |r: &PutRecordBatchInput| {
            let recs = r
                .records()
                .iter()
                .map(|e| String::from_utf8_lossy(e.data().as_ref()).into_owned())
                .collect();
            s.lock()
                .unwrap()
                .push((r.delivery_stream_name().unwrap_or("").to_string(), recs));
            true
        })
    }

    #[test]
    fn settings_table() {
        let r = registry();
        for s in [
            json!({"aws": {"arn": ARN}}),
            json!({"aws": {"arn": "logs"}}),
            json!({"aws": {"arn": ARN}, "batch": {"count": 10000, "size": 100000000}}),
        ] {
            testing::build(&r, json!({"type": "send_aws_data_firehose", "settings": s}))
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        testing::assert_config_errors(
            &r,
            "send_aws_data_firehose",
            &[
                (json!({}), "aws.arn: missing required option"),
                (
                    json!({"aws": {"arn": "arn:aws:kinesis:us-east-1:1:stream/s"}}),
                    "is not a Firehose delivery stream ARN",
                ),
                (
                    json!({"aws": {"arn": "arn:aws:firehose::1:deliverystream/x"}}),
                    "is not a Firehose delivery stream ARN",
                ),
                (
                    json!({"aws": {"arn": "x".repeat(65)}}),
                    "nor a delivery stream name",
                ),
                (
                    json!({"aws": {"arn": ARN, "assume_role_arn": "arn:aws:s3:::b"}}),
                    "aws.assume_role_arn",
                ),
            ],
        );
        assert_eq!(
            parse_delivery_stream(Some(ARN.into())).unwrap(),
            ("logs".into(), Some("eu-west-1".into()))
        );
    }

    #[tokio::test]
    async fn caps_split_calls_and_the_name_is_sent() {
        let (seen, m) = recorder();
        let rule = mock!(Client::put_record_batch)
            .match_requests(m)
            .then_compute_output(|r| ok(r.records().len()));
        let f = firehose(&[&rule]);
        let items: Vec<String> = (0..501).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        f.send(&batch(&refs)).await.unwrap();
        let big = "x".repeat(MAX_RECORD_BYTES);
        f.send(&batch(&[big.as_str(); 5])).await.unwrap();
        let seen = seen.lock().unwrap();
        let sizes: Vec<usize> = seen.iter().map(|(_, r)| r.len()).collect();
        // 501 records: 500 + 1; five records of 1,000 KiB: 4 fit in 4 MiB, then 1.
        assert_eq!(sizes, vec![500, 1, 4, 1]);
        assert!(seen.iter().all(|(n, _)| n == "logs"), "DeliveryStreamName");
        assert_eq!(seen[1].1, vec!["500"]);
    }

    #[test]
    fn a_record_over_the_limit_is_an_error_naming_it() {
        let t = testing::build(
            &registry(),
            json!({"type": "send_aws_data_firehose", "settings": {"aws": {"arn": ARN}}}),
        )
        .unwrap();
        let e = testing::block_on(t.transform(
            Message::new(vec![b'x'; MAX_RECORD_BYTES + 1]),
            &mut Vec::new(),
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("item size limit of 1024000 bytes"), "{e}");
    }

    #[tokio::test]
    async fn partial_failures_resend_only_the_failed_records() {
        let (seen, m) = recorder();
        let rule = mock!(Client::put_record_batch)
            .match_requests(m)
            .sequence()
            .output(|| results(&[Some("ServiceUnavailableException"), None, None]))
            .output(|| ok(1))
            .build();
        let f = firehose(&[&rule]);
        f.send(&batch(&["a", "b", "c"])).await.unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].1, vec!["a"]);
    }

    #[tokio::test]
    async fn a_throttled_call_is_retried() {
        let throttled = r#"{"__type":"ServiceUnavailableException","message":"Slow down."}"#;
        let rule = mock!(Client::put_record_batch)
            .sequence()
            .http_status(503, Some(throttled.into()))
            .times(2)
            .output(|| ok(1))
            .build();
        let f = firehose(&[&rule]);
        f.send(&batch(&["a"])).await.unwrap();
        assert_eq!(rule.num_calls(), 3);
    }

    #[tokio::test]
    async fn persistent_record_failures_are_undelivered_items() {
        let rule = mock!(Client::put_record_batch).then_compute_output(|r| {
            let codes: Vec<Option<&str>> = r
                .records()
                .iter()
                .map(|e| (e.data().as_ref() == b"c").then_some("ServiceUnavailableException"))
                .collect();
            results(&codes)
        });
        let f = firehose(&[&rule]);
        let e = f.send(&batch(&["a", "b", "c", "d"])).await.unwrap_err();
        assert_eq!(e.undelivered, Undelivered::Items(vec![2]));
        let text = e.error.to_string();
        assert!(
            text.contains("firehose delivery stream logs: 1 of 4 records not accepted after 3 PutRecordBatch attempts: 1 × ServiceUnavailableException"),
            "{text}"
        );
        assert_eq!(rule.num_calls(), 3);
    }

    #[tokio::test]
    async fn a_failed_call_fails_it_and_the_calls_after_it() {
        let rule_ok = mock!(Client::put_record_batch)
            .sequence()
            .output(|| ok(500))
            .build();
        let rule_err = mock!(Client::put_record_batch)
            .sequence()
            .http_status(
                400,
                Some(r#"{"__type":"ResourceNotFoundException","message":"no such stream"}"#.into()),
            )
            .build();
        let f = firehose(&[&rule_ok, &rule_err]);
        let items: Vec<String> = (0..1200).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let e = f.send(&batch(&refs)).await.unwrap_err();
        assert_eq!(e.undelivered, Undelivered::Items((500..1200).collect()));
        let text = e.error.to_string();
        assert!(
            text.contains("firehose delivery stream logs: PutRecordBatch failed"),
            "{text}"
        );
        assert!(text.contains("ResourceNotFoundException"), "{text}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn acks_fail_for_exactly_the_undelivered_messages() {
        let rule = mock!(Client::put_record_batch).then_compute_output(|r| {
            let codes: Vec<Option<&str>> = r
                .records()
                .iter()
                .map(|e| (e.data().as_ref() == b"a").then_some("InternalFailure"))
                .collect();
            results(&codes)
        });
        let s = Sender::from_parts(
            firehose(&[&rule]),
            BatchLimits::from(BatchSettings::default()),
            MAX_RECORD_BYTES,
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
    fn compliance() {
        let rule = mock!(Client::put_record_batch).then_compute_output(|r| ok(r.records().len()));
        let t = Transform::stateful(Sender::from_parts(
            firehose(&[&rule]),
            BatchLimits::from(BatchSettings::default()),
            MAX_RECORD_BYTES,
            None,
            None,
        ));
        testing::check_compliance(t);
    }

    #[tokio::test]
    async fn failures_say_whether_they_may_have_been_applied() {
        for (answers, want) in sluice_platform::aws::outcome::ANSWERS_TABLE {
            let (last, first) = answers.split_last().unwrap();
            let mut seq = mock!(Client::put_record_batch).sequence();
            for status in first {
                seq = seq.http_status(*status, None);
            }
            let rule = seq.http_status(*last, None).repeatedly().build();
            let d = firehose(&[&rule]);
            let e = d.send(&batch(&["a", "b"])).await.unwrap_err();
            assert_eq!(e.uncertain, *want, "{answers:?}: {}", e.error);
        }
    }
}
