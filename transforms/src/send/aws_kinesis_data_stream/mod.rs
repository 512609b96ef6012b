//! `send_aws_kinesis_data_stream`: puts each batch into a Kinesis data stream with
//! `PutRecords`.
//!
//! Substation compatibility: the same type name, settings (`aws.arn`,
//! `aws.assume_role_arn`, `use_batch_key_as_partition_key`, `enable_record_aggregation`,
//! `batch`, `auxiliary_transforms`, `object.batch_key`) and default id (the type name).
//! `aws.arn` is the stream's ARN (sent as `StreamARN`); a bare stream name is accepted too
//! (sent as `StreamName`, the region then comes from `AWS_REGION`).
//!
//! Where sluice differs from Substation (`reference/substation.md` §2.1 row 53):
//!
//! - **A partition key per record**, not one per batch (Substation sends a whole batch
//!   under one random key, so it lands on one shard). The key is the value at
//!   `object.partition_key` in the record's data (a sluice setting; a missing or empty value
//!   gets a random key), else the batch key when `use_batch_key_as_partition_key` is set
//!   (an empty batch key gets a random key), else a random UUID per record. A key longer
//!   than Kinesis's 256 characters is replaced by the hex SHA-256 of it, so equal keys
//!   still reach the same shard.
//! - **Limits**: at most 500 records and 5 MiB (data plus partition keys) per call; a batch
//!   that exceeds either (e.g. after auxiliary transforms) is split into several calls, in
//!   order. A record's data may be at most 1 MiB − 256 bytes (so that it fits Kinesis's
//!   1 MiB per record with any partition key); a larger one is an error naming the limit,
//!   raised when the message arrives, so it never blocks a batch.
//! - **Partial failures**: the records a call reports with an `ErrorCode` (throttling,
//!   internal failure) are sent again, only those, with exponential backoff and full jitter,
//!   up to `RetryPolicy::DEFAULT`'s attempts. What still fails is reported to the batcher as
//!   exactly those items, so only their messages' acknowledgements fail, and the error names
//!   the stream and the error codes. Substation retries failed records recursively, without
//!   backoff or bound.
//! - **No blind retry of an ambiguous answer** ([`put`]): the SDK does not retry
//!   `PutRecords`; a call throttled or refused before it was sent is sent again as it was,
//!   but after a 5xx, a timeout or a connection lost after sending, the stream is read back
//!   ([`readback`]) for that call's records from just before its first attempt and only
//!   those not found are sent again. Substation (and every producer that lets its SDK
//!   retry) writes a duplicate whenever such an answer hid a success.
//! - **Aggregation** (`enable_record_aggregation`): KPL aggregated records (magic
//!   `F3 89 9A C2`, a protobuf `AggregatedRecord`, its MD5), each at most 1 MiB with its
//!   partition key. With keys from the data or the batch key an aggregate only holds records
//!   of one key (and is sent under it), so records of a key keep reaching one shard in
//!   order; with random keys an aggregate gets one random key. A lone record is sent plain.
//!
//! ## Exactly once into Kinesis
//!
//! Inside `meta_kv_store_lock` (or after it), every message reaches the stream exactly once,
//! across crashes and ambiguous answers, when its records carry its lock key (the lock's
//! `object.source_key` reads the same key from the record's data). Before a batch is sent,
//! the items whose lock says an earlier attempt may have delivered them (the key was
//! pending when taken: a crashed owner's lease ended, or an earlier attempt failed partly
//! or uncertainly; or a send under this lock failed uncertainly:
//! `LockTicket::read_back_since`) are looked for in the stream from that attempt's start,
//! less the lock's tolerated clock skew and a margin of the read-back's own. One found is not
//! sent again: it counts as delivered and its lock notes where it is. The others are sent.
//! Copies an earlier attempt recorded as delivered (the lock's progress) are not even looked
//! for: the batcher skips them. Every item put notes its landing place
//! (`shardId/sequenceNumber`) on its lock, which the commit stores (not with auxiliary
//! transforms, which lose the mapping from items to messages; those batches are looked for
//! whole when any of their locks asks). A read-back that fails leaves the items undelivered
//! and uncertain (the lock keeps their keys for the next attempt to check again).
//!
//! - **A record found must provably be this message's** (`LockTicket::proves`): it carries
//!   the message's lock key, so no other message (another key) can have made the same bytes.
//!   A record that does not (a status or heartbeat event, a mapping that drops the event id,
//!   a lock on the data's hash, items without a lock) is never taken for delivered on the
//!   strength of what the stream holds: it is sent again, a duplicate if the earlier attempt
//!   had landed, never a loss. The same holds after an ambiguous `PutRecords` answer.
//! - **What it relies on**: a deterministic pipeline inside the lock, so that the same
//!   message makes the same record: a record is recognised by its data and partition key
//!   (by its data alone over every shard when keys are random, since a record sent again
//!   gets a new random key). KPL aggregates are unpacked and matched per user record, so
//!   they need not be aggregated alike. Identical items of one message are counted: two
//!   need two records. The key field must not be rewritten after the lock.
//! - **What it costs**: nothing on a clean run; reads only when an outcome is uncertain or
//!   a key was taken over: `ListShards`, then `GetRecords` over the shards that can hold
//!   the records, from the first attempt's start (less the skew) until caught up.
//!   `GetRecords` allows 5 calls per second per shard, shared with every consumer of the
//!   stream; the read-back paces itself and backs off when throttled.
//! - **What it does not cover**: a record trimmed by the stream's retention before the
//!   read-back (it is sent again); a transform before the send, inside the lock, that is
//!   not deterministic (time, random values, lookups that change: the record differs and
//!   is sent again); records that cannot be told apart (above: sent again after a crash);
//!   a request the service applies after the read-back (a read waits
//!   [`readback::ReadBack::settle`] after an ambiguous answer, and the items stay uncertain
//!   if the call finally fails).
//! - **Not an intent record**: recording each send's intent in the lock store before the
//!   call would cost a store write per message. The lock record keeps when the first
//!   attempt at the message took its key (`since`, inherited by every takeover), which is
//!   where a read-back starts, and what earlier attempts delivered (`progress`), and the
//!   stream and partition keys come from the same configuration on the retry. So a clean
//!   run still costs 1 acquire and at most 1/25 commit per message.

