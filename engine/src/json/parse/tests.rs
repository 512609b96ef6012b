//! The reader against serde_json's: edge cases, generated documents and their mutations,
//! objects' texts, and keys read as the last object's.

use super::*;
use crate::json::tests::{Rng, first_wins};
use crate::json::{Map, write_compact, write_json};

/// serde_json's reading of `text`, the oracle.
fn serde(text: &[u8]) -> Option<Value> {
    serde_json::from_slice(text).ok()
}

fn compact(v: &Value) -> String {
    let mut out = Vec::new();
    write_compact(&mut out, v);
    String::from_utf8(out).unwrap()
}

/// Same acceptance, same value, same number types (written compact, `1` and `1.0`
/// differ).
fn agree(text: &[u8]) {
    let ours = from_slice_with(text, DuplicateKeys::Last);
    let theirs = serde(text);
    assert_eq!(
        ours.as_ref().map(compact),
        theirs.as_ref().map(compact),
        "{:?}",
        String::from_utf8_lossy(text)
    );
    assert_eq!(ours, theirs, "{:?}", String::from_utf8_lossy(text));
}

#[test]
fn reads_what_serde_json_reads_table() {
    let cases: &[&[u8]] = &[
        b"",
        b" ",
        b"null",
        b" null ",
        b"nul",
        b"nulll",
        b"true",
        b"false",
        b"tru",
        b"0",
        b"-0",
        b"-",
        b"01",
        b"-01",
        b"1.",
        b".5",
        b"1.5",
        b"-1.5e3",
        b"1E5",
        b"1e+5",
        b"1e-5",
        b"1e",
        b"1e+",
        b"0.0",
        b"-0.0",
        b"1.50",
        b"123456789",
        b"18446744073709551615",
        b"18446744073709551616",
        b"-9223372036854775808",
        b"-9223372036854775809",
        b"99999999999999999999999",
        b"1e308",
        b"1e309",
        b"-1e309",
        b"1e-400",
        b"-1e-400",
        b"0e99999999999999999999",
        b"1e99999999999999999999",
        b"4.9406564584124654e-324",
        b"2.2250738585072011e-308",
        b"0.1",
        b"1.7976931348623157e308",
        b"\"\"",
        b"\"a\"",
        b"\"a",
        b"a\"",
        b"\"\\\"\"",
        b"\"\\\\\"",
        b"\"\\/\"",
        b"\"\\b\\f\\n\\r\\t\"",
        b"\"\\x\"",
        b"\"\\u0041\"",
        b"\"\\u00e9\"",
        b"\"\\u00E9x\"",
        b"\"\\ud83d\\ude00\"",
        b"\"\\ud83d\"",
        b"\"\\ude00\"",
        b"\"\\ud83dx\"",
        b"\"\\ud83d\\u0041\"",
        b"\"\\u12\"",
        b"\"\\u12g4\"",
        b"\"\x01\"",
        b"\"a\tb\"",
        b"\"\x7f\"",
        "\"é\"".as_bytes(),
        b"\"\xff\"",
        b"\"\xc3\"",
        b"\"a\\n\xc3\xa9\"",
        b"\"\\n\xff\"",
        b"[]",
        b"[ ]",
        b"[1,2]",
        b"[1,]",
        b"[,1]",
        b"[1 2]",
        b"[",
        b"]",
        b"{}",
        b"{ }",
        b"{\"a\":1}",
        b"{\"a\" : 1 , \"b\" : [ 1 , { } ] }",
        b"{\"a\":1,}",
        b"{,}",
        b"{\"a\"}",
        b"{\"a\":}",
        b"{a:1}",
        b"{\"a\":1 \"b\":2}",
        b"{\"a\":1,\"a\":2}",
        b"{\"a\":1,\"b\":2,\"a\":3}",
        b"{\"\\u0061\":1,\"a\":2}",
        b"{1:1}",
        b"\t\r\n {\"a\":1}\n",
        b"{\"a\":1}x",
        b"{\"a\":1} {}",
        b"\x0c1",
        b"\x0b1",
        b"1 2",
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"+1",
        b"[1]]",
        b"{\"a\":{}}}",
        b"\xef\xbb\xbf{}",
        b"\"\\u0000\"",
        b"[true,false,null]",
        b"[tru]",
    ];
    for c in cases {
        agree(c);
    }
    // Nesting up to serde_json's limit and past it.
    for n in [1usize, 100, 126, 127, 128, 129, 1000] {
        agree(format!("{}{}", "[".repeat(n), "]".repeat(n)).as_bytes());
        let objects = format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
        agree(objects.as_bytes());
    }
    // A large object, with a duplicate past the point where it is indexed.
    let mut large: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
    large.push("\"k3\":\"again\"".into());
    agree(format!("{{{}}}", large.join(",")).as_bytes());
}

