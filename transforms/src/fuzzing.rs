//! Entry points for the fuzz targets (`fuzz/`), which can only call public items: the
//! parts of this crate that read untrusted text and are not public otherwise.

use chrono::{TimeZone, Utc};
use chrono_tz::Tz;

/// Go time layouts: compiles `layout`, parses `value` with it (in UTC and in a zone with
/// daylight saving), and formats a fixed instant and the parsed one back with it.
pub fn go_time_layout(layout: &str, value: &str) {
    let l = crate::time::layout::Layout::compile(layout);
    let fixed = Utc
        .timestamp_opt(1_700_000_000, 123_456_789)
        .single()
        .map(|t| t.with_timezone(&Tz::UTC));
    if let Some(t) = fixed {
        let _ = l.format(&t);
    }
    for tz in [Tz::UTC, Tz::America__New_York] {
        if let Ok(t) = l.parse(value, tz) {
            let _ = l.format(&t.with_timezone(&tz));
        }
    }
}

/// A name from message data under a root from the config (`send_file`'s and the object
/// sends' `use_batch_key_as_prefix`): the path it gives, or `None` when it is refused.
pub fn data_path(root: &str, name: &str) -> Option<String> {
    crate::send::data_path::confine(root, name).ok()
}
