//! The epoch commit and its fence, and the per-key changes' conditions on the owner's
//! epoch and slot.

use super::*;

/// Commit requests for `keys`.
fn commits_of(keys: &[&str]) -> Vec<CommitRequest> {
    keys.iter()
        .map(|k| CommitRequest {
            key: k.to_string(),
            ttl: LIVE_TTL,
            note: None,
        })
        .collect()
}

/// A store that took `k0..kN` fresh in its epoch 0 (slots 0..N) as `me`, whose
/// `UpdateItem`s are answered by `answer`: the store, the log, the `UpdateItem`s and the
/// transactions sent.
async fn holding(
    keys: usize,
    answer: impl Fn(&UpdateItemInput) -> MockResponse<UpdateItemOutput, UpdateItemError>
    + Send
    + Sync
    + 'static,
) -> (
    DynamoDbStore,
    Log,
    Arc<Mutex<Vec<UpdateItemInput>>>,
    Arc<Mutex<Vec<TransactWriteItemsInput>>>,
) {
    let log = Log::default();
    let (seen, txs) = (Arc::default(), Arc::default());
    let read = reads(vec![], Some(vec![]), &log);
    let write = statements(&log);
    let update = updates(&log, &seen, answer);
    let tx = transactions(&log, &txs);
    let store = store(&[&read, &write, &update, &tx], 1);
    let reqs: Vec<_> = (0..keys).map(|i| req(&format!("k{i}"))).collect();
    let got = store.acquire("me", NOW_MS, &reqs, 4).await;
    assert!(got.iter().all(|g| g.as_ref().unwrap() == &Acquired::FRESH));
    log.lock().unwrap().clear();
    (store, log, seen, txs)
}

fn committed_slots(u: &UpdateItemInput) -> Vec<u32> {
    let mut got: Vec<u32> = match value_of(u, ":slots") {
        AttributeValue::Ns(ns) => ns.iter().map(|s| s.parse().unwrap()).collect(),
        other => panic!("{other:?}"),
    };
    got.sort_unstable();
    got
}

#[tokio::test]
async fn one_update_commits_the_keys_of_an_epoch_on_its_abort_counter() {
    let (store, log, seen, _) = holding(3, |_| updated()).await;
    let got = store
        .commit("me", &commits_of(&["k0", "k1", "k2"]), 4)
        .await
        .unwrap();
    assert_eq!(got, vec![Settled::Ok; 3]);
    assert_eq!(logged(&log), ["update #epoch:me:0"]);
    let u = &seen.lock().unwrap()[0];
    assert_eq!(
        u.update_expression(),
        Some("ADD #committed :slots SET #ttl = :ttl")
    );
    assert_eq!(
        u.condition_expression(),
        Some("attribute_not_exists(#v) OR #v = :v")
    );
    assert_eq!(value_of(u, ":v"), n(0));
    assert_eq!(value_of(u, ":ttl"), n(LIVE_TTL));
    assert_eq!(committed_slots(u), [0, 1, 2]);
    // Committed: in no ledger any more, so a later release or abandonment is refused
    // (the record is pending in the epoch, which these never change).
    assert_eq!(store.epochs.slot_of("me", "k0"), None);
}

