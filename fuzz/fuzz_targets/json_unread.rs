//! The objects and arrays a document leaves unread against the same document read whole:
//! the same inputs accepted, and after the same reads and changes (taken from the input's
//! first bytes), equal values and the same text written, keeping texts and compact.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_engine::json::unread_check::unread_and_read_agree;

fuzz_target!(|data: &[u8]| {
    // The first byte says how many changes (up to 7, three bytes each) come before the
    // document.
    let Some((&count, rest)) = data.split_first() else {
        return;
    };
    let ops_len = (usize::from(count % 8) * 3).min(rest.len());
    let (ops, document) = rest.split_at(ops_len);
    if let Err(e) = unread_and_read_agree(document, ops) {
        panic!("{e} (document {:?}, changes {ops:?})", String::from_utf8_lossy(document));
    }
});