const SPACE: &[&str] = &["", "", "", " ", "  ", "\n", "\t", "\r\n  "];
const SCALARS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "1.5",
    "1.50",
    "1e3",
    "-2.5E-3",
    "123456789012345678901",
    "9223372036854775807",
    "-9223372036854775808",
    "0.1",
    "true",
    "false",
    "null",
    "\"\"",
    "\"a b\"",
    "\"\\u00e9\\n\"",
    "\"é\"",
    "\"\\ud83d\\ude00\"",
    "\"\\\"q\\\"\"",
    "\"\\/\"",
];
const KEYS: &[&str] = &["a", "b", "ab", "abcdefgh", "abcdefgX", "", "é", "a\\u0062"];

/// `open`, up to `most - 1` elements each written by `element` (with random white
/// space around the commas), `close`.
fn container(
    r: &mut Rng,
    out: &mut String,
    (open, close, most): (char, char, usize),
    mut element: impl FnMut(&mut Rng, &mut String),
) {
    out.push(open);
    for i in 0..r.below(most) {
        out.push_str(r.pick(SPACE));
        if i > 0 {
            out.push(',');
            out.push_str(r.pick(SPACE));
        }
        element(r, out);
    }
    out.push_str(r.pick(SPACE));
    out.push(close);
}

pub(super) fn document(r: &mut Rng, depth: usize, out: &mut String) {
    match if depth > 4 { 2 } else { r.below(3) } {
        0 => container(r, out, ('{', '}', 5), |r, out| {
            out.push('"');
            out.push_str(r.pick(KEYS));
            out.push('"');
            out.push_str(r.pick(SPACE));
            out.push(':');
            out.push_str(r.pick(SPACE));
            document(r, depth + 1, out);
        }),
        1 => container(r, out, ('[', ']', 4), |r, out| document(r, depth + 1, out)),
        _ => out.push_str(r.pick(SCALARS)),
    }
}

#[test]
fn a_string_stops_where_its_first_quote_escape_or_control_byte_is() {
    // Each stop at every place of the first three words (a word is read at once and the
    // stop found from its mask), after plain ASCII, after UTF-8, and followed by a
    // second stop in the same word: read as serde_json reads it.
    let stops: &[&str] = &["\"", "\\n", "\\u00e9", "\u{1}", "\u{1f}", "\"\""];
    for prefix_of in ["a", "é"] {
        for n in 0..24 {
            let prefix = prefix_of.repeat(n);
            for stop in stops {
                for after in ["", "b\"", "\\t\"", "\""] {
                    let text = format!("\"{prefix}{stop}{after}");
                    agree(text.as_bytes());
                    agree(format!("[{text},1]").as_bytes());
                    agree(format!("{{{text}:{text}}}").as_bytes());
                }
            }
        }
    }
}

