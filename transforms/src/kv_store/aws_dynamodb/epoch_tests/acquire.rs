//! A taker and a key pending in another epoch: a duplicate, held, taken over after an
//! abort, taken fresh after its window, and a takeover the SDK sent twice.

use super::*;

#[tokio::test]
async fn a_key_whose_slot_is_committed_is_a_duplicate_without_a_write() {
    // Its lease is long over; its epoch committed its slot, and the epoch's TTL (the
    // largest TTL committed in it) is what the duplicate is told.
    let epoch = epoch_item("them", THEIR_EPOCH, &[1, THEIR_SLOT], &[], 0, LIVE_TTL + 60);
    let (got, log, _) = acquire_k1(theirs(NOW_MS - 60_000), Some(vec![epoch]), |_| {
        panic!("no write")
    })
    .await;
    match got {
        Acquired::Held(Some(r)) => {
            assert_eq!(
                (r.owner.as_str(), r.status, r.ttl),
                ("them", LockStatus::Committed, LIVE_TTL + 60)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(log, ["read k1", "read-epochs #epoch:them:7"]);
}

#[tokio::test]
async fn a_committed_slot_past_its_epochs_ttl_is_taken_fresh_without_a_lease_condition() {
    // Its lease is still live (its owner never renews a committed key): the epoch's
    // window passed, so the key is taken as new, with no abort (the slot is committed)
    // and no lease in the key write's condition.
    let epoch = epoch_item("them", THEIR_EPOCH, &[THEIR_SLOT], &[], 0, PAST_TTL);
    let (got, log, sent) =
        acquire_k1(theirs(NOW_MS + 60_000), Some(vec![epoch]), |_| updated()).await;
    assert_eq!(got, Acquired::FRESH);
    assert_eq!(log, ["read k1", "read-epochs #epoch:them:7", "update k1"]);
    let u = &sent[0];
    let condition = u.condition_expression().unwrap();
    assert!(
        condition.contains("#epoch = :their_e") && condition.contains("#slot = :their_s"),
        "{condition}"
    );
    assert!(!condition.contains("#lease"), "{condition}");
    assert!(
        u.update_expression()
            .unwrap()
            .contains("REMOVE #note, #progress"),
        "taken as new, without the history: {:?}",
        u.update_expression()
    );
    assert_eq!(
        (value_of(u, ":their_e"), value_of(u, ":their_s")),
        (n(THEIR_EPOCH as i64), n(i64::from(THEIR_SLOT)))
    );
    assert_eq!(
        (value_of(u, ":e"), value_of(u, ":s"), value_of(u, ":epoch")),
        (n(0), n(0), s(EPOCH)),
        "pending in the taker's epoch 0, slot 0"
    );
}

#[tokio::test]
async fn a_live_lease_not_committed_holds_the_key_without_a_write() {
    for epochs in [
        vec![],
        vec![epoch_item("them", THEIR_EPOCH, &[0], &[], 0, LIVE_TTL)],
    ] {
        let lease = NOW_MS + 30_000;
        let (got, log, _) = acquire_k1(theirs(lease), Some(epochs), |_| panic!("no write")).await;
        match got {
            Acquired::Held(Some(r)) => assert_eq!(
                (r.owner.as_str(), r.status),
                (
                    "them",
                    LockStatus::Pending {
                        lease_until_ms: lease
                    }
                )
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(log, ["read k1", "read-epochs #epoch:them:7"]);
    }
}

#[tokio::test]
async fn a_lease_over_is_taken_over_after_aborting_its_slot() {
    let lapsed = NOW_MS - 1;
    let (got, log, sent) = acquire_k1(theirs(lapsed), Some(vec![]), |u| {
        match pk(u.key().unwrap()).as_str() {
            "k1" => old(theirs(NOW_MS - 1)),
            _ => updated(),
        }
    })
    .await;
    assert_eq!(
        got,
        Acquired::Taken {
            prior: Some(Prior {
                owner: "them".into(),
                since_ms: THEIR_SINCE,
                progress: Progress::from_entries(["s0:0"]),
            })
        }
    );
    // The abort first, on their epoch's record; then the key.
    assert_eq!(
        log,
        [
            "read k1",
            "read-epochs #epoch:them:7",
            "update #epoch:them:7",
            "update k1"
        ]
    );
    let abort = &sent[0];
    assert_eq!(
        abort.update_expression(),
        Some("ADD #aborted :slot, #v :one SET #ttl = if_not_exists(#ttl, :ttl)")
    );
    assert_eq!(
        abort.condition_expression(),
        Some("NOT contains(#committed, :slot_n)")
    );
    assert_eq!(value_of(abort, ":slot"), slots(&[THEIR_SLOT]));
    let take = &sent[1];
    let condition = take.condition_expression().unwrap();
    assert!(
        condition.contains("#owner = :them")
            && condition.contains("#epoch = :their_e AND #slot = :their_s")
            && condition.contains("#lease < :takeover_ms"),
        "{condition}"
    );
    assert!(
        !take.update_expression().unwrap().contains("#progress"),
        "a takeover keeps the progress: {:?}",
        take.update_expression()
    );
}

#[tokio::test]
async fn an_abort_that_finds_the_slot_committed_is_a_duplicate_without_a_key_write() {
    // The epoch read (eventually consistent) missed the commit; the abort's condition
    // decides.
    let (got, log, _) = acquire_k1(theirs(NOW_MS - 1), Some(vec![]), |u| {
        match pk(u.key().unwrap()).as_str() {
            "k1" => panic!("no key write"),
            _ => MockResponse::Error(ccf(None)),
        }
    })
    .await;
    assert!(
        matches!(&got, Acquired::Held(Some(r)) if r.status == LockStatus::Committed && r.owner == "them"),
        "{got:?}"
    );
    assert_eq!(
        log,
        [
            "read k1",
            "read-epochs #epoch:them:7",
            "update #epoch:them:7"
        ]
    );
}

#[tokio::test]
async fn a_key_write_whose_condition_fails_is_held_as_the_record_is_now() {
    // Their owner renewed between the read and the takeover: held, with its record now.
    let renewed = theirs(NOW_MS + 60_000);
    let now = renewed.clone();
    let (got, log, _) = acquire_k1(theirs(NOW_MS - 1), Some(vec![]), move |u| {
        match pk(u.key().unwrap()).as_str() {
            "k1" => MockResponse::Error(ccf(Some(now.clone()))),
            _ => updated(),
        }
    })
    .await;
    assert!(
        matches!(&got, Acquired::Held(Some(r)) if r.owner == "them"
            && r.status == LockStatus::Pending { lease_until_ms: NOW_MS + 60_000 }),
        "{got:?}"
    );
    assert_eq!(log.last().map(String::as_str), Some("update k1"));
    // Committed on its record meanwhile (their epoch commit found the slot aborted).
    let mut committed = key_item("k1", "them", None, 0, LIVE_TTL);
    committed.insert("lock_status".into(), s(COMMITTED));
    let (got, _, _) = acquire_k1(theirs(NOW_MS - 1), Some(vec![]), move |u| {
        match pk(u.key().unwrap()).as_str() {
            "k1" => MockResponse::Error(ccf(Some(committed.clone()))),
            _ => updated(),
        }
    })
    .await;
    assert!(
        matches!(&got, Acquired::Held(Some(r)) if r.status == LockStatus::Committed),
        "{got:?}"
    );
}

#[tokio::test]
async fn an_epoch_read_that_fails_is_no_answer_and_the_slot_is_still_aborted() {
    // Never trusted as "not committed": the abort's condition decides, and it found the
    // slot free.
    let (got, log, _) = acquire_k1(theirs(NOW_MS - 1), None, |u| {
        match pk(u.key().unwrap()).as_str() {
            "k1" => old(theirs(NOW_MS - 1)),
            _ => updated(),
        }
    })
    .await;
    assert!(
        matches!(&got, Acquired::Taken { prior: Some(p) } if p.owner == "them"),
        "{got:?}"
    );
    assert_eq!(
        log,
        [
            "read k1",
            "read-epochs #epoch:them:7",
            "update #epoch:them:7",
            "update k1"
        ]
    );
    // And the abort found it committed: a duplicate.
    let (got, _, _) = acquire_k1(theirs(NOW_MS - 1), None, |u| {
        match pk(u.key().unwrap()).as_str() {
            "k1" => panic!("no key write"),
            _ => MockResponse::Error(ccf(None)),
        }
    })
    .await;
    assert!(
        matches!(&got, Acquired::Held(Some(r)) if r.status == LockStatus::Committed),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_takeover_the_sdk_sent_twice_that_finds_its_own_write_is_taken_with_the_history() {
    // The first attempt of the key write applied and its answer was lost (a 500); the
    // retry's condition failed on what it wrote: this owner, in its epoch and slot, with
    // this lease, and the since and progress the takeover kept.
    let mut mine = theirs(NOW_MS + 60_000);
    mine.insert("lock_owner".into(), s("me"));
    mine.insert("lock_epoch".into(), n(0));
    mine.insert("lock_slot".into(), n(0));
    let log = Log::default();
    let read = reads(vec![theirs(NOW_MS - 1)], Some(vec![]), &log);
    let abort = mock!(Client::update_item)
        .match_requests(|u| pk(u.key().unwrap()) != "k1")
        .then_output(|| UpdateItemOutput::builder().build());
    let key = mock!(Client::update_item)
        .match_requests(|u| pk(u.key().unwrap()) == "k1")
        .sequence()
        .http_status(
            500,
            Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}"#.into()),
        )
        .error(move || ccf(Some(mine.clone())))
        .build();
    let store = store(&[&read, &abort, &key], 2);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 4).await;
    assert_eq!(
        got[0].as_ref().unwrap(),
        &Acquired::Taken {
            prior: Some(Prior {
                owner: "them".into(),
                since_ms: THEIR_SINCE,
                progress: Progress::from_entries(["s0:0"]),
            })
        }
    );
    assert_eq!((abort.num_calls(), key.num_calls()), (1, 2));
    // The ledger holds it in its epoch: its commit goes to the epoch.
    assert_eq!(
        store.epochs.slot_of("me", "k1"),
        Some(EpochSlot { epoch: 0, slot: 0 })
    );
    // Someone else's record after the retry is theirs: held.
    let log = Log::default();
    let read = reads(vec![theirs(NOW_MS - 1)], Some(vec![]), &log);
    let abort = mock!(Client::update_item)
        .match_requests(|u| pk(u.key().unwrap()) != "k1")
        .then_output(|| UpdateItemOutput::builder().build());
    let key = mock!(Client::update_item)
        .match_requests(|u| pk(u.key().unwrap()) == "k1")
        .sequence()
        .http_status(
            500,
            Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}"#.into()),
        )
        .error(|| {
            ccf(Some(key_item(
                "k1",
                "other",
                Some((2, 0)),
                NOW_MS + 60_000,
                LIVE_TTL,
            )))
        })
        .build();
    let store = self::store(&[&read, &abort, &key], 2);
    let got = store.acquire("me", NOW_MS, &[req("k1")], 4).await;
    assert!(
        matches!(got[0].as_ref().unwrap(), Acquired::Held(Some(r)) if r.owner == "other"),
        "{got:?}"
    );
    assert_eq!(store.epochs.slot_of("me", "k1"), None);
}
