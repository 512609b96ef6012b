//! Taking and committing locks with PartiQL statements (`lock_acquire: 'statements'`)
//! against mocked responses: what the consistent read decides for each key, what each
//! statement's error means (read again and decided, sent again, failed alone), a call the
//! SDK sent twice, commits whose condition failed, read back, and the `UPDATE` form a
//! service that refuses AWS's documented one gets (`dialect.rs`). The same store against
//! the emulator passes the contract in `tests/kv_store_dynamodb.rs`.

use aws_sdk_dynamodb::operation::batch_execute_statement::{
    BatchExecuteStatementError, BatchExecuteStatementInput, BatchExecuteStatementOutput,
};
use aws_sdk_dynamodb::operation::batch_get_item::{BatchGetItemInput, BatchGetItemOutput};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsOutput;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::{
    BatchStatementError, BatchStatementErrorCodeEnum as Code, BatchStatementResponse,
};
use aws_smithy_mocks::{MockResponse, Rule, RuleMode, mock};

use super::lock::ACQUIRE_CONDITION;
use super::tests::{ARN, NOW_MS, commits, meta, mine, n, req, s, store_from, value};
use super::*;
use crate::kv_store::{Acquired, LockStore, Prior, Settled};

/// A store taking locks with statements whose client answers with `rules` (any order),
/// the SDK trying each call up to `attempts` times.
fn store(rules: &[&Rule], attempts: u32) -> DynamoDbStore {
    let settings = value(&format!(
        r#"{{"aws": {{"arn": "{ARN}"}}, "attributes": {{"partition_key": "PK"}}, "lock_acquire": "statements"}}"#
    ));
    store_from(&settings, RuleMode::MatchAny, rules, attempts)
}

/// A lock item for `key`.
fn item(
    key: &str,
    owner: &str,
    status: &str,
    lease: i64,
    ttl: i64,
) -> HashMap<String, AttributeValue> {
    let mut item = HashMap::new();
    item.insert("PK".to_string(), s(key));
    item.insert("ttl".to_string(), n(ttl));
    item.insert("lock_owner".to_string(), s(owner));
    item.insert("lock_status".to_string(), s(status));
    if status == PENDING {
        item.insert("lock_lease_until".to_string(), n(lease));
        item.insert("lock_since".to_string(), n(NOW_MS - 9_000));
    }
    item
}

/// The keys a `BatchGetItem` asks for.
fn read_keys(r: &BatchGetItemInput) -> Vec<String> {
    r.request_items().unwrap()["locks"]
        .keys()
        .iter()
        .map(|k| k["PK"].as_s().unwrap().clone())
        .collect()
}

/// A `BatchGetItem` answered from `items` (by key), checking that it reads consistently.
fn reads(items: Vec<HashMap<String, AttributeValue>>) -> Rule {
    mock!(Client::batch_get_item)
        .match_requests(|r| r.request_items().unwrap()["locks"].consistent_read() == Some(true))
        .then_compute_output(move |r| {
            let asked = read_keys(r);
            let found: Vec<_> = items
                .iter()
                .filter(|i| asked.contains(i["PK"].as_s().unwrap()))
                .cloned()
                .collect();
            BatchGetItemOutput::builder()
                .responses("locks", found)
                .build()
        })
}

/// The key (first parameter of an `INSERT`, the key parameter of an `UPDATE`) of each
/// statement.
fn statement_keys(r: &BatchExecuteStatementInput) -> Vec<String> {
    r.statements()
        .iter()
        .map(|st| {
            let p = st.parameters();
            let at = if st.statement().starts_with("INSERT") {
                0
            } else {
                p.len() - 3
            };
            p[at].as_s().unwrap().clone()
        })
        .collect()
}

fn ok() -> BatchStatementResponse {
    BatchStatementResponse::builder()
        .table_name("locks")
        .build()
}

fn failed(code: Code) -> BatchStatementResponse {
    BatchStatementResponse::builder()
        .error(
            BatchStatementError::builder()
                .code(code)
                .message("from the mock")
                .build(),
        )
        .build()
}

fn answers(responses: Vec<BatchStatementResponse>) -> BatchExecuteStatementOutput {
    BatchExecuteStatementOutput::builder()
        .set_responses(Some(responses))
        .build()
}

