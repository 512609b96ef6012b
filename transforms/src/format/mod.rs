//! The `format_*` family: base64 and gzip encodings of values and data.

pub mod from_base64;
pub mod from_gzip;
pub mod to_base64;
pub mod to_gzip;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform("format_from_base64", ctor!(from_base64::FormatFromBase64));
    r.transform("format_to_base64", ctor!(to_base64::FormatToBase64));
    r.transform("format_from_gzip", ctor!(from_gzip::FormatFromGzip));
    r.transform("format_to_gzip", ctor!(to_gzip::FormatToGzip));
}
