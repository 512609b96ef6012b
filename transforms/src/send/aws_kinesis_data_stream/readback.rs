//! Reading a Kinesis stream back for records an earlier attempt may have put: what makes
//! the send exactly-once when the outcome of a put is unknown (see the send's module
//! documentation for when it runs and what it guarantees).
//!
//! [`find`] looks for user records ([`Sought`]: a partition key, or none when keys are
//! random, and data bytes) from an instant on: it lists the stream's shards (every page of
//! `ListShards`, closed parents of a reshard included, since they hold what was put before
//! it), keeps those whose hash key range holds a sought key (every shard when a record is
//! sought by its data alone), reads each from the instant (`GetShardIterator` at
//! `AT_TIMESTAMP`, then `GetRecords`) until it is caught up (no records and
//! `MillisBehindLatest` 0, or the end of a closed shard) or everything it may hold was
//! found, and answers where each sought record landed. KPL aggregates are deaggregated, so
//! a user record is found whatever it was aggregated with. Records are matched by partition
//! key and data, each stream record at most once, so two identical sought records need two
//! records in the stream.
//!
//! `GetRecords` is limited to 5 calls per second per shard (shared with every consumer):
//! calls on one shard are spaced by [`ReadBack::pace`], throttling is retried by the SDK
//! and then with backoff, an expired iterator is renewed where reading stopped.

use sluice_platform::aws::kinesis_throttled as throttled;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::error::ProvideErrorMetadata;
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::ShardIteratorType;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use md5::{Digest, Md5};

use super::StreamRef;
use crate::send::aws_records::RetryPolicy;
use sluice_platform::aws::describe_error;
use sluice_platform::kpl;

/// How a read-back reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadBack {
    /// How much earlier than the instant asked for reading starts: the clock of the
    /// machine that noted the instant may be ahead of Kinesis's (arrival times). Larger
    /// margins read more; a clock ahead by more sends a record again. (Only records that
    /// carry their message's lock key are sought, so a wider window never lets another
    /// message's record pass for this one.)
    pub skew: Duration,
    /// How long to wait after an ambiguous answer before reading: a request the client
    /// gave up on may still be being applied.
    pub settle: Duration,
    /// The least time between two `GetRecords` calls on one shard.
    pub pace: Duration,
    /// Shards read at once.
    pub concurrency: usize,
}

impl ReadBack {
    /// 5 s of clock skew (synchronised clocks differ by milliseconds), 1 s to settle,
    /// 200 ms between reads of a shard (its 5 calls per second), 4 shards at once.
    pub(crate) const DEFAULT: ReadBack = ReadBack {
        skew: Duration::from_secs(5),
        settle: Duration::from_secs(1),
        pace: Duration::from_millis(200),
        concurrency: 4,
    };
}

/// A user record to look for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Sought {
    /// Its partition key; `None` when keys are random (a record sent again gets a new one),
    /// so it is recognised by its data alone, in every shard.
    pub key: Option<String>,
    /// Its data.
    pub data: Bytes,
}

/// Where a record landed: `shardId/sequenceNumber`, as the lock notes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Landing {
    /// The shard.
    pub shard: String,
    /// The record's sequence number (an aggregate's user records share it).
    pub sequence: String,
}

impl std::fmt::Display for Landing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.shard, self.sequence)
    }
}

/// A shard and the hash keys it takes.
#[derive(Debug, Clone)]
struct Shard {
    id: String,
    hashes: std::ops::RangeInclusive<u128>,
}

/// The hash key Kinesis maps a partition key to: its MD5 as a 128-bit integer.
pub(crate) fn hash_key(partition_key: &str) -> u128 {
    u128::from_be_bytes(Md5::digest(partition_key.as_bytes()).into())
}

/// A stream record (or one user record of an aggregate) that matches a sought one.
#[derive(Debug, Clone)]
struct Candidate {
    key: String,
    data: Bytes,
    landing: Landing,
}

