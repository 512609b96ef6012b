//! `format_from_parquet`: reads a Parquet file and emits one JSON object per row.
//!
//! Substation compatibility: data only, no settings; the data is a whole Parquet file (as
//! read from object storage), each row becomes a message whose data is a JSON object of
//! the row's columns, in the file's column order, and whose metadata is a copy of the
//! input's. A file with no rows yields no message; data that is not a Parquet file (empty
//! data included) is an error. Uncompressed, Snappy, gzip, LZ4 and Zstandard pages are read
//! (what Spark, pyarrow, DuckDB and Polars write); Brotli and LZO pages are errors naming
//! the codec.
//!
//! Values: integers and floats are JSON numbers (floats with an integral value written as
//! integers, as Go writes them; NaN and infinities `null`), strings and
//! enums strings, other byte arrays base64 strings (as Go's encoder writes bytes), groups
//! objects, lists arrays, maps objects (keys that are not strings become their JSON text),
//! dates `YYYY-MM-DD`, times `HH:MM:SS.sss`, timestamps RFC 3339 in UTC
//! (`2024-01-02T03:04:05.123Z`), and decimals strings with their exact digits (`"12.30"`),
//! since a JSON number would round them. Substation's reader (parquet-go into Go values) may
//! spell dates, times and decimals differently.
//!
//! Unlike Substation, the sizes the file declares for its decompressed columns are checked
//! against [`MAX_DECOMPRESSED`] (1 GiB) before anything is decompressed, and a fault of the
//! decoder on a malformed file is an error, never a crash.

use std::panic::{AssertUnwindSafe, catch_unwind};

use base64::Engine;
use bytes::Bytes;
use parquet::data_type::Decimal;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, Row};
use serde::Deserialize;
use sluice_engine::{
    Body, Build, ConfigError, Map, Message, Number, StatelessTransform, TransformError, Value,
    async_trait, value,
};

pub(crate) use super::from_gzip::MAX_DECOMPRESSED;

/// Settings of `format_from_parquet` (none).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {}

/// The `format_from_parquet` transform.
pub(crate) struct FormatFromParquet {
    limit: u64,
}

impl FormatFromParquet {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let _: Settings = b.settings()?;
        Ok(FormatFromParquet {
            limit: MAX_DECOMPRESSED,
        })
    }
}

fn failed(why: impl std::fmt::Display) -> TransformError {
    TransformError::failed(format!("cannot read parquet: {why}"))
}

/// The rows of the Parquet file `data` as JSON objects.
pub(crate) fn read_rows(data: Bytes, limit: u64) -> Result<Vec<Value>, TransformError> {
    if data.is_empty() {
        return Err(failed("the data is empty"));
    }
    // The decoder is third-party code fed untrusted bytes: a panic inside it becomes this
    // message's error instead of taking the process down.
    match catch_unwind(AssertUnwindSafe(|| read_rows_inner(data, limit))) {
        Ok(r) => r,
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("the decoder failed");
            Err(failed(format!("malformed file ({why})")))
        }
    }
}

fn read_rows_inner(data: Bytes, limit: u64) -> Result<Vec<Value>, TransformError> {
    let reader = SerializedFileReader::new(data).map_err(failed)?;
    let meta = reader.metadata();
    let mut declared: u64 = 0;
    for rg in meta.row_groups() {
        for col in rg.columns() {
            declared = declared.saturating_add(col.uncompressed_size().max(0) as u64);
        }
    }
    if declared > limit {
        return Err(failed(format!(
            "the file declares {declared} bytes of decompressed columns, over the limit of {}",
            super::from_gzip::describe_limit(limit)
        )));
    }
    let rows = reader.get_row_iter(None).map_err(failed)?;
    let mut out = Vec::with_capacity(meta.file_metadata().num_rows().clamp(0, 1 << 16) as usize);
    for (i, row) in rows.enumerate() {
        let row = row.map_err(|e| failed(format!("row {i}: {e}")))?;
        out.push(row_value(&row).map_err(|e| failed(format!("row {i}: {e}")))?);
    }
    Ok(out)
}

fn row_value(row: &Row) -> Result<Value, String> {
    let mut m = Map::with_capacity(row.len());
    for (name, field) in row.get_column_iter() {
        m.insert(
            name.as_str(),
            field_value(field).map_err(|e| format!("column {name:?}: {e}"))?,
        );
    }
    Ok(Value::Object(m))
}

