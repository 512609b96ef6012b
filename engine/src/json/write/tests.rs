//! The writer against serde_json and its own bounds, on values of every kind.

use super::*;
use crate::json::{Map, Value};

/// serde_json's compact text of `v` (the oracle: its own serializer over `Value`'s
/// `Serialize`).
fn serde_text(v: &Value) -> String {
    serde_json::to_string(v).unwrap()
}

/// `v` written by [`write_compact`] and by [`write_json`] (no text kept, so the same)
/// after `prefix`, into a `Vec` with no spare room and into one with `prefix`'s room
/// only, so that every growth path runs; each must be `prefix` then serde_json's text.
/// (Debug builds check every unchecked write against the room asked for, so a bound
/// too small fails here even when the `Vec` happens to have the capacity.)
fn check(v: &Value) {
    let want = serde_text(v);
    for prefix in [&b""[..], b"0123456789abcdefghijklmnopqrstuvwxyz"] {
        for spare in [0, 7, 64] {
            for f in [write_compact, write_json] {
                let mut out = Vec::with_capacity(prefix.len() + spare);
                out.extend_from_slice(prefix);
                f(&mut out, v);
                assert_eq!(&out[..prefix.len()], prefix);
                assert_eq!(String::from_utf8_lossy(&out[prefix.len()..]), want);
            }
        }
    }
}

#[test]
fn decimal_len_counts_the_digits_of_every_kind_of_number() {
    let mut ns: Vec<u64> = (0..=100_000).collect();
    for b in 0..64 {
        let p = 1u64 << b;
        ns.extend([p - 1, p, p + 1, p.wrapping_mul(3) / 2]);
    }
    let mut p = 1u64;
    loop {
        ns.extend([p - 1, p, p + 1]);
        let Some(q) = p.checked_mul(10) else { break };
        p = q;
    }
    ns.extend([u64::MAX - 1, u64::MAX]);
    for n in ns {
        assert_eq!(decimal_len(n), n.to_string().len(), "{n}");
    }
}

#[test]
fn numbers_of_every_kind_are_written_as_serde_json_writes_them() {
    let mut ints: Vec<u64> = (0..=1000).collect();
    let mut p = 1u64;
    while let Some(q) = p.checked_mul(10) {
        ints.extend([p - 1, p, p + 1, q - 1]);
        p = q;
    }
    ints.extend([
        p - 1,
        p,
        p + 1,
        u64::MAX - 1,
        u64::MAX,
        1 << 63,
        (1 << 63) - 1,
    ]);
    for &n in &ints {
        check(&Value::from(n));
        if let Ok(i) = i64::try_from(n) {
            check(&Value::from(-i));
        }
    }
    check(&Value::from(i64::MIN));
    check(&Value::from(i64::MIN + 1));
    let floats = [
        0.0,
        -0.0,
        1.5,
        -1.5,
        0.1,
        1591367999.430166,
        0.7609624449125756,
        760962444.9125756,
        1e-7,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        -2.2250738585072014e-308,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        1e21,
        1e22,
        123456789012345680000.0,
        -1.2345678901234567e-300,
    ];
    for f in floats {
        check(&Value::from(f));
    }
    // Every kind in one object and one array, as members and elements.
    let all: Vec<Value> = ints
        .iter()
        .map(|&n| Value::from(n))
        .chain(floats.iter().map(|&f| Value::from(f)))
        .chain([
            Value::from(i64::MIN),
            Value::Null,
            true.into(),
            false.into(),
        ])
        .collect();
    let m: Map = all
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("k{i}"), v.clone()))
        .collect();
    check(&Value::Object(m));
    check(&Value::from(all));
}

#[test]
fn strings_and_keys_of_every_length_and_escape_are_written_as_serde_json_writes_them() {
    // Plain, with a character to escape at every place, with non-ASCII, at every length
    // up to 80 (the writer copies up to 32 bytes in words, longer ones at once), as
    // values, keys and array elements, before and after values of every kind.
    let base: Vec<char> = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&'()*+,-./:;<=>?@[]^_`{|}~ "
        .chars()
        .collect();
    let mut strings = Vec::new();
    for n in 0..=80 {
        let plain: String = base[..n].iter().collect();
        strings.push(plain.clone());
        for pos in 0..=n {
            for c in ['"', '\\', '\n', '\u{0}', '\u{1f}', '\u{7f}', 'é', '😀'] {
                let mut s = plain.clone();
                s.insert(pos, c);
                strings.push(s);
            }
        }
    }
    for s in &strings {
        check(&Value::from(s.as_str()));
        let mut m = Map::new();
        m.insert(s.as_str(), Value::from(s.as_str()));
        m.insert(format!("{s}2"), Value::from(-12345));
        m.insert(format!("{s}3"), Value::from(1.5e-300));
        m.insert(format!("{s}4"), Value::from(vec![Value::from(s.as_str())]));
        m.insert(format!("{s}5"), Value::Object(Map::new()));
        m.insert(format!("{s}6"), Value::Null);
        check(&Value::Object(m));
    }
}

#[test]
fn nested_and_empty_containers_are_written_as_serde_json_writes_them() {
    for text in [
        "{}",
        "[]",
        "[[]]",
        "[{}]",
        r#"{"a":{}}"#,
        r#"{"a":[]}"#,
        r#"[[[[[[[[[[[[[[[[[[[[{"x":[1,[2,[3,{"y":{"z":{}}}]]]}]]]]]]]]]]]]]]]]]]]]"#,
        r#"{"a":{"b":{"c":{"d":[1,2,{"e":"f","g":[null,true,false,-0.0]}]}}},"h":""}"#,
        r#"[1,"a",null,true,false,1.5,[],{},{"":""},[""]]"#,
    ] {
        let v: Value = serde_json::from_str(text).unwrap();
        check(&v);
    }
    // A large object and a long array: the output grows many times.
    let big: Map = (0..500)
        .map(|i| {
            (
                format!("key number {i}"),
                Value::from(format!("value {i} {}", "x".repeat(i % 40))),
            )
        })
        .collect();
    check(&Value::Object(big));
    let long: Vec<Value> = (0..2000).map(|i| Value::from(i * 7919)).collect();
    check(&Value::from(long));
}
