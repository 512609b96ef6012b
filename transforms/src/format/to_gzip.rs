//! `format_to_gzip`: compresses the data with gzip.
//!
//! Substation compatibility: data only, no settings; the default compression level (6), as
//! Go's writer uses. Empty data becomes an empty gzip stream, as in Go.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use serde::Deserialize;
use sluice_engine::{Build, ConfigError, InPlace, MapTransform, Message, TransformError};

/// Settings of `format_to_gzip` (none).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {}

/// The `format_to_gzip` transform.
pub(crate) struct FormatToGzip;

impl FormatToGzip {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let _: Settings = b.settings()?;
        Ok(FormatToGzip)
    }
}

/// Compresses `data` with gzip at the default level.
pub(crate) fn gzip(data: &[u8]) -> Result<Vec<u8>, TransformError> {
    let mut e = GzEncoder::new(
        Vec::with_capacity(data.len() / 2 + 32),
        Compression::default(),
    );
    e.write_all(data)
        .and_then(|_| e.finish())
        .map_err(|err| TransformError::external("cannot compress gzip", err))
}

impl MapTransform for FormatToGzip {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl FormatToGzip {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let data = gzip(msg.data())?;
        msg.set_data(data);
        Ok(())
    }
}

/// What registers the `format_to_gzip` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "format_to_gzip",
    aliases: &[],
    library: "sub.tf.fmt.to.gz",
    summary: "compresses the data with gzip",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use flate2::read::GzDecoder;
    use sluice_engine::{Pipeline, json, testing};
    use std::io::Read;
    use std::sync::Arc;

    const TYPE: &str = "format_to_gzip";

    fn run(input: &[u8]) -> Vec<u8> {
        let t = testing::build(&registry(), json!({"type": TYPE})).unwrap();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let out = testing::block_on(p.apply(vec![Message::new(input.to_vec())])).unwrap();
        out[0].data().to_vec()
    }

    fn gunzip(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        GzDecoder::new(b).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn cases() {
        let big = "abc".repeat(100_000);
        let cases: [(&str, &[u8]); 5] = [
            ("text", b"{\"a\":1}"),
            ("binary", &[0, 0xff, 0x1f, 0x8b]),
            ("empty", b""),
            ("compressible", big.as_bytes()),
            ("not json", b"not json"),
        ];
        for (name, input) in cases {
            let out = run(input);
            assert_eq!(&out[..2], &[0x1f, 0x8b], "{name}: a gzip header");
            assert_eq!(gunzip(&out), input, "{name}");
        }
        assert!(run(big.as_bytes()).len() < 5_000, "compressed");
    }

    #[test]
    fn round_trip_through_from_gzip() {
        let p = testing::build_pipeline(
            &registry(),
            json!([{"type": TYPE}, {"type": "format_from_gzip"}]),
        )
        .unwrap();
        assert_eq!(
            testing::run_pipeline(&p, &["hello", r#"{"a":[1,2]}"#]).unwrap(),
            vec!["hello", r#"{"a":[1,2]}"#]
        );
    }

    #[test]
    fn errors() {
        let r = registry();
        let err = testing::build(&r, json!({"type": TYPE, "settings": []}))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("\"settings\" must be an object"), "{err}");
        let built = r
            .build_transform(
                &json!({"type": TYPE, "settings": {"level": 9}}),
                "transforms[0]",
            )
            .ok()
            .unwrap();
        assert!(built.warnings.iter().any(|w| w.message.contains("level")));
    }
}
