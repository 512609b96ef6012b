//! The Go regular expression layer: any text translates, and compiles or is refused,
//! without a panic; what compiles matches its own pattern text without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_engine::go_regex;

fuzz_target!(|data: &[u8]| {
    let Ok(pattern) = std::str::from_utf8(data) else {
        return;
    };
    let _ = go_regex::translate(pattern);
    if let Ok(re) = go_regex::compile(pattern) {
        let _ = re.is_match(pattern);
    }
    if let Ok(re) = go_regex::compile_bytes(pattern) {
        let _ = re.is_match(data);
    }
});