#[tokio::test]
async fn a_piece_is_one_consistent_read_then_insert_statements_of_up_to_twenty_five() {
    // The store's first piece is read; once it has seen that keys are new, the next
    // pieces are written unread (`first_read.rs`).
    let read = reads(Vec::new());
    let seen: std::sync::Arc<std::sync::Mutex<Vec<BatchExecuteStatementInput>>> =
        Default::default();
    let sn = seen.clone();
    let write = mock!(Client::batch_execute_statement)
        .match_requests(move |r| {
            sn.lock().unwrap().push(r.clone());
            true
        })
        .then_compute_output(|r| answers(r.statements().iter().map(|_| ok()).collect()));
    let store = store(&[&read, &write], 1);
    let reqs: Vec<_> = (0..230).map(|i| req(&format!("k{i}"))).collect();
    let got = store.acquire("me", NOW_MS, &reqs[..100], 32).await;
    assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    assert_eq!(read.num_calls(), 1, "one read of 100 keys");
    assert_eq!(write.num_calls(), 4, "4 calls of 25");
    let got = store.acquire("me", NOW_MS, &reqs[100..], 32).await;
    assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    assert_eq!(read.num_calls(), 1, "none of 100 new keys existed: no read");
    assert_eq!(write.num_calls(), 10, "4 + 2 calls of up to 25");
    let seen = seen.lock().unwrap();
    assert!(seen.iter().all(|c| c.statements().len() <= 25));
    let mut all: Vec<String> = seen.iter().flat_map(statement_keys).collect();
    all.sort();
    let mut want: Vec<String> = (0..230).map(|i| format!("k{i}")).collect();
    want.sort();
    assert_eq!(all, want, "each key written once");
    let first = &seen[0].statements()[0];
    assert_eq!(
        first.statement(),
        "INSERT INTO \"locks\" VALUE {'PK': ?, 'lock_owner': ?, 'lock_status': ?, \
         'lock_lease_until': ?, 'ttl': ?, 'lock_since': ?}"
    );
    assert_eq!(
        &first.parameters()[1..],
        &[
            s("me"),
            s("pending"),
            n(NOW_MS + 60_000),
            n(NOW_MS / 1000 + 600),
            n(NOW_MS)
        ]
    );
}

/// k1..k5 as the tests of what decides each key find them (k0 is absent): committed and
/// live, another owner's live lease, a lapsed lease, committed and past its TTL, our own.
fn five_records(live: i64) -> Vec<HashMap<String, AttributeValue>> {
    vec![
        item("k1", "them", COMMITTED, 0, NOW_MS / 1000 + 10),
        item("k2", "them", PENDING, live, NOW_MS / 1000 + 60),
        item("k3", "them", PENDING, NOW_MS - 1, NOW_MS / 1000 + 60),
        item("k4", "them", COMMITTED, 0, NOW_MS / 1000),
        item("k5", "me", PENDING, live, NOW_MS / 1000 + 60),
    ]
}

/// k3 (a lapsed lease) and k5 (our own) taken alone, whose old item tells it.
fn taken_alone() -> Rule {
    mock!(Client::update_item)
        .match_requests(|r| r.condition_expression() == Some(ACQUIRE_CONDITION))
        .then_compute_output(|r| {
            let key = r.key().unwrap()["PK"].as_s().unwrap().clone();
            let old = match key.as_str() {
                "k3" => item("k3", "them", PENDING, NOW_MS - 1, NOW_MS / 1000 + 60),
                _ => item("k5", "me", PENDING, NOW_MS + 30_000, NOW_MS / 1000 + 60),
            };
            UpdateItemOutput::builder()
                .set_attributes(Some(old))
                .build()
        })
}

