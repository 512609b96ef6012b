//! The shard scheduling and end-of-shard rules of `sluice tap`, as tables.

use super::*;

fn info(parents: &[&str], ending: Option<&str>) -> ShardInfo {
    ShardInfo {
        parents: parents.iter().map(|p| p.to_string()).collect(),
        starting: "100".into(),
        ending: ending.map(str::to_string),
    }
}

#[test]
fn where_to_start_parses_names_times_and_epochs() {
    let cases: &[(&str, Result<StartAt, ()>)] = &[
        ("latest", Ok(StartAt::Latest)),
        ("LATEST", Ok(StartAt::Latest)),
        ("trim-horizon", Ok(StartAt::TrimHorizon)),
        ("TRIM_HORIZON", Ok(StartAt::TrimHorizon)),
        ("earliest", Ok(StartAt::TrimHorizon)),
        ("2023-11-14T22:13:20Z", Ok(StartAt::Time(1_700_000_000_000))),
        (
            "2023-11-14T23:13:20.5+01:00",
            Ok(StartAt::Time(1_700_000_000_500)),
        ),
        ("1700000000", Ok(StartAt::Time(1_700_000_000_000))),
        ("1700000000.25", Ok(StartAt::Time(1_700_000_000_250))),
        ("yesterday", Err(())),
        ("-5", Err(())),
        ("", Err(())),
    ];
    for (text, want) in cases {
        let got = StartAt::parse(text).map_err(|_| ());
        assert_eq!(&got, want, "{text:?}");
    }
    let e = StartAt::parse("soon").unwrap_err();
    assert!(e.contains("latest, trim-horizon"), "{e}");
}

