//! `format_to_base64`: encodes as base64 (standard alphabet, with padding).
//!
//! Substation compatibility: object mode (`source_key` and `target_key`) encodes the value's
//! text (GJSON's `String()`: objects as compact JSON) and writes a string; data mode
//! encodes the data bytes, binary included. A missing source passes through.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, InPlace, MapTransform, Message, TransformError, Value};

use crate::common::Io;

/// Settings of `format_to_base64`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key`, or neither (data mode).
    pub object: ObjectSettings,
}

/// The `format_to_base64` transform.
pub(crate) struct FormatToBase64 {
    io: Io,
}

impl FormatToBase64 {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(FormatToBase64 {
            io: Io::new(b, &s.object)?,
        })
    }
}

impl MapTransform for FormatToBase64 {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl FormatToBase64 {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let encoded = self.io.read_bytes(msg).map(|b| STANDARD.encode(&b));
        if let Some(e) = encoded {
            self.io.write(msg, Value::String(e.into()))?;
        }
        Ok(())
    }
}

/// What registers the `format_to_base64` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "format_to_base64",
    aliases: &[],
    library: "sub.tf.fmt.to.b64",
    summary: "encodes as standard base64",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{Message, Pipeline, json, testing};
    use std::sync::Arc;

    const TYPE: &str = "format_to_base64";

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}});
        let cases = [
            ("data mode", json!({}), "foobar", vec!["Zm9vYmFy"]),
            ("data mode, padding", json!({}), "fooba", vec!["Zm9vYmE="]),
            (
                "object mode",
                obj.clone(),
                r#"{"a":"foobar"}"#,
                vec![r#"{"a":"foobar","b":"Zm9vYmFy"}"#],
            ),
            (
                "object mode, an object as JSON text",
                obj.clone(),
                r#"{"a":{"x":1}}"#,
                vec![r#"{"a":{"x":1},"b":"eyJ4IjoxfQ=="}"#],
            ),
            (
                "object mode, a number",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":12}"#,
                vec![r#"{"a":"MTI="}"#],
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"c":1}"#,
                vec![r#"{"c":1}"#],
            ),
            ("empty data", json!({}), "", vec![""]),
        ];
        for (name, settings, input, want) in cases {
            let t = testing::build(&r, json!({"type": TYPE, "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn binary_round_trip() {
        let r = registry();
        let p =
            testing::build_pipeline(&r, json!([{"type": TYPE}, {"type": "format_from_base64"}]))
                .unwrap();
        let bytes: Vec<u8> = (0..=255u8).collect();
        let out = testing::block_on(p.apply(vec![Message::new(bytes.clone())])).unwrap();
        assert_eq!(&out[0].data()[..], &bytes[..]);
        let t = testing::build(&r, json!({"type": TYPE})).unwrap();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let out = testing::block_on(p.apply(vec![Message::new(&[0xffu8, 0xfe][..])])).unwrap();
        assert_eq!(&out[0].data()[..], b"//4=");
    }

    #[test]
    fn errors() {
        let r = registry();
        // The value is read from the metadata but the data is not JSON: nowhere to write.
        let t = testing::build(
            &r,
            json!({"type": TYPE, "settings": {"object": {"source_key": "meta a", "target_key": "b"}}}),
        )
        .unwrap();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let mut msg = Message::new(&b"plain"[..]);
        msg.set_metadata(&br#"{"a":"x"}"#[..]);
        let err = testing::block_on(p.apply(vec![msg]))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("not JSON"), "{err}");
        let err = testing::build(
            &r,
            json!({"type": TYPE, "settings": {"object": {"target_key": "b"}}}),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("settings.object.source_key"), "{err}");
        let err = testing::build(&r, json!({"type": TYPE, "settings": {"object": "a"}}))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("settings.object"), "{err}");
    }
}