fn field_value(f: &Field) -> Result<Value, String> {
    Ok(match f {
        Field::Null => Value::Null,
        Field::Bool(b) => Value::Bool(*b),
        Field::Byte(n) => Value::Number(Number::from(*n)),
        Field::Short(n) => Value::Number(Number::from(*n)),
        Field::Int(n) => Value::Number(Number::from(*n)),
        Field::Long(n) => Value::Number(Number::from(*n)),
        Field::UByte(n) => Value::Number(Number::from(*n)),
        Field::UShort(n) => Value::Number(Number::from(*n)),
        Field::UInt(n) => Value::Number(Number::from(*n)),
        Field::ULong(n) => Value::Number(Number::from(*n)),
        Field::Float16(n) => float(f64::from(*n)),
        Field::Float(n) => float(f64::from(*n)),
        Field::Double(n) => float(*n),
        Field::Decimal(d) => Value::String(decimal_text(d)?.into()),
        Field::Str(s) => Value::from(s.as_str()),
        Field::Bytes(b) => Value::String(
            base64::engine::general_purpose::STANDARD
                .encode(b.data())
                .into(),
        ),
        Field::Date(days) => {
            let d = chrono::DateTime::from_timestamp(i64::from(*days) * 86_400, 0)
                .ok_or_else(|| format!("date {days} (days since 1970) is out of range"))?;
            Value::String(d.format("%Y-%m-%d").to_string().into())
        }
        Field::TimeMillis(ms) => Value::String(time_of_day(i64::from(*ms) * 1_000, 3)?.into()),
        Field::TimeMicros(us) => Value::String(time_of_day(*us, 6)?.into()),
        Field::TimestampMillis(ms) => {
            let t = chrono::DateTime::from_timestamp_millis(*ms)
                .ok_or_else(|| format!("timestamp {ms} ms is out of range"))?;
            Value::String(t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string().into())
        }
        Field::TimestampMicros(us) => {
            let t = chrono::DateTime::from_timestamp_micros(*us)
                .ok_or_else(|| format!("timestamp {us} µs is out of range"))?;
            Value::String(t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string().into())
        }
        Field::Group(row) => row_value(row)?,
        Field::ListInternal(list) => Value::Array(
            list.elements()
                .iter()
                .map(field_value)
                .collect::<Result<_, _>>()?,
        ),
        Field::MapInternal(map) => {
            let mut m = Map::with_capacity(map.len());
            for (k, v) in map.entries() {
                let key = match field_value(k)? {
                    Value::String(s) => s,
                    other => String::from_utf8_lossy(&value::to_bytes(&other)).into(),
                };
                m.insert(key, field_value(v)?);
            }
            Value::Object(m)
        }
    })
}

/// A float as Go's encoder writes it: integral values without a fraction.
fn float(f: f64) -> Value {
    value::number(f)
}

/// `HH:MM:SS` and `digits` fractional digits, from microseconds since midnight.
fn time_of_day(us: i64, digits: usize) -> Result<String, String> {
    if !(0..86_400_000_000).contains(&us) {
        return Err(format!("time of day {us} µs is out of range"));
    }
    let (secs, frac) = (us / 1_000_000, us % 1_000_000);
    let frac = format!("{frac:06}");
    Ok(format!(
        "{:02}:{:02}:{:02}.{}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        &frac[..digits]
    ))
}

/// The exact decimal text of a Parquet decimal (unscaled big-endian integer and scale).
fn decimal_text(d: &Decimal) -> Result<String, String> {
    let bytes = d.data();
    if bytes.is_empty() || bytes.len() > 16 {
        return Err(format!(
            "a decimal of {} bytes is not supported (1 to 16 are)",
            bytes.len()
        ));
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut wide = [fill; 16];
    wide[16 - bytes.len()..].copy_from_slice(bytes);
    let unscaled = i128::from_be_bytes(wide);
    let scale = d.scale();
    if scale <= 0 {
        // A negative scale would be a schema error; the writer forbids it.
        return Ok(unscaled.to_string());
    }
    let scale = scale as usize;
    let digits = unscaled.unsigned_abs().to_string();
    let digits = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = digits.split_at(digits.len() - scale);
    let sign = if unscaled < 0 { "-" } else { "" };
    Ok(format!("{sign}{int}.{frac}"))
}

#[async_trait]
impl StatelessTransform for FormatFromParquet {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        for row in read_rows(msg.data().clone(), self.limit)? {
            out.push(msg.derive(Body::from_value(row)));
        }
        Ok(())
    }
}

