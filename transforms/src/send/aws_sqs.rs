//! `send_aws_sqs`: sends each batch to an Amazon SQS queue with `SendMessageBatch`.
//!
//! Substation compatibility: the same type name and settings (`aws.arn`,
//! `aws.assume_role_arn`, `batch`, `auxiliary_transforms`, `object.batch_key`) and default
//! id (the type name). Each item is one message, its body the item's data.
//!
//! Where sluice differs from Substation (`reference/substation.md` §2.1 row 57):
//!
//! - **The queue**: `aws.arn` is the queue's ARN (`arn:aws:sqs:REGION:ACCOUNT:NAME`), its
//!   URL, or its bare name. For an ARN or a name the URL is asked of SQS once
//!   (`GetQueueUrl`, with `QueueOwnerAWSAccountId` from the ARN) and kept, so an endpoint
//!   override (`AWS_ENDPOINT_URL_SQS`, an emulator) gets its own URL; Substation builds
//!   `https://sqs.REGION.amazonaws.com/ACCOUNT/NAME` by hand. The region comes from the ARN,
//!   from a URL's `sqs.REGION.amazonaws.com` host, else from `AWS_REGION`.
//! - **Limits** (the API's): at most 10 messages and 1 MiB (1,048,576 bytes, the sum of the
//!   bodies) per call; a message is at most 1 MiB, not empty, and UTF-8 text of the
//!   characters XML allows. A message that breaks a rule is an error naming it when it
//!   arrives, so it never blocks a batch. (A queue whose `MaximumMessageSize` is set lower
//!   rejects larger messages itself; the error names the queue and the reason.)
//! - **FIFO queues** (`.fifo`): a `MessageGroupId` (the batch key, else one random id per
//!   batch as in Substation) and a `MessageDeduplicationId` per message (the value at
//!   `object.deduplication_key`, else the SHA-256 of the data), so SQS itself drops a
//!   message sent twice within 5 minutes ([`super::aws_messages`]). Substation sets no
//!   deduplication id.
//! - **Partial failures**: the messages a call reports in `Failed` are sent again, only
//!   those, with exponential backoff and full jitter and a bound (`RetryPolicy::DEFAULT`);
//!   throttling and 5xx of the whole call are retried by the SDK (`crate::aws`). What still
//!   fails is reported to the batcher as exactly those items, so only their messages'
//!   acknowledgements fail, and the error names the queue and the error codes. A failed
//!   call fails the messages it carried and those of the later calls of the batch.
//!   Substation retries recursively, without bound or backoff.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use bytes::Bytes;
use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, TransformError, Value, async_trait};
use tokio::sync::OnceCell;

use super::aws_destination::{AwsDestination, aws_send, send_calls};
use super::aws_messages::{
    FifoIds, MAX_ENTRIES, MessageIds, MessageObject, check_text, entries, is_fifo, results_by_id,
};
use super::aws_records::{
    self, AttemptWatch, AwsSettings, CallError, PutFailure, Stream, check_role, non_empty,
    put_with_retries,
};
use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use crate::aws::{Arn, AwsTarget};

/// Most bytes (the sum of the bodies) in one `SendMessageBatch` call.
pub(crate) const MAX_CALL_BYTES: usize = 1024 * 1024;
/// Most bytes of one message body.
pub(crate) const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// Settings of `send_aws_sqs`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The queue and the role.
    pub aws: AwsSettings,
    /// Batch limits (capped at 10 messages and 1 MiB).
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is sent.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`, `deduplication_key`.
    pub object: MessageObject,
}

/// How the queue is known before its URL is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QueueRef {
    /// Its URL, used as is.
    Url(String),
    /// Its name (and owner account, from an ARN): the URL is asked of SQS.
    Name {
        /// The queue's name.
        name: String,
        /// The account that owns it.
        owner: Option<String>,
    },
}

/// The queue named by `aws.arn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Queue {
    /// How requests find it.
    pub queue: QueueRef,
    /// Its name.
    pub name: String,
    /// Its region, when `aws.arn` tells it.
    pub region: Option<String>,
}

