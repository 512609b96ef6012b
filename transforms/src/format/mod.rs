//! The `format_*` family: base64 and gzip encodings of values and data, and reading
//! containers (ZIP archives, Parquet files) and pretty-printed JSON into messages.

pub mod from_base64;
pub mod from_gzip;
pub mod from_parquet;
pub mod from_pretty_print;
pub mod from_zip;
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
    r.transform(
        "format_from_parquet",
        ctor!(from_parquet::FormatFromParquet),
    );
    r.transform(
        "format_from_pretty_print",
        ctor!(from_pretty_print::FormatFromPrettyPrint),
    );
    r.transform("format_from_zip", ctor!(from_zip::FormatFromZip));
}
