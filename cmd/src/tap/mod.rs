//! Reading a live Kinesis stream for `sluice tap`: every shard, resharding followed, KPL
//! aggregates taken apart, each record turned into the messages the Lambda Kinesis handler
//! would make of it, handed on in batches as they arrive.
//!
//! Why its own reader rather than the Kinesis Client Library's model: tap is a tool for
//! looking at a stream (and trying a config on live data), not a consumer that checkpoints,
//! so it keeps nothing between runs and leases nothing; it only has to read every shard in
//! the order Kinesis defines and stop cleanly.
//!
//! Order. A shard is read only once every parent it has (`ParentShardId`,
//! `AdjacentParentShardId`) was read to its end, so for any partition key what was written
//! before a reshard comes out before what was written after it. A parent no longer listed
//! (past the stream's retention) does not hold its children back. Where reading starts:
//! `latest` reads the shards open when tap starts from their tip (closed ones are history)
//! and every child that appears later from its start, so nothing written after tap started
//! is missed; `trim-horizon` reads everything the stream holds; a time reads every shard
//! from that time on.
//!
//! The end of a shard. Kinesis ends a closed shard with a `GetRecords` answer that has no
//! next iterator. A shard is also taken as read to its end when the listing says it is
//! closed and what was read reached its `EndingSequenceNumber`, or, for a shard that held
//! nothing, when a read finds it empty and caught up (moto, the emulator the tests use,
//! moves a split shard's records into its children and never ends the parent's iterator).
//!
//! Limits. `GetRecords` allows 5 calls per second per shard, shared with every consumer:
//! calls on one shard are at least [`PACE`] apart and an idle shard is polled every
//! [`IDLE_POLL`]. Throttling is retried by the SDK and then here, with backoff, without end
//! (a tap waits rather than fails); an expired iterator is renewed after the last record
//! read. The shards are listed again every [`LIST_EVERY`] and whenever a shard ends, which
//! is how children are found.
//!
//! What became of each record handed on is kept shard by shard ([`Ledger`]), so that a tap
//! that stops can say what was delivered and where each shard would resume.

use sluice_platform::aws::kinesis_throttled as throttled;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::error::ProvideErrorMetadata;
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::types::ShardIteratorType;
use sluice_engine::Message;
use sluice_platform::aws::describe_error;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use sluice_lambda::kinesis::{record_messages, rfc3339_millis};

mod ledger;
pub use ledger::{Ledger, Resume, Summary};

/// The least time between two `GetRecords` calls on one shard (its 5 calls per second).
pub const PACE: Duration = Duration::from_millis(200);
/// How long a shard that had nothing new waits before it is read again.
pub const IDLE_POLL: Duration = Duration::from_millis(500);
/// How often the shards are listed, to find children and learn which shards closed.
pub const LIST_EVERY: Duration = Duration::from_secs(5);
/// The longest wait between two tries of a throttled call.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Listings that may fail in a row (after the first) before tap gives up.
const LIST_FAILURES: u32 = 5;

/// Where reading starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// The tip of every shard open at the start.
    Latest,
    /// The oldest record the stream holds.
    TrimHorizon,
    /// Records that arrived at or after this time (milliseconds since the epoch).
    Time(i64),
}

impl StartAt {
    /// `latest`, `trim-horizon` (or Substation's `earliest`), or a time: RFC 3339
    /// (`2026-11-25T10:00:00Z`) or seconds since the epoch.
    pub fn parse(s: &str) -> Result<StartAt, String> {
        let t = s.trim();
        match t.to_ascii_lowercase().as_str() {
            "latest" => return Ok(StartAt::Latest),
            "trim-horizon" | "trim_horizon" | "earliest" => return Ok(StartAt::TrimHorizon),
            _ => {}
        }
        if let Ok(time) = chrono::DateTime::parse_from_rfc3339(t) {
            return Ok(StartAt::Time(time.timestamp_millis()));
        }
        if let Ok(secs) = t.parse::<f64>()
            && secs.is_finite()
            && secs >= 0.0
        {
            return Ok(StartAt::Time((secs * 1000.0).round() as i64));
        }
        Err(format!(
            "{s:?} is not where to start: expected latest, trim-horizon, an RFC 3339 time \
             (2026-11-25T10:00:00Z) or seconds since the epoch"
        ))
    }
}