mod aggregate;
mod put;
pub(crate) mod readback;

use std::sync::Arc;

use super::aws_destination::{AwsDestination, aws_send};
use super::aws_records::{self, check_role, non_empty, valid_stream_name};
use super::batcher::{Caps, Destination, ItemLocks, Outgoing, SendError, SendOptions, Sender};
use crate::kv_store::LockTicket;
use aws_sdk_kinesis::Client;
use bytes::Bytes;
use readback::{Landing, ReadBack, Sought};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sluice_engine::message::Target;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, Key, Message, TransformError, Value, async_trait, value};
use sluice_platform::aws::{Arn, AwsTarget};

pub(crate) use super::aws_records::AwsSettings;
#[cfg(test)]
use super::aws_records::RetryPolicy;

/// Most records in one `PutRecords` call.
pub(crate) const MAX_RECORDS: usize = 500;
/// Most bytes (data plus partition keys) in one `PutRecords` call.
pub(crate) const MAX_CALL_BYTES: usize = 5 * 1024 * 1024;
/// Most bytes of one record (data plus partition key).
pub(crate) const MAX_RECORD_BYTES: usize = 1024 * 1024;
/// Most bytes of a partition key (Kinesis allows 256 characters).
pub(crate) const MAX_PARTITION_KEY: usize = 256;
/// Most bytes of a message's data: a record with any partition key still fits.
pub(crate) const MAX_DATA_BYTES: usize = MAX_RECORD_BYTES - MAX_PARTITION_KEY;

/// `object`: the keys every send takes, plus sluice's `partition_key`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct KinesisObject {
    /// Not used (the library's shared `object` defaults include it).
    pub source_key: Option<String>,
    /// Not used (the library's shared `object` defaults include it).
    pub target_key: Option<String>,
    /// What partitions batches.
    pub batch_key: Option<String>,
    /// Where each record's partition key is read (sluice's own setting).
    pub partition_key: Option<String>,
}

