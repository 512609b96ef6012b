//! Tests of `layout`.

use super::*;
use chrono::Offset;

fn at(tz: Tz, rfc3339: &str) -> DateTime<Tz> {
    DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .with_timezone(&tz)
}

#[test]
fn formats() {
    let ny = chrono_tz::America::New_York;
    let utc = chrono_tz::UTC;
    let t = "2020-06-05T14:39:59.430166Z";
    let cases: &[(&str, Tz, &str, &str)] = &[
        (t, utc, "2006-01-02T15:04:05Z07:00", "2020-06-05T14:39:59Z"),
        (
            t,
            ny,
            "2006-01-02T15:04:05Z07:00",
            "2020-06-05T10:39:59-04:00",
        ),
        (
            t,
            utc,
            "2006-01-02T15:04:05.000Z",
            "2020-06-05T14:39:59.430Z",
        ),
        (
            t,
            utc,
            "2006-01-02T15:04:05.999999999Z07:00",
            "2020-06-05T14:39:59.430166Z",
        ),
        (t, utc, "15:04:05.000000000", "14:39:59.430166000"),
        (t, utc, "15:04:05,000", "14:39:59,430"),
        ("2020-06-05T14:39:59Z", utc, "05.999", "59"),
        (t, utc, "Jan _2 15:04:05.000", "Jun  5 14:39:59.430"),
        (
            t,
            utc,
            "Mon, 02 Jan 2006 15:04:05 MST",
            "Fri, 05 Jun 2020 14:39:59 UTC",
        ),
        (
            t,
            ny,
            "Mon, 02 Jan 2006 15:04:05 MST",
            "Fri, 05 Jun 2020 10:39:59 EDT",
        ),
        (
            "2020-01-05T14:39:59Z",
            ny,
            "Monday January 2 MST -0700",
            "Sunday January 5 EST -0500",
        ),
        (t, ny, "3:04PM", "10:39AM"),
        (t, utc, "03:04pm", "02:39pm"),
        ("2020-06-05T00:10:00Z", utc, "3:04 PM", "12:10 AM"),
        (t, utc, "06 1 2 __2 002", "20 6 5 157 157"),
        ("2020-01-05T00:00:00Z", utc, "__2|002|_2", "  5|005| 5"),
        (
            t,
            chrono_tz::Asia::Kolkata,
            "-0700 -07:00 -07 Z0700 MST",
            "+0530 +05:30 +05 +0530 IST",
        ),
        (
            t,
            chrono_tz::Asia::Kathmandu,
            "-070000 -07:00:00 Z07",
            "+054500 +05:45:00 +05",
        ),
        (t, chrono_tz::Europe::Istanbul, "MST", "+03"),
        (t, utc, "Z07:00:00 Z070000", "Z Z"),
        (t, utc, "2006/01/02", "2020/06/05"),
        (t, utc, "unix", "1591367999"),
        (t, utc, "unix_milli", "1591367999430"),
        (t, utc, "Janet _2006", "Janet _2020"),
        (t, utc, "literal text", "literal text"),
    ];
    for (time, tz, layout, want) in cases {
        assert_eq!(format_go(&at(*tz, time), layout), *want, "{layout}");
    }
}