/// k0..k5 asked for by "me" at `NOW_MS`.
async fn six_acquired(store: &DynamoDbStore) -> Vec<Acquired> {
    let reqs: Vec<_> = (0..6).map(|i| req(&format!("k{i}"))).collect();
    store
        .acquire("me", NOW_MS, &reqs, 4)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

/// What k0..k5 of [`five_records`] come to: k0 and k4 taken fresh, k1 a duplicate, k2
/// held, k3 and k5 taken over.
fn assert_six_decided(got: &[Acquired], live: i64) {
    assert_eq!(got[0], Acquired::FRESH);
    assert!(
        matches!(&got[1], Acquired::Held(Some(r)) if r.owner == "them" && r.status == LockStatus::Committed),
        "{:?}",
        got[1]
    );
    assert!(
        matches!(&got[2], Acquired::Held(Some(r)) if r.lease_until_ms() == Some(live)),
        "{:?}",
        got[2]
    );
    let prior = |owner: &str| Acquired::Taken {
        prior: Some(Prior {
            owner: owner.into(),
            since_ms: NOW_MS - 9_000,
            progress: Default::default(),
        }),
    };
    assert_eq!(got[3], prior("them"));
    assert_eq!(got[4], Acquired::FRESH);
    assert_eq!(got[5], prior("me"));
}

#[tokio::test]
async fn what_the_read_found_decides_each_key() {
    let live = NOW_MS + 30_000;
    let read = reads(five_records(live));
    // k0 is absent: inserted; k4 is committed and past its TTL: updated on condition.
    let write = mock!(Client::batch_execute_statement)
        .match_requests(|r| {
            let st = r.statements();
            statement_keys(r) == ["k0", "k4"]
                && st[0].statement().starts_with("INSERT")
                && st[1].statement()
                    == "UPDATE \"locks\" SET \"lock_owner\" = ? SET \"lock_status\" = ? \
                        SET \"lock_lease_until\" = ? SET \"ttl\" = ? SET \"lock_since\" = ? \
                        REMOVE \"lock_note\" WHERE \"PK\" = ? AND (\"lock_status\" IS MISSING OR \
                        \"lock_status\" <> ?) AND \"ttl\" <= ?"
                && st[1].parameters()[6..] == [s("pending"), n(NOW_MS / 1000)]
        })
        .then_output(|| answers(vec![ok(), ok()]));
    // k3 (a lapsed lease) and k5 (our own) are taken alone.
    let alone = taken_alone();
    let store = store(&[&read, &write, &alone], 1);
    let got = six_acquired(&store).await;
    assert_six_decided(&got, live);
    assert_eq!(
        (read.num_calls(), write.num_calls(), alone.num_calls()),
        (1, 1, 2)
    );
}

#[tokio::test]
async fn written_unread_a_key_that_exists_is_refused_read_and_decided_as_if_read_first() {
    let live = NOW_MS + 30_000;
    let exists: Vec<String> = (1..6).map(|i| format!("k{i}")).collect();
    let read = reads(five_records(live));
    let seen: std::sync::Arc<std::sync::Mutex<Vec<Vec<String>>>> = Default::default();
    let sn = seen.clone();
    // An INSERT of a key that exists is refused, as DynamoDB refuses it.
    let write = mock!(Client::batch_execute_statement)
        .match_requests(move |r| {
            sn.lock().unwrap().push(
                r.statements()
                    .iter()
                    .zip(statement_keys(r))
                    .map(|(st, k)| format!("{} {k}", &st.statement()[..6]))
                    .collect(),
            );
            true
        })
        .then_compute_output(move |r| {
            let keys = statement_keys(r);
            answers(
                r.statements()
                    .iter()
                    .zip(keys)
                    .map(|(st, k)| {
                        match st.statement().starts_with("INSERT") && exists.contains(&k) {
                            true => failed(Code::DuplicateItem),
                            false => ok(),
                        }
                    })
                    .collect(),
            )
        });
    let alone = taken_alone();
    let store = store(&[&read, &write, &alone], 1);
    // A piece of new keys: the store learns that keys are new.
    let new: Vec<_> = (0..100).map(|i| req(&format!("new{i}"))).collect();
    store.acquire("me", NOW_MS, &new, 4).await;
    assert_eq!((read.num_calls(), write.num_calls()), (1, 4));
    seen.lock().unwrap().clear();
    let got = six_acquired(&store).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [
            vec![
                "INSERT k0",
                "INSERT k1",
                "INSERT k2",
                "INSERT k3",
                "INSERT k4",
                "INSERT k5"
            ],
            vec!["UPDATE k4"]
        ],
        "every key inserted unread, then k4 (committed, past its TTL) updated"
    );
    assert_six_decided(&got, live);
    assert_eq!(
        read.num_calls(),
        2,
        "the refused keys read once, strongly consistent"
    );
    assert_eq!(alone.num_calls(), 2);
    // 5 of the 106 keys asked for existed: under a sixth, still written first.
    assert!(!store.first_read.read_first(1.0));
}

