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
//!   up to `RetryPolicy::DEFAULT`'s attempts; throttling or 5xx of the whole call is
//!   retried by the SDK (`crate::aws`). What still fails is reported to the batcher as
//!   exactly those items, so only their messages' acknowledgements fail, and the error names
//!   the stream and the error codes. Substation retries failed records recursively, without
//!   backoff or bound.
//! - **Aggregation** (`enable_record_aggregation`): KPL aggregated records (magic
//!   `F3 89 9A C2`, a protobuf `AggregatedRecord`, its MD5), each at most 1 MiB with its
//!   partition key. With keys from the data or the batch key an aggregate only holds records
//!   of one key (and is sent under it), so records of a key keep reaching one shard in
//!   order; with random keys an aggregate gets one random key. A lone record is sent plain.

use std::collections::HashMap;

use super::aws_destination::{AwsDestination, aws_send};
use super::aws_records::{
    self, Stream, check_role, non_empty, put_with_retries, record_result, valid_stream_name,
};
use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use crate::aws::{Arn, AwsTarget};
use ::md5::{Digest, Md5};
use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::error::DisplayErrorContext;
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use bytes::Bytes;
use serde::Deserialize;
use sha2::Sha256;
use sluice_engine::message::Target;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, Key, Message, TransformError, Value, async_trait, value};

pub use super::aws_records::{AwsSettings, RetryPolicy};

/// Most records in one `PutRecords` call.
pub const MAX_RECORDS: usize = 500;
/// Most bytes (data plus partition keys) in one `PutRecords` call.
pub const MAX_CALL_BYTES: usize = 5 * 1024 * 1024;
/// Most bytes of one record (data plus partition key).
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;
/// Most bytes of a partition key (Kinesis allows 256 characters).
pub const MAX_PARTITION_KEY: usize = 256;
/// Most bytes of a message's data: a record with any partition key still fits.
pub const MAX_DATA_BYTES: usize = MAX_RECORD_BYTES - MAX_PARTITION_KEY;
/// The first bytes of a KPL aggregated record.
pub const KPL_MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];