/// Looks for `sought` in `stream` from `since_ms` (epoch ms, less [`ReadBack::skew`]) on;
/// answers for each sought record where it landed (`None`: not in the stream).
pub(crate) async fn find(
    client: &Client,
    stream: &StreamRef,
    since_ms: i64,
    sought: &[Sought],
    how: &ReadBack,
    retry: &RetryPolicy,
) -> Result<Vec<Option<Landing>>, String> {
    if sought.is_empty() {
        return Ok(Vec::new());
    }
    let from_ms = since_ms.saturating_sub(how.skew.as_millis() as i64);
    let shards = list_shards(client, stream).await?;
    // Each shard with the sought records it may hold.
    let reads: Vec<_> = shards
        .iter()
        .filter_map(|s| {
            let here: Vec<&Sought> = sought
                .iter()
                .filter(|w| {
                    w.key
                        .as_deref()
                        .is_none_or(|k| s.hashes.contains(&hash_key(k)))
                })
                .collect();
            (!here.is_empty()).then(|| read_shard(client, stream, &s.id, from_ms, here, how, retry))
        })
        .collect();
    let found: Vec<Vec<Candidate>> = futures::stream::iter(reads)
        .buffer_unordered(how.concurrency.max(1))
        .try_collect()
        .await?;
    Ok(assign(sought, found.into_iter().flatten()))
}

/// Matches each sought record, in order, to a candidate not matched yet.
fn assign(sought: &[Sought], found: impl Iterator<Item = Candidate>) -> Vec<Option<Landing>> {
    let mut by_data: HashMap<Bytes, Vec<Option<Candidate>>> = HashMap::new();
    for c in found {
        by_data.entry(c.data.clone()).or_default().push(Some(c));
    }
    sought
        .iter()
        .map(|w| {
            let slot = by_data.get_mut(&w.data)?.iter_mut().find(|c| {
                c.as_ref()
                    .is_some_and(|c| w.key.as_deref().is_none_or(|k| k == c.key))
            })?;
            slot.take().map(|c| c.landing)
        })
        .collect()
}

/// Every shard of the stream (closed ones too), every page.
async fn list_shards(client: &Client, stream: &StreamRef) -> Result<Vec<Shard>, String> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut req = client.list_shards();
        // A page after the first names the stream by its token alone.
        req = match (&token, stream) {
            (Some(t), _) => req.next_token(t),
            (None, StreamRef::Arn(a)) => req.stream_arn(a),
            (None, StreamRef::Name(n)) => req.stream_name(n),
        };
        let page = req
            .send()
            .await
            .map_err(|e| format!("ListShards failed: {}", describe_error(&e)))?;
        for s in page.shards() {
            let range = s.hash_key_range();
            let bound = |v: Option<&str>| v.and_then(|v| v.parse::<u128>().ok());
            let (Some(lo), Some(hi)) = (
                bound(range.map(|r| r.starting_hash_key())),
                bound(range.map(|r| r.ending_hash_key())),
            ) else {
                return Err(format!(
                    "ListShards answered shard {} without a readable hash key range",
                    s.shard_id()
                ));
            };
            out.push(Shard {
                id: s.shard_id().to_string(),
                hashes: lo..=hi,
            });
        }
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok(out),
        }
    }
}

