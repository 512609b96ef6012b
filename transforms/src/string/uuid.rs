//! `string_uuid`: a random (version 4) UUID, written at a key or as the new data.
//!
//! Substation compatibility: with `object.target_key` the UUID (hyphenated, lowercase) is
//! written there, as a string; without it the data is replaced by the UUID. A target key on
//! data that is not JSON is an error (the key cannot be set); empty data becomes a new
//! object. `object.source_key` is not used.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, InPlace, Key, MapTransform, Message, TransformError, Value,
};

/// Settings of `string_uuid`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `target_key`: where the UUID goes (optional; absent replaces the data).
    pub object: ObjectSettings,
}

/// The `string_uuid` transform.
pub(crate) struct StringUuid {
    target: Option<Key>,
}

impl StringUuid {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(StringUuid {
            target: b.opt_key("object.target_key", &s.object.target_key)?,
        })
    }
}

impl MapTransform for StringUuid {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl StringUuid {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let id = ::uuid::Uuid::new_v4().hyphenated().to_string();
        match &self.target {
            Some(t) => msg.set(t, Value::String(id.into()))?,
            None => msg.set_data(id.into_bytes()),
        }
        Ok(())
    }
}

/// What registers the `string_uuid` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_uuid",
    aliases: &[],
    library: "sub.tf.str.uuid",
    summary: "writes a random v4 UUID",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{Value, json, testing};

    fn is_uuid_v4(s: &str) -> bool {
        let re = regex::Regex::new(
            "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
        )
        .unwrap();
        re.is_match(s)
    }

    #[test]
    fn cases() {
        let r = registry();
        // (name, settings, input, what the output must satisfy)
        type Check = fn(&str) -> bool;
        let at_id: Check = |out| {
            let v: Value = serde_json::from_str(out).unwrap();
            v["a"] == json!(1) && is_uuid_v4(v["id"].as_str().unwrap_or(""))
        };
        let cases: [(&str, Value, &str, Check); 5] = [
            ("data mode replaces data", json!({}), "anything", is_uuid_v4),
            ("data mode on JSON", json!({}), r#"{"a":1}"#, is_uuid_v4),
            (
                "object mode",
                json!({"object": {"target_key": "id"}}),
                r#"{"a":1}"#,
                at_id,
            ),
            (
                "nested target",
                json!({"object": {"target_key": "x.y"}}),
                "",
                |out| {
                    let v: Value = serde_json::from_str(out).unwrap();
                    is_uuid_v4(v["x"]["y"].as_str().unwrap_or(""))
                },
            ),
            (
                "metadata target leaves data alone",
                json!({"object": {"target_key": "meta id"}}),
                r#"{"a":1}"#,
                |out| out == r#"{"a":1}"#,
            ),
        ];
        for (name, settings, input, check) in cases {
            let t =
                testing::build(&r, json!({"type": "string_uuid", "settings": settings})).unwrap();
            let out = testing::run(t, &[input]).unwrap();
            assert_eq!(out.len(), 1, "{name}");
            assert!(check(&out[0]), "{name}: {}", out[0]);
        }
    }

    #[test]
    fn each_message_gets_its_own() {
        let t = testing::build(&registry(), json!({"type": "string_uuid"})).unwrap();
        let out = testing::run(t, &["", ""]).unwrap();
        assert_ne!(out[0], out[1]);
    }

    #[test]
    fn errors() {
        let r = registry();
        let err = testing::build(
            &r,
            json!({"type": "string_uuid", "settings": {"object": {"target_key": 5}}}),
        )
        .expect_err("a config error");
        assert!(err.to_string().contains("object.target_key"), "{err}");
        let t = testing::build(
            &r,
            json!({"type": "string_uuid", "settings": {"object": {"target_key": "id"}}}),
        )
        .unwrap();
        assert!(testing::run(t, &["not json"]).is_err());
    }
}
