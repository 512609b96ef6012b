//! The path language: a path (the first line) is compiled, and read, written and deleted
//! on a JSON document (the rest). Never a panic; a value written at a plain key path reads
//! back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_engine::Value;
use sluice_engine::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (path, doc) = text.split_once('\n').unwrap_or((text, "{}"));
    let Ok(p) = Path::parse(path) else {
        return;
    };
    let Ok(mut doc) = serde_json::from_str::<Value>(doc) else {
        return;
    };
    let _ = p.get(&doc);
    let written = Value::from("fuzz");
    if p.set(&mut doc, written.clone()).is_ok() {
        // A path of plain keys (letters only, dot-separated) reads back what was written.
        if !path.is_empty()
            && path
                .split('.')
                .all(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphabetic()))
        {
            assert_eq!(p.get(&doc).map(|v| v.into_owned()), Some(written));
        }
    }
    let _ = p.delete(&mut doc);
});
