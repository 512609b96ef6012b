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
    r.stateless(&from_base64::INFO, from_base64::FormatFromBase64::build);
    r.map(&to_base64::INFO, to_base64::FormatToBase64::build);
    r.map(&from_gzip::INFO, from_gzip::FormatFromGzip::build);
    r.map(&to_gzip::INFO, to_gzip::FormatToGzip::build);
    r.stateless(&from_parquet::INFO, from_parquet::FormatFromParquet::build);
    r.stateful(
        &from_pretty_print::INFO,
        from_pretty_print::FormatFromPrettyPrint::build,
    );
    r.stateless(&from_zip::INFO, from_zip::FormatFromZip::build);
}
