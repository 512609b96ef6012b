//! Tests of `json`.

use super::*;
use compact_str::CompactString;

/// A small deterministic generator (xorshift) for the generated-case tests of `json`'s
/// modules, so that a failure reproduces.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(super) fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// serde_json's reading of `text`, except that a key given twice keeps its first value, as
/// GJSON reads it: the oracle for `parse::from_slice`, written apart from it.
pub(super) fn first_wins(text: &[u8]) -> Option<serde_json::Value> {
    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde_json::Value as J;
    struct FirstWins(J);
    impl<'de> Deserialize<'de> for FirstWins {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(Oracle).map(FirstWins)
        }
    }
    struct Oracle;
    impl<'de> Visitor<'de> for Oracle {
        type Value = J;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_unit<E>(self) -> Result<J, E> {
            Ok(J::Null)
        }
        fn visit_bool<E>(self, b: bool) -> Result<J, E> {
            Ok(J::Bool(b))
        }
        fn visit_i64<E>(self, n: i64) -> Result<J, E> {
            Ok(J::from(n))
        }
        fn visit_u64<E>(self, n: u64) -> Result<J, E> {
            Ok(J::from(n))
        }
        fn visit_f64<E>(self, n: f64) -> Result<J, E> {
            Ok(J::from(n))
        }
        fn visit_str<E>(self, s: &str) -> Result<J, E> {
            Ok(J::from(s))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<J, A::Error> {
            let mut out = Vec::new();
            while let Some(FirstWins(v)) = seq.next_element()? {
                out.push(v);
            }
            Ok(J::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<J, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(k) = map.next_key::<String>()? {
                let FirstWins(v) = map.next_value()?;
                out.entry(k).or_insert(v);
            }
            Ok(J::Object(out))
        }
    }
    serde_json::from_slice::<FirstWins>(text).ok().map(|v| v.0)
}

#[test]
fn parses_and_serialises_keeping_key_order() {
    let text = r#"{"z":1,"a":{"y":[1,2.5,"s",null,true]},"m":-3,"big":30400402455622563}"#;
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(serde_json::to_string(&v).unwrap(), text);
    assert_eq!(v["a"]["y"][1], json!(2.5));
    assert_eq!(
        v.get("big").and_then(Value::as_i64),
        Some(30400402455622563)
    );
}

#[test]
fn insert_keeps_place_and_remove_keeps_order() {
    let mut m = Map::new();
    m.insert("b", json!(1));
    m.insert("a", json!(2));
    m.insert("b", json!(3));
    m.insert(String::from("c"), json!(4));
    assert_eq!(
        m.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["b", "a", "c"]
    );
    m.shift_remove("b");
    assert_eq!(m.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["a", "c"]);
    assert_eq!(
        *m.get_or_insert_null(&CompactString::from("d")),
        Value::Null
    );
    assert_eq!(m.len(), 3);
}

#[test]
fn duplicate_keys_keep_the_last_value_through_serde_and_the_first_as_messages() {
    let v: Value = serde_json::from_str(r#"{"a":1,"b":2,"a":3}"#).unwrap();
    assert_eq!(v.to_string(), r#"{"a":3,"b":2}"#);
    // Messages are read as GJSON reads them: the first value.
    let m = parse::from_slice(br#"{"a":1,"b":2,"a":3}"#).unwrap();
    assert_eq!(m.to_string(), r#"{"a":1,"b":2}"#);
    // Many keys, so that the parser's seen-bits collide, with duplicates throughout.
    let keys: Vec<String> = (0..200).map(|i| format!("key{}", i % 70)).collect();
    let text = format!(
        "{{{}}}",
        keys.iter()
            .enumerate()
            .map(|(i, k)| format!("\"{k}\":{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    let want: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v, want);
    assert_eq!(v.as_object().unwrap().len(), 70);
    assert_eq!(v.to_string(), serde_json::to_string(&want).unwrap());
    let m = parse::from_slice(text.as_bytes()).unwrap();
    assert_eq!(
        Some(m.clone()),
        first_wins(text.as_bytes()).map(Value::from)
    );
    assert_eq!(m["key3"], json!(3));
    assert_eq!(
        parse::from_slice_with(text.as_bytes(), parse::DuplicateKeys::Last),
        Some(v)
    );
}

#[test]
fn converts_to_and_from_serde_json() {
    let s = serde_json::json!({"a": [1, {"b": null}], "c": "d"});
    let v = Value::from(s.clone());
    assert_eq!(v, s);
    assert_eq!(serde_json::Value::from(v), s);
}

#[test]
fn large_objects_use_an_index_that_follows_changes() {
    let mut m = Map::new();
    for i in 0..100 {
        m.insert(format!("k{i}"), json!(i));
    }
    assert!(m.has_index());
    assert_eq!(m.get("k57"), Some(&json!(57)));
    assert_eq!(m.shift_remove("k10"), Some(json!(10)));
    assert_eq!(m.get("k11"), Some(&json!(11)));
    assert_eq!(m.get_index_of("k11"), Some(10));
    m.retain(|k, _| k.ends_with('7'));
    assert_eq!(m.len(), 10);
    assert!(!m.has_index());
    assert_eq!(m.get("k97"), Some(&json!(97)));
    *m.entry("new").or_insert(json!(1)) = json!(2);
    assert_eq!(m.get("new"), Some(&json!(2)));
    m.sort_keys();
    assert_eq!(m.keys().next().map(|k| k.as_str()), Some("k17"));
}

#[test]
fn the_direct_writer_writes_what_serde_json_writes() {
    let mut texts: Vec<String> = vec![
        r#"{"a":"x\"y\\z\n\t\r\b\f\u0001\u001f/é😀","b":[1,-2,2.5,1e300,-0.0,18446744073709551615,null,true,false],"c":{}}"#.into(),
        r#"[[],[{}],"",0,-9223372036854775808]"#.into(),
        r#"[1591367999.430166,0.7609624449125756,1e-7,5e-324,1.7976931348623157e308,-1.5e-10,100000000000000000000.0]"#.into(),
    ];
    // Every single byte value 0..128 inside a string and as a key, alone and at every
    // position of a longer string (the writer skips eight plain bytes at a time).
    for b in 0u8..128 {
        let s = serde_json::to_string(&String::from(b as char)).unwrap();
        texts.push(format!("{{{s}:{s}}}"));
        for pos in 0..20 {
            let mut long: String = "abcdefghijklmnopqrs".into();
            long.insert(pos, b as char);
            let long = serde_json::to_string(&long).unwrap();
            texts.push(format!("[{long}]"));
        }
    }
    // Each byte that needs escaping at every position of strings of 1 to 26 bytes (the
    // writer checks a string in words read straight from it, the last one overlapping, or
    // in two overlapping halves, or byte by byte under four).
    for b in [0u8, 0x1f, b'"', b'\\', b'\n'] {
        for n in 1..=26 {
            for pos in 0..n {
                let mut s: String = "abcdefghijklmnopqrstuvwxyz"[..n - 1].into();
                s.insert(pos, b as char);
                let s = serde_json::to_string(&s).unwrap();
                texts.push(format!("{{{s}:{s}}}"));
            }
        }
    }
    // Plain strings of every length up to 40.
    for n in 0..=40 {
        let plain: String = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"[..n].into();
        texts.push(format!("{{\"{plain}\":\"{plain}\"}}"));
    }
    for t in texts {
        let v: Value = serde_json::from_str(&t).unwrap();
        let mut mine = Vec::new();
        write_compact(&mut mine, &v);
        assert_eq!(
            String::from_utf8(mine).unwrap(),
            serde_json::to_string(&v).unwrap(),
            "{t}"
        );
    }
}

#[test]
fn keys_that_share_a_tag_are_told_apart() {
    let mut m = Map::new();
    for k in ["abcdefgX", "abcdefgY", "abcdefg", "abc", "", "abcdefgXY"] {
        m.insert(k, json!(k));
    }
    for k in ["abcdefgX", "abcdefgY", "abcdefg", "abc", "", "abcdefgXY"] {
        assert_eq!(m.get(k), Some(&json!(k)), "{k:?}");
    }
    assert_eq!(m.get("abcdefgZ"), None);
    assert_eq!(m.get("ab"), None);
    let long = "k".repeat(300);
    m.insert(long.as_str(), json!(1));
    assert_eq!(m.get(long.as_str()), Some(&json!(1)));
    assert_eq!(m.get("k".repeat(299).as_str()), None);
}

#[test]
fn keys_of_8_to_20_bytes_that_differ_in_one_byte_are_told_apart() {
    // Keys that share their tag (length and first seven bytes), differing at each later
    // place: told apart when an object is read and when it is looked up, plainly and
    // through a hint.
    for n in 8..=20 {
        let base: String = "abcdefghijklmnopqrst"[..n].into();
        let keys: Vec<String> = std::iter::once(base.clone())
            .chain((7..n).map(|at| {
                let mut k = base.clone().into_bytes();
                k[at] = b'_';
                String::from_utf8(k).unwrap()
            }))
            .collect();
        let members: Vec<String> = keys.iter().map(|k| format!("{k:?}:{k:?}")).collect();
        let text = format!("{{{}}}", members.join(","));
        let parsed = parse::from_slice(text.as_bytes()).unwrap();
        let Value::Object(m) = &parsed else {
            unreachable!()
        };
        assert_eq!(m.len(), keys.len(), "{text}");
        for k in &keys {
            assert_eq!(m.get(k), Some(&json!(k)), "{k:?}");
            let hint = KeyHint::new(k);
            for _ in 0..2 {
                assert_eq!(m.get_hinted(k, &hint), Some(&json!(k)), "{k:?}");
            }
        }
        let mut other = base.clone().into_bytes();
        other[n - 1] = b'!';
        assert_eq!(m.get(std::str::from_utf8(&other).unwrap()), None);
    }
}

#[test]
fn objects_compare_as_json() {
    assert_eq!(json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1}));
    assert_ne!(json!({"a": 1}), json!({"a": 2}));
}

#[test]
fn a_hinted_lookup_finds_what_a_plain_one_finds_whatever_the_hint_last_saw() {
    // One hint per key, used on objects of different shapes in turn (as a path is, message
    // after message): a place that held the key in the last object may hold another key,
    // one that shares its tag, or nothing at all in this one.
    let keys = [
        "abcdefgX",
        "abcdefgY",
        "abcdefg",
        "abc",
        "",
        "abcdefgXY",
        "zz",
    ];
    let shapes: Vec<Map> = vec![
        keys.iter().map(|k| (k.to_string(), json!(k))).collect(),
        keys.iter()
            .rev()
            .map(|k| (k.to_string(), json!(k)))
            .collect(),
        keys[..3]
            .iter()
            .map(|k| (k.to_string(), json!(k)))
            .collect(),
        keys[3..]
            .iter()
            .map(|k| (k.to_string(), json!(k)))
            .collect(),
        (0..40)
            .map(|i| (format!("k{i}"), json!(i)))
            .chain(keys.iter().map(|k| (k.to_string(), json!(k))))
            .collect(),
        Map::new(),
    ];
    let hints: Vec<KeyHint> = keys
        .iter()
        .chain(&["abcdefgZ", "k39"])
        .map(|k| KeyHint::new(k))
        .collect();
    for round in 0..3 {
        for (s, m) in shapes.iter().enumerate() {
            for (k, h) in keys.iter().chain(&["abcdefgZ", "k39"]).zip(&hints) {
                assert_eq!(
                    m.get_index_hinted(k, h),
                    m.get_index_of(k),
                    "{k:?} in shape {s}, round {round}"
                );
            }
        }
    }
    // Inserting through a hint keeps the place of what it inserted.
    let mut m = shapes[2].clone();
    let h = KeyHint::new("new");
    *m.get_or_insert_null_hinted(&CompactString::from("new"), &h) = json!(1);
    *m.get_or_insert_null_hinted(&CompactString::from("new"), &h) = json!(2);
    assert_eq!(m.get("new"), Some(&json!(2)));
    assert_eq!(m.len(), 4);
    // Setting through a hint: added at the end, then replaced in its place.
    let h = KeyHint::new("set");
    m.insert_hinted(&CompactString::from("set"), &h, json!("a"));
    m.insert_hinted(&CompactString::from("set"), &h, json!("b"));
    assert_eq!(m.get_index_of("set"), Some(4));
    assert_eq!(m.get("set"), Some(&json!("b")));
    assert_eq!(m.len(), 5);
}

#[test]
fn setting_through_a_hint_is_written_as_sjson_edits_the_text() {
    // A parsed object keeps its text; a value set through a hint is spliced into it, an
    // added key appended, as for any other change.
    let Value::Object(mut m) = parse::from_slice(br#"{"a": 1, "b" : "x"}"#).unwrap() else {
        unreachable!()
    };
    m.insert_hinted(&CompactString::from("b"), &KeyHint::new("b"), json!("y"));
    m.insert_hinted(&CompactString::from("c"), &KeyHint::new("c"), json!([1]));
    let mut out = Vec::new();
    write_json(&mut out, &Value::Object(m));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"a": 1, "b" : "y","c":[1]}"#
    );
}

#[test]
fn a_value_is_four_words_and_an_object_entry_one_cache_line() {
    // Strings are kept inline up to 24 bytes without growing a value: a value stays four
    // words, and an object's entry (tag, key, value) 64 bytes.
    assert_eq!(std::mem::size_of::<Value>(), 32);
    assert_eq!(std::mem::size_of::<Slot>(), 64);
    let short = Value::from("C5bLoe2Mvxqhawzqqd000001");
    let Value::String(s) = &short else {
        unreachable!()
    };
    assert!(!s.is_heap_allocated(), "24 bytes are kept inline");
    let long = Value::from("x".repeat(25));
    assert_eq!(long.as_str().map(str::len), Some(25));
}

#[test]
fn what_a_dropped_object_leaves_alone_has_no_drop() {
    // The drop of an object skips numbers, null and booleans, and keys and strings kept
    // inline (whose drop does nothing): numbers must have no drop at all (serde_json's
    // `arbitrary_precision` would give them a `String`).
    assert!(!std::mem::needs_drop::<Number>());
    assert!(!std::mem::needs_drop::<bool>());
}

#[test]
fn dropping_a_document_frees_each_object_and_array_once() {
    // Every object and array read from a text keeps a share of it; once the document is
    // dropped, the text is unique again only if each was dropped (once: twice would free
    // a share another holds). Objects and arrays read and unread, nested in objects and
    // arrays, among scalars and strings short and long, with long keys.
    let long = "y".repeat(40);
    let text = format!(
        r#"{{"a":{{"b":"{long}","c":[1,{{"d":2}},[3]],"e":1.5,"f":null,"{long}":{{}}}},"g":[{{"h":true}}],"i":"short","{long}2":{{"j":[{{"k":"{long}"}}]}},"l":-7}}"#
    );
    let bytes = bytes::Bytes::from(text);
    for read in [false, true] {
        let mut v = parse::from_bytes(&bytes).unwrap();
        if read {
            // Read some of it, and change some, so that readings and owned entries are
            // dropped too.
            assert_eq!(v["a"]["c"][1]["d"], Value::from(2));
            assert_eq!(v["g"][0]["h"], Value::Bool(true));
            if let Some(m) = v.as_object_mut() {
                m.insert("m", Value::from(long.as_str()));
                if let Some(Value::Object(a)) = m.get_mut("a") {
                    a.insert("n", Value::from(vec![Value::Object(Map::new())]));
                }
            }
        }
        assert!(!bytes.is_unique());
        drop(v);
        assert!(bytes.is_unique(), "read: {read}");
    }
}
