//! `format_from_gzip`: decompresses gzip data.
//!
//! Substation compatibility: data only, no settings; concatenated gzip members are read as
//! one stream, as Go's reader does. Truncated or corrupt input is an error (never a panic),
//! and so is empty data. Unlike Substation, the decompressed size is capped at
//! [`MAX_DECOMPRESSED`] (1 GiB) so that a small "gzip bomb" cannot exhaust memory; larger
//! output is an error naming the limit.

use std::io::Read;

use flate2::read::MultiGzDecoder;
use serde::Deserialize;
use sluice_engine::{Build, ConfigError, InPlace, MapTransform, Message, TransformError};

/// The most bytes one message may decompress to.
pub(crate) const MAX_DECOMPRESSED: u64 = 1 << 30;

/// Settings of `format_from_gzip` (none).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {}

/// The `format_from_gzip` transform.
pub(crate) struct FormatFromGzip {
    limit: u64,
}

impl FormatFromGzip {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let _: Settings = b.settings()?;
        Ok(FormatFromGzip {
            limit: MAX_DECOMPRESSED,
        })
    }
}

pub(crate) fn describe_limit(limit: u64) -> String {
    if limit >= 1 << 30 && limit.is_multiple_of(1 << 30) {
        format!("{} GiB", limit >> 30)
    } else {
        format!("{limit} bytes")
    }
}

/// Decompresses gzip `data`, failing if the output would exceed `limit` bytes.
pub(crate) fn gunzip(data: &[u8], limit: u64) -> Result<Vec<u8>, TransformError> {
    if data.is_empty() {
        return Err(TransformError::failed(
            "cannot decompress gzip: the data is empty",
        ));
    }
    let mut out = Vec::with_capacity(data.len().saturating_mul(4).min(64 << 20));
    MultiGzDecoder::new(data)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::UnexpectedEof if data.starts_with(&[0x1f, 0x8b]) => {
                    "the data is truncated".to_string()
                }
                std::io::ErrorKind::UnexpectedEof => "invalid gzip header".to_string(),
                _ => e.to_string(),
            };
            TransformError::failed(format!("cannot decompress gzip: {why}"))
        })?;
    if out.len() as u64 > limit {
        return Err(TransformError::failed(format!(
            "cannot decompress gzip: the output exceeds the limit of {}",
            describe_limit(limit)
        )));
    }
    Ok(out)
}

impl MapTransform for FormatFromGzip {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl FormatFromGzip {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let data = gunzip(msg.data(), self.limit)?;
        msg.set_data(data);
        Ok(())
    }
}

/// What registers the `format_from_gzip` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "format_from_gzip",
    aliases: &[],
    library: "sub.tf.fmt.from.gz",
    summary: "decompresses gzip data",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use sluice_engine::{Pipeline, json, testing};
    use std::io::Write;
    use std::sync::Arc;

    const TYPE: &str = "format_from_gzip";

    fn gz(b: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    fn run(input: Vec<u8>) -> Result<Vec<u8>, TransformError> {
        let t = testing::build(&registry(), json!({"type": TYPE})).unwrap();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let out = testing::block_on(p.apply(vec![Message::new(input)]))?;
        Ok(out[0].data().to_vec())
    }

    #[test]
    fn cases() {
        let two_members = [gz(b"foo"), gz(b"bar")].concat();
        let cases: [(&str, Vec<u8>, &[u8]); 5] = [
            ("text", gz(b"{\"a\":1}"), b"{\"a\":1}"),
            ("binary", gz(&[0, 0xff, 0x1f, 0x8b]), &[0, 0xff, 0x1f, 0x8b]),
            ("empty content", gz(b""), b""),
            ("concatenated members", two_members, b"foobar"),
            (
                "Go's gzip header (no name, unknown OS)",
                vec![
                    0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255, 74, 203, 207, 7, 4, 0, 0, 255, 255, 0x21,
                    0x65, 0x73, 0x8c, 3, 0, 0, 0,
                ],
                b"foo",
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(run(input).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn errors() {
        let full = gz(b"hello world hello world");
        let mut corrupt = full.clone();
        corrupt[12] ^= 0xff;
        let mut bad_crc = full.clone();
        let n = bad_crc.len();
        bad_crc[n - 6] ^= 0xff;
        let cases: [(&str, Vec<u8>, &str); 5] = [
            (
                "truncated",
                full[..full.len() - 5].to_vec(),
                "cannot decompress gzip",
            ),
            ("corrupt", corrupt, "cannot decompress gzip"),
            ("bad checksum", bad_crc, "cannot decompress gzip"),
            ("not gzip", b"plain text".to_vec(), "cannot decompress gzip"),
            ("empty", Vec::new(), "the data is empty"),
        ];
        for (name, input, want) in cases {
            let err = run(input).unwrap_err().to_string();
            assert!(err.starts_with("transform t: "), "{name}: {err}");
            assert!(err.contains(want), "{name}: {err}");
        }
        let err = run(full[..5].to_vec()).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
        // Short data that is not gzip at all is not "truncated".
        let err = run(b"hello".to_vec()).unwrap_err().to_string();
        assert!(err.contains("invalid gzip header"), "{err}");
    }

    #[test]
    fn limit() {
        let bomb = gz(&vec![0u8; 10_000]);
        assert_eq!(gunzip(&bomb, 10_000).unwrap().len(), 10_000);
        let err = gunzip(&bomb, 9_999).unwrap_err().to_string();
        assert!(err.contains("exceeds the limit of 9999 bytes"), "{err}");
        assert_eq!(describe_limit(MAX_DECOMPRESSED), "1 GiB");
    }

    #[test]
    fn settings() {
        let r = registry();
        let built = r
            .build_transform(
                &json!({"type": TYPE, "settings": {"object": {"source_key": "a"}}}),
                "transforms[0]",
            )
            .ok()
            .unwrap();
        assert!(
            built.warnings.iter().any(|w| w.message.contains("object")),
            "data only: object settings are unknown"
        );
    }
}