#[test]
fn children_wait_for_every_listed_parent() {
    // 0 split into 1 and 2; 1 and 2 merged into 3; 9 is a child of an expired parent.
    let shards: BTreeMap<String, ShardInfo> = [
        ("s0", info(&[], Some("200"))),
        ("s1", info(&["s0"], Some("300"))),
        ("s2", info(&["s0"], Some("300"))),
        ("s3", info(&["s1", "s2"], None)),
        ("s9", info(&["gone"], None)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let waiting = || ShardState::Waiting(Position::TrimHorizon);
    // (the shards' states, the shards that may start)
    type Case<'a> = (&'a [(&'a str, ShardState)], &'a [&'a str]);
    let table: &[Case] = &[
        // Nothing read yet: the root and the orphan start.
        (
            &[
                ("s0", waiting()),
                ("s1", waiting()),
                ("s2", waiting()),
                ("s3", waiting()),
                ("s9", waiting()),
            ],
            &["s0", "s9"],
        ),
        // The parent is being read: its children wait.
        (
            &[
                ("s0", ShardState::Reading),
                ("s1", waiting()),
                ("s2", waiting()),
                ("s3", waiting()),
            ],
            &[],
        ),
        // The parent ended: both children start; the merge waits for both.
        (
            &[
                ("s0", ShardState::Done),
                ("s1", waiting()),
                ("s2", waiting()),
                ("s3", waiting()),
            ],
            &["s1", "s2"],
        ),
        (
            &[
                ("s0", ShardState::Done),
                ("s1", ShardState::Done),
                ("s2", ShardState::Reading),
                ("s3", waiting()),
            ],
            &[],
        ),
        (
            &[
                ("s0", ShardState::Done),
                ("s1", ShardState::Done),
                ("s2", ShardState::Done),
                ("s3", waiting()),
            ],
            &["s3"],
        ),
    ];
    for (states, want) in table {
        let states: HashMap<String, ShardState> = states
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let got: Vec<String> = ready(&shards, &states)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(got, *want, "{states:?}");
    }
}

#[test]
fn the_start_decides_each_shards_first_position() {
    let open = info(&[], None);
    let closed = info(&[], Some("5"));
    let table = [
        (
            StartAt::Latest,
            true,
            &open,
            ShardState::Waiting(Position::Latest),
        ),
        (StartAt::Latest, true, &closed, ShardState::Done),
        // A child that appears after tap started is read from its start.
        (
            StartAt::Latest,
            false,
            &open,
            ShardState::Waiting(Position::TrimHorizon),
        ),
        (
            StartAt::TrimHorizon,
            true,
            &closed,
            ShardState::Waiting(Position::TrimHorizon),
        ),
        (
            StartAt::Time(7),
            true,
            &closed,
            ShardState::Waiting(Position::Time(7)),
        ),
        (
            StartAt::Time(7),
            false,
            &open,
            ShardState::Waiting(Position::Time(7)),
        ),
    ];
    for (start, first, info, want) in table {
        assert_eq!(initial_state(start, first, info), want, "{start:?} {first}");
    }
}

#[test]
fn a_shard_ends_at_its_last_iterator_or_its_ending_sequence_number() {
    let closed = ("100".to_string(), "250".to_string());
    let empty_closed = ("0".to_string(), "0".to_string());
    type Case<'a> = (
        Option<&'a (String, String)>,
        Option<&'a str>,
        bool,
        bool,
        bool,
    );
    let table: &[Case] = &[
        // (closed, last read, next iterator, empty and caught up) -> ended
        (None, Some("300"), false, false, true),
        (None, Some("300"), true, true, false),
        (Some(&closed), Some("249"), true, false, false),
        (Some(&closed), Some("250"), true, false, true),
        (Some(&closed), Some("0251"), true, false, true),
        (Some(&closed), None, true, true, false),
        (Some(&empty_closed), None, true, true, true),
        (Some(&empty_closed), None, true, false, false),
        (Some(&empty_closed), Some("3"), true, false, true),
    ];
    for &(closed, last, next, empty, want) in table {
        assert_eq!(
            shard_ended(closed, last, next, empty),
            want,
            "{closed:?} {last:?} {next} {empty}"
        );
    }
}

#[test]
fn sequence_numbers_compare_as_numbers() {
    use std::cmp::Ordering::*;
    for (a, b, want) in [
        ("9", "10", Less),
        ("10", "9", Greater),
        ("007", "7", Equal),
        (
            "49590338271490256608559692538361571095921575989136588898",
            "49590338271490256608559692540925702759324208523137515618",
            Less,
        ),
    ] {
        assert_eq!(seq_cmp(a, b), want, "{a} {b}");
    }
}

#[test]
fn throttled_calls_back_off_to_a_ceiling() {
    let waits: Vec<u128> = (1..=8).map(|n| backoff(n).as_millis()).collect();
    assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 10000, 10000, 10000]);
    assert!(super::throttled(Some(
        "ProvisionedThroughputExceededException"
    )));
    assert!(!super::throttled(Some("ResourceNotFoundException")));
    assert!(!super::throttled(None));
}

#[test]
fn streams_are_named_by_name_or_arn() {
    // (given, its name and region; None when it is refused)
    type Case<'a> = (&'a str, Option<(&'a str, Option<&'a str>)>);
    let table: &[Case] = &[
        ("events", Some(("events", None))),
        (
            "arn:aws:kinesis:eu-west-1:123456789012:stream/events",
            Some(("events", Some("eu-west-1"))),
        ),
        (
            "arn:aws:kinesis::123456789012:stream/events",
            Some(("events", None)),
        ),
        ("arn:aws:kinesis:eu-west-1:123456789012:stream/", None),
        ("arn:aws:sqs:eu-west-1:123456789012:queue", None),
        ("arn:nonsense", None),
    ];
    for (given, want) in table {
        let got = stream_name_and_region(given).ok();
        let got = got.as_ref().map(|(n, r)| (n.as_str(), r.as_deref()));
        assert_eq!(got, *want, "{given}");
    }
    let e = stream_name_and_region("arn:nonsense")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a Kinesis stream ARN"), "{e}");
}
