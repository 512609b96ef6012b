//! The JSON value: what sluice's reader accepts, serde_json accepts (and the other way
//! round), as the same value with the same number types; what sluice writes (objects as
//! the text they were parsed from) reads back, in serde_json, as the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_engine::json::write_compact;
use sluice_engine::message::{parse_json, serialize};

fuzz_target!(|data: &[u8]| {
    let ours = parse_json(data);
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
});
