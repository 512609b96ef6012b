//! `hash_md5`: the hex MD5 digest of the data or of a value.
//!
//! Substation compatibility: data mode (neither key) hashes the raw data bytes (any bytes,
//! not only UTF-8) and replaces the data with the lowercase hex digest. Object mode (both
//! `object.source_key` and `object.target_key`) hashes the value's text as GJSON's
//! `String()` gives it (a string without its quotes, a number or boolean as its text,
//! objects and arrays as JSON text: an object parsed from the input as its text, white
//! space included, changes spliced in as SJSON does) and writes the digest at the target. A missing source
//! passes the message through unchanged.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, InPlace, MapTransform, Message, TransformError, Value};

use crate::common::Io;

/// Settings of `hash_md5`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `hash_md5` transform.
pub(crate) struct HashMd5 {
    io: Io,
}

impl HashMd5 {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(HashMd5 {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The lowercase hex digest of `bytes`.
fn digest(bytes: &[u8]) -> String {
    use ::md5::Digest;
    hex::encode(::md5::Md5::digest(bytes))
}

impl MapTransform for HashMd5 {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl HashMd5 {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        if let Some(hex) = self.io.read_bytes(msg).map(|b| digest(&b)) {
            self.io.write(msg, Value::String(hex.into()))?;
        }
        Ok(())
    }
}

/// What registers the `hash_md5` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "hash_md5",
    aliases: &[],
    library: "sub.tf.hash.md5",
    summary: "lowercase hex MD5 digest",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{Message, json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}});
        let data = json!({});
        let cases = [
            (
                "string value",
                obj.clone(),
                r#"{"a":"abc"}"#,
                r#"{"a":"abc","b":"900150983cd24fb0d6963f7d28e17f72"}"#.to_string(),
            ),
            (
                "number as text",
                obj.clone(),
                r#"{"a":123}"#,
                r#"{"a":123,"b":"202cb962ac59075b964b07152d234b70"}"#.to_string(),
            ),
            (
                "object as its text",
                obj.clone(),
                r#"{"a":{ "c": 1 }}"#,
                r#"{"a":{ "c": 1 },"b":"be5b76877d6d3a2e3c7ae7b7b8d0fdb7"}"#.to_string(),
            ),
            (
                "object written compact",
                obj.clone(),
                r#"{"a":{"c":1}}"#,
                r#"{"a":{"c":1},"b":"00191365abe901ab416793dd0f3bb570"}"#.to_string(),
            ),
            (
                "data mode",
                data.clone(),
                "abc",
                "900150983cd24fb0d6963f7d28e17f72".to_string(),
            ),
            (
                "data mode empty",
                data.clone(),
                "",
                "d41d8cd98f00b204e9800998ecf8427e".to_string(),
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"z":1}"#,
                r#"{"z":1}"#.to_string(),
            ),
            (
                "non-JSON data with keys passes",
                obj.clone(),
                "plain",
                "plain".to_string(),
            ),
        ];
        testing::assert_single_outputs(&r, "hash_md5", &cases);
    }

    #[test]
    fn data_mode_hashes_raw_bytes() {
        let t = testing::build(&registry(), json!({"type": "hash_md5", "settings": {}})).unwrap();
        let out = testing::block_on(
            sluice_engine::Pipeline::new(vec![(std::sync::Arc::from("t"), t)])
                .apply(vec![Message::new(vec![0xff, 0x00, 0xfe])]),
        )
        .unwrap();
        assert_eq!(
            &out[0].data()[..],
            super::digest(&[0xff, 0x00, 0xfe]).as_bytes()
        );
        assert_ne!(
            super::digest(&[0xff, 0x00, 0xfe]),
            super::digest("\u{fffd}\u{0}\u{fffd}".as_bytes())
        );
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "hash_md5",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
            ],
        );
    }
}