/// `object`: the keys every send takes, plus sluice's `partition_key`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct KinesisObject {
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
pub struct Settings {
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
pub enum StreamRef {
    /// `StreamARN`.
    Arn(String),
    /// `StreamName`.
    Name(String),
}

/// The stream named by `aws.arn`: how requests name it, its name, its region (from an ARN).
pub fn parse_stream(arn: Option<String>) -> Result<(StreamRef, String, Option<String>), String> {
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
pub enum PartitionKeys {
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
pub struct Kinesis {
    aws: AwsDestination<Client>,
    stream: StreamRef,
    keys: PartitionKeys,
    aggregate: bool,
}

impl Kinesis {
    /// The stream `stream` (named `name`), reached with `target`.
    pub fn new(
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
        }
    }

    /// The stream's name.
    pub fn stream_name(&self) -> &str {
        self.aws.name()
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

    /// The records that carry a batch, in order.
    fn records(&self, batch: &Outgoing) -> Vec<Record> {
        let keyed: Vec<(Option<String>, &Bytes)> = batch
            .items
            .iter()
            .map(|i| (self.key_of(&batch.key, i), i))
            .collect();
        if !self.aggregate {
            return keyed
                .into_iter()
                .enumerate()
                .map(|(i, (key, data))| Record {
                    key: key.unwrap_or_else(random_key),
                    data: data.clone(),
                    items: vec![i],
                })
                .collect();
        }
        aggregate(keyed)
    }

    /// Puts `records` (one call's worth) until each was accepted or the attempts are
    /// spent. On failure: the indexes (into `records`) not accepted, and why.
    async fn put(
        &self,
        client: &Client,
        records: &[Record],
    ) -> Result<(), (Vec<usize>, TransformError)> {
        let stream = Stream {
            kind: self.aws.kind(),
            name: self.aws.name(),
            operation: "PutRecords",
            records: "records",
        };
        put_with_retries(stream, self.aws.retry(), records.len(), |pending| {
            let entries: Vec<PutRecordsRequestEntry> = pending
                .iter()
                .map(|&i| {
                    PutRecordsRequestEntry::builder()
                        .partition_key(&records[i].key)
                        .data(Blob::new(records[i].data.to_vec()))
                        .build()
                        .expect("data and partition key are set")
                })
                .collect();
            let mut req = client.put_records().set_records(Some(entries));
            req = match &self.stream {
                StreamRef::Arn(a) => req.stream_arn(a),
                StreamRef::Name(n) => req.stream_name(n),
            };
            let req = req.send();
            async move {
                let out = req.await.map_err(|e| DisplayErrorContext(&e).to_string())?;
                Ok(out
                    .records()
                    .iter()
                    .map(|r| record_result(r.error_code(), r.error_message()))
                    .collect())
            }
        })
        .await
        .map_err(|f| (f.pending, f.error))
    }
}

fn random_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Splits `records` into calls of at most [`MAX_RECORDS`] records and [`MAX_CALL_BYTES`].
fn calls(records: &[Record]) -> Vec<std::ops::Range<usize>> {
    aws_records::calls(records, Record::size, MAX_RECORDS, MAX_CALL_BYTES)
}

#[async_trait]
impl Destination for Kinesis {
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let client = self.aws.client(Client::new).await?;
        let records = self.records(batch);
        for range in calls(&records) {
            if let Err((failed, e)) = self.put(client, &records[range.clone()]).await {
                // The failed records of this call and everything after it were not
                // delivered (later calls are not sent, so order is kept).
                let mut items: Vec<usize> = failed
                    .iter()
                    .flat_map(|&i| records[range.start + i].items.iter().copied())
                    .chain(records[range.end..].iter().flat_map(|r| r.items.clone()))
                    .collect();
                items.sort_unstable();
                return Err(SendError::items(items, e));
            }
        }
        Ok(())
    }
}

aws_send!(Kinesis, Client);

// --- KPL aggregation -------------------------------------------------------------------

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// A length-delimited field's size: tag, length, bytes.
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// One aggregated record being filled.
#[derive(Default)]
struct Aggregate {
    /// The partition key table and the index of each key in it.
    table: Vec<String>,
    index: HashMap<String, u64>,
    /// Each user record: (key index, data, batch item).
    records: Vec<(u64, Bytes, usize)>,
    /// The protobuf's size so far.
    size: usize,
}

impl Aggregate {
    /// The protobuf size a `Record{partition_key_index, data}` takes.
    fn record_len(index: u64, data: usize) -> usize {
        1 + varint_len(index) + field_len(data)
    }

    /// The size the aggregate would have with (`key`, `data` bytes) added, with the outer
    /// partition key `outer` (magic, protobuf, MD5 and key).
    fn size_with(&self, key: &str, data: usize, outer: usize) -> usize {
        let (table, index) = match self.index.get(key) {
            Some(&i) => (0, i),
            None => (field_len(key.len()), self.table.len() as u64),
        };
        KPL_MAGIC.len() + self.size + table + field_len(Self::record_len(index, data)) + 16 + outer
    }

    fn add(&mut self, key: &str, data: &Bytes, item: usize) {
        let index = match self.index.get(key) {
            Some(&i) => i,
            None => {
                let i = self.table.len() as u64;
                self.size += field_len(key.len());
                self.table.push(key.to_string());
                self.index.insert(key.to_string(), i);
                i
            }
        };
        self.size += field_len(Self::record_len(index, data.len()));
        self.records.push((index, data.clone(), item));
    }

    /// The finished record under `outer`; a lone record is sent plain.
    fn finish(self, outer: String) -> Record {
        if self.records.len() == 1 {
            let (_, data, item) = self.records.into_iter().next().expect("one record");
            return Record {
                key: outer,
                data,
                items: vec![item],
            };
        }
        let mut pb = Vec::with_capacity(self.size);
        for k in &self.table {
            pb.push(0x0A); // field 1, partition_key_table
            put_varint(&mut pb, k.len() as u64);
            pb.extend_from_slice(k.as_bytes());
        }
        let mut items = Vec::with_capacity(self.records.len());
        for (index, data, item) in &self.records {
            pb.push(0x1A); // field 3, records
            put_varint(&mut pb, Self::record_len(*index, data.len()) as u64);
            pb.push(0x08); // Record field 1, partition_key_index
            put_varint(&mut pb, *index);
            pb.push(0x1A); // Record field 3, data
            put_varint(&mut pb, data.len() as u64);
            pb.extend_from_slice(data);
            items.push(*item);
        }
        debug_assert_eq!(pb.len(), self.size);
        let mut out = Vec::with_capacity(KPL_MAGIC.len() + pb.len() + 16);
        out.extend_from_slice(&KPL_MAGIC);
        out.extend_from_slice(&pb);
        out.extend_from_slice(&Md5::digest(&pb));
        Record {
            key: outer,
            data: Bytes::from(out),
            items,
        }
    }
}

/// KPL aggregation of `(partition key, data)` items (`None` keys are random). Records of
/// one key are aggregated together and in order; with random keys, consecutive items share
/// an aggregate and one random key.
fn aggregate(items: Vec<(Option<String>, &Bytes)>) -> Vec<Record> {
    let mut out: Vec<Record> = Vec::new();
    // Open aggregates by key (`None` for random), in the order they were opened.
    let mut open: Vec<(Option<String>, String, Aggregate)> = Vec::new();
    for (i, (key, data)) in items.into_iter().enumerate() {
        let slot = match open.iter().position(|(k, _, _)| *k == key) {
            Some(p) => p,
            None => {
                let outer = key.clone().unwrap_or_else(random_key);
                open.push((key.clone(), outer, Aggregate::default()));
                open.len() - 1
            }
        };
        let (_, outer, agg) = &mut open[slot];
        let inner = outer.clone();
        if !agg.records.is_empty()
            && agg.size_with(&inner, data.len(), outer.len()) > MAX_RECORD_BYTES
        {
            let full = std::mem::take(agg);
            out.push(full.finish(outer.clone()));
            if key.is_none() {
                *outer = random_key();
            }
        }
        let (_, outer, agg) = &mut open[slot];
        let inner = outer.clone();
        if agg.records.is_empty()
            && agg.size_with(&inner, data.len(), outer.len()) > MAX_RECORD_BYTES
        {
            // Too large to aggregate at all: sent plain (it fits as a plain record).
            out.push(Record {
                key: outer.clone(),
                data: data.clone(),
                items: vec![i],
            });
            if key.is_none() {
                *outer = random_key();
            }
            continue;
        }
        agg.add(&inner, data, i);
    }
    for (_, outer, agg) in open {
        if !agg.records.is_empty() {
            out.push(agg.finish(outer));
        }
    }
    out
}

/// The `send_aws_kinesis_data_stream` transform.
pub type SendAwsKinesisDataStream = Sender<Kinesis>;

impl Sender<Kinesis> {
    /// Builds it from its settings.
    pub fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
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
pub(crate) mod tests {
    use super::*;
    use crate::registry;
    use crate::send::aws_destination::AwsSend;
    use aws_sdk_kinesis::config::retry::RetryConfig;
    use aws_sdk_kinesis::operation::put_records::PutRecordsOutput;
    use aws_sdk_kinesis::types::PutRecordsResultEntry;
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::batch::BatchLimits;
    use sluice_engine::{Transform, json, testing};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    const ARN: &str = "arn:aws:kinesis:eu-west-1:123456789012:stream/events";

    fn client(rules: &[&Rule]) -> Client {
        mock_client!(aws_sdk_kinesis, RuleMode::MatchAny, rules, |b| b
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(1))
            ))
    }

    const FAST: RetryPolicy = RetryPolicy {
        attempts: 3,
        base: Duration::from_millis(1),
        max: Duration::from_millis(2),
    };

    fn kinesis(keys: PartitionKeys, aggregate: bool, rules: &[&Rule]) -> Kinesis {
        let (stream, name, region) = parse_stream(Some(ARN.into())).unwrap();
        Kinesis::new(
            stream,
            name,
            AwsTarget {
                region,
                ..Default::default()
            },
            keys,
            aggregate,
        )
        .with_client(client(rules))
        .with_retry(FAST)
    }

    fn batch(key: &str, items: &[&str]) -> Outgoing {
        Outgoing {
            key: key.into(),
            items: items.iter().map(|i| Bytes::from(i.to_string())).collect(),
            ..Default::default()
        }
    }

    fn ok(n: usize) -> PutRecordsOutput {
        results(&vec![None; n])
    }

    /// An answer with one result per record: `Some(code)` failed.
    fn results(codes: &[Option<&str>]) -> PutRecordsOutput {
        let failed = codes.iter().filter(|c| c.is_some()).count() as i32;
        let records = codes
            .iter()
            .enumerate()
            .map(|(i, c)| match c {
                None => PutRecordsResultEntry::builder()
                    .shard_id("shardId-000000000000")
                    .sequence_number(format!("{i}"))
                    .build(),
                Some(code) => PutRecordsResultEntry::builder()
                    .error_code(*code)
                    .error_message("Rate exceeded for shard shardId-000000000000")
                    .build(),
            })
            .collect();
        PutRecordsOutput::builder()
            .failed_record_count(failed)
            .set_records(Some(records))
            .build()
            .unwrap()
    }

    /// The requests a rule saw: (stream ARN, [(partition key, data)]) per call.
    type Seen = Arc<Mutex<Vec<(Option<String>, Vec<(String, Vec<u8>)>)>>>;

    fn recorder() -> (
        Seen,
        impl Fn(&aws_sdk_kinesis::operation::put_records::PutRecordsInput) -> bool
        + Send
        + Sync
        + 'static,
    ) {
        let seen: Seen = Arc::default();
        let s = seen.clone();
        (
            seen,
            move |r: &aws_sdk_kinesis::operation::put_records::PutRecordsInput| {
                let recs = r
                    .records()
                    .iter()
                    .map(|e| {
                        (
                            e.partition_key().unwrap_or_default().to_string(),
                            e.data().as_ref().to_vec(),
                        )
                    })
                    .collect();
                s.lock()
                    .unwrap()
                    .push((r.stream_arn().map(String::from), recs));
                true
            },
        )
    }

    fn datas(call: &[(String, Vec<u8>)]) -> Vec<String> {
        call.iter()
            .map(|(_, d)| String::from_utf8_lossy(d).into_owned())
            .collect()
    }

    #[test]
    fn settings_table() {
        let r = registry();
        let ok = [
            json!({"aws": {"arn": ARN}}),
            json!({"aws": {"arn": "events"}}),
            json!({"aws": {"arn": ARN, "assume_role_arn": "arn:aws:iam::1:role/r"}}),
            json!({"aws": {"arn": ARN}, "object": {"partition_key": "user.id"}}),
            json!({"aws": {"arn": ARN}, "object": {"batch_key": "k"}, "use_batch_key_as_partition_key": true}),
            json!({"aws": {"arn": ARN}, "enable_record_aggregation": true, "batch": {"count": 5000}}),
        ];
        for s in ok {
            testing::build(
                &r,
                json!({"type": "send_aws_kinesis_data_stream", "settings": s}),
            )
            .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        testing::assert_config_errors(
            &r,
            "send_aws_kinesis_data_stream",
            &[
                (json!({}), "aws.arn: missing required option"),
                (
                    json!({"aws": {"arn": ""}}),
                    "aws.arn: missing required option",
                ),
                (
                    json!({"aws": {"arn": "arn:aws:sqs:us-east-1:1:q"}}),
                    "aws.arn: \"arn:aws:sqs:us-east-1:1:q\" is not a Kinesis data stream ARN",
                ),
                (
                    json!({"aws": {"arn": "arn:aws:kinesis::1:stream/s"}}),
                    "is not a Kinesis data stream ARN",
                ),
                (json!({"aws": {"arn": "bad name!"}}), "nor a stream name"),
                (
                    json!({"aws": {"arn": ARN, "assume_role_arn": "nope"}}),
                    "aws.assume_role_arn: \"nope\" is not an IAM role ARN",
                ),
                (
                    json!({"aws": {"arn": ARN}, "object": {"partition_key": "meta k"}}),
                    "object.partition_key: must be a key in the data",
                ),
                (
                    json!({"aws": {"arn": ARN}, "object": {"partition_key": "a", "batch_key": "a"}, "use_batch_key_as_partition_key": true}),
                    "object.partition_key: set either",
                ),
            ],
        );
        assert_eq!(
            parse_stream(Some(ARN.into())).unwrap(),
            (
                StreamRef::Arn(ARN.into()),
                "events".into(),
                Some("eu-west-1".into())
            )
        );
        assert_eq!(
            parse_stream(Some("events".into())).unwrap(),
            (StreamRef::Name("events".into()), "events".into(), None)
        );
    }

    #[test]
    fn caps_bound_the_batch_settings() {
        let s = Sender::from_parts(
            kinesis(PartitionKeys::Random, false, &[]),
            BatchLimits::from(BatchSettings {
                count: 5000,
                size: 50_000_000,
                ..Default::default()
            })
            .capped(MAX_RECORDS, MAX_CALL_BYTES),
            MAX_DATA_BYTES,
            None,
            None,
        );
        assert_eq!(s.limits().count, 500);
        assert_eq!(s.limits().size, 5 * 1024 * 1024);
    }

    #[test]
    fn partition_keys_per_record() {
        let k = kinesis(PartitionKeys::Random, false, &[]);
        let recs = k.records(&batch("b", &["1", "2", "3"]));
        let keys: std::collections::HashSet<_> = recs.iter().map(|r| r.key.clone()).collect();
        assert_eq!(keys.len(), 3, "a random key per record, not per batch");

        let k = kinesis(PartitionKeys::Field(Key::parse("u").unwrap()), false, &[]);
        let long = "x".repeat(300);
        let items = [
            r#"{"u":"alice"}"#.to_string(),
            r#"{"u":7}"#.to_string(),
            r#"{"v":1}"#.to_string(),
            "not json".to_string(),
            format!(r#"{{"u":"{long}"}}"#),
        ];
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let recs = k.records(&batch("", &refs));
        assert_eq!(recs[0].key, "alice");
        assert_eq!(recs[1].key, "7");
        assert_eq!(recs[2].key.len(), 36, "missing value: random");
        assert_eq!(recs[3].key.len(), 36, "not JSON: random");
        assert_eq!(recs[4].key, hex::encode(Sha256::digest(long.as_bytes())));

        let k = kinesis(PartitionKeys::BatchKey, false, &[]);
        let recs = k.records(&batch("tenant-1", &["a", "b"]));
        assert!(recs.iter().all(|r| r.key == "tenant-1"));
        let recs = k.records(&batch("", &["a", "b"]));
        assert_ne!(recs[0].key, recs[1].key, "empty batch key: random");
    }

    #[tokio::test]
    async fn the_501st_record_goes_to_the_next_call() {
        let (seen, m) = recorder();
        let rule = mock!(Client::put_records)
            .match_requests(m)
            .then_compute_output(|r| ok(r.records().len()));
        let k = kinesis(PartitionKeys::Random, false, &[&rule]);
        let items: Vec<String> = (0..501).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        k.send(&batch("", &refs)).await.unwrap();
        {
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 2);
            assert_eq!(seen[0].0.as_deref(), Some(ARN), "sent as StreamARN");
            assert_eq!(seen[0].1.len(), 500);
            assert_eq!(datas(&seen[1].1), vec!["500"]);
        }
        // 5 MiB per call: 6 records of 1 MiB - 256 need two calls.
        let big = "x".repeat(MAX_DATA_BYTES);
        let (seen, m) = recorder();
        let rule = mock!(Client::put_records)
            .match_requests(m)
            .then_compute_output(|r| ok(r.records().len()));
        let k = kinesis(PartitionKeys::Random, false, &[&rule]);
        k.send(&batch("", &[big.as_str(); 6])).await.unwrap();
        let sizes: Vec<usize> = seen.lock().unwrap().iter().map(|c| c.1.len()).collect();
        assert_eq!(sizes, vec![5, 1]);
    }

    #[test]
    fn a_record_over_the_limit_is_an_error_naming_it() {
        let t = testing::build(
            &registry(),
            json!({"type": "send_aws_kinesis_data_stream", "settings": {"aws": {"arn": ARN}}}),
        )
        .unwrap();
        let big = vec![b'x'; MAX_DATA_BYTES + 1];
        let e = testing::block_on(t.transform(Message::new(big), &mut Vec::new()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("exceeds the destination's item size limit of 1048320 bytes"),
            "{e}"
        );
        // Nothing is held: a lone ctrl has nothing to send (and no client is made).
        testing::block_on(t.transform(Message::ctrl(), &mut Vec::new())).unwrap();
    }

    #[tokio::test]
    async fn partial_failures_resend_only_the_failed_records() {
        let (seen, m) = recorder();
        let rule = mock!(Client::put_records)
            .match_requests(m)
            .sequence()
            .output(|| {
                results(&[
                    None,
                    Some("ProvisionedThroughputExceededException"),
                    None,
                    Some("InternalFailure"),
                ])
            })
            .output(|| ok(2))
            .build();
        let k = kinesis(PartitionKeys::Random, false, &[&rule]);
        k.send(&batch("", &["a", "b", "c", "d"])).await.unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(datas(&seen[1].1), vec!["b", "d"]);
        // The same partition keys as in the first call.
        assert_eq!(seen[1].1[0].0, seen[0].1[1].0);
        assert_eq!(seen[1].1[1].0, seen[0].1[3].0);
    }

    #[tokio::test]
    async fn a_throttled_call_is_retried() {
        let throttled =
            r#"{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded"}"#;
        let rule = mock!(Client::put_records)
            .sequence()
            .http_status(400, Some(throttled.into()))
            .times(2)
            .output(|| ok(2))
            .build();
        let k = kinesis(PartitionKeys::Random, false, &[&rule]);
        k.send(&batch("", &["a", "b"])).await.unwrap();
        assert_eq!(rule.num_calls(), 3);
    }

    #[tokio::test]
    async fn persistent_throttling_of_the_call_fails_every_record() {
        let throttled =
            r#"{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded"}"#;
        let rule = mock!(Client::put_records)
            .sequence()
            .http_status(400, Some(throttled.into()))
            .times(3)
            .build();
        let k = kinesis(PartitionKeys::Random, false, &[&rule]);
        let e = k.send(&batch("", &["a", "b"])).await.unwrap_err();
        assert_eq!(
            e.undelivered,
            super::super::batcher::Undelivered::Items(vec![0, 1])
        );
        let text = e.error.to_string();
        assert!(
            text.contains("kinesis stream events: PutRecords failed"),
            "{text}"
        );
        assert!(
            text.contains("ProvisionedThroughputExceededException"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn persistent_record_failures_are_undelivered_items() {
        let rule = mock!(Client::put_records).then_compute_output(|r| {
            // Records "b" and "d" always fail.
            let codes: Vec<Option<&str>> = r
                .records()
                .iter()
                .map(|e| match e.data().as_ref() {
                    b"b" | b"d" => Some("ProvisionedThroughputExceededException"),
                    _ => None,
                })
                .collect();
            results(&codes)
        });
        let k = kinesis(PartitionKeys::Random, false, &[&rule]);
        let e = k.send(&batch("", &["a", "b", "c", "d"])).await.unwrap_err();
        assert_eq!(
            e.undelivered,
            super::super::batcher::Undelivered::Items(vec![1, 3])
        );
        let text = e.error.to_string();
        assert!(text.contains("kinesis stream events"), "{text}");
        assert!(
            text.contains("2 of 4 records not accepted after 3 PutRecords attempts"),
            "{text}"
        );
        assert!(
            text.contains("2 × ProvisionedThroughputExceededException"),
            "{text}"
        );
        assert_eq!(rule.num_calls(), 3);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn acks_fail_for_exactly_the_undelivered_messages() {
        let rule = mock!(Client::put_records).then_compute_output(|r| {
            let codes: Vec<Option<&str>> = r
                .records()
                .iter()
                .map(|e| (e.data().as_ref() == b"b").then_some("InternalFailure"))
                .collect();
            results(&codes)
        });
        let s = Sender::from_parts(
            kinesis(PartitionKeys::Random, false, &[&rule]),
            BatchLimits::from(BatchSettings::default()),
            MAX_DATA_BYTES,
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
        let e = s
            .transform(Message::ctrl(), &mut Vec::new())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("InternalFailure"), "{e}");
        assert_eq!(trackers[0].status(), AckStatus::Delivered);
        assert_eq!(trackers[1].status(), AckStatus::Pending);
        assert_eq!(trackers[2].status(), AckStatus::Delivered);
        assert_eq!(s.undelivered(), 1);
        s.abort("gave up").await;
        assert_eq!(trackers[1].status(), AckStatus::Failed);
    }

    /// Decodes a KPL aggregated record: (partition key table, [(key index, data)]).
    pub(crate) fn decode_kpl(blob: &[u8]) -> (Vec<String>, Vec<(u64, Vec<u8>)>) {
        assert_eq!(&blob[..4], &KPL_MAGIC, "magic");
        let (pb, md5) = blob[4..].split_at(blob.len() - 4 - 16);
        assert_eq!(md5, Md5::digest(pb).as_slice(), "MD5");
        fn varint(b: &[u8], p: &mut usize) -> u64 {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let byte = b[*p];
                *p += 1;
                v |= u64::from(byte & 0x7F) << shift;
                if byte < 0x80 {
                    return v;
                }
                shift += 7;
            }
        }
        let (mut keys, mut records) = (Vec::new(), Vec::new());
        let mut p = 0;
        while p < pb.len() {
            let tag = varint(pb, &mut p);
            assert_eq!(tag & 7, 2, "length-delimited fields only");
            let len = varint(pb, &mut p) as usize;
            let body = &pb[p..p + len];
            p += len;
            match tag >> 3 {
                1 => keys.push(String::from_utf8(body.to_vec()).unwrap()),
                3 => {
                    let (mut q, mut index, mut data) = (0, None, None);
                    while q < body.len() {
                        let t = varint(body, &mut q);
                        match (t >> 3, t & 7) {
                            (1, 0) => index = Some(varint(body, &mut q)),
                            (3, 2) => {
                                let l = varint(body, &mut q) as usize;
                                data = Some(body[q..q + l].to_vec());
                                q += l;
                            }
                            other => panic!("unexpected field {other:?}"),
                        }
                    }
                    records.push((index.unwrap(), data.unwrap()));
                }
                other => panic!("unexpected field {other}"),
            }
        }
        (keys, records)
    }

    #[test]
    fn varints() {
        for v in [0u64, 1, 127, 128, 300, 16_383, 16_384, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
        }
    }

    #[test]
    fn aggregation_round_trips_and_groups_by_key() {
        let k = kinesis(PartitionKeys::Field(Key::parse("u").unwrap()), true, &[]);
        let items = [
            r#"{"u":"a","n":1}"#,
            r#"{"u":"b","n":2}"#,
            r#"{"u":"a","n":3}"#,
            r#"{"u":"a","n":4}"#,
        ];
        let recs = k.records(&batch("", &items));
        assert_eq!(recs.len(), 2, "one aggregate for a, b alone (plain)");
        assert_eq!(recs[0].key, "a");
        assert_eq!(recs[0].items, vec![0, 2, 3]);
        let (keys, inner) = decode_kpl(&recs[0].data);
        assert_eq!(keys, vec!["a"]);
        let datas: Vec<String> = inner
            .iter()
            .map(|(i, d)| {
                assert_eq!(*i, 0);
                String::from_utf8(d.clone()).unwrap()
            })
            .collect();
        assert_eq!(datas, vec![items[0], items[2], items[3]]);
        assert_eq!(recs[1].key, "b");
        assert_eq!(
            &recs[1].data[..],
            items[1].as_bytes(),
            "a lone record is plain"
        );
    }

    #[test]
    fn aggregates_stay_within_one_mib() {
        let k = kinesis(PartitionKeys::Random, true, &[]);
        let item = "y".repeat(300_000);
        let items = vec![item.as_str(); 7];
        let recs = k.records(&batch("", &items));
        // Three 300 kB records fit in 1 MiB, a fourth does not.
        let counts: Vec<usize> = recs.iter().map(|r| r.items.len()).collect();
        assert_eq!(counts, vec![3, 3, 1]);
        for r in &recs {
            assert!(r.size() <= MAX_RECORD_BYTES, "{}", r.size());
        }
        let (keys, inner) = decode_kpl(&recs[0].data);
        assert_eq!(keys, vec![recs[0].key.clone()]);
        assert_eq!(inner.len(), 3);
        assert!(inner.iter().all(|(_, d)| d == item.as_bytes()));
        assert_ne!(recs[0].key, recs[1].key, "a random key per aggregate");
        // A record too large to aggregate with its (long) key is sent plain, after what
        // was aggregated before it (order is kept).
        let k = kinesis(PartitionKeys::Field(Key::parse("u").unwrap()), true, &[]);
        let key = "k".repeat(MAX_PARTITION_KEY);
        let small = format!(r#"{{"u":"{key}"}}"#);
        let head = format!(r#"{{"u":"{key}","p":""#);
        let huge = format!("{head}{}\"}}", "z".repeat(MAX_DATA_BYTES - head.len() - 2));
        assert_eq!(huge.len(), MAX_DATA_BYTES);
        let recs = k.records(&batch("", &[&small, &small, &huge, &small]));
        let items: Vec<Vec<usize>> = recs.iter().map(|r| r.items.clone()).collect();
        assert_eq!(items, vec![vec![0, 1], vec![2], vec![3]]);
        assert_eq!(&recs[1].data[..], huge.as_bytes(), "sent plain");
        for r in &recs {
            assert_eq!(r.key, key);
            assert!(r.size() <= MAX_RECORD_BYTES, "{}", r.size());
        }
    }

    #[tokio::test]
    async fn a_failed_aggregate_fails_every_message_in_it() {
        let rule = mock!(Client::put_records).then_compute_output(|r| {
            let codes: Vec<Option<&str>> = r
                .records()
                .iter()
                .map(|e| (e.partition_key() == Some("a")).then_some("InternalFailure"))
                .collect();
            results(&codes)
        });
        let k = kinesis(
            PartitionKeys::Field(Key::parse("u").unwrap()),
            true,
            &[&rule],
        );
        let items = [r#"{"u":"a"}"#, r#"{"u":"b"}"#, r#"{"u":"a","x":1}"#];
        let e = k.send(&batch("", &items)).await.unwrap_err();
        assert_eq!(
            e.undelivered,
            super::super::batcher::Undelivered::Items(vec![0, 2])
        );
    }

    #[test]
    fn compliance() {
        let rule = mock!(Client::put_records).then_compute_output(|r| ok(r.records().len()));
        let t = Arc::new(Sender::from_parts(
            kinesis(PartitionKeys::Random, false, &[&rule]),
            BatchLimits::from(BatchSettings::default()),
            MAX_DATA_BYTES,
            None,
            None,
        ));
        testing::check_compliance(t);
    }
}
