//! `object_to_float`: converts a value to a float.
//!
//! Substation compatibility: GJSON's `Float()`: numbers, numeric strings, `true` as 1; anything else is 0. As Go writes a float64, integral results are written as integers (`"2"` becomes `2`, not `2.0`).
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

/// Settings of `object_to_float`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `object_to_float` transform.
pub(crate) struct ObjectToFloat {
    io: Io,
}

impl ObjectToFloat {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(ObjectToFloat {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The conversion.
fn convert(v: &Value) -> Value {
    value::number(value::to_f64(v))
}

impl MapTransform for ObjectToFloat {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectToFloat {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        if let Some(v) = super::read_any(&self.io, msg) {
            let converted = convert(&v);
            self.io.write(msg, converted)?;
        }
        Ok(())
    }
}

/// What registers the `object_to_float` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "object_to_float",
    aliases: &[],
    library: "sub.tf.obj.to.float",
    summary: "converts to a float",
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
                "numeric string",
                obj.clone(),
                r#"{"a":"1.5"}"#,
                r#"{"a":"1.5","b":1.5}"#,
            ),
            (
                "integral string",
                obj.clone(),
                r#"{"a":"2"}"#,
                r#"{"a":"2","b":2}"#,
            ),
            (
                "true is one",
                obj.clone(),
                r#"{"a":true}"#,
                r#"{"a":true,"b":1}"#,
            ),
            (
                "non-numeric is zero",
                obj.clone(),
                r#"{"a":"x"}"#,
                r#"{"a":"x","b":0}"#,
            ),
            (
                "in place",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":"-0.25"}"#,
                r#"{"a":-0.25}"#,
            ),
            ("data mode", data.clone(), "3.75", "3.75"),
            ("data mode text", data.clone(), "abc", "0"),
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
        testing::assert_single_outputs(&r, "object_to_float", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "object_to_float",
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
