//! `object_to_boolean`: converts a value to a boolean.
//!
//! Substation compatibility: GJSON's truthiness: `true`, non-zero numbers, and the strings Go's `ParseBool` reads as true (`1`, `t`, `T`, `true`, `TRUE`, `True`); anything else (objects, arrays, null, other strings) is `false`.
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

/// Settings of `object_to_boolean`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `object_to_boolean` transform.
pub(crate) struct ObjectToBoolean {
    io: Io,
}

impl ObjectToBoolean {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(ObjectToBoolean {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The conversion.
fn convert(v: &Value) -> Value {
    Value::Bool(value::to_bool(v))
}

impl MapTransform for ObjectToBoolean {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectToBoolean {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        if let Some(v) = super::read_any(&self.io, msg) {
            let converted = convert(&v);
            self.io.write(msg, converted)?;
        }
        Ok(())
    }
}

/// What registers the `object_to_boolean` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "object_to_boolean",
    aliases: &[],
    library: "sub.tf.obj.to.bool",
    summary: "converts to a boolean",
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
                "true string",
                obj.clone(),
                r#"{"a":"true"}"#,
                r#"{"a":"true","b":true}"#,
            ),
            (
                "non-zero number",
                obj.clone(),
                r#"{"a":2.5}"#,
                r#"{"a":2.5,"b":true}"#,
            ),
            ("zero", obj.clone(), r#"{"a":0}"#, r#"{"a":0,"b":false}"#),
            (
                "other string is false",
                obj.clone(),
                r#"{"a":"yes"}"#,
                r#"{"a":"yes","b":false}"#,
            ),
            (
                "object is false",
                obj.clone(),
                r#"{"a":{"c":1}}"#,
                r#"{"a":{"c":1},"b":false}"#,
            ),
            ("data mode text", data.clone(), "T", "true"),
            ("data mode number", data.clone(), "1.0", "true"),
            ("data mode other", data.clone(), "nope", "false"),
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
        testing::assert_single_outputs(&r, "object_to_boolean", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "object_to_boolean",
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