/// SQS queue names: 1 to 80 letters, digits, `-` and `_`, `.fifo` included for FIFO queues.
fn valid_queue_name(name: &str) -> bool {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    (1..=80).contains(&name.len())
        && !base.is_empty()
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

const FORMS: &str = "a queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME), a queue URL \
     (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME) or a queue name (1 to 80 letters, \
     digits, '-', '_', with .fifo for FIFO queues)";

/// The queue named by `aws.arn`.
pub(crate) fn parse_queue(arn: Option<String>) -> Result<Queue, String> {
    let arn =
        non_empty(arn).ok_or_else(|| format!("missing required option: the queue, as {FORMS}"))?;
    if arn.starts_with("arn:") {
        let a = Arn::parse(&arn)?;
        if a.service != "sqs"
            || a.region.is_empty()
            || a.account.is_empty()
            || !valid_queue_name(&a.resource)
        {
            return Err(format!(
                "{arn:?} is not an SQS queue ARN (expected arn:aws:sqs:REGION:ACCOUNT:NAME)"
            ));
        }
        return Ok(Queue {
            queue: QueueRef::Name {
                name: a.resource.clone(),
                owner: Some(a.account),
            },
            name: a.resource,
            region: Some(a.region),
        });
    }
    if let Some(rest) = arn
        .strip_prefix("https://")
        .or_else(|| arn.strip_prefix("http://"))
    {
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let name = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        if host.is_empty() || !valid_queue_name(name) {
            return Err(format!(
                "{arn:?} is not an SQS queue URL (expected \
                 https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)"
            ));
        }
        let region = host
            .strip_prefix("sqs.")
            .and_then(|h| h.split_once('.'))
            .filter(|(_, domain)| domain.starts_with("amazonaws."))
            .map(|(region, _)| region.to_string());
        return Ok(Queue {
            queue: QueueRef::Url(arn.clone()),
            name: name.to_string(),
            region,
        });
    }
    if valid_queue_name(&arn) {
        return Ok(Queue {
            queue: QueueRef::Name {
                name: arn.clone(),
                owner: None,
            },
            name: arn,
            region: None,
        });
    }
    Err(format!("{arn:?} is not {FORMS}"))
}

/// An SQS queue as a destination.
pub(crate) struct Sqs {
    aws: AwsDestination<Client>,
    queue: QueueRef,
    ids: MessageIds,
    url: OnceCell<String>,
}

impl Sqs {
    /// The queue `queue` (named `name`), its messages identified by `ids`, reached with
    /// `target`.
    pub(crate) fn new(queue: QueueRef, name: String, ids: MessageIds, target: AwsTarget) -> Self {
        Sqs {
            aws: AwsDestination::new(
                "sqs queue",
                name,
                target,
                "give the queue's ARN in aws.arn or set AWS_REGION",
            ),
            queue,
            ids,
            url: OnceCell::new(),
        }
    }

    /// The queue's URL: given, or asked of SQS on first use and kept.
    async fn url(&self, client: &Client) -> Result<&str, TransformError> {
        let url = self
            .url
            .get_or_try_init(|| async {
                let (name, owner) = match &self.queue {
                    QueueRef::Url(url) => return Ok(url.clone()),
                    QueueRef::Name { name, owner } => (name, owner),
                };
                let out = client
                    .get_queue_url()
                    .queue_name(name)
                    .set_queue_owner_aws_account_id(owner.clone())
                    .send()
                    .await
                    .map_err(|e| {
                        TransformError::failed(format!(
                            "sqs queue {}: GetQueueUrl failed: {}",
                            self.aws.name(),
                            DisplayErrorContext(&e)
                        ))
                    })?;
                out.queue_url()
                    .filter(|u| !u.is_empty())
                    .map(String::from)
                    .ok_or_else(|| {
                        TransformError::failed(format!(
                            "sqs queue {}: GetQueueUrl answered no URL",
                            self.aws.name()
                        ))
                    })
            })
            .await?;
        Ok(url)
    }

    /// Sends `items` (one call's worth, with their FIFO ids) until each was accepted or the
    /// attempts are spent. On failure: the indexes (into `items`) not accepted, why, and whether they may have been applied.
    async fn put(
        &self,
        client: &Client,
        url: &str,
        items: &[Bytes],
        fifo: Option<(&str, &[String])>,
    ) -> Result<(), PutFailure> {
        let stream = Stream {
            kind: self.aws.kind(),
            name: self.aws.name(),
            operation: "SendMessageBatch",
            records: "messages",
        };
        put_with_retries(stream, self.aws.retry(), items.len(), |pending| {
            let entries: Vec<SendMessageBatchRequestEntry> = entries(pending, items, fifo)
                .map(|e| {
                    SendMessageBatchRequestEntry::builder()
                        .id(e.id)
                        .message_body(e.text)
                        .set_message_group_id(e.group.map(String::from))
                        .set_message_deduplication_id(e.dedup.map(String::from))
                        .build()
                        .expect("id and body are set")
                })
                .collect();
            let count = entries.len();
            let watch = AttemptWatch::default();
            let req = client
                .send_message_batch()
                .queue_url(url)
                .set_entries(Some(entries))
                .customize()
                .interceptor(watch.clone())
                .send();
            async move {
                let out = req.await.map_err(|e| CallError::sdk(&e, &watch))?;
                Ok(results_by_id(
                    count,
                    out.successful().iter().map(|s| s.id()),
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
impl Destination for Sqs {
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let client = self.aws.client(Client::new).await?;
        let url = self.url(client).await?;
        let ids: Option<FifoIds> = self.ids.of(&batch.key, &batch.items);
        send_calls(calls(&batch.items), batch.items.len(), |range| {
            let fifo = ids
                .as_ref()
                .map(|f| (f.group.as_str(), &f.dedup[range.clone()]));
            self.put(client, url, &batch.items[range], fifo)
        })
        .await
    }

    fn check(&self, item: &[u8]) -> Result<(), String> {
        check_text(item, true).map_err(|rule| format!("sqs queue {} {rule}", self.aws.name()))
    }
}

aws_send!(Sqs, Client);

/// The `send_aws_sqs` transform.
pub(crate) type SendAwsSqs = Sender<Sqs>;

impl Sender<Sqs> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let Queue {
            queue,
            name,
            region,
        } = parse_queue(s.aws.arn).map_err(|m| b.field_error("aws.arn", m))?;
        let role = non_empty(s.aws.assume_role_arn);
        check_role(&role).map_err(|m| b.field_error("aws.assume_role_arn", m))?;
        let ids = MessageIds::from_settings(b, &name, s.object.deduplication_key)?;
        debug_assert_eq!(matches!(ids, MessageIds::Fifo(_)), is_fifo(&name));
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
            Sqs::new(queue, name, ids, target),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use crate::send::aws_destination::{AwsSend, RetryPolicy};
    use crate::send::batcher::Undelivered;
    use aws_sdk_sqs::config::retry::RetryConfig;
    use aws_sdk_sqs::operation::get_queue_url::{GetQueueUrlInput, GetQueueUrlOutput};
    use aws_sdk_sqs::operation::send_message_batch::{
        SendMessageBatchInput, SendMessageBatchOutput,
    };
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
        testing::block_on(
            t.transform(Message::new(vec![b'x'; MAX_MESSAGE_BYTES]), &mut Vec::new()),
        )
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
        for (answers, want) in crate::aws::outcome::ANSWERS_TABLE {
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
}
