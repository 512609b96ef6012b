//! `object_to_unsigned_integer`: converts a value to an unsigned 64-bit integer.
//!
//! Substation compatibility: GJSON's `Uint()`: non-negative integers exactly, floats truncated, negative numbers 0, numeric strings parsed, `true` as 1; anything else is 0.
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

/// Settings of `object_to_unsigned_integer`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `object_to_unsigned_integer` transform.
pub(crate) struct ObjectToUnsignedInteger {
    io: Io,
}

impl ObjectToUnsignedInteger {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(ObjectToUnsignedInteger {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The conversion.
fn convert(v: &Value) -> Value {
    Value::from(value::to_u64(v))
}

impl MapTransform for ObjectToUnsignedInteger {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectToUnsignedInteger {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        if let Some(v) = super::read_any(&self.io, msg) {
            let converted = convert(&v);
            self.io.write(msg, converted)?;
        }
        Ok(())
    }
}

/// What registers the `object_to_unsigned_integer` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "object_to_unsigned_integer",
    aliases: &[],
    library: "sub.tf.obj.to.uint",
    summary: "converts to an unsigned integer",
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
                "negative is zero",
                obj.clone(),
                r#"{"a":-3}"#,
                r#"{"a":-3,"b":0}"#,
            ),
            (
                "numeric string",
                obj.clone(),
                r#"{"a":"18446744073709551615"}"#,
                r#"{"a":"18446744073709551615","b":18446744073709551615}"#,
            ),
            (
                "true is one",
                obj.clone(),
                r#"{"a":true}"#,
                r#"{"a":true,"b":1}"#,
            ),
            ("data mode", data.clone(), "12.9", "12"),
            ("data mode text", data.clone(), "x", "0"),
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
        testing::assert_single_outputs(&r, "object_to_unsigned_integer", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "object_to_unsigned_integer",
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