/// Reads shard `shard` from `from_ms` until it is caught up or every sought record it may
/// hold was found; answers the records that match one sought.
async fn read_shard(
    client: &Client,
    stream: &StreamRef,
    shard: &str,
    from_ms: i64,
    sought: Vec<&Sought>,
    how: &ReadBack,
    retry: &RetryPolicy,
) -> Result<Vec<Candidate>, String> {
    // How many of each (key, data) are still missing, by data.
    let mut missing: HashMap<&Bytes, Vec<(Option<&str>, usize)>> = HashMap::new();
    for w in &sought {
        let e = missing.entry(&w.data).or_default();
        match e.iter_mut().find(|(k, _)| *k == w.key.as_deref()) {
            Some((_, n)) => *n += 1,
            None => e.push((w.key.as_deref(), 1)),
        }
    }
    let mut left = sought.len();
    let mut found = Vec::new();
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("shard {shard}: {what} failed: {e}");
    let mut iterator = shard_iterator(client, stream, shard, from_ms, None)
        .await
        .map_err(|e| fail("GetShardIterator", &e))?;
    let mut last_sequence: Option<String> = None;
    let mut last_call: Option<Instant> = None;
    let mut troubles = 0;
    loop {
        if let Some(at) = last_call {
            let next = at + how.pace;
            if next > Instant::now() {
                tokio::time::sleep_until(next.into()).await;
            }
        }
        last_call = Some(Instant::now());
        let mut req = client.get_records().shard_iterator(&iterator);
        if let StreamRef::Arn(a) = stream {
            req = req.stream_arn(a);
        }
        let page = match req.send().await {
            Ok(p) => p,
            Err(e) => {
                troubles += 1;
                if troubles >= retry.attempts {
                    return Err(fail("GetRecords", &describe_error(&e)));
                }
                match e.code() {
                    c if throttled(c) => {
                        tokio::time::sleep(retry.delay(troubles)).await;
                    }
                    Some("ExpiredIteratorException") => {
                        iterator = shard_iterator(
                            client,
                            stream,
                            shard,
                            from_ms,
                            last_sequence.as_deref(),
                        )
                        .await
                        .map_err(|e| fail("GetShardIterator", &e))?;
                    }
                    _ => return Err(fail("GetRecords", &describe_error(&e))),
                }
                continue;
            }
        };
        troubles = 0;
        for r in page.records() {
            let sequence = r.sequence_number().to_string();
            let data = Bytes::copy_from_slice(r.data().as_ref());
            let key = r.partition_key().unwrap_or_default();
            // The record itself (a plain record, or an aggregate sent again as it was), and
            // each user record of an aggregate.
            let mut users = vec![(key.to_string(), data.clone())];
            if let Ok(Some(inner)) = kpl::deaggregate(&data) {
                users.extend(inner.into_iter().map(|u| (u.partition_key, u.data)));
            }
            for (key, data) in users {
                let Some(wanted) = missing.get_mut(&data) else {
                    continue;
                };
                let slot = wanted
                    .iter()
                    .position(|(k, n)| *n > 0 && *k == Some(key.as_str()))
                    .or_else(|| wanted.iter().position(|(k, n)| *n > 0 && k.is_none()));
                if let Some(p) = slot {
                    wanted[p].1 -= 1;
                    left -= 1;
                }
                // Kept even when no count is left: another shard's match may be the same.
                found.push(Candidate {
                    key,
                    data,
                    landing: Landing {
                        shard: shard.to_string(),
                        sequence: sequence.clone(),
                    },
                });
            }
            last_sequence = Some(sequence);
        }
        if left == 0 {
            return Ok(found);
        }
        let caught_up = page.records().is_empty() && page.millis_behind_latest() == Some(0);
        match page.next_shard_iterator() {
            // A closed shard read to its end, or an open one caught up.
            None => return Ok(found),
            Some(_) if caught_up => return Ok(found),
            Some(next) => iterator = next.to_string(),
        }
    }
}

/// An iterator of `shard` at `from_ms`, or after `after` (where an expired one stopped).
async fn shard_iterator(
    client: &Client,
    stream: &StreamRef,
    shard: &str,
    from_ms: i64,
    after: Option<&str>,
) -> Result<String, String> {
    let mut req = client.get_shard_iterator().shard_id(shard);
    req = match after {
        Some(seq) => req
            .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
            .starting_sequence_number(seq),
        None => req
            .shard_iterator_type(ShardIteratorType::AtTimestamp)
            .timestamp(DateTime::from_millis(from_ms)),
    };
    req = match stream {
        StreamRef::Arn(a) => req.stream_arn(a),
        StreamRef::Name(n) => req.stream_name(n),
    };
    let out = req.send().await.map_err(|e| describe_error(&e))?;
    out.shard_iterator()
        .map(str::to_string)
        .ok_or_else(|| "no shard iterator in the answer".to_string())
}
