//! `format_from_base64`: decodes base64 (standard alphabet).
//!
//! Substation compatibility: object mode (`source_key` and `target_key`) or data mode; a
//! missing source passes through. Line breaks in the input are ignored, as Go's decoder
//! does. In object mode decoded bytes that are not UTF-8 are an error with Substation's
//! text, "cannot write binary as object"; decoded text is written with SJSON's typing (a
//! JSON object or array goes in as JSON, anything else as a string). In data mode the
//! decoded bytes, binary or not, replace the data. sluice also accepts input without its
//! `=` padding (Go's standard decoder rejects it).

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, Message, StatelessTransform, TransformError, async_trait};

use crate::common::Io;

/// Settings of `format_from_base64`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key`, or neither (data mode).
    pub object: ObjectSettings,
}

/// The `format_from_base64` transform.
pub(crate) struct FormatFromBase64 {
    io: Io,
}

impl FormatFromBase64 {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(FormatFromBase64 {
            io: Io::new(b, &s.object)?,
        })
    }
}

const STANDARD_ANY_PADDING: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes standard base64, ignoring line breaks and tolerating missing padding.
pub(crate) fn decode(input: &[u8]) -> Result<Vec<u8>, TransformError> {
    let decode = |b: &[u8]| {
        STANDARD_ANY_PADDING
            .decode(b)
            .map_err(|e| TransformError::failed(format!("cannot decode base64: {e}")))
    };
    if input.contains(&b'\n') || input.contains(&b'\r') {
        let clean: Vec<u8> = input
            .iter()
            .copied()
            .filter(|c| *c != b'\n' && *c != b'\r')
            .collect();
        decode(&clean)
    } else {
        decode(input)
    }
}

#[async_trait]
impl StatelessTransform for FormatFromBase64 {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let decoded = match self.io.read_bytes(&msg) {
            Some(b) => Some(decode(&b)?),
            None => None,
        };
        if let Some(bytes) = decoded {
            if matches!(self.io, Io::Object { .. }) && std::str::from_utf8(&bytes).is_err() {
                return Err(TransformError::failed("cannot write binary as object"));
            }
            self.io.write_bytes(&mut msg, bytes)?;
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `format_from_base64` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "format_from_base64",
    aliases: &[],
    library: "sub.tf.fmt.from.b64",
    summary: "decodes standard base64",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    const TYPE: &str = "format_from_base64";

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}});
        let cases = [
            ("data mode", json!({}), "Zm9vYmFy", vec!["foobar"]),
            (
                "data mode, binary output",
                json!({}),
                "//4=",
                vec!["\u{fffd}\u{fffd}"],
            ),
            (
                "object mode",
                obj.clone(),
                r#"{"a":"Zm9vYmFy"}"#,
                vec![r#"{"a":"Zm9vYmFy","b":"foobar"}"#],
            ),
            (
                "object mode, JSON goes in as JSON",
                obj.clone(),
                r#"{"a":"eyJ4IjoxfQ=="}"#,
                vec![r#"{"a":"eyJ4IjoxfQ==","b":{"x":1}}"#],
            ),
            (
                "line breaks and missing padding",
                json!({}),
                "Zm9v\r\nYmE",
                vec!["fooba"],
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"c":1}"#,
                vec![r#"{"c":1}"#],
            ),
        ];
        for (name, settings, input, want) in cases {
            let t = testing::build(&r, json!({"type": TYPE, "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn data_mode_keeps_binary_bytes() {
        let t = testing::build(&registry(), json!({"type": TYPE})).unwrap();
        let p = sluice_engine::Pipeline::new(vec![(std::sync::Arc::from("t"), t)]);
        let out =
            testing::block_on(p.apply(vec![sluice_engine::Message::new(&b"//4="[..])])).unwrap();
        assert_eq!(&out[0].data()[..], &[0xff, 0xfe]);
    }

    #[test]
    fn errors() {
        let r = registry();
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}});
        let cases = [
            (
                "binary as object",
                obj.clone(),
                r#"{"a":"//4="}"#,
                "cannot write binary as object",
            ),
            (
                "not base64",
                obj.clone(),
                r#"{"a":"%%%"}"#,
                "cannot decode base64",
            ),
            (
                "not base64, data",
                json!({}),
                "a!b=",
                "cannot decode base64",
            ),
        ];
        for (name, settings, input, want) in cases {
            let t = testing::build(&r, json!({"type": TYPE, "settings": settings})).unwrap();
            let err = testing::run(t, &[input]).unwrap_err().to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
        let err = testing::build(
            &r,
            json!({"type": TYPE, "settings": {"object": {"source_key": "a"}}}),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("settings.object.target_key"), "{err}");
    }
}
