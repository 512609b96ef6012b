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
//!   throttling and 5xx of the whole call are retried by the SDK (`sluice_platform::aws`). What still
//!   fails is reported to the batcher as exactly those items, so only their messages'
//!   acknowledgements fail, and the error names the queue and the error codes. A failed
//!   call fails the messages it carried and those of the later calls of the batch.
//!   Substation retries recursively, without bound or backoff.

use aws_sdk_sqs::Client;
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
    self, AttemptWatch, AwsSettings, CallError, PutFailure, Stream, cannot_make, check_role,
    non_empty, put_with_retries,
};
use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use sluice_platform::aws::{Arn, AwsTarget};

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
                            sluice_platform::aws::describe_error(&e)
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
            let entries: Result<Vec<SendMessageBatchRequestEntry>, _> =
                entries(pending, items, fifo)
                    .map(|e| {
                        SendMessageBatchRequestEntry::builder()
                            .id(e.id)
                            .message_body(e.text)
                            .set_message_group_id(e.group.map(String::from))
                            .set_message_deduplication_id(e.dedup.map(String::from))
                            .build()
                    })
                    .collect();
            let count = pending.len();
            let watch = AttemptWatch::default();
            let req = entries.map(|entries| {
                client
                    .send_message_batch()
                    .queue_url(url)
                    .set_entries(Some(entries))
                    .customize()
                    .interceptor(watch.clone())
                    .send()
            });
            async move {
                let req = req.map_err(|e| cannot_make(&e))?;
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
mod tests;