/// Where one shard's reading starts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Position {
    Latest,
    TrimHorizon,
    Time(i64),
    After(String),
}

/// A stream, as tap names it in requests (its name) and in metadata (its ARN).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamId {
    /// The stream's name.
    pub name: String,
    /// The stream's ARN.
    pub arn: String,
}

/// Why tap stopped early.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    /// A Kinesis call failed for a reason that waiting does not cure.
    #[error("Kinesis {operation} on stream {stream}{shard}: {cause}")]
    Call {
        /// The operation (`GetRecords`, ...).
        operation: &'static str,
        /// The stream's name.
        stream: String,
        /// `, shard ID` when the call was about one shard.
        shard: String,
        /// The cause, in words.
        cause: String,
    },
}

/// Counts of one tap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Kinesis records read.
    pub records: u64,
    /// Messages handed on (a KPL aggregate is several).
    pub messages: u64,
    /// Records that were corrupt KPL aggregates (logged, not handed on).
    pub unreadable: u64,
    /// Shards read to their end.
    pub shards_ended: u64,
}

/// What tap knows of a shard from the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ShardInfo {
    parents: Vec<String>,
    starting: String,
    /// Its `EndingSequenceNumber`, once it is closed.
    ending: Option<String>,
}

/// Where a shard is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ShardState {
    /// Not read yet: waiting for its parents, to start at this position.
    Waiting(Position),
    /// Being read.
    Reading,
    /// Read to its end (or, under `latest`, closed before tap started).
    Done,
}