#[tokio::test]
async fn a_commit_that_finds_slots_aborted_commits_them_on_their_records_never_in_the_epoch() {
    // k0..k5 in epoch 0. Slot 1 (committed now) and slot 5 (not committed in this call:
    // the model's finding) were aborted by takers: the first epoch commit fails on
    // `lock_v` and its old item says so.
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let (store, log, seen, txs) = holding(6, move |u| {
        assert_eq!(pk(u.key().unwrap()), "#epoch:me:0");
        match calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => MockResponse::Error(ccf(Some(epoch_item("me", 0, &[], &[1, 5], 2, LIVE_TTL)))),
            _ => updated(),
        }
    })
    .await;
    let got = store
        .commit("me", &commits_of(&["k0", "k1", "k2"]), 4)
        .await
        .unwrap();
    assert_eq!(got, vec![Settled::Ok; 3]);
    assert_eq!(
        logged(&log),
        ["update #epoch:me:0", "update #epoch:me:0", "transaction k1"]
    );
    {
        let seen = seen.lock().unwrap();
        assert_eq!(committed_slots(&seen[0]), [0, 1, 2]);
        assert_eq!(value_of(&seen[0], ":v"), n(0));
        // Sent again without the aborted slot, on the counter it found.
        assert_eq!(committed_slots(&seen[1]), [0, 2]);
        assert_eq!(value_of(&seen[1], ":v"), n(2));
        assert_eq!(seen[1].condition_expression(), Some("#v = :v"));
    }
    // k1 committed on its record, conditional on this owner, epoch and slot, and taken
    // out of the epoch.
    let (condition, values) = condition_of(&txs.lock().unwrap()[0].transact_items()[0]);
    assert_eq!(
        condition,
        "#owner = :me AND #status = :epoch AND #epoch = :e AND #slot = :s"
    );
    assert_eq!(
        (
            values[":me"].clone(),
            values[":e"].clone(),
            values[":s"].clone()
        ),
        (s("me"), n(0), n(1))
    );
    let update = txs.lock().unwrap()[0].transact_items()[0]
        .update()
        .unwrap()
        .update_expression()
        .to_string();
    assert!(
        update.contains("REMOVE") && update.ends_with("#epoch, #slot"),
        "{update}"
    );
    // Later in the same epoch: k5's slot was aborted (reported by the failed commit
    // although not committed then), so it goes on its record, never in the epoch; k3 goes
    // in the epoch with the counter learnt.
    log.lock().unwrap().clear();
    let got = store
        .commit("me", &commits_of(&["k5", "k3"]), 4)
        .await
        .unwrap();
    assert_eq!(got, vec![Settled::Ok; 2]);
    let mut calls = logged(&log);
    calls.sort();
    assert_eq!(calls, ["transaction k5", "update #epoch:me:0"]);
    let seen = seen.lock().unwrap();
    let last = seen.last().unwrap();
    assert_eq!(committed_slots(last), [3]);
    assert_eq!(value_of(last, ":v"), n(2));
    let (_, values) = condition_of(&txs.lock().unwrap()[1].transact_items()[0]);
    assert_eq!(values[":s"], n(5));
}

#[tokio::test]
async fn an_aborted_slot_taken_over_is_refused_on_its_record_and_not_put_in_the_epoch() {
    // The slot was aborted and the taker's key write landed: the commit on the record is
    // refused with the taker's record, and nothing goes in the epoch for it.
    let log = Log::default();
    let seen = Arc::default();
    let read = reads(vec![], Some(vec![]), &log);
    let write = statements(&log);
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let update = updates(&log, &seen, move |_| {
        match calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => MockResponse::Error(ccf(Some(epoch_item("me", 0, &[], &[0], 1, LIVE_TTL)))),
            _ => panic!("nothing more in the epoch"),
        }
    });
    let taker = key_item("k0", "them", Some((4, 0)), NOW_MS + 60_000, LIVE_TTL);
    let refused = mock!(Client::transact_write_items).then_error(move || {
        super::tests::cancelled(&[("ConditionalCheckFailed", Some(taker.clone()))])
    });
    let store = store(&[&read, &write, &update, &refused], 1);
    let got = store.acquire("me", NOW_MS, &[req("k0")], 4).await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    let got = store.commit("me", &commits_of(&["k0"]), 4).await.unwrap();
    assert!(
        matches!(&got[0], Settled::NotOwner(Some(r)) if r.owner == "them"),
        "{got:?}"
    );
    assert_eq!(refused.num_calls(), 1);
    assert_eq!(store.epochs.slot_of("me", "k0"), None);
}

