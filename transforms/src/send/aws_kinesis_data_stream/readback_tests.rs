//! The read-back's tests, against a small Kinesis made of the SDK's mocks ([`Fake`]): a
//! stream of shards that `PutRecords` writes to (or, as planned per call, applies in part
//! and then answers 500, or fails without applying), read with `ListShards`,
//! `GetShardIterator` and `GetRecords` as Kinesis answers them.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_kinesis::operation::get_records::GetRecordsOutput;
use aws_sdk_kinesis::operation::get_shard_iterator::GetShardIteratorOutput;
use aws_sdk_kinesis::operation::list_shards::ListShardsOutput;
use aws_sdk_kinesis::operation::put_records::PutRecordsOutput;
use aws_sdk_kinesis::primitives::{Blob, DateTime};
use aws_sdk_kinesis::types::{
    HashKeyRange, PutRecordsResultEntry, Record as KinesisRecord, SequenceNumberRange, Shard,
    ShardIteratorType,
};
use aws_smithy_mocks::{MockResponse, Rule, RuleMode, mock};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use sluice_engine::ack::{AckStatus, AckTag, AckTracker};
use sluice_engine::batch::BatchLimits;
use sluice_engine::settings::BatchSettings;
use sluice_engine::{Key, Message, StatefulTransform};

use super::readback::{ReadBack, hash_key};
use super::tests::{batch, kinesis, kinesis_on};
use super::*;
use crate::kv_store::memory::MemoryStore;
use crate::send::batcher::Undelivered;

/// Reading without waits, as far back as the default.
const QUICK: ReadBack = ReadBack {
    skew: ReadBack::DEFAULT.skew,
    settle: Duration::ZERO,
    pace: Duration::ZERO,
    concurrency: 4,
};

/// What the fake does with a `PutRecords` call.
#[derive(Debug, Clone, Copy)]
enum Put {
    /// Puts every record and answers where they landed.
    Apply,
    /// Puts the first `n` records (the rest never arrived), then answers 500.
    ApplyThen500(usize),
}

struct FakeShard {
    id: String,
    hashes: (u128, u128),
    parent: Option<String>,
    open: bool,
    /// (partition key, data, sequence number, arrival ms).
    records: Vec<(String, Vec<u8>, String, i64)>,
}

/// A Kinesis stream behind the SDK's mocks.
#[derive(Default)]
struct Fake {
    shards: Vec<FakeShard>,
    /// What the next `PutRecords` calls do (then [`Put::Apply`]).
    plan: VecDeque<Put>,
    next_seq: u64,
    /// What each `PutRecords` call carried: (partition key, data).
    puts: Vec<Vec<(String, String)>>,
    /// Each `GetShardIterator`: (shard, its `AT_TIMESTAMP` in ms).
    iterators: Vec<(String, Option<i64>)>,
    /// Each `ListShards`: (its token, whether it named the stream).
    lists: Vec<(Option<String>, bool)>,
    /// `ListShards` calls to refuse (access denied), then answer.
    refuse_lists: usize,
    /// Shards per `ListShards` page (0: all).
    list_page: usize,
    /// `GetRecords` calls to throttle, then answer.
    throttle_reads: usize,
    /// Records per `GetRecords` page.
    read_page: usize,
}

type Shared = Arc<Mutex<Fake>>;

impl Fake {
    /// A stream of `n` open shards splitting the hash keys evenly.
    fn new(n: u128) -> Fake {
        let width = u128::MAX / n;
        let shards = (0..n)
            .map(|i| FakeShard {
                id: format!("shardId-{i:012}"),
                hashes: (
                    i * width,
                    if i == n - 1 {
                        u128::MAX
                    } else {
                        (i + 1) * width - 1
                    },
                ),
                parent: None,
                open: true,
                records: Vec::new(),
            })
            .collect();
        Fake {
            shards,
            read_page: 2,
            ..Fake::default()
        }
    }

    /// A stream resharded from one shard into two: the closed parent holds what was put
    /// before; children take what comes after.
    fn resharded() -> Fake {
        let mut f = Fake::new(1);
        f.shards[0].open = false;
        let half = u128::MAX / 2;
        for (i, (lo, hi)) in [(0, half), (half + 1, u128::MAX)].into_iter().enumerate() {
            f.shards.push(FakeShard {
                id: format!("shardId-{:012}", i + 1),
                hashes: (lo, hi),
                parent: Some("shardId-000000000000".into()),
                open: true,
                records: Vec::new(),
            });
        }
        f
    }

