//! The JSON value: what sluice's reader accepts, serde_json accepts (and the other way
//! round), as the same value with the same number types when a key given twice keeps its
//! last value, as serde_json keeps it; what sluice writes (objects and arrays as the text
//! they were parsed from) reads back, in serde_json, as the same value. Messages, which
//! keep a key's first value (GJSON's reading), are accepted alike and read back as
//! themselves.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_engine::json::parse::{DuplicateKeys, from_slice_with};
use sluice_engine::json::write_compact;
use sluice_engine::message::{parse_json, serialize};

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
    if let Some(m) = message {
        assert_eq!(parse_json(&serialize(&m)), Some(m), "round trip of {data:?}");
    }
});