/// The conditions of a renewal, a release, an abandonment and a recorded progress of
/// `key`, in that order.
async fn changes_of(store: &DynamoDbStore, key: &str) -> Vec<Settled> {
    let renew = store
        .renew(
            "me",
            &[RenewRequest {
                key: key.into(),
                ttl: LIVE_TTL,
                lease_until_ms: NOW_MS + 90_000,
            }],
            4,
        )
        .await
        .unwrap();
    let progress = AbandonRequest {
        key: key.into(),
        progress: Progress::from_entries(["s1:0"]),
    };
    let record = store
        .record("me", std::slice::from_ref(&progress), 4)
        .await
        .unwrap();
    let abandon = store
        .abandon("me", std::slice::from_ref(&progress), 4)
        .await
        .unwrap();
    [renew, record, abandon].concat()
}

#[tokio::test]
async fn per_key_changes_of_a_key_held_in_an_epoch_name_its_epoch_and_slot() {
    let (store, _, _, txs) = holding(3, |_| updated()).await;
    let got = changes_of(&store, "k2").await;
    assert_eq!(got, vec![Settled::Ok; 3]);
    let release = store.release("me", &["k1".to_string()], 4).await.unwrap();
    assert_eq!(release, vec![Settled::Ok]);
    let txs = txs.lock().unwrap();
    assert_eq!(txs.len(), 4);
    for (i, tx) in txs.iter().enumerate() {
        let (condition, values) = condition_of(&tx.transact_items()[0]);
        assert_eq!(
            condition, "#owner = :me AND #status = :epoch AND #epoch = :e AND #slot = :s",
            "change {i}"
        );
        let slot = if i == 3 { 1 } else { 2 };
        assert_eq!(
            (
                values[":epoch"].clone(),
                values[":e"].clone(),
                values[":s"].clone()
            ),
            (s(EPOCH), n(0), n(slot)),
            "change {i}"
        );
    }
    // The abandonment takes the key out of its epoch: pending, outside it.
    let abandon = txs[2].transact_items()[0].update().unwrap();
    assert!(
        abandon.update_expression().contains("#status = :pending")
            && abandon
                .update_expression()
                .ends_with("REMOVE #epoch, #slot"),
        "{}",
        abandon.update_expression()
    );
    assert!(txs[3].transact_items()[0].delete().is_some());
    // Released and abandoned: in no ledger any more.
    assert_eq!(store.epochs.slot_of("me", "k1"), None);
    assert_eq!(store.epochs.slot_of("me", "k2"), None);
    // A transactional send's write names the epoch and slot too.
    let shared = Arc::new(store);
    let ticket = LockTicket::new(
        "k0".into(),
        LIVE_TTL,
        NOW_MS,
        None,
        shared.clone(),
        "me".into(),
        std::time::Instant::now(),
        None,
    );
    for progress in [Progress::default(), Progress::from_entries(["s0:0"])] {
        let write = shared.co_progress_write(&ticket, &progress).unwrap();
        let (condition, values) = condition_of(&write);
        assert_eq!(
            condition,
            "#owner = :me AND #status = :epoch AND #epoch = :e AND #slot = :s"
        );
        assert_eq!((values[":e"].clone(), values[":s"].clone()), (n(0), n(0)));
    }
}

#[tokio::test]
async fn after_its_epoch_commit_a_key_is_released_or_abandoned_by_no_one() {
    // Committed in the epoch: the changes are conditional on a pending record outside any
    // epoch, which its record (pending in the epoch) fails: refused with the record.
    let log = Log::default();
    let (seen, txs) = (
        Arc::default(),
        Arc::<Mutex<Vec<TransactWriteItemsInput>>>::default(),
    );
    let read = reads(vec![], Some(vec![]), &log);
    let write = statements(&log);
    let update = updates(&log, &seen, |_| updated());
    let record = key_item("k0", "me", Some((0, 0)), NOW_MS + 60_000, LIVE_TTL);
    let txs2 = txs.clone();
    let refused = mock!(Client::transact_write_items).then_compute_response(move |r| {
        txs2.lock().unwrap().push(r.clone());
        MockResponse::Error(super::tests::cancelled(&[(
            "ConditionalCheckFailed",
            Some(record.clone()),
        )]))
    });
    let store = store(&[&read, &write, &update, &refused], 1);
    let got = store.acquire("me", NOW_MS, &[req("k0")], 4).await;
    assert_eq!(got[0].as_ref().unwrap(), &Acquired::FRESH);
    let got = store.commit("me", &commits_of(&["k0"]), 4).await.unwrap();
    assert_eq!(got, vec![Settled::Ok]);
    let release = store.release("me", &["k0".to_string()], 4).await.unwrap();
    let abandon = store
        .abandon(
            "me",
            &[AbandonRequest {
                key: "k0".into(),
                progress: Progress::default(),
            }],
            4,
        )
        .await
        .unwrap();
    for got in [release, abandon] {
        assert!(
            matches!(&got[0], Settled::NotOwner(Some(r)) if r.owner == "me"),
            "{got:?}"
        );
    }
    for tx in txs.lock().unwrap().iter() {
        let (condition, values) = condition_of(&tx.transact_items()[0]);
        assert_eq!(condition, "#owner = :me AND #status = :pending");
        assert_eq!(values[":pending"], s(PENDING));
    }
}

