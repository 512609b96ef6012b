//! The `format_*` family: base64 and gzip encodings of values and data, and reading
//! containers (ZIP archives, Parquet files) and pretty-printed JSON into messages.

pub(crate) mod from_base64;
pub(crate) mod from_gzip;
pub(crate) mod from_parquet;
pub(crate) mod from_pretty_print;
pub(crate) mod from_zip;
pub(crate) mod to_base64;
pub(crate) mod to_gzip;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.stateless("format_from_base64", from_base64::FormatFromBase64::build);
    r.map("format_to_base64", to_base64::FormatToBase64::build);
    r.map("format_from_gzip", from_gzip::FormatFromGzip::build);
    r.map("format_to_gzip", to_gzip::FormatToGzip::build);
    r.stateless(
        "format_from_parquet",
        from_parquet::FormatFromParquet::build,
    );
    r.stateful(
        "format_from_pretty_print",
        from_pretty_print::FormatFromPrettyPrint::build,
    );
    r.stateless("format_from_zip", from_zip::FormatFromZip::build);
}