/// What registers the `format_from_parquet` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "format_from_parquet",
    aliases: &[],
    library: "sub.tf.fmt.from.parquet",
    summary: "one JSON message per row of a Parquet file",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use parquet::basic::{Compression, GzipLevel, ZstdLevel};
    use parquet::data_type::{
        BoolType, ByteArray, ByteArrayType, DoubleType, FloatType, Int32Type, Int64Type,
    };
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use sluice_engine::{Pipeline, json, testing};
    use std::sync::Arc;

    const TYPE: &str = "format_from_parquet";

    const SCHEMA: &str = "
        message row {
            required int64 id;
            optional binary name (UTF8);
            required double score;
            required boolean ok;
            required int32 day (DATE);
            required int64 at (TIMESTAMP_MILLIS);
            required int32 price (DECIMAL(9,2));
            required binary raw;
            optional group tags (LIST) {
                repeated group list {
                    optional int32 element;
                }
            }
            optional group user {
                required binary login (UTF8);
                optional int32 age;
            }
            required float ratio;
        }";

    /// Three rows in the shape of [`SCHEMA`], written with `codec`.
    fn sample(codec: Compression) -> Vec<u8> {
        let schema = Arc::new(parse_message_type(SCHEMA).unwrap());
        let props = Arc::new(WriterProperties::builder().set_compression(codec).build());
        let mut w = SerializedFileWriter::new(Vec::new(), schema, props).unwrap();
        let mut rg = w.next_row_group().unwrap();
        let mut col = 0;
        while let Some(mut c) = rg.next_column().unwrap() {
            match col {
                0 => {
                    c.typed::<Int64Type>()
                        .write_batch(&[1, 2, 3], None, None)
                        .unwrap();
                }
                1 => {
                    let v: Vec<ByteArray> = vec!["alice".into(), "carol".into()];
                    c.typed::<ByteArrayType>()
                        .write_batch(&v, Some(&[1, 0, 1]), None)
                        .unwrap();
                }
                2 => {
                    c.typed::<DoubleType>()
                        .write_batch(&[1.5, -2.0, 1e300], None, None)
                        .unwrap();
                }
                3 => {
                    c.typed::<BoolType>()
                        .write_batch(&[true, false, true], None, None)
                        .unwrap();
                }
                4 => {
                    c.typed::<Int32Type>()
                        .write_batch(&[0, 19_723, -1], None, None)
                        .unwrap();
                }
                5 => {
                    c.typed::<Int64Type>()
                        .write_batch(&[0, 1_704_164_645_123, -1], None, None)
                        .unwrap();
                }
                6 => {
                    c.typed::<Int32Type>()
                        .write_batch(&[1230, -5, 0], None, None)
                        .unwrap();
                }
                7 => {
                    let v: Vec<ByteArray> =
                        vec![vec![0u8, 255].into(), b"hi".to_vec().into(), vec![].into()];
                    c.typed::<ByteArrayType>()
                        .write_batch(&v, None, None)
                        .unwrap();
                }
                8 => {
                    // tags: [1, null, 3], [] , null
                    c.typed::<Int32Type>()
                        .write_batch(&[1, 3], Some(&[3, 2, 3, 1, 0]), Some(&[0, 1, 1, 0, 0]))
                        .unwrap();
                }
                9 => {
                    // user.login: {login: "a"}, null, {login: "c"}
                    let v: Vec<ByteArray> = vec!["a".into(), "c".into()];
                    c.typed::<ByteArrayType>()
                        .write_batch(&v, Some(&[1, 0, 1]), None)
                        .unwrap();
                }
                10 => {
                    // user.age: 30, (no user), null
                    c.typed::<Int32Type>()
                        .write_batch(&[30], Some(&[2, 0, 1]), None)
                        .unwrap();
                }
                11 => {
                    c.typed::<FloatType>()
                        .write_batch(&[0.5, f32::NAN, 2.0], None, None)
                        .unwrap();
                }
                _ => unreachable!(),
            }
            c.close().unwrap();
            col += 1;
        }
        rg.close().unwrap();
        w.into_inner().unwrap()
    }

    const WANT: [&str; 3] = [
        r#"{"id":1,"name":"alice","score":1.5,"ok":true,"day":"1970-01-01","at":"1970-01-01T00:00:00.000Z","price":"12.30","raw":"AP8=","tags":[1,null,3],"user":{"login":"a","age":30},"ratio":0.5}"#,
        r#"{"id":2,"name":null,"score":-2,"ok":false,"day":"2024-01-01","at":"2024-01-02T03:04:05.123Z","price":"-0.05","raw":"aGk=","tags":[],"user":null,"ratio":null}"#,
        r#"{"id":3,"name":"carol","score":1e+300,"ok":true,"day":"1969-12-31","at":"1969-12-31T23:59:59.999Z","price":"0.00","raw":"","tags":null,"user":{"login":"c","age":null},"ratio":2}"#,
    ];

    fn run(input: Vec<u8>) -> Result<Vec<Message>, TransformError> {
        let t = testing::build(&registry(), json!({"type": TYPE})).unwrap();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let mut m = Message::new(input);
        m.set_metadata(&br#"{"key":"k.parquet"}"#[..]);
        testing::block_on(p.apply(vec![m]))
    }

    #[test]
    fn cases() {
        let codecs = [
            ("uncompressed", Compression::UNCOMPRESSED),
            ("snappy", Compression::SNAPPY),
            ("gzip", Compression::GZIP(GzipLevel::default())),
            ("lz4", Compression::LZ4_RAW),
            ("zstd", Compression::ZSTD(ZstdLevel::default())),
        ];
        for (name, codec) in codecs {
            let out = run(sample(codec)).unwrap_or_else(|e| panic!("{name}: {e}"));
            let got: Vec<String> = out
                .iter()
                .map(|m| String::from_utf8_lossy(m.data()).into_owned())
                .collect();
            assert_eq!(got, WANT, "{name}");
            for m in &out {
                assert_eq!(&m.metadata()[..], br#"{"key":"k.parquet"}"#, "{name}");
            }
        }
    }

    #[test]
    fn no_rows_no_messages() {
        let schema = Arc::new(parse_message_type("message m { required int32 a; }").unwrap());
        let w = SerializedFileWriter::new(Vec::new(), schema, Default::default()).unwrap();
        assert!(run(w.into_inner().unwrap()).unwrap().is_empty());
    }

    #[test]
    fn errors() {
        let good = sample(Compression::SNAPPY);
        let mut bad_footer = good.clone();
        let n = bad_footer.len();
        // The footer length, just before the closing magic.
        bad_footer[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut bad_page = good.clone();
        // Scribble over the first column's pages, after the leading magic.
        for b in &mut bad_page[4..40] {
            *b = 0xaa;
        }
        let cases: [(&str, Vec<u8>, &str); 6] = [
            (
                "empty",
                Vec::new(),
                "cannot read parquet: the data is empty",
            ),
            ("not parquet", b"a,b\n1,2\n".to_vec(), "cannot read parquet"),
            (
                "truncated",
                good[..good.len() / 2].to_vec(),
                "cannot read parquet",
            ),
            ("magic only", b"PAR1PAR1".to_vec(), "cannot read parquet"),
            ("bad footer length", bad_footer, "cannot read parquet"),
            ("corrupt pages", bad_page, "cannot read parquet"),
        ];
        for (name, input, want) in cases {
            let err = run(input).unwrap_err().to_string();
            assert!(err.starts_with("transform t: "), "{name}: {err}");
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn limit() {
        let file = Bytes::from(sample(Compression::SNAPPY));
        assert_eq!(read_rows(file.clone(), 1 << 20).unwrap().len(), 3);
        let err = read_rows(file, 10).unwrap_err().to_string();
        assert!(err.contains("over the limit of 10 bytes"), "{err}");
    }

    #[test]
    fn values() {
        let dec = |v: i32, scale: i32| decimal_text(&Decimal::from_i32(v, 9, scale)).unwrap();
        assert_eq!(dec(12345, 2), "123.45");
        assert_eq!(dec(-12345, 2), "-123.45");
        assert_eq!(dec(5, 3), "0.005");
        assert_eq!(dec(-5, 3), "-0.005");
        assert_eq!(dec(7, 0), "7");
        let wide = Decimal::from_bytes(ByteArray::from(vec![0xffu8; 17]), 38, 0);
        assert!(decimal_text(&wide).unwrap_err().contains("17 bytes"));
        assert_eq!(time_of_day(3_723_004_005, 3).unwrap(), "01:02:03.004");
        assert_eq!(time_of_day(3_723_004_005, 6).unwrap(), "01:02:03.004005");
        assert!(time_of_day(-1, 3).is_err());
        assert!(field_value(&Field::TimestampMillis(i64::MAX)).is_err());
        assert!(field_value(&Field::Date(i32::MAX)).is_err());
    }
}
