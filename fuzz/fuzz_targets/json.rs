//! The JSON value: what sluice parses, serde_json parses (and the other way round), and
//! what sluice writes reads back, in serde_json, as the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
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
        let text = serialize(&v);
        let back: serde_json::Value =
            serde_json::from_slice(&text).expect("what sluice writes is JSON");
        assert_eq!(back, want, "round trip of {data:?}");
    }
});
