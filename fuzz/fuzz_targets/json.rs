//! The JSON value: what sluice's reader accepts, serde_json accepts (and the other way
//! round), as the same value with the same number types when a key given twice keeps its
//! last value, as serde_json keeps it; what sluice writes (objects and arrays as the text
//! they were parsed from) reads back, in serde_json, as the same value. Messages, which
//! keep a key's first value (GJSON's reading), are accepted alike and read back as
//! themselves. A message's data that is not one JSON value reads by path, as GJSON reads
//! it, as the object or array its first bytes hold (or hold once the closing bracket is
//! added), or as nothing; its bytes are kept while nothing is written, and a key of that
//! object set in place keeps the bytes after it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_engine::json::parse::{DuplicateKeys, from_slice_with};
use sluice_engine::json::write_compact;
use sluice_engine::json::parse::leading_value;
use sluice_engine::message::{Key, Message, parse_json, serialize};
use sluice_engine::{Value, json};

fuzz_target!(|data: &[u8]| {
    let ours = from_slice_with(data, DuplicateKeys::Last);
    let theirs = serde_json::from_slice::<serde_json::Value>(data);
    // sluice reads empty (or all-blank) input as no document; serde_json as an error.
    assert_eq!(
        ours.is_some(),
        theirs.is_ok(),
        "parse disagrees on {data:?}"
    );
    if let (Some(v), Ok(want)) = (ours, theirs) {
        let mut compact = Vec::new();
        write_compact(&mut compact, &v);
        let want_text = serde_json::to_vec(&want).expect("a value serialises");
        assert_eq!(compact, want_text, "value of {data:?}");
        let text = serialize(&v);
        let back: serde_json::Value =
            serde_json::from_slice(&text).expect("what sluice writes is JSON");
        assert_eq!(back, want, "round trip of {data:?}");
    }
    let message = parse_json(data);
    assert_eq!(
        message.is_some(),
        serde_json::from_slice::<serde_json::Value>(data).is_ok(),
        "a message's reading disagrees on {data:?}"
    );
    if let Some(m) = &message {
        assert_eq!(parse_json(&serialize(m)), Some(m.clone()), "round trip of {data:?}");
    }

    let mut msg = Message::new(data.to_vec());
    let doc = msg.data_body().document().cloned();
    match (&message, &doc) {
        (Some(m), Some(d)) => assert_eq!(m, d, "a document that is JSON reads as it: {data:?}"),
        (Some(_), None) => panic!("JSON read as no document: {data:?}"),
        (None, Some(d)) => assert!(
            matches!(d, Value::Object(_) | Value::Array(_)),
            "only an object or array is read out of other bytes: {data:?}"
        ),
        (None, None) => {}
    }
    assert_eq!(&msg.data()[..], data, "unchanged bytes are kept");
    // A key the first object has, set in place: the bytes after the object stay.
    let bytes = msg.data().clone();
    if message.is_none()
        && let Some((Value::Object(first), _, end)) = leading_value(&bytes)
        && let Some((k, _)) = first.iter().next()
        // A plain key (one of digits only would be an index, and a long one one too large).
        && k.starts_with(|c: char| c.is_ascii_alphabetic())
        && k.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        let key = Key::parse(k).expect("a plain key");
        msg.set(&key, json!(0)).expect("a key the document has is set");
        assert!(
            msg.data().ends_with(&bytes[end..]),
            "the bytes after the value are kept: {data:?}"
        );
        assert_eq!(
            msg.get(&key).map(|v| v.into_owned()),
            Some(json!(0)),
            "{data:?}"
        );
    }
});