/// `BatchGetItem`s answered from `first`, then (every read after) from `then`.
fn reads_then(
    first: Vec<HashMap<String, AttributeValue>>,
    then: Vec<HashMap<String, AttributeValue>>,
) -> Rule {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    mock!(Client::batch_get_item)
        .match_requests(|r| r.request_items().unwrap()["locks"].consistent_read() == Some(true))
        .then_compute_output(move |r| {
            let items = match calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => &first,
                _ => &then,
            };
            let asked = read_keys(r);
            let found: Vec<_> = items
                .iter()
                .filter(|i| asked.contains(i["PK"].as_s().unwrap()))
                .cloned()
                .collect();
            BatchGetItemOutput::builder()
                .responses("locks", found)
                .build()
        })
}

#[tokio::test]
async fn an_insert_that_finds_the_item_is_taken_alone() {
    // Another owner took k1 between the read and the write: its lease ended since, so
    // the key is taken over alone, and the old item says from whom.
    let read = reads_then(Vec::new(), vec![item("k1", "them", PENDING, NOW_MS - 1, 0)]);
    let write = mock!(Client::batch_execute_statement)
        .then_output(|| answers(vec![ok(), failed(Code::DuplicateItem)]));
    let alone = mock!(Client::update_item)
        .match_requests(|r| r.key().unwrap()["PK"] == s("k1"))
        .then_output(|| {
            UpdateItemOutput::builder()
                .set_attributes(Some(item("k1", "them", PENDING, NOW_MS - 1, 0)))
                .build()
        });
    let store = store(&[&read, &write, &alone], 1);
    let got = store
        .acquire("me", NOW_MS, &[req("k0"), req("k1")], 4)
        .await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    assert!(
        matches!(got[1].as_ref().unwrap(), Acquired::Taken { prior: Some(p) } if p.owner == "them"),
        "{:?}",
        got[1]
    );
    assert_eq!((read.num_calls(), alone.num_calls()), (2, 1));
}

#[tokio::test]
async fn a_throttled_statement_is_sent_again_alone() {
    let read = reads(Vec::new());
    let write = mock!(Client::batch_execute_statement)
        .sequence()
        .output(|| answers(vec![ok(), failed(Code::ProvisionedThroughputExceeded)]))
        .output(|| answers(vec![ok()]))
        .build();
    let store = store(&[&read, &write], 1);
    let got = store
        .acquire("me", NOW_MS, &[req("k0"), req("k1")], 4)
        .await;
    assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    assert_eq!(write.num_calls(), 2);
}

#[tokio::test]
async fn a_refused_statement_fails_its_key_alone() {
    let read = reads(Vec::new());
    let write = mock!(Client::batch_execute_statement)
        .then_output(|| answers(vec![ok(), failed(Code::ValidationError), ok()]));
    let alone = mock!(Client::update_item).then_compute_response(|r| {
        assert_eq!(
            r.key().unwrap()["PK"],
            s("k1"),
            "only the refused key alone"
        );
        MockResponse::Error(UpdateItemError::generic(meta("ValidationException")))
    });
    let store = store(&[&read, &write, &alone], 1);
    let got = store
        .acquire("me", NOW_MS, &[req("k0"), req("k1"), req("k2")], 4)
        .await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    let e = got[1].as_ref().unwrap_err().to_string();
    assert!(
        e.starts_with("aws_dynamodb table locks: acquiring key \"k1\": "),
        "{e}"
    );
    assert_eq!(got[2].as_ref().unwrap(), &Acquired::FRESH);
    // Refused as a whole (the read): every key alone.
    let refused = mock!(Client::batch_get_item).then_error(|| {
        aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemError::generic(meta(
            "ValidationException",
        ))
    });
    let alone = mock!(Client::update_item).then_output(|| UpdateItemOutput::builder().build());
    let store = self::store(&[&refused, &alone], 1);
    let got = store
        .acquire("me", NOW_MS, &[req("k0"), req("k1")], 4)
        .await;
    assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    assert_eq!(alone.num_calls(), 2);
}

/// Acquires k1 where the statement call answers `first`, then (the SDK's retry) a
/// `DuplicateItem`; the read after it, and the key taken alone if it is, find `found`.
/// Also says how many times the key was taken alone.
async fn acquire_after(
    first: Option<u16>,
    found: HashMap<String, AttributeValue>,
) -> (Acquired, usize) {
    let read = reads_then(Vec::new(), vec![found.clone()]);
    let write = match first {
        Some(status) => mock!(Client::batch_execute_statement)
            .sequence()
            .http_status(
                status,
                Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}"#.into()),
            )
            .output(|| answers(vec![failed(Code::DuplicateItem)]))
            .build(),
        None => mock!(Client::batch_execute_statement)
            .then_output(|| answers(vec![failed(Code::DuplicateItem)])),
    };
    let alone = mock!(Client::update_item).then_output(move || {
        UpdateItemOutput::builder()
            .set_attributes(Some(found.clone()))
            .build()
    });
    let store = store(&[&read, &write, &alone], 2);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
    assert_eq!(
        read.num_calls(),
        2,
        "the piece's read, then the changed key's"
    );
    (got.into_iter().next().unwrap().unwrap(), alone.num_calls())
}