/// The shards that may start now: waiting, with every listed parent done.
fn ready(
    shards: &BTreeMap<String, ShardInfo>,
    states: &HashMap<String, ShardState>,
) -> Vec<(String, Position)> {
    shards
        .iter()
        .filter_map(|(id, info)| match states.get(id) {
            Some(ShardState::Waiting(pos)) => {
                let parents_done = info.parents.iter().all(|p| {
                    !shards.contains_key(p) || matches!(states.get(p), Some(ShardState::Done))
                });
                parents_done.then(|| (id.clone(), pos.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The state of a shard found in a listing: `first` when it is in the listing tap started
/// with.
fn initial_state(start: StartAt, first: bool, info: &ShardInfo) -> ShardState {
    match (start, first) {
        (StartAt::Latest, true) if info.ending.is_some() => ShardState::Done,
        (StartAt::Latest, true) => ShardState::Waiting(Position::Latest),
        (StartAt::Latest, false) | (StartAt::TrimHorizon, _) => {
            ShardState::Waiting(Position::TrimHorizon)
        }
        (StartAt::Time(ms), _) => ShardState::Waiting(Position::Time(ms)),
    }
}

/// Compares two sequence numbers (decimal strings of up to 128 bits).
fn seq_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
    (a.len(), a).cmp(&(b.len(), b))
}

/// Whether a shard is read to its end. `closed`: its listed (starting, ending) sequence
/// numbers, once the listing says it is closed; `last`: the last sequence number read;
/// `next_iterator`: whether the last answer had one; `empty_caught_up`: whether the last
/// answer had no records and nothing behind.
fn shard_ended(
    closed: Option<&(String, String)>,
    last: Option<&str>,
    next_iterator: bool,
    empty_caught_up: bool,
) -> bool {
    if !next_iterator {
        return true;
    }
    let Some((starting, ending)) = closed else {
        return false;
    };
    match last {
        Some(last) => seq_cmp(last, ending).is_ge(),
        // Nothing read: ended when it held nothing and a read found it so.
        None => empty_caught_up && seq_cmp(ending, starting).is_le(),
    }
}

/// The wait before try `n` (from 1) of a throttled call: 0.5 s doubling to [`MAX_BACKOFF`].
fn backoff(n: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << n.min(6).saturating_sub(1))).min(MAX_BACKOFF)
}

/// A stream given by name or ARN: its name, and the region an ARN names.
pub fn stream_name_and_region(stream: &str) -> Result<(String, Option<String>), TapError> {
    if !stream.starts_with("arn:") {
        return Ok((stream.to_string(), None));
    }
    sluice_platform::aws::Arn::parse(stream)
        .ok()
        .and_then(|a| {
            let name = a.resource.strip_prefix("stream/")?.to_string();
            (!name.is_empty()).then(|| (name, Some(a.region).filter(|r| !r.is_empty())))
        })
        .ok_or_else(|| TapError::Call {
            operation: "DescribeStreamSummary",
            stream: stream.to_string(),
            shard: String::new(),
            cause: "not a Kinesis stream ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME)".into(),
        })
}

/// Resolves the stream named `name` (which must exist): its name and ARN.
pub async fn resolve(client: &Client, name: String) -> Result<StreamId, TapError> {
    let out = client
        .describe_stream_summary()
        .stream_name(&name)
        .send()
        .await
        .map_err(|e| TapError::Call {
            operation: "DescribeStreamSummary",
            stream: name.clone(),
            shard: String::new(),
            cause: describe_error(&e),
        })?;
    let arn = out
        .stream_description_summary()
        .map(|s| s.stream_arn().to_string())
        .unwrap_or_default();
    Ok(StreamId { name, arn })
}

/// What the shard readers share.
struct Shared {
    client: Client,
    stream: StreamId,
    out: mpsc::Sender<Vec<Message>>,
    stop: watch::Receiver<bool>,
    /// The (starting, ending) sequence numbers of the shards the latest listing says are
    /// closed.
    closed: Mutex<HashMap<String, (String, String)>>,
    stats: Mutex<TapStats>,
    ledger: Arc<Ledger>,
}

/// How a reader ended.
enum ReaderEnd {
    /// The shard was read to its end.
    Ended(String),
    /// Tap is stopping (or nobody takes the messages any more).
    Stopped,
}

/// Reads every shard of `stream` from `start` and sends each batch of messages to `out`,
/// until `shutdown` completes (then what is being read is finished and the readers stop) or
/// `out` is closed. Returns what was read, or the error that stopped it; `ledger` learns
/// what became of each record handed on.
pub async fn tap(
    client: Client,
    stream: StreamId,
    start: StartAt,
    out: mpsc::Sender<Vec<Message>>,
    shutdown: impl Future<Output = ()>,
    ledger: Arc<Ledger>,
) -> Result<TapStats, TapError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        client,
        stream,
        out,
        stop: stop_rx,
        closed: Mutex::new(HashMap::new()),
        stats: Mutex::new(TapStats::default()),
        ledger,
    });
    let mut shards = list_shards(&shared).await?;
    let mut states: HashMap<String, ShardState> = shards
        .iter()
        .map(|(id, info)| (id.clone(), initial_state(start, true, info)))
        .collect();
    note_closed(&shared, &shards);
    tracing::info!(
        stream = %shared.stream.name,
        shards = shards.len(),
        "tap started"
    );
    let mut readers: JoinSet<Result<ReaderEnd, TapError>> = JoinSet::new();
    let mut next_list = Instant::now() + LIST_EVERY;
    let mut list_failures = 0;
    let mut result: Result<(), TapError> = Ok(());
    tokio::pin!(shutdown);
    loop {
        for (id, pos) in ready(&shards, &states) {
            states.insert(id.clone(), ShardState::Reading);
            let shared = shared.clone();
            readers.spawn(async move { read_shard(&shared, id, pos).await });
        }
        let relist = tokio::select! {
            _ = &mut shutdown => break,
            _ = tokio::time::sleep_until(next_list.into()) => true,
            Some(joined) = readers.join_next() => match joined {
                Ok(Ok(ReaderEnd::Ended(id))) => {
                    tracing::info!(shard = %id, "shard read to its end");
                    shared.stats.lock().unwrap_or_else(|p| p.into_inner()).shards_ended += 1;
                    states.insert(id, ShardState::Done);
                    true
                }
                Ok(Ok(ReaderEnd::Stopped)) => break,
                Ok(Err(e)) => {
                    result = Err(e);
                    break;
                }
                Err(join) => {
                    result = Err(TapError::Call {
                        operation: "GetRecords",
                        stream: shared.stream.name.clone(),
                        shard: String::new(),
                        cause: format!("a shard reader stopped: {join}"),
                    });
                    break;
                }
            },
        };
        if relist {
            next_list = Instant::now() + LIST_EVERY;
            match list_shards(&shared).await {
                Ok(listed) => {
                    list_failures = 0;
                    for (id, info) in &listed {
                        states
                            .entry(id.clone())
                            .or_insert_with(|| initial_state(start, false, info));
                    }
                    shards = listed;
                    note_closed(&shared, &shards);
                }
                Err(e) => {
                    list_failures += 1;
                    if list_failures >= LIST_FAILURES {
                        result = Err(e);
                        break;
                    }
                    tracing::warn!(error = %e, "listing the shards failed; trying again");
                }
            }
        }
    }
    // Drain: each reader finishes the answer it is handling and stops.
    let _ = stop_tx.send(true);
    while let Some(joined) = readers.join_next().await {
        if let Ok(Err(e)) = joined
            && result.is_ok()
        {
            result = Err(e);
        }
    }
    let stats = *shared.stats.lock().unwrap_or_else(|p| p.into_inner());
    result.map(|()| stats)
}

