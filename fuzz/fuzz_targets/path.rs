//! The path language: a path (the first line) is compiled, and read, written and deleted
//! on a JSON document (the rest). Never a panic; a value written at a plain key path reads
//! back; after every change the document's JSON text (the input's own, the changes spliced
//! in as SJSON splices them) reads back as the document.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_engine::Value;
use sluice_engine::json::{parse, write_json};
use sluice_engine::path::Path;

/// How deep arrays and objects nest in `v`.
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The document's text reads back as the document (paths can nest it deeper than a
/// reader accepts, 127 levels as serde_json: those are not read back).
fn text_reads_back(doc: &Value) {
    if depth(doc) >= 127 {
        return;
    }
    let mut text = Vec::new();
    write_json(&mut text, doc);
    assert_eq!(
        parse::from_slice(&text).as_ref(),
        Some(doc),
        "{}",
        String::from_utf8_lossy(&text)
    );
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (path, doc) = text.split_once('\n').unwrap_or((text, "{}"));
    let Ok(p) = Path::parse(path) else {
        return;
    };
    let Some(mut doc) = parse::from_slice(doc.as_bytes()) else {
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
    text_reads_back(&doc);
    let _ = p.delete(&mut doc);
    text_reads_back(&doc);
});