/// Settings of `send_aws_kinesis_data_stream`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The stream and the role.
    pub aws: AwsSettings,
    /// Use the batch key as the records' partition key.
    pub use_batch_key_as_partition_key: bool,
    /// Send KPL aggregated records.
    pub enable_record_aggregation: bool,
    /// Batch limits (capped at 500 records and 5 MiB).
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is sent.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`, `partition_key`.
    pub object: KinesisObject,
}

/// How a stream is named in requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StreamRef {
    /// `StreamARN`.
    Arn(String),
    /// `StreamName`.
    Name(String),
}

/// The stream named by `aws.arn`: how requests name it, its name, its region (from an ARN).
pub(crate) fn parse_stream(
    arn: Option<String>,
) -> Result<(StreamRef, String, Option<String>), String> {
    let arn = non_empty(arn).ok_or(
        "missing required option: the stream's ARN \
         (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME) or its name",
    )?;
    if arn.starts_with("arn:") {
        let a = Arn::parse(&arn)?;
        let name = a.resource.strip_prefix("stream/").unwrap_or("");
        if a.service != "kinesis" || !valid_stream_name(name, 128) || a.region.is_empty() {
            return Err(format!(
                "{arn:?} is not a Kinesis data stream ARN \
                 (expected arn:aws:kinesis:REGION:ACCOUNT:stream/NAME)"
            ));
        }
        let name = name.to_string();
        Ok((StreamRef::Arn(arn), name, Some(a.region)))
    } else if valid_stream_name(&arn, 128) {
        Ok((StreamRef::Name(arn.clone()), arn, None))
    } else {
        Err(format!(
            "{arn:?} is neither a Kinesis data stream ARN \
             (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME) nor a stream name \
             (1 to 128 letters, digits, '_', '-', '.')"
        ))
    }
}

/// Where records' partition keys come from.
#[derive(Debug, Clone)]
pub(crate) enum PartitionKeys {
    /// The value at this key of each record's data.
    Field(Key),
    /// The batch key.
    BatchKey,
    /// A random UUID per record.
    Random,
}

/// One Kinesis record to put, and the batch items it carries.
#[derive(Debug, Clone)]
struct Record {
    key: String,
    data: Bytes,
    items: Vec<usize>,
}

impl Record {
    fn size(&self) -> usize {
        self.key.len() + self.data.len()
    }
}

/// A Kinesis data stream as a destination.
pub(crate) struct Kinesis {
    aws: AwsDestination<Client>,
    stream: StreamRef,
    keys: PartitionKeys,
    aggregate: bool,
    readback: ReadBack,
}

impl Kinesis {
    /// The stream `stream` (named `name`), reached with `target`.
    pub(crate) fn new(
        stream: StreamRef,
        name: String,
        target: AwsTarget,
        keys: PartitionKeys,
        aggregate: bool,
    ) -> Self {
        Kinesis {
            aws: AwsDestination::new(
                "kinesis stream",
                name,
                target,
                "give the stream's ARN in aws.arn or set AWS_REGION",
            ),
            stream,
            keys,
            aggregate,
            readback: ReadBack::DEFAULT,
        }
    }

    /// Reads the stream back as `how` says (tests shorten the waits).
    #[cfg(test)]
    pub(crate) fn with_readback(mut self, how: ReadBack) -> Self {
        self.readback = how;
        self
    }

    /// The partition key of `item` in a batch with key `batch_key`; `None` for a random one.
    fn key_of(&self, batch_key: &str, item: &Bytes) -> Option<String> {
        let key = match &self.keys {
            PartitionKeys::Random => return None,
            PartitionKeys::BatchKey => batch_key.to_string(),
            PartitionKeys::Field(k) => Message::new(item.clone())
                .get(k)
                .map(|v| value::to_text(&v).into_owned())
                .unwrap_or_default(),
        };
        if key.is_empty() {
            None
        } else if key.len() > MAX_PARTITION_KEY {
            Some(hex::encode(Sha256::digest(key.as_bytes())))
        } else {
            Some(key)
        }
    }

    /// The records that carry a whole batch, in order.
    #[cfg(test)]
    fn records(&self, batch: &Outgoing) -> Vec<Record> {
        let keys: Vec<Option<String>> = batch
            .items
            .iter()
            .map(|i| self.key_of(&batch.key, i))
            .collect();
        let all: Vec<usize> = (0..batch.items.len()).collect();
        self.records_of(&keys, &batch.items, &all)
    }

    /// The records that carry the items at `which` (with partition keys `keys`, `None`
    /// for a random one), in order; their `items` are indexes into `items`.
    fn records_of(&self, keys: &[Option<String>], items: &[Bytes], which: &[usize]) -> Vec<Record> {
        if !self.aggregate {
            return which
                .iter()
                .map(|&i| Record {
                    key: keys[i].clone().unwrap_or_else(random_key),
                    data: items[i].clone(),
                    items: vec![i],
                })
                .collect();
        }
        let mut records = aggregate::aggregate(
            which
                .iter()
                .map(|&i| (keys[i].clone(), &items[i]))
                .collect(),
        );
        for r in &mut records {
            for i in &mut r.items {
                *i = which[*i];
            }
        }
        records
    }

    /// The items an earlier attempt may have delivered (their locks say so) and that can
    /// be told apart from other messages' records (`provable`), and since when (epoch ms),
    /// if any.
    fn earlier_attempts(
        &self,
        batch: &Outgoing,
        provable: &(dyn Fn(usize) -> bool + Sync),
    ) -> Option<(i64, Vec<usize>)> {
        let since = |ts: &[Arc<LockTicket>]| ts.iter().filter_map(|t| t.read_back_since()).min();
        match &batch.locks {
            ItemLocks::None => None,
            ItemLocks::PerItem(per) => {
                let (mut first, mut items) = (None::<i64>, Vec::new());
                for (i, ts) in per.iter().enumerate() {
                    if let Some(s) = since(ts).filter(|_| provable(i)) {
                        first = Some(first.map_or(s, |f| f.min(s)));
                        items.push(i);
                    }
                }
                first.map(|f| (f, items))
            }
            // The mapping from messages to items is lost: every provable item is looked for.
            ItemLocks::Batch(all) => {
                let since = since(all)?;
                let items: Vec<usize> = (0..batch.items.len()).filter(|&i| provable(i)).collect();
                (!items.is_empty()).then_some((since, items))
            }
        }
    }

    /// Per item, whether a record of it found in the stream provably is this message's, not
    /// another's with the same bytes: it carries its lock key (`LockTicket::proves`; with
    /// auxiliary transforms, the key of one of the batch's locks). A record that cannot be
    /// told apart is never taken for delivered on the strength of what the stream holds.
    fn provable(batch: &Outgoing) -> Vec<bool> {
        let proves = |t: &Arc<LockTicket>, data: &[u8]| t.proves(data) == Some(true);
        batch
            .items
            .iter()
            .enumerate()
            .map(|(i, data)| match &batch.locks {
                ItemLocks::None => false,
                ItemLocks::PerItem(per) => {
                    per[i].iter().all(|t| proves(t, data)) && !per[i].is_empty()
                }
                ItemLocks::Batch(all) => all.iter().any(|t| proves(t, data)),
            })
            .collect()
    }

    /// Notes on each item's locks where it landed (when items map to messages).
    fn note(batch: &Outgoing, landed: &[Option<Landing>]) {
        for (i, l) in landed.iter().enumerate() {
            if let (Some(l), Some(tickets)) = (l, batch.locks.of(i)) {
                for t in tickets {
                    t.set_note(l.to_string());
                }
            }
        }
    }
}

fn random_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Now, in epoch milliseconds.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Splits `records` into calls of at most [`MAX_RECORDS`] records and [`MAX_CALL_BYTES`].
fn calls(records: &[Record]) -> Vec<std::ops::Range<usize>> {
    aws_records::calls(records, Record::size, MAX_RECORDS, MAX_CALL_BYTES)
}

#[async_trait]
impl Destination for Kinesis {
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let client = self.aws.client(Client::new).await?;
        let keys: Vec<Option<String>> = batch
            .items
            .iter()
            .map(|i| self.key_of(&batch.key, i))
            .collect();
        let mut landed: Vec<Option<Landing>> = vec![None; batch.items.len()];
        // Which items can be told apart is worked out once, and only when a read-back needs
        // it (it reads each record's key: a JSON parse per record).
        let provable_items = std::sync::OnceLock::new();
        let provable = |i: usize| provable_items.get_or_init(|| Self::provable(batch))[i];
        // What an earlier attempt may have put is looked for first, and not sent again
        // when found.
        if let Some((since, check)) = self.earlier_attempts(batch, &provable) {
            let sought: Vec<Sought> = check
                .iter()
                .map(|&i| Sought {
                    key: keys[i].clone(),
                    data: batch.items[i].clone(),
                })
                .collect();
            let found = readback::find(
                client,
                &self.stream,
                since,
                &sought,
                &self.readback,
                self.aws.retry(),
            )
            .await
            .map_err(|e| {
                SendError::from(TransformError::failed(format!(
                    "{} {}: reading the stream back for {} records an earlier attempt may have put failed: {e}",
                    self.aws.kind(),
                    self.aws.name(),
                    check.len()
                )))
                .uncertain(true)
            })?;
            let mut again = 0;
            for (&i, l) in check.iter().zip(found) {
                again += usize::from(l.is_none());
                landed[i] = l;
            }
            tracing::debug!(stream = %self.aws.name(), sought = check.len(), found = check.len() - again, "read back records an earlier attempt may have put");
        }
        let unsent: Vec<usize> = (0..batch.items.len())
            .filter(|&i| landed[i].is_none())
            .collect();
        let records = self.records_of(&keys, &batch.items, &unsent);
        let mut result = Ok(());
        for range in calls(&records) {
            let in_call = &records[range.clone()];
            let record_provable = |r: usize| in_call[r].items.iter().all(|&i| provable(i));
            let (put, failure) = self.put(client, in_call, &record_provable).await;
            for (r, l) in records[range.clone()].iter().zip(put) {
                if let Some(l) = l {
                    for &i in &r.items {
                        landed[i] = Some(l.clone());
                    }
                }
            }
            if let Some(f) = failure {
                // What this call did not put and everything after it (later calls are not
                // sent, so order is kept).
                let mut items: Vec<usize> = records[range.start..]
                    .iter()
                    .flat_map(|r| r.items.iter().copied())
                    .filter(|&i| landed[i].is_none())
                    .collect();
                items.sort_unstable();
                result = Err(SendError::items(items, f.error).uncertain(f.uncertain));
                break;
            }
        }
        Self::note(batch, &landed);
        result
    }
}

aws_send!(Kinesis, Client);

/// The `send_aws_kinesis_data_stream` transform.
pub(crate) type SendAwsKinesisDataStream = Sender<Kinesis>;

impl Sender<Kinesis> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let (stream, name, region) =
            parse_stream(s.aws.arn).map_err(|m| b.field_error("aws.arn", m))?;
        let role = non_empty(s.aws.assume_role_arn);
        check_role(&role).map_err(|m| b.field_error("aws.assume_role_arn", m))?;
        let batch_key = non_empty(s.object.batch_key);
        let keys = match non_empty(s.object.partition_key) {
            Some(pk) => {
                let key = b.key("object.partition_key", &pk)?;
                if key.target() == Target::Meta {
                    return Err(b.field_error(
                        "object.partition_key",
                        "must be a key in the data: a send keeps no metadata of the messages it batches",
                    ));
                }
                if s.use_batch_key_as_partition_key {
                    return Err(b.field_error(
                        "object.partition_key",
                        "set either object.partition_key or use_batch_key_as_partition_key, not both",
                    ));
                }
                PartitionKeys::Field(key)
            }
            None if s.use_batch_key_as_partition_key => {
                if batch_key.is_none() {
                    b.warn(
                        "use_batch_key_as_partition_key is set but object.batch_key is not: every record gets a random partition key"
                            .to_string(),
                    );
                }
                PartitionKeys::BatchKey
            }
            None => PartitionKeys::Random,
        };
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
                    batch_key,
                },
            },
            Caps {
                count: MAX_RECORDS,
                size: MAX_CALL_BYTES,
                item_size: MAX_DATA_BYTES,
            },
            Kinesis::new(stream, name, target, keys, s.enable_record_aggregation),
        )
    }
}

#[cfg(test)]
mod readback_tests;
#[cfg(test)]
mod tests;
