//! `hash_sha256`: the hex SHA-256 digest of the data or of a value.
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

/// Settings of `hash_sha256`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `hash_sha256` transform.
pub(crate) struct HashSha256 {
    io: Io,
}

impl HashSha256 {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(HashSha256 {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The lowercase hex digest of `bytes`.
fn digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

impl MapTransform for HashSha256 {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl HashSha256 {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        if let Some(hex) = self.io.read_bytes(msg).map(|b| digest(&b)) {
            self.io.write(msg, Value::String(hex.into()))?;
        }
        Ok(())
    }
}

/// What registers the `hash_sha256` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "hash_sha256",
    aliases: &[],
    library: "sub.tf.hash.sha256",
    summary: "lowercase hex SHA-256 digest",
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
            ("string value", obj.clone(), r#"{"a":"abc"}"#, r#"{"a":"abc","b":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}"#.to_string()),
            ("number as text", obj.clone(), r#"{"a":123}"#, r#"{"a":123,"b":"a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3"}"#.to_string()),
            ("object as its text", obj.clone(), r#"{"a":{ "c": 1 }}"#, r#"{"a":{ "c": 1 },"b":"f8d22238f066935e6d480c762fcf275b02bb1be03e5b8ac860883266363481e5"}"#.to_string()),
            ("object written compact", obj.clone(), r#"{"a":{"c":1}}"#, r#"{"a":{"c":1},"b":"a1dd48c657971696c2087f2a6beb489ee65b25320b763222f10718dd93e9149e"}"#.to_string()),
            ("data mode", data.clone(), "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".to_string()),
            ("data mode empty", data.clone(), "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".to_string()),
            ("missing source passes", obj.clone(), r#"{"z":1}"#, r#"{"z":1}"#.to_string()),
            ("non-JSON data with keys passes", obj.clone(), "plain", "plain".to_string()),
        ];
        for (name, settings, input, want) in cases {
            let t =
                testing::build(&r, json!({"type": "hash_sha256", "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), vec![want], "{name}");
        }
    }

    #[test]
    fn data_mode_hashes_raw_bytes() {
        let t =
            testing::build(&registry(), json!({"type": "hash_sha256", "settings": {}})).unwrap();
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
            "hash_sha256",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
            ],
        );
    }
}
