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