#[tokio::test]
async fn a_committed_key_is_a_duplicate_until_its_epochs_ttl_whatever_its_own_record_says() {
    // The key record's TTL is the one it was taken with (`ttl_offset` from when it was
    // taken); its commit counted the window from the commit (`commit_ttl`), later, and
    // wrote it on the epoch only. Between the two the key is still committed: a
    // duplicate, not a key taken as new.
    let taken_long_ago = key_item(
        "k1",
        "them",
        Some((THEIR_EPOCH, THEIR_SLOT)),
        NOW_MS - 600_000,
        PAST_TTL,
    );
    let epoch = epoch_item("them", THEIR_EPOCH, &[THEIR_SLOT], &[], 0, LIVE_TTL);
    let (got, log, _) = acquire_k1(taken_long_ago.clone(), Some(vec![epoch]), |_| {
        panic!("no write")
    })
    .await;
    assert!(
        matches!(&got, Acquired::Held(Some(r)) if r.status == LockStatus::Committed && r.ttl == LIVE_TTL),
        "{got:?}"
    );
    assert!(
        !log.iter().any(|l| l.starts_with("statements")),
        "not taken by a statement: {log:?}"
    );
    // Its epoch's window passed too: taken as new.
    let epoch = epoch_item("them", THEIR_EPOCH, &[THEIR_SLOT], &[], 0, PAST_TTL);
    let (got, _, _) = acquire_k1(taken_long_ago, Some(vec![epoch]), |_| updated()).await;
    assert_eq!(got, Acquired::FRESH);
}

#[tokio::test]
async fn a_retried_statement_trusts_only_a_record_in_its_own_epoch_and_slot() {
    // The statement call was sent twice (a 500, then `DuplicateItem`); the read after it
    // finds this owner's record with this lease and instant, but in epoch 5: another
    // piece's write (the same key in two pieces of one call), not this statement's. Taken
    // as this piece's, the ledger would commit the key in epoch 0 while its record names
    // epoch 5, where it is never committed. It is settled through epoch 5 instead.
    let mut other_piece = key_item("k1", "me", Some((5, 0)), NOW_MS + 60_000, LIVE_TTL);
    other_piece.insert("lock_since".into(), n(NOW_MS));
    other_piece.remove("lock_progress");
    let log = Log::default();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let (l, found) = (log.clone(), other_piece.clone());
    let read = mock!(Client::batch_get_item).then_compute_output(move |r| {
        let asked = r.request_items().unwrap()["locks"].clone();
        let consistent = asked.consistent_read() == Some(true);
        let keys: Vec<String> = asked.keys().iter().map(pk).collect();
        let what = match keys.iter().all(|k| k.starts_with("#epoch:")) {
            true if !consistent => "read-epochs",
            _ => "read",
        };
        l.lock().unwrap().push(format!("{what} {}", keys.join(",")));
        let epochs = keys.iter().all(|k| k.starts_with("#epoch:"));
        let items = match epochs || calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            true => vec![],
            false => vec![found.clone()],
        };
        BatchGetItemOutput::builder()
            .responses("locks", items)
            .build()
    });
    let write = mock!(Client::batch_execute_statement)
        .sequence()
        .http_status(
            500,
            Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}"#.into()),
        )
        .output(|| {
            BatchExecuteStatementOutput::builder()
                .responses(
                    BatchStatementResponse::builder()
                        .error(
                            aws_sdk_dynamodb::types::BatchStatementError::builder()
                                .code(aws_sdk_dynamodb::types::BatchStatementErrorCodeEnum::DuplicateItem)
                                .message("from the mock")
                                .build(),
                        )
                        .build(),
                )
                .build()
        })
        .build();
    let seen = Arc::default();
    let update = updates(&log, &seen, move |u| match pk(u.key().unwrap()).as_str() {
        "k1" => old(other_piece.clone()),
        _ => updated(),
    });
    let store = store(&[&read, &write, &update], 2);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 4).await;
    assert!(
        matches!(got[0].as_ref().unwrap(), Acquired::Taken { prior: Some(p) } if p.owner == "me"),
        "{got:?}"
    );
    assert_eq!(
        logged(&log),
        [
            "read k1",
            "read k1",
            "read-epochs #epoch:me:5",
            "update #epoch:me:5",
            "update k1"
        ]
    );
    assert_eq!(
        store.epochs.slot_of("me", "k1"),
        Some(EpochSlot { epoch: 0, slot: 0 })
    );
}