#[test]
fn parses() {
    let utc = chrono_tz::UTC;
    let ny = chrono_tz::America::New_York;
    let cases: &[(&str, &str, Tz, &str)] = &[
        (
            "2006-01-02T15:04:05Z07:00",
            "2020-06-05T14:39:59Z",
            utc,
            "2020-06-05T14:39:59+00:00",
        ),
        (
            "2006-01-02T15:04:05Z07:00",
            "2020-06-05T10:39:59-04:00",
            utc,
            "2020-06-05T14:39:59+00:00",
        ),
        // A numeric offset wins over the location.
        (
            "2006-01-02T15:04:05Z07:00",
            "2020-06-05T14:39:59Z",
            ny,
            "2020-06-05T14:39:59+00:00",
        ),
        // No zone in the input: read in the location (summer and winter).
        (
            "2006-01-02 15:04:05",
            "2020-06-05 10:39:59",
            ny,
            "2020-06-05T14:39:59+00:00",
        ),
        (
            "2006-01-02 15:04:05",
            "2020-01-05 10:39:59",
            ny,
            "2020-01-05T15:39:59+00:00",
        ),
        // A fraction the layout does not mention.
        (
            "2006-01-02T15:04:05Z07:00",
            "2020-06-05T14:39:59.430166Z",
            utc,
            "2020-06-05T14:39:59.430166+00:00",
        ),
        (
            "2006-01-02T15:04:05.000Z",
            "2020-06-05T14:39:59.430Z",
            utc,
            "2020-06-05T14:39:59.430+00:00",
        ),
        (
            "2006-01-02T15:04:05.999999999Z",
            "2020-06-05T14:39:59Z",
            utc,
            "2020-06-05T14:39:59+00:00",
        ),
        (
            "2006-01-02T15:04:05.999999999Z",
            "2020-06-05T14:39:59.123456789Z",
            utc,
            "2020-06-05T14:39:59.123456789+00:00",
        ),
        (
            "15:04:05,000 2006-01-02",
            "14:39:59,430 2020-06-05",
            utc,
            "2020-06-05T14:39:59.430+00:00",
        ),
        (
            "Mon, 02 Jan 2006 15:04:05 MST",
            "Fri, 05 Jun 2020 14:39:59 UTC",
            ny,
            "2020-06-05T14:39:59+00:00",
        ),
        (
            "Mon, 02 Jan 2006 15:04:05 MST",
            "Fri, 05 Jun 2020 10:39:59 EDT",
            ny,
            "2020-06-05T14:39:59+00:00",
        ),
        // An abbreviation the location does not use counts as offset 0, as in Go.
        (
            "Mon, 02 Jan 2006 15:04:05 MST",
            "Fri, 05 Jun 2020 14:39:59 PDT",
            utc,
            "2020-06-05T14:39:59+00:00",
        ),
        (
            "Mon, 02 Jan 2006 15:04:05 MST",
            "Fri, 05 Jun 2020 17:39:59 GMT+3",
            utc,
            "2020-06-05T14:39:59+00:00",
        ),
        // Case-insensitive names, space runs, `_2` with and without the pad.
        (
            "Jan _2 15:04:05 2006",
            "JUN  5 14:39:59 2020",
            utc,
            "2020-06-05T14:39:59+00:00",
        ),
        (
            "Jan _2 15:04:05 2006",
            "Jun 15 14:39:59 2020",
            utc,
            "2020-06-15T14:39:59+00:00",
        ),
        (
            "January 2, 2006 3:04 PM",
            "june 5, 2020 2:39 PM",
            utc,
            "2020-06-05T14:39:00+00:00",
        ),
        (
            "3:04pm 2006-01-02",
            "12:05am 2020-06-05",
            utc,
            "2020-06-05T00:05:00+00:00",
        ),
        (
            "02/01/06 15h04",
            "05/06/20 14h39",
            utc,
            "2020-06-05T14:39:00+00:00",
        ),
        ("2006 __2", "2020 157", utc, "2020-06-05T00:00:00+00:00"),
        ("2006 002", "2021 060", utc, "2021-03-01T00:00:00+00:00"),
        (
            "2006-01-02 -0700",
            "2020-06-05 +0530",
            utc,
            "2020-06-04T18:30:00+00:00",
        ),
        (
            "2006-01-02 Z070000",
            "2020-06-05 -013000",
            utc,
            "2020-06-05T01:30:00+00:00",
        ),
        (
            "2006-01-02 -07",
            "2020-06-05 +02",
            utc,
            "2020-06-04T22:00:00+00:00",
        ),
        ("unix", "1591367999.5", utc, "2020-06-05T14:39:59.500+00:00"),
        (
            "unix_milli",
            "1591367999430",
            utc,
            "2020-06-05T14:39:59.430+00:00",
        ),
        // In the gap of a DST change Go moves back west of UTC and forward east of it.
        (
            "2006-01-02 15:04",
            "2020-03-08 02:30",
            ny,
            "2020-03-08T06:30:00+00:00",
        ),
        (
            "2006-01-02 15:04",
            "2021-03-28 02:00",
            chrono_tz::Europe::Paris,
            "2021-03-28T01:00:00+00:00",
        ),
        // The repeated hour of a DST change: the first one (still daylight time).
        (
            "2006-01-02 15:04",
            "2020-11-01 01:30",
            ny,
            "2020-11-01T05:30:00+00:00",
        ),
    ];
    for (layout, input, tz, want) in cases {
        let got = parse_go(input, layout, *tz).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(
            got,
            DateTime::parse_from_rfc3339(want).unwrap(),
            "{layout} {input}"
        );
    }
}