#[tokio::test]
async fn a_retried_call_whose_first_attempt_wrote_the_record_took_the_key_fresh() {
    // The first attempt inserted the record and its answer was lost (a 500); the SDK's
    // retry found the item: the read after it finds exactly this request's record, taken
    // fresh without an UpdateItem.
    assert_eq!(acquire_after(Some(500), mine()).await, (Acquired::FRESH, 0));
    let retake = |since_ms| Acquired::Taken {
        prior: Some(Prior {
            owner: "me".into(),
            since_ms,
            progress: Default::default(),
        }),
    };
    // Without a retry, the same record is an earlier request's: a retake, taken alone.
    assert_eq!(acquire_after(None, mine()).await, (retake(NOW_MS), 1));
    // After a retry, this owner's record of another lease is an earlier acquisition's: a
    // retake.
    let mut other_lease = mine();
    other_lease.insert("lock_lease_until".into(), n(NOW_MS + 59_999));
    assert_eq!(
        acquire_after(Some(500), other_lease).await,
        (retake(NOW_MS), 1)
    );
    // This owner and lease, but a chain begun earlier: not this statement's write (it
    // begins a chain now), taken alone, whose old item tells the takeover.
    let mut earlier = mine();
    earlier.insert("lock_since".into(), n(NOW_MS - 1));
    assert_eq!(
        acquire_after(Some(500), earlier).await,
        (retake(NOW_MS - 1), 1)
    );
    // A record of another owner after a retry is still theirs.
    let theirs = item("k1", "them", PENDING, NOW_MS - 1, 0);
    assert!(matches!(
        acquire_after(Some(500), theirs).await,
        (Acquired::Taken { prior: Some(p) }, 1) if p.owner == "them"
    ));
    // Another owner's record of the same lease and instant, live: held.
    let mut theirs = mine();
    theirs.insert("lock_owner".into(), s("them"));
    assert!(matches!(
        acquire_after(Some(500), theirs).await,
        (Acquired::Held(Some(r)), 0) if r.owner == "them"
    ));
}

#[tokio::test]
async fn a_lost_answer_costs_one_read_not_an_update_per_key() {
    // The first attempt of the call inserted all three records and its answer was lost;
    // the SDK's retry finds each item: one read of the three, each taken fresh.
    let mine = |key: &str| {
        let mut m = mine();
        m.insert("PK".into(), s(key));
        m
    };
    let read = reads_then(Vec::new(), vec![mine("k0"), mine("k1"), mine("k2")]);
    let write = mock!(Client::batch_execute_statement)
        .sequence()
        .http_status(
            500,
            Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}"#.into()),
        )
        .output(|| answers(vec![failed(Code::DuplicateItem); 3]))
        .build();
    let alone = mock!(Client::update_item).then_output(|| UpdateItemOutput::builder().build());
    let store = store(&[&read, &write, &alone], 2);
    let reqs: Vec<_> = (0..3).map(|i| req(&format!("k{i}"))).collect();
    let got = store.acquire("me", NOW_MS, &reqs, 4).await;
    assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    assert_eq!(
        (read.num_calls(), write.num_calls(), alone.num_calls()),
        (2, 2, 0)
    );
}