/// Records which listed shards are closed, for the readers.
fn note_closed(shared: &Shared, shards: &BTreeMap<String, ShardInfo>) {
    let mut closed = shared.closed.lock().unwrap_or_else(|p| p.into_inner());
    for (id, info) in shards {
        if let Some(ending) = &info.ending {
            closed.insert(id.clone(), (info.starting.clone(), ending.clone()));
        }
    }
}

/// Every shard of the stream, every page, with its parents and sequence number range.
async fn list_shards(shared: &Shared) -> Result<BTreeMap<String, ShardInfo>, TapError> {
    let mut out = BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let req = shared.client.list_shards();
        // A page after the first names the stream by its token alone.
        let req = match &token {
            Some(t) => req.next_token(t),
            None => req.stream_name(&shared.stream.name),
        };
        let page = req.send().await.map_err(|e| TapError::Call {
            operation: "ListShards",
            stream: shared.stream.name.clone(),
            shard: String::new(),
            cause: describe_error(&e),
        })?;
        for s in page.shards() {
            let range = s.sequence_number_range();
            let parents = [s.parent_shard_id(), s.adjacent_parent_shard_id()]
                .into_iter()
                .flatten()
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect();
            out.insert(
                s.shard_id().to_string(),
                ShardInfo {
                    parents,
                    starting: range
                        .map(|r| r.starting_sequence_number().to_string())
                        .unwrap_or_default(),
                    ending: range
                        .and_then(|r| r.ending_sequence_number())
                        .map(str::to_string),
                },
            );
        }
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok(out),
        }
    }
}

/// Sleeps for `d`, or less when tap is stopping; answers whether it is stopping.
async fn pause(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}