#[test]
fn generated_documents_and_their_mutations_read_as_serde_json_reads_them() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    const NOISE: &[u8] = b"{}[],:\" \\0-1e.tnu\x01\xc3";
    for _ in 0..3000 {
        let mut text = String::new();
        document(&mut r, 0, &mut text);
        agree(text.as_bytes());
        // Read as messages are, a key given twice is its first value (GJSON's reading).
        let first = from_slice(text.as_bytes());
        let oracle = first_wins(text.as_bytes());
        assert!(
            first.as_ref().map(compact) == oracle.as_ref().map(|j| j.to_string())
                && first
                    .as_ref()
                    .zip(oracle.as_ref())
                    .is_none_or(|(v, j)| v == j),
            "{text}: {first:?} is not {oracle:?}"
        );
        // Each parsed object's text is its own JSON text.
        if let Some(v) = from_slice(text.as_bytes()) {
            let mut out = Vec::new();
            write_json(&mut out, &v);
            assert_eq!(from_slice(&out), Some(v), "{text}");
        }
        // Mutations: a byte removed, replaced or inserted, mostly invalid.
        let mut bytes = text.into_bytes();
        for _ in 0..3 {
            let at = r.below(bytes.len() + 1);
            match r.below(3) {
                0 if at < bytes.len() => {
                    bytes.remove(at);
                }
                1 if at < bytes.len() => bytes[at] = NOISE[r.below(NOISE.len())],
                _ => bytes.insert(at, NOISE[r.below(NOISE.len())]),
            }
            agree(&bytes);
        }
    }
}

/// What reading `text` gives on a thread that has read nothing before: its value
/// written compact (`None`: not JSON), and its text after a key is added to it (the
/// members' places at work).
fn read_fresh(text: &[u8], duplicates: DuplicateKeys) -> (Option<String>, Option<String>) {
    let text = text.to_vec();
    std::thread::spawn(move || read_now(&text, duplicates))
        .join()
        .unwrap()
}

/// [`read_fresh`], on this thread (after what it read before).
fn read_now(text: &[u8], duplicates: DuplicateKeys) -> (Option<String>, Option<String>) {
    let v = from_slice_with(text, duplicates);
    let edited = v.clone().and_then(|v| match v {
        Value::Object(mut m) => {
            m.insert("added", Value::Null);
            let mut out = Vec::new();
            write_json(&mut out, &Value::Object(m));
            Some(String::from_utf8(out).unwrap())
        }
        _ => None,
    });
    (v.as_ref().map(compact), edited)
}