    /// Stores a record in the shard that takes `key` (closed ones when `closed`), arriving
    /// at `arrival_ms`: where it landed.
    fn store(&mut self, key: &str, data: &[u8], arrival_ms: i64, closed: bool) -> String {
        self.next_seq += 1;
        let seq = format!("{:020}", self.next_seq);
        let h = hash_key(key);
        let shard = self
            .shards
            .iter_mut()
            .find(|s| s.open != closed && (s.hashes.0..=s.hashes.1).contains(&h))
            .expect("a shard takes every key");
        shard
            .records
            .push((key.into(), data.to_vec(), seq.clone(), arrival_ms));
        format!("{}/{seq}", shard.id)
    }

    /// Every record's data in the stream, as text, sorted.
    fn datas(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .shards
            .iter()
            .flat_map(|s| s.records.iter())
            .map(|r| String::from_utf8_lossy(&r.1).into_owned())
            .collect();
        all.sort();
        all
    }
}

fn http(status: u16, body: &str) -> HttpResponse {
    HttpResponse::new(
        StatusCode::try_from(status).unwrap(),
        SdkBody::from(body.to_string()),
    )
}

/// The mock rules that make `fake` a Kinesis.
fn rules(fake: &Shared) -> Vec<Rule> {
    let f = fake.clone();
    let put = mock!(Client::put_records).then_compute_response(move |req| {
        let mut f = f.lock().unwrap();
        let entries: Vec<(String, Vec<u8>)> = req
            .records()
            .iter()
            .map(|e| {
                (
                    e.partition_key().unwrap_or_default().to_string(),
                    e.data().as_ref().to_vec(),
                )
            })
            .collect();
        f.puts.push(
            entries
                .iter()
                .map(|(k, d)| (k.clone(), String::from_utf8_lossy(d).into_owned()))
                .collect(),
        );
        let (applied, answer) = match f.plan.pop_front().unwrap_or(Put::Apply) {
            Put::Apply => (entries.len(), true),
            Put::ApplyThen500(n) => (n, false),
        };
        let now = now_ms();
        let landed: Vec<String> = entries[..applied]
            .iter()
            .map(|(k, d)| f.store(k, d, now, false))
            .collect();
        if !answer {
            return MockResponse::Http(http(500, r#"{"__type":"InternalFailure"}"#));
        }
        let records = landed
            .iter()
            .map(|l| {
                let (shard, seq) = l.split_once('/').unwrap();
                PutRecordsResultEntry::builder()
                    .shard_id(shard)
                    .sequence_number(seq)
                    .build()
            })
            .collect();
        MockResponse::Output(
            PutRecordsOutput::builder()
                .failed_record_count(0)
                .set_records(Some(records))
                .build()
                .unwrap(),
        )
    });
    let f = fake.clone();
    let list = mock!(Client::list_shards).then_compute_response(move |req| {
        let mut f = f.lock().unwrap();
        f.lists.push((
            req.next_token().map(String::from),
            req.stream_arn().is_some() || req.stream_name().is_some(),
        ));
        if f.refuse_lists > 0 {
            f.refuse_lists -= 1;
            return MockResponse::Http(http(
                400,
                r#"{"__type":"AccessDeniedException","message":"no"}"#,
            ));
        }
        let start: usize = req
            .next_token()
            .map_or(0, |t| t.trim_start_matches("page-").parse().unwrap());
        let size = if f.list_page == 0 {
            f.shards.len()
        } else {
            f.list_page
        };
        let end = (start + size).min(f.shards.len());
        let shards = f.shards[start..end]
            .iter()
            .map(|s| {
                let mut seqs = SequenceNumberRange::builder().starting_sequence_number("0");
                if !s.open {
                    seqs = seqs.ending_sequence_number("99999999999999999999");
                }
                Shard::builder()
                    .shard_id(&s.id)
                    .set_parent_shard_id(s.parent.clone())
                    .hash_key_range(
                        HashKeyRange::builder()
                            .starting_hash_key(s.hashes.0.to_string())
                            .ending_hash_key(s.hashes.1.to_string())
                            .build()
                            .unwrap(),
                    )
                    .sequence_number_range(seqs.build().unwrap())
                    .build()
                    .unwrap()
            })
            .collect();
        MockResponse::Output(
            ListShardsOutput::builder()
                .set_shards(Some(shards))
                .set_next_token((end < f.shards.len()).then(|| format!("page-{end}")))
                .build(),
        )
    });
    let f = fake.clone();
    let iterator = mock!(Client::get_shard_iterator).then_compute_output(move |req| {
        let mut f = f.lock().unwrap();
        let shard = req.shard_id().unwrap_or_default().to_string();
        let at = req.timestamp().map(|t| t.to_millis().unwrap());
        f.iterators.push((shard.clone(), at));
        let s = f
            .shards
            .iter()
            .find(|s| s.id == shard)
            .expect("a known shard");
        let pos = match req.shard_iterator_type() {
            Some(ShardIteratorType::AtTimestamp) => s
                .records
                .iter()
                .position(|r| r.3 >= at.unwrap())
                .unwrap_or(s.records.len()),
            Some(ShardIteratorType::AfterSequenceNumber) => {
                let after = req.starting_sequence_number().unwrap();
                s.records.iter().position(|r| r.2 == after).unwrap() + 1
            }
            other => panic!("unexpected iterator type {other:?}"),
        };
        GetShardIteratorOutput::builder()
            .shard_iterator(format!("{shard}#{pos}"))
            .build()
    });
    let f = fake.clone();
    let read = mock!(Client::get_records).then_compute_response(move |req| {
        let mut f = f.lock().unwrap();
        if f.throttle_reads > 0 {
            f.throttle_reads -= 1;
            return MockResponse::Http(http(
                400,
                r#"{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded"}"#,
            ));
        }
        let (shard, pos) = req.shard_iterator().unwrap().split_once('#').unwrap();
        let pos: usize = pos.parse().unwrap();
        let s = f.shards.iter().find(|s| s.id == shard).unwrap();
        let end = (pos + f.read_page).min(s.records.len());
        let records = s.records[pos..end]
            .iter()
            .map(|(k, d, seq, at)| {
                KinesisRecord::builder()
                    .partition_key(k)
                    .data(Blob::new(d.clone()))
                    .sequence_number(seq)
                    .approximate_arrival_timestamp(DateTime::from_millis(*at))
                    .build()
                    .unwrap()
            })
            .collect();
        let done = end == s.records.len();
        MockResponse::Output(
            GetRecordsOutput::builder()
                .set_records(Some(records))
                // A closed shard read to its end has no next iterator.
                .set_next_shard_iterator((!done || s.open).then(|| format!("{shard}#{end}")))
                .millis_behind_latest(if done { 0 } else { 1000 })
                .build()
                .unwrap(),
        )
    });
    vec![put, list, iterator, read]
}

/// A send to `fake` with keys `keys`.
fn send_to(fake: &Shared, keys: PartitionKeys, aggregate: bool) -> Kinesis {
    let rules = rules(fake);
    let refs: Vec<&Rule> = rules.iter().collect();
    kinesis(keys, aggregate, &refs).with_readback(QUICK)
}

/// A send to `fake` whose client makes one attempt per call (the SDK's mocks cannot
/// compute a retry's answer from its request).
fn send_once_to(fake: &Shared, keys: PartitionKeys) -> Kinesis {
    let rules = rules(fake);
    let refs: Vec<&Rule> = rules.iter().collect();
    let client = aws_smithy_mocks::mock_client!(aws_sdk_kinesis, RuleMode::MatchAny, &refs, |b| b
        .retry_config(aws_sdk_kinesis::config::retry::RetryConfig::disabled()));
    kinesis_on(keys, false, client).with_readback(QUICK)
}

/// The clock skew margin, in ms.
fn skew() -> i64 {
    QUICK.skew.as_millis() as i64
}

fn by_user() -> PartitionKeys {
    PartitionKeys::Field(Key::parse("u").unwrap())
}

/// A lock ticket on `key`, taken a second ago; `prior`: since when an earlier owner may
/// have delivered it. The key a record carries is its data (as a lock on the whole of a
/// message's data would read it), so a record proves its message when its data is the key.
fn ticket(key: &str, prior: Option<i64>) -> Arc<LockTicket> {
    Arc::new(
        LockTicket::new(
            key.into(),
            2_000_000_000,
            now_ms() - 1000,
            prior.map(|since| (since, Default::default())),
            Arc::new(MemoryStore::new(NonZeroUsize::new(8).unwrap())),
            "me".into(),
            std::time::Instant::now(),
            None,
        )
        .with_key_of(Some(Arc::new(|d: &[u8]| {
            Some(String::from_utf8_lossy(d).into_owned())
        }))),
    )
}

/// `items`, item `i` under the tickets `locks[i]`.
fn locked(items: &[&str], locks: &[Vec<Arc<LockTicket>>]) -> Outgoing {
    Outgoing {
        locks: ItemLocks::PerItem(locks.to_vec()),
        ..batch("", items)
    }
}

fn datas(call: &[(String, String)]) -> Vec<&str> {
    call.iter().map(|(_, d)| d.as_str()).collect()
}

#[tokio::test]
async fn an_ambiguous_answer_resends_only_what_the_stream_lacks() {
    let fake: Shared = Arc::new(Mutex::new(Fake::new(1)));
    fake.lock().unwrap().plan = [Put::ApplyThen500(2)].into();
    let k = send_to(&fake, PartitionKeys::Random, false);
    let t: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .map(|d| ticket(d, None))
        .collect();
    let b = locked(
        &["a", "b", "c", "d"],
        &t.iter().map(|t| vec![t.clone()]).collect::<Vec<_>>(),
    );
    k.send(&b).await.unwrap();
    let f = fake.lock().unwrap();
    assert_eq!(f.puts.len(), 2);
    assert_eq!(datas(&f.puts[1]), ["c", "d"], "a and b were found");
    assert_eq!(f.puts[1][0].0, f.puts[0][2].0, "sent again under its key");
    assert_eq!(f.datas(), ["a", "b", "c", "d"], "each once");
    // Read back from before the first attempt, less the clock skew margin.
    let (_, at) = &f.iterators[0];
    assert!(at.unwrap() <= now_ms() - skew(), "{at:?}");
    // Every item notes where it landed, found or put.
    let notes: Vec<String> = t.iter().map(|t| t.note().unwrap()).collect();
    let seqs: Vec<&str> = f.shards[0].records.iter().map(|r| r.2.as_str()).collect();
    for (n, seq) in notes.iter().zip(seqs) {
        assert_eq!(*n, format!("shardId-000000000000/{seq}"));
    }
}

/// Records that cannot be told apart from other messages' (no lock, or a lock whose key they
/// do not carry): after an ambiguous answer they are sent again as they are, so that one
/// that did not land is never lost for another message's identical record in the stream.
#[tokio::test]
async fn an_ambiguous_answer_resends_what_cannot_be_told_apart() {
    for locks in [None, Some(["k0", "k1", "k2"])] {
        let fake: Shared = Arc::new(Mutex::new(Fake::new(1)));
        fake.lock().unwrap().plan = [Put::ApplyThen500(2)].into();
        let k = send_to(&fake, PartitionKeys::Random, false);
        let items = ["a", "b", "c"];
        let b = match locks {
            None => batch("", &items),
            Some(keys) => locked(&items, &keys.map(|key| vec![ticket(key, None)])),
        };
        k.send(&b).await.unwrap();
        let f = fake.lock().unwrap();
        assert!(f.lists.is_empty(), "nothing read back: {locks:?}");
        assert_eq!(datas(&f.puts[1]), items, "all sent again: {locks:?}");
        assert_eq!(f.datas(), ["a", "a", "b", "b", "c"], "{locks:?}");
    }
}

#[tokio::test]
async fn an_ambiguous_answer_that_applied_nothing_resends_everything_once() {
    let fake: Shared = Arc::new(Mutex::new(Fake::new(2)));
    fake.lock().unwrap().plan = [Put::ApplyThen500(0)].into();
    let k = send_to(&fake, by_user(), false);
    let items = [r#"{"u":"a"}"#, r#"{"u":"b"}"#, r#"{"u":"a","n":2}"#];
    k.send(&batch("", &items)).await.unwrap();
    let f = fake.lock().unwrap();
    assert_eq!(f.puts.len(), 2);
    assert_eq!(datas(&f.puts[1]), items);
    let mut want: Vec<String> = items.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(f.datas(), want);
}

#[tokio::test]
async fn a_failed_read_back_leaves_the_records_uncertain() {
    let fake: Shared = Arc::new(Mutex::new(Fake::new(1)));
    {
        let mut f = fake.lock().unwrap();
        f.plan = [Put::ApplyThen500(1)].into();
        f.refuse_lists = 1;
    }
    let k = send_to(&fake, PartitionKeys::Random, false);
    let e = k
        .send(&locked(
            &["a", "b"],
            &[vec![ticket("a", None)], vec![ticket("b", None)]],
        ))
        .await
        .unwrap_err();
    assert!(e.uncertain, "the first record may be in the stream");
    assert_eq!(e.undelivered, Undelivered::Items(vec![0, 1]));
    let text = e.error.to_string();
    assert!(
        text.contains("kinesis stream events: PutRecords failed"),
        "{text}"
    );
    assert!(
        text.contains("reading the stream back failed: ListShards failed"),
        "{text}"
    );
    assert_eq!(fake.lock().unwrap().puts.len(), 1, "nothing sent blindly");
}

#[tokio::test]
async fn a_taken_over_record_already_in_the_stream_is_not_sent_again() {
    let t0 = now_ms() - 60_000;
    let x = r#"{"u":"x","n":1}"#;
    let y = r#"{"u":"y","n":2}"#;
    // Resharded since: the earlier owner's record sits in the closed parent.
    let fake: Shared = Arc::new(Mutex::new(Fake::resharded()));
    let landed = fake
        .lock()
        .unwrap()
        .store("x", x.as_bytes(), t0 + 500, true);
    let k = send_to(&fake, by_user(), false);
    let (tx, ty) = (ticket(x, Some(t0)), ticket(y, None));
    k.send(&locked(&[x, y], &[vec![tx.clone()], vec![ty.clone()]]))
        .await
        .unwrap();
    let f = fake.lock().unwrap();
    assert_eq!(f.puts.len(), 1);
    assert_eq!(datas(&f.puts[0]), [y], "only the record not found");
    assert_eq!(tx.note(), Some(landed), "found: noted where it is");
    assert!(ty.note().unwrap().starts_with("shardId-"), "put: noted");
    // Only the shards that take x's key: the closed parent and one child, from T0 less the
    // skew margin.
    let child = if hash_key("x") <= u128::MAX / 2 {
        "shardId-000000000001"
    } else {
        "shardId-000000000002"
    };
    let mut read: Vec<_> = f.iterators.clone();
    read.sort();
    assert_eq!(
        read,
        vec![
            ("shardId-000000000000".to_string(), Some(t0 - skew())),
            (child.to_string(), Some(t0 - skew())),
        ]
    );
}

#[tokio::test]
async fn aggregated_records_are_matched_per_user_record() {
    let t0 = now_ms() - 10_000;
    let (x1, x2) = (r#"{"u":"x","n":1}"#, r#"{"u":"x","n":2}"#);
    let fake: Shared = Arc::new(Mutex::new(Fake::new(1)));
    // The earlier attempt aggregated x1 with a record of another message.
    let agg =
        sluice_platform::kpl::aggregate(&[("x", br#"{"u":"x","n":0}"#), ("x", x1.as_bytes())]);
    let landed = fake.lock().unwrap().store("x", &agg, t0 + 1, false);
    let k = send_to(&fake, by_user(), true);
    let (t1, t2) = (ticket(x1, Some(t0)), ticket(x2, Some(t0)));
    k.send(&locked(&[x1, x2], &[vec![t1.clone()], vec![t2.clone()]]))
        .await
        .unwrap();
    let f = fake.lock().unwrap();
    assert_eq!(f.puts.len(), 1);
    assert_eq!(datas(&f.puts[0]), [x2], "a lone record is sent plain");
    assert_eq!(t1.note(), Some(landed));
    assert_ne!(t2.note(), t1.note());
}

#[tokio::test]
async fn identical_items_need_as_many_records() {
    // Two copies of one message (the same lock): one found, one sent.
    let t0 = now_ms() - 10_000;
    let x = r#"{"u":"x"}"#;
    let fake: Shared = Arc::new(Mutex::new(Fake::new(1)));
    fake.lock().unwrap().store("x", x.as_bytes(), t0 + 1, false);
    let k = send_to(&fake, by_user(), false);
    let t = ticket(x, Some(t0));
    k.send(&locked(&[x, x], &[vec![t.clone()], vec![t]]))
        .await
        .unwrap();
    let f = fake.lock().unwrap();
    assert_eq!(datas(&f.puts[0]), [x], "one found, one sent");
    assert_eq!(f.datas(), [x, x]);
}

/// The issue's finding 4: a message taken over after a crash, whose record is byte for byte
/// another message's (a status event, a mapping that dropped the event id), was taken for
/// delivered on the strength of the other's record, and never sent. A record that does not
/// carry its message's lock key is not looked for: it is sent.
#[tokio::test]
async fn another_messages_identical_record_is_never_taken_for_this_ones() {
    let t0 = now_ms() - 10_000;
    let status = r#"{"u":"h1","status":"ok"}"#;
    let fake: Shared = Arc::new(Mutex::new(Fake::new(1)));
    // Another message (lock key "evt-1") put the same bytes after this one's first attempt.
    fake.lock()
        .unwrap()
        .store("h1", status.as_bytes(), t0 + 1, false);
    let k = send_to(&fake, by_user(), false);
    let t = ticket("evt-2", Some(t0));
    k.send(&locked(&[status], &[vec![t.clone()]]))
        .await
        .unwrap();
    let f = fake.lock().unwrap();
    assert!(
        f.iterators.is_empty(),
        "not read back: it could not be told apart"
    );
    assert_eq!(datas(&f.puts[0]), [status], "sent");
    assert_eq!(f.datas(), [status, status], "one per message");
}

#[tokio::test]
async fn random_keys_are_matched_by_data_over_every_shard_of_every_page() {
    let t0 = now_ms() - 10_000;
    let fake: Shared = Arc::new(Mutex::new(Fake::new(3)));
    {
        let mut f = fake.lock().unwrap();
        f.list_page = 1;
        // Older than T0 less the margin: not read.
        f.store("old", b"q", t0 - 60_000, false);
        // Under another random key, earlier: whichever shard it went to.
        f.store("5d9c3b0e-0000-4000-8000-000000000000", b"m", t0 + 1, false);
        f.store("other", b"n", t0 + 2, false);
    }
    let k = send_to(&fake, PartitionKeys::Random, false);
    let locks = [vec![ticket("m", Some(t0))], vec![ticket("q", Some(t0))]];
    k.send(&locked(&["m", "q"], &locks)).await.unwrap();
    let f = fake.lock().unwrap();
    assert_eq!(datas(&f.puts[0]), ["q"]);
    assert_eq!(
        f.lists,
        vec![
            (None, true),
            (Some("page-1".into()), false),
            (Some("page-2".into()), false)
        ],
        "a page after the first is named by its token alone"
    );
    let mut read: Vec<&str> = f.iterators.iter().map(|(s, _)| s.as_str()).collect();
    read.sort();
    assert_eq!(
        read,
        [
            "shardId-000000000000",
            "shardId-000000000001",
            "shardId-000000000002"
        ]
    );
}

#[tokio::test]
async fn throttled_reads_back_off_and_go_on() {
    let t0 = now_ms() - 10_000;
    let fake: Shared = Arc::new(Mutex::new(Fake::new(1)));
    {
        let mut f = fake.lock().unwrap();
        f.read_page = 1;
        for i in 0..5 {
            f.store("x", format!("r{i}").as_bytes(), t0 + i, false);
        }
        // The SDK retries throttling (not here: see `send_once_to`), then the read-back
        // backs off and tries again itself.
        f.throttle_reads = 2;
    }
    let k = send_once_to(&fake, PartitionKeys::Random);
    let t = ticket("r4", Some(t0));
    k.send(&locked(&["r4"], &[vec![t.clone()]])).await.unwrap();
    let f = fake.lock().unwrap();
    assert!(f.puts.is_empty(), "found after 5 pages");
    assert_eq!(t.note().unwrap(), f.store_note(4));
}

impl Fake {
    /// The landing of the `i`th record of the first shard.
    fn store_note(&self, i: usize) -> String {
        format!("{}/{}", self.shards[0].id, self.shards[0].records[i].2)
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_uncertain_failure_is_checked_before_the_send_tries_again() {
    let fake: Shared = Arc::new(Mutex::new(Fake::new(1)));
    {
        let mut f = fake.lock().unwrap();
        // Applied, then 500; and the read-back of that call fails.
        f.plan = [Put::ApplyThen500(1)].into();
        f.refuse_lists = 1;
    }
    let s = Sender::from_parts(
        send_to(&fake, PartitionKeys::Random, false),
        BatchLimits::from(BatchSettings::default()),
        MAX_DATA_BYTES,
        None,
        None,
    );
    let t = ticket("a", None);
    let tag: AckTag = t.clone();
    let (tracker, token) = AckTracker::watched(Some(tag), None);
    let mut m = Message::new(b"a".to_vec());
    m.add_ack(token);
    s.transform(m, &mut Vec::new()).await.unwrap();
    let e = s
        .transform(Message::ctrl(), &mut Vec::new())
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("reading the stream back failed"),
        "{e}"
    );
    assert!(tracker.uncertain());
    assert_eq!(t.read_back_since(), Some(t.taken_ms));
    // The retry looks first, finds it, and does not send it again.
    s.transform(Message::ctrl(), &mut Vec::new()).await.unwrap();
    assert_eq!(tracker.status(), AckStatus::Delivered);
    let f = fake.lock().unwrap();
    assert_eq!(f.puts.len(), 1);
    assert_eq!(f.datas(), ["a"]);
    assert_eq!(t.note().unwrap(), f.store_note(0));
}

/// A loopback endpoint that reads each request, notes its operation (`X-Amz-Target`) and
/// closes the connection without answering: a call whose outcome the client cannot know.
async fn dropping_endpoint() -> (String, Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let s = s.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_lowercase();
                let op = head
                    .lines()
                    .find_map(|l| l.strip_prefix("x-amz-target:"))
                    .and_then(|t| t.trim().rsplit('.').next().map(str::to_string))
                    .unwrap_or_default();
                s.lock().unwrap().push(op);
            });
        }
    });
    (url, seen, task)
}

/// A send to the stream at `endpoint` through the SDK's real HTTP client.
fn send_to_endpoint(endpoint: &str) -> Kinesis {
    use aws_sdk_kinesis::config::retry::RetryConfig;
    use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
    let conf = aws_sdk_kinesis::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("eu-west-1"))
        .credentials_provider(Credentials::new("a", "b", None, None, "test"))
        .endpoint_url(endpoint)
        .http_client(sluice_platform::aws::https_client())
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(2)
                .with_initial_backoff(Duration::from_millis(1)),
        )
        .build();
    kinesis_on(PartitionKeys::Random, false, Client::from_conf(conf)).with_readback(QUICK)
}

#[tokio::test]
async fn a_call_lost_after_sending_is_not_sent_again_blindly() {
    let (url, seen, task) = dropping_endpoint().await;
    let e = send_to_endpoint(&url)
        .send(&locked(&["a"], &[vec![ticket("a", None)]]))
        .await
        .unwrap_err();
    task.abort();
    assert!(e.uncertain, "{}", e.error);
    let text = e.error.to_string();
    assert!(
        text.contains("reading the stream back failed: ListShards failed"),
        "{text}"
    );
    let seen = seen.lock().unwrap();
    let puts = seen.iter().filter(|op| *op == "putrecords").count();
    assert_eq!(puts, 1, "one attempt, then a read-back: {seen:?}");
    assert_eq!(
        seen.iter().filter(|op| *op == "listshards").count(),
        2,
        "the read-back's calls are retried by the SDK: {seen:?}"
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_certain_failure() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = send_to_endpoint(&format!("http://127.0.0.1:{port}"))
        .send(&batch("", &["a"]))
        .await
        .unwrap_err();
    assert!(!e.uncertain, "never sent: {}", e.error);
    assert!(
        e.error.to_string().contains("PutRecords failed"),
        "{}",
        e.error
    );
}
