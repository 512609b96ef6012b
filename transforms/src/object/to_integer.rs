//! `object_to_integer`: converts a value to a signed 64-bit integer.
//!
//! Substation compatibility: GJSON's `Int()`: integers exactly, floats truncated towards zero, numeric strings parsed, `true` as 1; anything else is 0.
//! Object mode (both `object.source_key` and `object.target_key`) converts the value at the
//! source and writes it at the target; a missing source passes the message through. Substation
//! needs both keys in practice; sluice also accepts neither and then converts the whole data
//! (parsed as JSON when it is JSON, else taken as text). Setting only one key is an error.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, InPlace, MapTransform, Message, TransformError, Value, value,
};

use crate::common::Io;

/// Settings of `object_to_integer`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `object_to_integer` transform.
pub(crate) struct ObjectToInteger {
    io: Io,
}

impl ObjectToInteger {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(ObjectToInteger {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The conversion.
fn convert(v: &Value) -> Value {
    Value::from(value::to_i64(v))
}

impl MapTransform for ObjectToInteger {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectToInteger {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        if let Some(v) = super::read_any(&self.io, msg) {
            let converted = convert(&v);
            self.io.write(msg, converted)?;
        }
        Ok(())
    }
}

/// What registers the `object_to_integer` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "object_to_integer",
    aliases: &[],
    library: "sub.tf.obj.to.int",
    summary: "converts to a signed integer",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}});
        let data = json!({});
        let cases = [
            (
                "float truncated",
                obj.clone(),
                r#"{"a":2.9}"#,
                r#"{"a":2.9,"b":2}"#,
            ),
            (
                "negative float truncated",
                obj.clone(),
                r#"{"a":-2.9}"#,
                r#"{"a":-2.9,"b":-2}"#,
            ),
            (
                "numeric string",
                obj.clone(),
                r#"{"a":"42"}"#,
                r#"{"a":"42","b":42}"#,
            ),
            (
                "large integer exact",
                obj.clone(),
                r#"{"a":30400402455622563}"#,
                r#"{"a":30400402455622563,"b":30400402455622563}"#,
            ),
            (
                "non-numeric is zero",
                obj.clone(),
                r#"{"a":[1]}"#,
                r#"{"a":[1],"b":0}"#,
            ),
            ("data mode", data.clone(), "7.5", "7"),
            (
                "missing source passes",
                obj.clone(),
                r#"{"x":1}"#,
                r#"{"x":1}"#,
            ),
            (
                "non-JSON data with keys passes",
                obj.clone(),
                "plain",
                "plain",
            ),
        ];
        testing::assert_single_outputs(&r, "object_to_integer", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "object_to_integer",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
                (
                    json!({"object": {"source_key": ["a"], "target_key": "b"}}),
                    "object.source_key",
                ),
            ],
        );
    }
}