#[test]
fn parse_errors() {
    let utc = chrono_tz::UTC;
    let cases = [
        ("2006-01-02", "2020-6-05", "cannot parse \"6-05\" as \"01\""),
        ("2006-01-02", "2020-13-05", "month out of range"),
        ("2006-01-02", "2021-02-29", "day out of range"),
        ("15:04", "25:00", "hour out of range"),
        ("2006-01-02", "2020-06-05 extra", "extra text: \" extra\""),
        (
            "2006-01-02T15:04:05.000",
            "2020-06-05T14:39:59.4",
            "cannot parse \".4\" as \".000\"",
        ),
        ("Jan 2006", "Foo 2020", "as \"Jan\""),
        ("2006 002", "2021 366", "day-of-year out of range"),
        (
            "2006-01 002",
            "2021-02 060",
            "day-of-year does not match month",
        ),
        ("-0700", "0530", "cannot parse"),
        ("MST", "xx", "cannot parse"),
        ("2006", "20é6", "cannot parse"),
        ("unix", "soon", "not a number"),
    ];
    for (layout, input, want) in cases {
        let err = parse_go(input, layout, utc).unwrap_err();
        assert!(err.contains(want), "{layout} {input}: {err}");
        assert!(err.starts_with("parsing time"), "{err}");
    }
}

#[test]
fn round_trips() {
    let tz = chrono_tz::Europe::Paris;
    let t = at(tz, "2021-11-03T21:07:08.123456789+01:00");
    for layout in [
        "2006-01-02T15:04:05.999999999Z07:00",
        "Mon Jan _2 15:04:05.000000000 MST 2006",
        "02 Jan 06 15:04:05.999999999 -0700",
        "Monday, 02-Jan-06 03:04:05.000000000PM -07:00:00",
    ] {
        let s = format_go(&t, layout);
        assert_eq!(parse_go(&s, layout, tz).unwrap(), t, "{layout}: {s}");
    }
}

#[test]
fn random_round_trips_and_no_panics() {
    let zones = [
        chrono_tz::UTC,
        chrono_tz::America::New_York,
        chrono_tz::Asia::Kathmandu,
        chrono_tz::Australia::Lord_Howe,
        chrono_tz::Pacific::Chatham,
    ];
    let exact = [
        "2006-01-02T15:04:05.999999999Z07:00",
        "Mon Jan _2 15:04:05.000000000 -07:00:00 2006",
        "2006 002 15 04 05,000000000 Z070000",
    ];
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..2000 {
        let ns = rng.i64(..);
        let tz = zones[rng.usize(..zones.len())];
        let t = DateTime::from_timestamp_nanos(ns).with_timezone(&tz);
        for layout in exact {
            let s = format_go(&t, layout);
            let parsed = parse_go(&s, layout, tz).unwrap();
            // Local mean time offsets have seconds, which `Z07:00` leaves out.
            if t.offset().fix().local_minus_utc() % 60 == 0 || !layout.contains("Z07:00") {
                assert_eq!(parsed, t, "{layout}: {s}");
            }
            // Damaged input must give an error or a time, never a panic.
            let mut bytes = s.clone().into_bytes();
            let at = rng.usize(..bytes.len());
            bytes[at] = rng.u8(..);
            let damaged = String::from_utf8_lossy(&bytes);
            let _ = parse_go(&damaged, layout, tz);
            let _ = parse_go(&s[..rng.usize(..s.len())], layout, tz);
        }
    }
}

#[test]
fn decimals() {
    let cases = [
        ("1", 9, Some(1_000_000_000)),
        ("-1.5", 9, Some(-1_500_000_000)),
        ("1591367999.430166", 9, Some(1_591_367_999_430_166_000)),
        ("1.5e3", 0, Some(1500)),
        ("1.23456789129", 9, Some(1_234_567_891)),
        ("1E-3", 6, Some(1000)),
        ("0.0000000001", 9, Some(0)),
        ("", 9, None),
        (".", 9, None),
        ("1e", 9, None),
        ("abc", 9, None),
        ("1e400", 0, None),
    ];
    for (text, scale, want) in cases {
        assert_eq!(scaled_decimal(text, scale), want, "{text}");
    }
}

#[test]
fn decimals_of_up_to_18_digits_scale_as_any_number_of_digits_do() {
    let mut rng = fastrand::Rng::with_seed(18);
    let mut checked = 0;
    for _ in 0..20_000 {
        let n = rng.usize(1..=18);
        let digits: Vec<u8> = (0..n).map(|_| b'0' + rng.u8(..10)).collect();
        let point = rng.usize(..=n);
        let (int, frac) = digits.split_at(point);
        let shift = rng.i32(-45..45);
        let neg = rng.bool();
        let general = parse::scaled_digits(int, frac, shift, neg);
        match parse::scaled_decimal_fast(int, frac, shift, neg) {
            Some(fast) => {
                checked += 1;
                assert_eq!(
                    fast,
                    general,
                    "{:?}.{:?} shift {shift}",
                    std::str::from_utf8(int),
                    std::str::from_utf8(frac)
                );
            }
            None => assert!(shift.unsigned_abs() > 38, "shift {shift}"),
        }
    }
    assert!(checked > 15_000, "{checked} of 20000 took the fast path");
}

