//! Objects and arrays left unread: which are, that they are written as their text until
//! changed, that they are checked as strictly as read ones, and that reading them later
//! gives what reading them at once gives.

use super::*;
use crate::json::tests::Rng;
use crate::json::unread_check::unread_and_read_agree;
use crate::json::{write_compact, write_json};

fn written(v: &Value) -> String {
    let mut out = Vec::new();
    write_json(&mut out, v);
    String::from_utf8(out).unwrap()
}

fn object(v: &Value) -> &Map {
    v.as_object().unwrap()
}

#[test]
fn containers_inside_the_top_object_are_left_unread_until_used() {
    let text = r#"{"a" : { "b" : [ 1 , {"c":2} ] }, "d":[ 1, 2 ], "e": "x", "f": {} }"#;
    let v = from_slice(text.as_bytes()).unwrap();
    let top = object(&v);
    assert!(!top.is_unread(), "the top object is built");
    assert!(top.get("a").unwrap().as_object().unwrap().is_unread());
    assert!(top.get("d").unwrap().as_array().unwrap().is_unread());
    assert!(top.get("f").unwrap().as_object().unwrap().is_unread());
    // Written as they came, and still unread after.
    assert_eq!(written(&v), text);
    assert!(top.get("a").unwrap().as_object().unwrap().is_unread());
    // Read through a shared reference: read whole (a path down a chain of containers each
    // left unread would pass over the bytes below each once per level).
    let a = top.get("a").unwrap().as_object().unwrap();
    assert_eq!(a.len(), 1);
    assert!(!a.is_unread());
    assert!(!a.get("b").unwrap().as_array().unwrap().is_unread());
    assert_eq!(a.get("b").unwrap()[1]["c"], Value::from(2u64));
    assert_eq!(written(&v), text, "reading changes nothing written");
    assert_eq!(
        Some(v),
        from_slice_all_read(text.as_bytes(), DuplicateKeys::First)
    );
}

#[test]
fn a_change_inside_an_unread_container_is_spliced_into_its_text() {
    let text = r#"{"a" : { "b" : [ 1 , 2 ], "c" :3 }, "d": [ 1 ,2 ]}"#;
    let mut v = from_slice(text.as_bytes()).unwrap();
    let Value::Object(top) = &mut v else { panic!() };
    let Some(Value::Object(a)) = top.get_mut("a") else {
        panic!()
    };
    a.insert("n", Value::from(true));
    let Some(Value::Array(d)) = top.get_mut("d") else {
        panic!()
    };
    d.push(Value::from(3u64));
    assert_eq!(
        written(&v),
        r#"{"a" : { "b" : [ 1 , 2 ], "c" :3 ,"n":true}, "d": [ 1 ,2 ,3]}"#
    );
    let mut compact = Vec::new();
    write_compact(&mut compact, &v);
    assert_eq!(
        String::from_utf8(compact).unwrap(),
        r#"{"a":{"b":[1,2],"c":3,"n":true},"d":[1,2,3]}"#
    );
}

#[test]
fn an_unread_container_is_checked_as_a_read_one_is_table() {
    // Each inside an object and an array, two and three deep: accepted alike both ways,
    // and as serde_json accepts it.
    let inner: &[&str] = &[
        r#"{"b":1}"#,
        r#"{"b":"\u0001"}"#,
        "{\"b\":\"\u{1}\"}",
        r#"["\ud800"]"#,
        r#"["\ud800\udc00"]"#,
        r#"["\udc00"]"#,
        r#"["\x"]"#,
        r#"["\u12G4"]"#,
        "[1e400]",
        "[-1e400]",
        "[1e-400]",
        "[0e999999]",
        "[1.5E+3]",
        "[01]",
        "[-]",
        "[1.]",
        "[.5]",
        "[1e]",
        "[1,]",
        "[,1]",
        "[1 2]",
        r#"{"b"}"#,
        r#"{"b":}"#,
        r#"{"b":1,}"#,
        r#"{b:1}"#,
        r#"{"b":tru}"#,
        r#"{"b":nulll}"#,
        "[true,false,null]",
        "[ ]",
        "{ }",
        r#"{"b":1,"b":2}"#,
    ];
    let huge = format!("[{}]", "9".repeat(310));
    let large = format!("[{}]", "9".repeat(300));
    let deep_ok = format!("{}{}", "[".repeat(126), "]".repeat(126));
    let too_deep = format!("{}{}", "[".repeat(127), "]".repeat(127));
    let mut all: Vec<String> = inner.iter().map(|s| s.to_string()).collect();
    all.extend([huge, large, deep_ok, too_deep]);
    for x in &all {
        for doc in [
            format!(r#"{{"a":{x}}}"#),
            format!("[{x}]"),
            format!(r#"{{"a":[{{"z":{x}}}]}}"#),
        ] {
            let serde = serde_json::from_str::<serde_json::Value>(&doc).is_ok();
            assert_eq!(from_slice(doc.as_bytes()).is_some(), serde, "{doc:.80}");
            assert_eq!(
                from_slice_all_read(doc.as_bytes(), DuplicateKeys::First).is_some(),
                serde,
                "{doc:.80}"
            );
            unread_and_read_agree(doc.as_bytes(), &[0, 1, 0, 0, 2, 0, 7, 3, 1])
                .unwrap_or_else(|e| panic!("{doc:.80}: {e}"));
        }
    }
}

#[test]
fn generated_documents_read_later_as_when_read_at_once_through_changes() {
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..3000 {
        let mut text = String::new();
        super::tests::document(&mut r, 0, &mut text);
        // Mostly objects at the top, as messages are.
        let text = format!(r#"{{"t":{text},"u":{text}}}"#);
        let ops: Vec<u8> = (0..3 * (1 + r.below(6)))
            .map(|_| r.below(256) as u8)
            .collect();
        unread_and_read_agree(text.as_bytes(), &ops)
            .unwrap_or_else(|e| panic!("{text} {ops:?}: {e}"));
        unread_and_read_agree(&text.as_bytes()[..text.len() - 1], &ops)
            .unwrap_or_else(|e| panic!("{text} cut short: {e}"));
    }
}

#[test]
fn a_container_is_read_whole_so_a_chain_of_them_is_passed_over_once() {
    // {"c":{"c":...{"v":1}...}}: reading the first level reads every level below it, so a
    // path to the bottom passes over the bytes below each level once, not once a level.
    let depth = 60;
    let text = format!(
        "{}{{\"v\":1}}{}",
        "{\"c\":".repeat(depth),
        "}".repeat(depth)
    );
    let v = from_slice(text.as_bytes()).unwrap();
    let mut level = object(&v).get("c").unwrap().as_object().unwrap();
    assert!(level.is_unread());
    let _ = level.len();
    for _ in 1..depth {
        level = level.get("c").unwrap().as_object().unwrap();
        assert!(!level.is_unread(), "a level below the first read");
    }
    assert_eq!(level.get("v"), Some(&Value::from(1u64)));
    assert_eq!(written(&v), text);
}