#[tokio::test]
async fn a_changed_key_is_decided_by_a_read_of_it() {
    // k0: another owner inserted it first, live: held, with their record. k1: inserted
    // by another owner and deleted since: inserted again. k2: committed and past its TTL
    // when read again: updated again. Nothing is taken alone.
    let read = reads_then(
        Vec::new(),
        vec![
            item("k0", "them", PENDING, NOW_MS + 30_000, NOW_MS / 1000 + 60),
            item("k2", "them", COMMITTED, 0, NOW_MS / 1000 - 1),
        ],
    );
    let seen: std::sync::Arc<std::sync::Mutex<Vec<Vec<String>>>> = Default::default();
    let sn = seen.clone();
    let write = mock!(Client::batch_execute_statement).then_compute_output(move |r| {
        let mut seen = sn.lock().unwrap();
        seen.push(
            statement_keys(r)
                .into_iter()
                .zip(forms(r))
                .map(|(k, f)| format!("{k} {f}"))
                .collect(),
        );
        match seen.len() {
            1 => answers(vec![failed(Code::DuplicateItem); 3]),
            _ => answers(r.statements().iter().map(|_| ok()).collect()),
        }
    });
    let alone = mock!(Client::update_item).then_output(|| UpdateItemOutput::builder().build());
    let store = store(&[&read, &write, &alone], 1);
    let reqs: Vec<_> = (0..3).map(|i| req(&format!("k{i}"))).collect();
    let got = store.acquire("me", NOW_MS, &reqs, 4).await;
    assert!(
        matches!(got[0].as_ref().unwrap(), Acquired::Held(Some(r)) if r.owner == "them"),
        "{:?}",
        got[0]
    );
    assert_eq!(got[1].as_ref().unwrap(), &Acquired::FRESH);
    assert_eq!(got[2].as_ref().unwrap(), &Acquired::FRESH);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            vec!["k0 insert", "k1 insert", "k2 insert"],
            vec!["k1 insert", "k2 documented"],
        ]
    );
    assert_eq!((read.num_calls(), alone.num_calls()), (2, 0));
}

#[tokio::test(start_paused = true)]
async fn a_key_changed_at_every_attempt_is_taken_alone() {
    // Inserted and deleted by others between each read and write: written again up to
    // the store's attempts, then taken alone.
    let read = reads(Vec::new());
    let write = mock!(Client::batch_execute_statement)
        .then_output(|| answers(vec![failed(Code::DuplicateItem)]));
    let alone = mock!(Client::update_item).then_output(|| UpdateItemOutput::builder().build());
    let store = store(&[&read, &write, &alone], 1);
    let got = store.acquire("me", NOW_MS, &[req("k0")], 4).await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    assert_eq!(write.num_calls() as u32, super::lock::STORE_ATTEMPTS);
    assert_eq!(alone.num_calls(), 1);
}

#[tokio::test]
async fn a_changed_key_whose_read_fails_is_taken_alone() {
    let read = mock!(Client::batch_get_item)
        .sequence()
        .output(|| BatchGetItemOutput::builder().build())
        .error(|| {
            aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemError::generic(meta(
                "AccessDeniedException",
            ))
        })
        .build();
    let write = mock!(Client::batch_execute_statement)
        .then_output(|| answers(vec![failed(Code::DuplicateItem)]));
    let alone = mock!(Client::update_item).then_output(|| UpdateItemOutput::builder().build());
    let store = store(&[&read, &write, &alone], 1);
    let got = store.acquire("me", NOW_MS, &[req("k0")], 4).await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    assert_eq!((read.num_calls(), alone.num_calls()), (2, 1));
}

#[tokio::test]
async fn commits_are_statements_and_failed_conditions_are_read_back() {
    let write = mock!(Client::batch_execute_statement)
        .match_requests(|r| {
            let st = &r.statements()[0];
            st.statement()
                == "UPDATE \"locks\" SET \"lock_status\" = ? SET \"ttl\" = ? REMOVE \
                    \"lock_lease_until\" REMOVE \"lock_since\" REMOVE \"lock_progress\" WHERE \"PK\" = ? \
                    AND \"lock_owner\" = ? AND \"lock_status\" = ?"
                && st.parameters()
                    == [
                        s("committed"),
                        n(NOW_MS / 1000 + 600),
                        s("k0"),
                        s("me"),
                        s("pending"),
                    ]
        })
        .then_output(|| {
            answers(vec![
                ok(),
                failed(Code::ConditionalCheckFailed),
                failed(Code::ConditionalCheckFailed),
                failed(Code::ConditionalCheckFailed),
            ])
        });
    // k1: committed by us already (a retried call); k2: taken over by them; k3: gone.
    let read = mock!(Client::batch_get_item)
        .match_requests(|r| {
            read_keys(r) == ["k1", "k2", "k3"]
                && r.request_items().unwrap()["locks"].consistent_read() == Some(true)
        })
        .then_output(|| {
            BatchGetItemOutput::builder()
                .responses(
                    "locks",
                    vec![
                        item("k1", "me", COMMITTED, 0, NOW_MS / 1000 + 600),
                        item("k2", "them", PENDING, NOW_MS + 60_000, NOW_MS / 1000 + 600),
                    ],
                )
                .build()
        });
    let store = store(&[&write, &read], 1);
    let got = store.commit("me", &commits(4), 4).await.unwrap();
    assert_eq!(got[0], Settled::Ok);
    assert_eq!(got[1], Settled::Ok, "ours already");
    assert!(
        matches!(&got[2], Settled::NotOwner(Some(r)) if r.owner == "them"),
        "{:?}",
        got[2]
    );
    assert_eq!(got[3], Settled::NotOwner(None));
    assert_eq!((write.num_calls(), read.num_calls()), (1, 1));
}