/// The parts of a decimal as they were found before `decimal_parts` found them in one
/// pass: the exponent after the first `e`/`E`, the point in what comes before it, then a
/// check that every other byte is a digit.
fn decimal_parts_in_three_passes(t: &[u8]) -> Option<(bool, &[u8], &[u8], i32)> {
    let (neg, t) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exp) = match t.iter().position(|c| *c == b'e' || *c == b'E') {
        Some(i) => {
            let e = std::str::from_utf8(&t[i + 1..]).ok()?.parse::<i32>().ok()?;
            (&t[..i], e)
        }
        None => (t, 0),
    };
    let (int, frac) = match mantissa.iter().position(|c| *c == b'.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, &mantissa[..0]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    Some((neg, int, frac, exp))
}

#[test]
fn decimal_parts_are_found_in_one_pass_as_in_three() {
    let table: [&[u8]; 24] = [
        b"1",
        b"-1.5",
        b"+2",
        b"1.",
        b".5",
        b"-.5",
        b".",
        b"",
        b"-",
        b"+-1",
        b"1e5",
        b"1E-3",
        b"1.5e+3",
        b"1e",
        b"e5",
        b".e5",
        b"1e5e3",
        b"1.2.3",
        b"1e5.3",
        b"1.e5",
        b"12a",
        b"1591367999.430166",
        b"1 ",
        "1\u{e9}".as_bytes(),
    ];
    for t in table {
        assert_eq!(
            parse::decimal_parts(t),
            decimal_parts_in_three_passes(t),
            "{:?}",
            String::from_utf8_lossy(t)
        );
    }
    // Short strings over the bytes that matter, and a few that do not.
    let alphabet = b"0123456789.eE+-x \xc3";
    let mut rng = fastrand::Rng::with_seed(55);
    for _ in 0..200_000 {
        let n = rng.usize(..10);
        let t: Vec<u8> = (0..n)
            .map(|_| alphabet[rng.usize(..alphabet.len())])
            .collect();
        assert_eq!(
            parse::decimal_parts(&t),
            decimal_parts_in_three_passes(&t),
            "{:?}",
            String::from_utf8_lossy(&t)
        );
    }
}

#[test]
fn fixed_layouts_format_as_their_tokens_do() {
    let layouts = [
        ("2006-01-02T15:04:05Z", true),
        ("2006-01-02T15:04:05.000Z", true),
        ("2006-01-02 15:04:05,000000000", true),
        ("06/01/02 002 15h04m05s", true),
        ("année 2006, 02.01 à 15:04:05", true),
        ("20060102150405", true),
        ("2006-01-02T15:04:05.000000000000", false),
        ("2006-01-02T15:04:05.999Z", false),
        ("2006-01-02T15:04:05Z07:00", false),
        ("Jan 2 15:04:05", false),
        ("unix", false),
        ("no fields", false),
    ];
    let zones = [
        chrono_tz::UTC,
        chrono_tz::America::New_York,
        chrono_tz::Asia::Kolkata,
    ];
    let mut rng = fastrand::Rng::with_seed(2006);
    let mut times: Vec<i64> = vec![0, -1, 1_591_367_999_430_166_000, i64::MAX, i64::MIN];
    times.extend((0..3_000).map(|_| rng.i64(..)));
    for (text, fixed) in layouts {
        let layout = Layout::compile(text);
        assert_eq!(layout.fixed.is_some(), fixed, "{text}");
        for &ns in &times {
            for tz in zones {
                let t = DateTime::from_timestamp_nanos(ns).with_timezone(&tz);
                assert_eq!(
                    layout.format(&t),
                    layout.format_by_tokens(&t),
                    "{text} at {t}"
                );
            }
        }
        // Years past 9999 and before 0, where `2006` takes more than four digits.
        for y in [-1, 0, 9999, 10000, 262_000] {
            if let Some(d) = chrono::NaiveDate::from_ymd_opt(y, 3, 4) {
                let t = d
                    .and_hms_nano_opt(5, 6, 7, 8)
                    .unwrap()
                    .and_utc()
                    .with_timezone(&chrono_tz::UTC);
                assert_eq!(
                    layout.format(&t),
                    layout.format_by_tokens(&t),
                    "{text} at {t}"
                );
            }
        }
    }
}