#[tokio::test]
async fn a_commit_again_of_a_key_committed_in_its_epoch_is_ok_and_of_one_not_committed_is_not() {
    // Committed in epoch 0 already, so in no ledger: committed again (a commit call the
    // keeper retried as a whole, say), it goes as a plain key; its statement and then the
    // transaction find the owner's record pending in an epoch, and a strongly consistent
    // read of that epoch says whether it is committed there.
    for (committed, want_ok) in [(&[0u32][..], true), (&[][..], false)] {
        let log = Log::default();
        let record = key_item("k0", "me", Some((0, 0)), NOW_MS + 60_000, LIVE_TTL);
        let epoch = epoch_item("me", 0, committed, &[], 0, LIVE_TTL);
        let read = reads(vec![record.clone()], Some(vec![epoch]), &log);
        let write = statements_refused();
        let tx = mock!(Client::transact_write_items).then_error(move || {
            super::tests::cancelled(&[("ConditionalCheckFailed", Some(record.clone()))])
        });
        let store = store(&[&read, &write, &tx], 1);
        let got = store.commit("me", &commits_of(&["k0"]), 4).await.unwrap();
        match want_ok {
            true => assert_eq!(got, [Settled::Ok]),
            false => assert!(matches!(&got[0], Settled::NotOwner(Some(_))), "{got:?}"),
        }
        assert_eq!(
            logged(&log),
            ["read k0", "read k0", "read-epochs! #epoch:me:0"],
            "the statement's re-read, then the recheck's reads"
        );
    }
}

/// Transactions refused whole: each write's condition fails on the record `found` has for
/// its key (or on no record), each call logged as `transaction KEYS`.
fn refusing(found: Vec<Item>, log: &Log) -> Rule {
    let log = log.clone();
    mock!(Client::transact_write_items).then_compute_response(move |r| {
        let keys: Vec<String> = r.transact_items().iter().map(|i| pk(item_key(i))).collect();
        log.lock()
            .unwrap()
            .push(format!("transaction {}", keys.join(",")));
        let reasons: Vec<(&str, Option<Item>)> = keys
            .iter()
            .map(|k| {
                let item = found.iter().find(|i| pk(i) == *k).cloned();
                ("ConditionalCheckFailed", item)
            })
            .collect();
        MockResponse::Error(super::tests::cancelled(&reasons))
    })
}