#[test]
fn keys_read_as_the_last_objects_keys_table() {
    // Each document is read after the ones before it in the table, which leave it the
    // keys to expect; it must read as on a fresh thread, and as serde_json reads it.
    let long = "k".repeat(30);
    let many = |last: &str| {
        let mut t: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        t.push(last.to_string());
        format!("{{{}}}", t.join(","))
    };
    let docs: Vec<String> = [
        r#"{"a":1,"bb":2,"ccc":3}"#,
        r#"{"a":4,"bb":5,"ccc":6}"#,
        r#"{ "a" : 7 , "bb":8,"ccc" :9 }"#,
        r#"{"a":1,"bb":2}"#,
        r#"{"a":1,"bb":2,"ccc":3,"dddd":4}"#,
        r#"{"a":1,"b":2,"ccc":3}"#,
        r#"{"a":1,"bbb":2,"ccc":3}"#,
        r#"{"bb":1,"a":2,"ccc":3}"#,
        r#"{"a":1,"a":2,"ccc":3}"#,
        r#"{"a":1,"bb":2,"a":3}"#,
        r#"{"a":1,"bb":2,"ccc":3,"bb":4}"#,
        r#"{"a":1,"b\u0062":2,"ccc":3}"#,
        r#"{"a":1,"bb":2,"ccc":3}"#,
        r#"{"a":1,"bb\n":2,"ccc":3}"#,
        r#"{"a":1,"bb"}"#,
        r#"{"a":1,"bb"#,
        r#"{"a":1,"b"#,
        r#"{"a":1,"bb":2,"ccc":3}"#,
        r#"{"a":1,"ccc":2,"ccc":3}"#,
        r#"["a",{"a":1,"bb":2}]"#,
        r#"{"a":{"a":1,"bb":2},"bb":{"bb":3}}"#,
        r#"{"eight_by":1,"fifteen_bytes_k":2,"sixteen_bytes_ke":3}"#,
        r#"{"eight_by":1,"fifteen_bytes_K":2,"sixteen_bytes_ke":3}"#,
        r#"{"eight_by":1,"fifteen_bytes_k":2,"sixteen_bytes_kE":3}"#,
        r#"{"eight_bY":1,"fifteen_bytes_k":2,"sixteen_bytes_ke":3}"#,
        // Known keys left out (found a few places on), keys not known between them, and
        // keys given twice after either.
        r#"{"a":1,"bb":2,"ccc":3,"dddd":4,"eeeee":5,"ffffff":6}"#,
        r#"{"a":1,"ccc":3,"ffffff":6}"#,
        r#"{"a":1,"dddd":4,"ffffff":6}"#,
        r#"{"a":1,"eeeee":5,"a":2}"#,
        r#"{"a":1,"ccc":3,"ccc":4}"#,
        r#"{"a":1,"ccc":3,"bb":4,"ccc":5}"#,
        r#"{"a":1,"x":0,"ccc":3,"x":9}"#,
        r#"{"a":1,"bb":2,"ccc":3,"dddd":4,"eeeee":5,"ffffff":6}"#,
        r#"{"a":1,"x":0,"dddd":4,"bb":1,"x":9}"#,
        r#"{"a":1,"bb":2,"ccc":3,"dddd":4,"eeeee":5,"ffffff":6}"#,
        r#"{"ffffff":1,"a":2,"ffffff":3}"#,
        r#"{"a":1,"bb":2,"ccc":3,"dddd":4,"eeeee":5,"ffffff":6}"#,
        r#"{"bb":1,"ccc":2,"a":3,"bb":4}"#,
        r#"{"a":1,"bb":2,"ccc":3,"dddd":4,"eeeee":5,"ffffff":6}"#,
        r#"{"ffffff":1,"a":2,"bb":3,"ccc":4,"dddd":5,"ffffff":6}"#,
    ]
    .into_iter()
    .map(str::to_string)
    .chain([
        format!(r#"{{"a":1,"{long}":2,"bb":3}}"#),
        format!(r#"{{"a":1,"{long}":2,"bb":3}}"#),
        format!(r#"{{"a":1,"{long}":2,"a":3}}"#),
        many(r#""z":0"#),
        many(r#""z":0"#),
        many(r#""k3":0"#),
        many(r#""k39":0"#),
        many(r#""z":0"#),
    ])
    .collect();
    for duplicates in [DuplicateKeys::First, DuplicateKeys::Last] {
        for doc in &docs {
            assert_eq!(
                read_now(doc.as_bytes(), duplicates),
                read_fresh(doc.as_bytes(), duplicates),
                "{doc} read as {duplicates:?}"
            );
            if duplicates == DuplicateKeys::Last {
                agree(doc.as_bytes());
            }
        }
    }
}

#[test]
fn objects_keep_their_text_until_they_change() {
    let text = b"{ \"a\" : { \"b\" : [ 1.50 , 2 ] } , \"c\" : {\"d\": 1e3} }";
    let v = from_slice(text).unwrap();
    let written = |v: &Value| {
        let mut out = Vec::new();
        write_json(&mut out, v);
        String::from_utf8(out).unwrap()
    };
    assert_eq!(written(&v), std::str::from_utf8(text).unwrap());
    assert_eq!(written(&v["a"]), "{ \"b\" : [ 1.50 , 2 ] }");
    assert_eq!(compact(&v), r#"{"a":{"b":[1.5,2]},"c":{"d":1000.0}}"#);
    // A change inside `a` is spliced into the text of `a` and of the root (`splice.rs`).
    let mut changed = v.clone();
    let Value::Object(root) = &mut changed else {
        unreachable!()
    };
    let Some(Value::Object(a)) = root.get_mut("a") else {
        unreachable!()
    };
    a.insert("x", Value::Null);
    assert_eq!(
        written(&changed),
        r#"{ "a" : { "b" : [ 1.50 , 2 ] ,"x":null} , "c" : {"d": 1e3} }"#
    );
    // Every way to change an object drops its text.
    type Change = fn(&mut Map);
    let changes: &[(&str, Change)] = &[
        ("insert", |m| {
            m.insert("z", Value::Null);
        }),
        ("get_mut", |m| {
            m.get_mut("a");
        }),
        ("remove", |m| {
            m.remove("a");
        }),
        ("entry", |m| {
            m.entry("a");
        }),
        ("get_or_insert_null", |m| {
            m.get_or_insert_null(&"a".into());
        }),
        ("iter_mut", |m| {
            let _ = m.iter_mut();
        }),
        ("values_mut", |m| {
            let _ = m.values_mut();
        }),
        ("sort_keys", Map::sort_keys),
        ("retain", |m| m.retain(|_, _| true)),
        ("clear", Map::clear),
        ("extend", |m| m.extend([("q", Value::Null)])),
        ("forget_text", Map::forget_text),
    ];
    for (name, change) in changes {
        let Some(Value::Object(mut m)) = from_slice(text) else {
            unreachable!()
        };
        assert!(m.text().is_some());
        change(&mut m);
        assert!(m.text().is_none(), "{name}");
    }
    // Read-only use keeps it, and so does a copy.
    let Some(Value::Object(m)) = from_slice(text) else {
        unreachable!()
    };
    let _ = (
        m.get("a"),
        m.iter().count(),
        m.keys().count(),
        m.contains_key("c"),
    );
    assert_eq!(m.clone().text(), m.text());
}

#[test]
fn large_objects_keep_their_text_and_index() {
    let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\" : {i}")).collect();
    let text = format!("{{ {} }}", keys.join(" , "));
    let Some(Value::Object(mut m)) = from_slice(text.as_bytes()) else {
        unreachable!()
    };
    assert!(m.has_index());
    assert_eq!(m.text().map(|t| &t[..]), Some(text.as_bytes()));
    assert_eq!(m.get("k33"), Some(&Value::from(33)));
    m.insert("k40", Value::from(40));
    assert!(m.text().is_none());
    assert!(m.has_index());
    assert_eq!(m.get("k40"), Some(&Value::from(40)));
}

#[test]
fn exact_floats_are_rusts_readings_table() {
    // Every case the one-operation path takes must be the float Rust's reader gives for
    // the same digits and power (both round the exact value once), to the bit; and the
    // ones past its bounds are left to that reader.
    let check = |digits: u64, power: i64| {
        let text = format!("{digits}e{power}");
        let rust: f64 = text.parse().unwrap();
        match exact_float(digits, power) {
            Some(f) => assert_eq!(f.to_bits(), rust.to_bits(), "{text}"),
            None => assert!(digits > 1 << 53 || !(-22..=22).contains(&power), "{text}"),
        }
    };
    let edges = [
        0,
        1,
        9,
        10,
        (1 << 53) - 1,
        1 << 53,
        (1 << 53) + 1,
        9_999_999_999_999_999,
        4_503_599_627_370_497,
        1_234_567_890_123_456,
        7_609_624_449_125_756,
        u64::MAX,
    ];
    for digits in edges {
        for power in -30..=30 {
            check(digits, power);
        }
    }
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..200_000 {
        // Every number of digits up to 17, uniformly, and every power near the bounds.
        let len = r.below(17) as u32 + 1;
        let digits = r.next() % 10u64.pow(len);
        let power = r.below(51) as i64 - 25;
        check(digits, power);
    }
    assert_eq!(exact_float(1, 22), Some(1e22));
    assert_eq!(exact_float(1, 23), None);
    assert_eq!(exact_float(1, -22), Some(1e-22));
    assert_eq!(exact_float(1, -23), None);
    assert_eq!(exact_float(1 << 53, 0), Some(9_007_199_254_740_992.0));
    assert_eq!(exact_float((1 << 53) + 1, 0), None);
    assert_eq!(exact_float(5, i64::MIN), None);
}

/// A number as JSON might write it, or nearly: signs, leading zeros, long and short
/// parts, fractions with leading zeros, exponents small and huge.
fn number_text(r: &mut Rng) -> String {
    let digits = |r: &mut Rng, n: usize| -> String {
        (0..n)
            .map(|_| char::from(b'0' + r.below(10) as u8))
            .collect()
    };
    let mut t = String::new();
    if r.below(3) == 0 {
        t.push('-');
    }
    match r.below(6) {
        0 => t.push('0'),
        1 => {
            let zeros = r.below(4) + 1;
            t.push_str(&"0".repeat(zeros));
            let n = r.below(3);
            t.push_str(&digits(r, n));
        }
        _ => {
            t.push(char::from(b'1' + r.below(9) as u8));
            let n = r.below(24);
            t.push_str(&digits(r, n));
        }
    }
    if r.below(2) == 0 {
        t.push('.');
        let zeros = if r.below(3) == 0 { r.below(8) } else { 0 };
        t.push_str(&"0".repeat(zeros));
        let n = r.below(22);
        t.push_str(&digits(r, n));
    }
    if r.below(3) == 0 {
        t.push_str(["e", "E"][r.below(2)]);
        t.push_str(["", "+", "-"][r.below(3)]);
        let n = [1, 1, 2, 3, 0, 25][r.below(6)];
        t.push_str(&digits(r, n));
    }
    t
}

#[test]
fn numbers_read_as_serde_json_and_rust_read_them() {
    let mut r = Rng(0xd1b5_4a32_d192_ed03);
    let cases = [
        "9007199254740992",
        "9007199254740993",
        "9007199254740993.0",
        "900719925474099.3",
        "0.9007199254740993",
        "1591367999.430166",
        "0.7609624449125756",
        "0.26633056045725956",
        "1e22",
        "1e23",
        "1.0e22",
        "10e21",
        "0.1e-21",
        "1e-22",
        "1e-23",
        "1234567890123456789",
        "12345678901234567890",
        "1234567890123456789.5",
        "0.1234567890123456789",
        "123456789012345678e3",
        "-0",
        "-0.0",
        "-0e5",
        "0e-5",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999",
        "100000000000000000000",
        "1e+0",
        "1E-0",
        "1e0000000000000000000000001",
        "1e-0000000000000000000000001",
        "2.5e-324",
        "1.7976931348623157e308",
        "1.7976931348623159e308",
    ];
    let texts = cases
        .iter()
        .map(|c| c.to_string())
        .chain((0..20_000).map(|_| number_text(&mut r)));
    for text in texts {
        // Alone, as a member's value (read on the member's path) and in an array.
        agree(text.as_bytes());
        agree(format!("{{\"k\":{text}}}").as_bytes());
        agree(format!("{{\"k\":{text},\"l\":1}}").as_bytes());
        agree(format!("[{text}]").as_bytes());
        // A float is the one Rust reads (serde_json's, with `float_roundtrip`, is the same).
        if let Some(Value::Number(n)) = from_slice(text.as_bytes())
            && n.is_f64()
        {
            let rust: f64 = text.parse().unwrap();
            assert_eq!(n.as_f64().map(f64::to_bits), Some(rust.to_bits()), "{text}");
        }
    }
}

#[test]
fn string_values_read_as_serde_json_reads_them() {
    // Either side of the length strings are kept inline up to (24 bytes), in ASCII and
    // in characters of two to four bytes, plain and with an escape, as members' values
    // and elsewhere.
    for unit in ["a", "é", "€", "😀", "a\\n", "\\u00e9"] {
        for n in 0..30 {
            let s = unit.repeat(n);
            for text in [
                format!("\"{s}\""),
                format!("{{\"k\":\"{s}\"}}"),
                format!("{{\"k\":\"{s}\",\"l\":\"{s}x\"}}"),
                format!("[\"{s}\"]"),
                format!("{{\"k\":\"{s}"),
            ] {
                agree(text.as_bytes());
            }
        }
    }
}

#[test]
fn keys_of_every_length_read_as_the_last_objects_keys() {
    // Each key of 0 to 20 bytes is known from the object before; the next object's key
    // differs from it in each byte, is one byte shorter or longer, or is cut off by the
    // end of the text (so the text has fewer than sixteen bytes after its quote).
    for n in 0..=20usize {
        let key: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let known = format!("{{\"{key}\":1,\"z\":2}}");
        let mut others = vec![known.clone(), format!("{{\"{key}\":1}}")];
        for at in 0..n {
            let mut k = key.clone().into_bytes();
            k[at] = b'Q';
            others.push(format!(
                "{{\"{}\":1,\"z\":2}}",
                String::from_utf8(k).unwrap()
            ));
        }
        others.push(format!("{{\"{key}x\":1,\"z\":2}}"));
        if n > 0 {
            others.push(format!("{{\"{}\":1,\"z\":2}}", &key[..n - 1]));
        }
        others.push(format!("{{\"{key}\\n\":1}}"));
        others.push(format!("{{\"{key}\""));
        others.push(format!("{{\"{key}"));
        others.push(format!("{{\"{key}\":"));
        for other in &others {
            for duplicates in [DuplicateKeys::First, DuplicateKeys::Last] {
                let _ = read_now(known.as_bytes(), duplicates);
                assert_eq!(
                    read_now(other.as_bytes(), duplicates),
                    read_fresh(other.as_bytes(), duplicates),
                    "{other} after {known}"
                );
            }
            agree(other.as_bytes());
        }
    }
}

#[test]
fn digits_are_read_eight_at_a_time_as_one_at_a_time_table() {
    // n random digits, then every byte that is not a digit, then anything: the run is the
    // n digits, whatever follows (bytes below '0' borrow, bytes above '9' carry).
    let slowly = |b: &[u8]| -> (u64, usize) {
        let n = b.iter().take_while(|d| d.is_ascii_digit()).count();
        let v = b[..n].iter().fold(0u64, |v, d| {
            v.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
        });
        (v, n)
    };
    let mut r = Rng(0x5851_f42d_4c95_7f2d);
    for n in 0..=8 {
        for stop in (0..=255u8).filter(|b| !b.is_ascii_digit()) {
            for _ in 0..8 {
                let mut b: Vec<u8> = (0..n).map(|_| b'0' + r.below(10) as u8).collect();
                b.push(stop);
                while b.len() < 8 {
                    b.push(r.next() as u8);
                }
                let word = u64::from_le_bytes(*b.first_chunk::<8>().unwrap());
                assert_eq!(eight_digits(word), slowly(&b[..n.min(8)]), "{b:?}");
                assert_eq!(eight_digits(word), slowly(&b), "{b:?}");
            }
        }
        let all: Vec<u8> = (0..8).map(|_| b'0' + r.below(10) as u8).collect();
        let word = u64::from_le_bytes(*all.first_chunk::<8>().unwrap());
        assert_eq!(eight_digits(word), slowly(&all));
    }
    // Runs of every length up to 40 from every place, ending at the end of the text or
    // before another byte; `digits` carried in.
    for len in 0..40 {
        let run: Vec<u8> = (0..len).map(|_| b'0' + r.below(10) as u8).collect();
        for tail in [&b""[..], b"x", b".5", b"12345678\""] {
            let mut b = b"-".to_vec();
            b.extend_from_slice(&run);
            b.extend_from_slice(tail);
            for start in 1..=b.len() {
                let mut digits = 7u64;
                let end = digit_run(&b, start, &mut digits);
                let (v, n) = slowly(&b[start..]);
                let scale = (0..n).fold(1u64, |s, _| s.wrapping_mul(10));
                let expected = 7u64.wrapping_mul(scale).wrapping_add(v);
                assert_eq!((end, digits), (start + n, expected), "{b:?} from {start}");
            }
        }
    }
}