#[tokio::test]
async fn commits_the_statements_cannot_settle_go_in_a_transaction() {
    // A statement refused, and one whose condition failed although the record read back is
    // still ours and pending: both committed in a transaction, as in the other modes.
    let write = mock!(Client::batch_execute_statement).then_output(|| {
        answers(vec![
            failed(Code::ValidationError),
            ok(),
            failed(Code::ConditionalCheckFailed),
        ])
    });
    let read = reads(vec![item("k2", "me", PENDING, NOW_MS + 60_000, 0)]);
    let tx = mock!(Client::transact_write_items)
        .match_requests(|r| {
            let keys: Vec<_> = r
                .transact_items()
                .iter()
                .map(|i| i.update().unwrap().key()["PK"].as_s().unwrap().clone())
                .collect();
            keys == ["k0", "k2"]
        })
        .then_output(|| TransactWriteItemsOutput::builder().build());
    let store = store(&[&write, &read, &tx], 1);
    let got = store.commit("me", &commits(3), 4).await.unwrap();
    assert_eq!(got, vec![Settled::Ok; 3]);
    assert_eq!(tx.num_calls(), 1);
    // A call refused as a whole: every key of it in a transaction.
    let refused = mock!(Client::batch_execute_statement)
        .then_error(|| BatchExecuteStatementError::generic(meta("ValidationException")));
    let tx = mock!(Client::transact_write_items)
        .then_output(|| TransactWriteItemsOutput::builder().build());
    let store = self::store(&[&refused, &tx], 1);
    assert_eq!(
        store.commit("me", &commits(2), 4).await.unwrap(),
        vec![Settled::Ok; 2]
    );
    assert_eq!(tx.num_calls(), 1);
}

/// The form of each statement of a call: `INSERT`, or an `UPDATE` in AWS's documented
/// form (repeated clauses) or in comma lists.
fn forms(r: &BatchExecuteStatementInput) -> Vec<&'static str> {
    r.statements()
        .iter()
        .map(|st| match st.statement() {
            t if t.starts_with("INSERT") => "insert",
            t if t.matches(" SET ").count() > 1 => "documented",
            t => {
                assert!(t.contains(" = ?, "), "{t}");
                "comma"
            }
        })
        .collect()
}

/// A service whose PartiQL reads the `UPDATE` forms in `reads` (and every `INSERT`),
/// refusing the others as dynoxide refuses the documented form; every call's forms go to
/// `seen`.
fn speaking(
    reads: &'static [&'static str],
    seen: std::sync::Arc<std::sync::Mutex<Vec<Vec<&'static str>>>>,
) -> Rule {
    mock!(Client::batch_execute_statement).then_compute_output(move |r| {
        let forms = forms(r);
        seen.lock().unwrap().push(forms.clone());
        answers(
            forms
                .into_iter()
                .map(|f| match f == "insert" || reads.contains(&f) {
                    true => ok(),
                    false => BatchStatementResponse::builder()
                        .error(
                            BatchStatementError::builder()
                                .code(Code::ValidationError)
                                .message("UPDATE requires a WHERE clause")
                                .build(),
                        )
                        .build(),
                })
                .collect(),
        )
    })
}

/// A read finding `k1` committed and past its TTL (taken with an `UPDATE`), `k0` absent.
fn k1_committed_long_ago() -> Rule {
    reads(vec![item("k1", "them", COMMITTED, 0, NOW_MS / 1000 - 1)])
}