/// `BatchExecuteStatement`s whose every statement fails its condition.
fn statements_refused() -> Rule {
    mock!(Client::batch_execute_statement).then_compute_output(|r| {
        let code = aws_sdk_dynamodb::types::BatchStatementErrorCodeEnum::ConditionalCheckFailed;
        BatchExecuteStatementOutput::builder()
            .set_responses(Some(
                r.statements()
                    .iter()
                    .map(|_| {
                        BatchStatementResponse::builder()
                            .error(
                                aws_sdk_dynamodb::types::BatchStatementError::builder()
                                    .code(code.clone())
                                    .message("from the mock")
                                    .build(),
                            )
                            .build()
                    })
                    .collect(),
            ))
            .build()
    })
}

#[tokio::test]
async fn a_commit_again_of_several_keys_of_one_epoch_reads_that_epoch_once() {
    // Three keys committed in epoch 0 already, in no ledger: committed again (the keeper
    // sends a commit call again as a whole when another epoch of it failed), they go as
    // plain keys, their records are found pending in the epoch, and one strongly
    // consistent read of it, naming it once, says they are committed. Before, the read
    // named the epoch once per key, which DynamoDB refuses: every key reported taken over.
    let log = Log::default();
    let records = mine_in_epoch_0(3);
    let epoch = epoch_item("me", 0, &[0, 1, 2], &[], 0, LIVE_TTL);
    let read = reads(records.clone(), Some(vec![epoch]), &log);
    let write = statements_refused();
    let tx = refusing(records, &log);
    let first = store(&[&read, &write, &tx], 1);
    let got = first
        .commit("me", &commits_of(&["k0", "k1", "k2"]), 4)
        .await
        .unwrap();
    assert_eq!(got, [Settled::Ok, Settled::Ok, Settled::Ok]);
    let epochs_read: Vec<String> = logged(&log)
        .into_iter()
        .filter(|l| l.starts_with("read-epochs"))
        .collect();
    assert_eq!(epochs_read, ["read-epochs! #epoch:me:0"]);

    // The epoch cannot be read: not known committed, and not reported taken over either:
    // the call fails, and the keeper sends it again.
    let log = Log::default();
    let records = mine_in_epoch_0(3);
    let read = reads(records.clone(), None, &log);
    let write = statements_refused();
    let tx = refusing(records, &log);
    let unread = store(&[&read, &write, &tx], 1);
    let got = unread
        .commit("me", &commits_of(&["k0", "k1", "k2"]), 4)
        .await;
    assert!(got.is_err(), "{got:?}");
}

/// The records of `k0`, `k1`, … pending for `me` in its epoch 0, at their slots, with a
/// minute of lease.
fn mine_in_epoch_0(n: u32) -> Vec<Item> {
    (0..n)
        .map(|i| {
            key_item(
                &format!("k{i}"),
                "me",
                Some((0, i)),
                NOW_MS + 60_000,
                LIVE_TTL,
            )
        })
        .collect()
}

/// Renews `keys` as `me` for a lease of a minute.
async fn renew_keys(store: &DynamoDbStore, keys: &[&str]) -> Result<Vec<Settled>, StoreError> {
    let asked: Vec<RenewRequest> = keys
        .iter()
        .map(|k| RenewRequest {
            key: k.to_string(),
            ttl: LIVE_TTL,
            lease_until_ms: NOW_MS + 60_000,
        })
        .collect();
    store.renew("me", &asked, 4).await
}

