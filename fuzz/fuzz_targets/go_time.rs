//! Go time layouts: a layout (the first line) parses a value (the rest) and formats times.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (layout, value) = text.split_once('\n').unwrap_or((text, ""));
    sluice_transforms::fuzzing::go_time_layout(layout, value);
});