#[tokio::test]
async fn the_documented_form_is_kept_where_the_service_reads_it() {
    let seen = Default::default();
    let write = speaking(&["documented", "comma"], std::sync::Arc::clone(&seen));
    let read = k1_committed_long_ago();
    let store = store(&[&write, &read], 1);
    for _ in 0..2 {
        assert_eq!(
            store.commit("me", &commits(2), 4).await.unwrap(),
            vec![Settled::Ok; 2]
        );
    }
    let got = store
        .acquire("me", NOW_MS, &[req("k0"), req("k1")], 4)
        .await;
    assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    assert_eq!(
        *seen.lock().unwrap(),
        [
            vec!["documented"; 2],
            vec!["documented"; 2],
            vec!["insert", "documented"],
        ]
    );
}

#[tokio::test]
async fn a_service_that_refuses_the_documented_form_gets_the_comma_form_from_then_on() {
    // Commits: the refused statements are sent again at once in comma lists, not
    // committed in a transaction (there is none to answer); the next commit is written in
    // comma lists from the start, and so is an acquisition's UPDATE.
    let seen = Default::default();
    let write = speaking(&["comma"], std::sync::Arc::clone(&seen));
    let read = k1_committed_long_ago();
    let store = store(&[&write, &read], 1);
    for _ in 0..2 {
        assert_eq!(
            store.commit("me", &commits(2), 4).await.unwrap(),
            vec![Settled::Ok; 2]
        );
    }
    let got = store
        .acquire("me", NOW_MS, &[req("k0"), req("k1")], 4)
        .await;
    assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    assert_eq!(
        *seen.lock().unwrap(),
        [
            vec!["documented"; 2],
            vec!["comma"; 2],
            vec!["comma"; 2],
            vec!["insert", "comma"],
        ]
    );
    // Acquisitions first: the refused UPDATE is sent again in comma lists, not taken alone
    // (there is no UpdateItem to answer).
    let seen = Default::default();
    let write = speaking(&["comma"], std::sync::Arc::clone(&seen));
    let read = k1_committed_long_ago();
    let store = self::store(&[&write, &read], 1);
    for _ in 0..2 {
        let got = store
            .acquire("me", NOW_MS, &[req("k0"), req("k1")], 4)
            .await;
        assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::FRESH));
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            vec!["insert", "documented"],
            vec!["comma"],
            vec!["insert", "comma"],
        ]
    );
}

#[tokio::test]
async fn a_service_that_refuses_both_forms_gets_the_other_modes_calls() {
    let seen = Default::default();
    let write = speaking(&[], std::sync::Arc::clone(&seen));
    let read = k1_committed_long_ago();
    let tx = mock!(Client::transact_write_items)
        .then_output(|| TransactWriteItemsOutput::builder().build());
    let alone = mock!(Client::update_item)
        .match_requests(|r| r.key().unwrap()["PK"] == s("k1"))
        .then_output(|| {
            UpdateItemOutput::builder()
                .set_attributes(Some(item("k1", "them", COMMITTED, 0, NOW_MS / 1000 - 1)))
                .build()
        });
    let store = store(&[&write, &read, &tx, &alone], 1);
    // Both forms tried once, then committed in a transaction; after that, no UPDATE
    // statement is sent: commits go in transactions, a committed key is taken alone.
    for _ in 0..2 {
        assert_eq!(
            store.commit("me", &commits(2), 4).await.unwrap(),
            vec![Settled::Ok; 2]
        );
    }
    assert_eq!(tx.num_calls(), 2);
    let got = store
        .acquire("me", NOW_MS, &[req("k0"), req("k1")], 4)
        .await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    assert_eq!(
        got[1].as_ref().unwrap(),
        &Acquired::FRESH,
        "a committed key"
    );
    assert_eq!(alone.num_calls(), 1);
    assert_eq!(
        *seen.lock().unwrap(),
        [vec!["documented"; 2], vec!["comma"; 2], vec!["insert"]]
    );
}

#[test]
fn statements_need_attribute_names_without_quotes() {
    let e = DynamoDbStore::from_settings(&value(
        r#"{"aws": {"arn": "locks"}, "attributes": {"partition_key": "P\"K"}, "lock_acquire": "statements"}"#,
    ))
    .unwrap_err();
    assert!(
        e.starts_with(
            "kv_store.settings.attributes.partition_key: attribute name \"P\\\"K\" has a quote"
        ),
        "{e}"
    );
    // The other modes name attributes by placeholders: any name goes.
    assert!(
        DynamoDbStore::from_settings(&value(
            r#"{"aws": {"arn": "locks"}, "attributes": {"partition_key": "P'K"}}"#,
        ))
        .is_ok()
    );
}