#[tokio::test]
async fn a_renewal_refused_after_the_owners_epoch_commit_is_answered_as_that_commit() {
    // k0 and k1 taken in epoch 0 and committed there (the keeper's commit call is still
    // under way for another epoch, so it still renews them); k2 taken over by another
    // owner after its lease. The renewal, conditional on a pending record outside any
    // epoch (the commit took k0 and k1 out of the ledger), is refused for all three.
    // k0 and k1 are this owner's commit, not a takeover: answered as committed by it;
    // k2 with its taker's record.
    let log = Log::default();
    let committed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut records = mine_in_epoch_0(2);
    records.push(key_item(
        "k2",
        "them",
        Some((4, 0)),
        NOW_MS + 90_000,
        LIVE_TTL,
    ));
    let epoch = epoch_item("me", 0, &[0, 1], &[], 0, LIVE_TTL + 60);
    // Before the commit the acquisition's read finds nothing.
    let (l, c, found, epochs) = (log.clone(), committed.clone(), records.clone(), vec![epoch]);
    let read = mock!(Client::batch_get_item).then_compute_output(move |r| {
        let asked = r.request_items().unwrap()["locks"].clone();
        let wanted: Vec<String> = asked.keys().iter().map(pk).collect();
        let strong = if asked.consistent_read() == Some(true) {
            "!"
        } else {
            ""
        };
        l.lock()
            .unwrap()
            .push(format!("read{strong} {}", wanted.join(",")));
        let items: Vec<Item> = match c.load(std::sync::atomic::Ordering::SeqCst) {
            false => vec![],
            true => found.iter().chain(&epochs).cloned().collect(),
        };
        BatchGetItemOutput::builder()
            .responses(
                "locks",
                items
                    .into_iter()
                    .filter(|i| wanted.contains(&pk(i)))
                    .collect(),
            )
            .build()
    });
    let write = statements(&log);
    let seen = Arc::default();
    let update = updates(&log, &seen, |_| updated());
    let tx = refusing(records, &log);
    let store = store(&[&read, &write, &update, &tx], 1);
    let reqs: Vec<_> = (0..3).map(|i| req(&format!("k{i}"))).collect();
    let got = store.acquire("me", NOW_MS, &reqs, 4).await;
    assert!(got.iter().all(|g| g.as_ref().unwrap() == &Acquired::FRESH));
    let got = store.commit("me", &commits_of(&["k0", "k1"]), 4).await;
    assert_eq!(got.unwrap(), [Settled::Ok, Settled::Ok]);
    committed.store(true, std::sync::atomic::Ordering::SeqCst);
    log.lock().unwrap().clear();

    let got = renew_keys(&store, &["k0", "k1", "k2"]).await.unwrap();
    for (i, got) in got[..2].iter().enumerate() {
        assert!(
            matches!(got, Settled::NotOwner(Some(r))
                if r.owner == "me" && r.status == LockStatus::Committed && r.ttl == LIVE_TTL + 60),
            "k{i}: {got:?}"
        );
    }
    assert!(
        matches!(&got[2], Settled::NotOwner(Some(r)) if r.owner == "them"),
        "{got:?}"
    );
    assert_eq!(
        logged(&log),
        ["transaction k0,k1,k2", "read! k0,k1", "read! #epoch:me:0"],
        "only this owner's records are looked into, and their epoch read once"
    );
    // The renewal took nothing out of the ledger that was not another owner's.
    assert_eq!(store.epochs.slot_of("me", "k2"), None);
}

#[tokio::test]
async fn a_renewal_refused_on_an_own_record_its_epoch_never_committed_is_not_made_a_commit() {
    // This owner's record pending in epoch 0, which has not committed (or has aborted)
    // its slot: not a commit, so the refusal stands with the record as found; and when the
    // epoch cannot be read, the renewal fails (tried again later) rather than guess.
    for (epochs, want) in [
        (
            Some(vec![epoch_item("me", 0, &[], &[], 0, LIVE_TTL)]),
            "refused",
        ),
        (
            Some(vec![epoch_item("me", 0, &[], &[0], 1, LIVE_TTL)]),
            "refused",
        ),
        (Some(vec![]), "refused"),
        (None, "failed"),
    ] {
        let log = Log::default();
        let record = key_item("k0", "me", Some((0, 0)), NOW_MS + 60_000, LIVE_TTL);
        let read = reads(vec![record.clone()], epochs.clone(), &log);
        let tx = refusing(vec![record], &log);
        let store = store(&[&read, &tx], 1);
        let got = renew_keys(&store, &["k0"]).await;
        match want {
            "refused" => assert!(
                matches!(&got, Ok(s) if matches!(&s[0], Settled::NotOwner(Some(r))
                    if r.owner == "me" && r.status != LockStatus::Committed)),
                "{epochs:?}: {got:?}"
            ),
            _ => assert!(got.is_err(), "{got:?}"),
        }
    }
}