/// Reads one shard from `pos` until its end or until tap stops.
async fn read_shard(shared: &Shared, shard: String, pos: Position) -> Result<ReaderEnd, TapError> {
    let mut stop = shared.stop.clone();
    let fail = |operation: &'static str, cause: String| TapError::Call {
        operation,
        stream: shared.stream.name.clone(),
        shard: format!(", shard {shard}"),
        cause,
    };
    let mut last: Option<String> = None;
    let mut iterator = match shard_iterator(shared, &shard, &pos, &mut stop).await? {
        Some(it) => it,
        None => return Ok(ReaderEnd::Stopped),
    };
    let mut troubles = 0;
    let mut last_call: Option<Instant> = None;
    loop {
        if let Some(at) = last_call {
            let wait = (at + PACE).saturating_duration_since(Instant::now());
            if pause(&mut stop, wait).await {
                return Ok(ReaderEnd::Stopped);
            }
        } else if *stop.borrow() {
            return Ok(ReaderEnd::Stopped);
        }
        last_call = Some(Instant::now());
        let page = match shared
            .client
            .get_records()
            .shard_iterator(&iterator)
            .send()
            .await
        {
            Ok(p) => p,
            Err(e) => {
                troubles += 1;
                if throttled(e.code()) {
                    tracing::debug!(shard = %shard, "GetRecords throttled; waiting");
                    if pause(&mut stop, backoff(troubles)).await {
                        return Ok(ReaderEnd::Stopped);
                    }
                    continue;
                }
                if e.code() == Some("ExpiredIteratorException") && troubles < 5 {
                    let again = match &last {
                        Some(seq) => Position::After(seq.clone()),
                        None => pos.clone(),
                    };
                    iterator = match shard_iterator(shared, &shard, &again, &mut stop).await? {
                        Some(it) => it,
                        None => return Ok(ReaderEnd::Stopped),
                    };
                    continue;
                }
                return Err(fail("GetRecords", describe_error(&e)));
            }
        };
        troubles = 0;
        let records = page.records();
        let mut read: Vec<(&str, Vec<Message>)> = Vec::with_capacity(records.len());
        let mut unreadable = 0;
        for r in records {
            let arrival = r
                .approximate_arrival_timestamp()
                .and_then(|t| t.to_millis().ok())
                .and_then(rfc3339_millis);
            let data = bytes::Bytes::copy_from_slice(r.data().as_ref());
            match record_messages(
                data,
                arrival.as_deref(),
                &shared.stream.arn,
                r.partition_key().unwrap_or_default(),
                r.sequence_number(),
            ) {
                Ok(msgs) => read.push((r.sequence_number(), msgs)),
                Err(e) => {
                    unreadable += 1;
                    tracing::error!(
                        shard = %shard,
                        sequence_number = %r.sequence_number(),
                        error = %e,
                        "record not processed"
                    );
                }
            }
            last = Some(r.sequence_number().to_string());
        }
        // Each record's messages carry its token: the ledger learns what became of it.
        let tokens = shared
            .ledger
            .hand_on(&shard, read.iter().map(|(seq, _)| *seq));
        let mut batch: Vec<Message> = Vec::with_capacity(records.len());
        for ((_, msgs), token) in read.into_iter().zip(tokens) {
            for mut m in msgs {
                m.add_ack(token.clone());
                batch.push(m);
            }
        }
        {
            let mut stats = shared.stats.lock().unwrap_or_else(|p| p.into_inner());
            stats.records += records.len() as u64;
            stats.messages += batch.len() as u64;
            stats.unreadable += unreadable;
        }
        if !batch.is_empty() && shared.out.send(batch).await.is_err() {
            return Ok(ReaderEnd::Stopped);
        }
        let caught_up = page.millis_behind_latest() == Some(0);
        let closed = shared
            .closed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&shard)
            .cloned();
        let next = page.next_shard_iterator().filter(|i| !i.is_empty());
        if shard_ended(
            closed.as_ref(),
            last.as_deref(),
            next.is_some(),
            records.is_empty() && caught_up,
        ) {
            return Ok(ReaderEnd::Ended(shard));
        }
        if let Some(next) = next {
            iterator = next.to_string();
        }
        if (records.is_empty() || caught_up) && pause(&mut stop, IDLE_POLL).await {
            return Ok(ReaderEnd::Stopped);
        }
    }
}

/// An iterator of `shard` at `pos`; `None` when tap stopped while it was throttled.
async fn shard_iterator(
    shared: &Shared,
    shard: &str,
    pos: &Position,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<String>, TapError> {
    let mut troubles = 0;
    loop {
        let req = shared
            .client
            .get_shard_iterator()
            .stream_name(&shared.stream.name)
            .shard_id(shard);
        let req = match pos {
            Position::Latest => req.shard_iterator_type(ShardIteratorType::Latest),
            Position::TrimHorizon => req.shard_iterator_type(ShardIteratorType::TrimHorizon),
            Position::Time(ms) => req
                .shard_iterator_type(ShardIteratorType::AtTimestamp)
                .timestamp(DateTime::from_millis(*ms)),
            Position::After(seq) => req
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .starting_sequence_number(seq),
        };
        match req.send().await {
            Ok(out) => {
                return out
                    .shard_iterator()
                    .map(|s| Some(s.to_string()))
                    .ok_or_else(|| TapError::Call {
                        operation: "GetShardIterator",
                        stream: shared.stream.name.clone(),
                        shard: format!(", shard {shard}"),
                        cause: "the answer has no iterator".into(),
                    });
            }
            Err(e) if throttled(e.code()) => {
                troubles += 1;
                if pause(stop, backoff(troubles)).await {
                    return Ok(None);
                }
            }
            Err(e) => {
                return Err(TapError::Call {
                    operation: "GetShardIterator",
                    stream: shared.stream.name.clone(),
                    shard: format!(", shard {shard}"),
                    cause: describe_error(&e),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests;
