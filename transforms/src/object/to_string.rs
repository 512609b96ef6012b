//! `object_to_string`: converts a value to a string.
//!
//! Substation compatibility (2.8): GJSON's `String()`: strings as they are, numbers and
//! booleans as their text, null as the empty string, objects and arrays as their JSON text.
//! An object's text is written as a string (`{"a":{"b":1}}` from `a` to `b` gives
//! `"b":"{\"b\":1}"`): Substation 2.8 hands `SetValue` that text in quotes, which keeps it
//! from being set as the object again. An array's text is not, so `SetValue`'s typing writes
//! it back as the array. An object or array parsed from the input is its text, white space
//! included, with any changes spliced in as SJSON splices them, as in Substation; one a
//! transform built is compact.
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

/// Settings of `object_to_string`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `object_to_string` transform.
pub(crate) struct ObjectToString {
    io: Io,
}

impl ObjectToString {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(ObjectToString {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The conversion.
fn convert(v: &Value) -> Value {
    Value::from(value::to_text(v))
}

impl MapTransform for ObjectToString {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectToString {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let Some(v) = super::read_any(&self.io, msg) else {
            return Ok(());
        };
        let object = matches!(v.as_ref(), Value::Object(_));
        let converted = convert(&v);
        drop(v);
        match &self.io {
            // The object's text stays a string at the target.
            Io::Object { target, .. } if object => msg.set_as_is(target, converted),
            _ => self.io.write(msg, converted),
        }
    }
}

/// What registers the `object_to_string` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "object_to_string",
    aliases: &[],
    library: "sub.tf.obj.to.str",
    summary: "converts to a string",
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
                "number",
                obj.clone(),
                r#"{"a":1.5}"#,
                r#"{"a":1.5,"b":"1.5"}"#,
            ),
            (
                "boolean",
                obj.clone(),
                r#"{"a":true}"#,
                r#"{"a":true,"b":"true"}"#,
            ),
            ("null", obj.clone(), r#"{"a":null}"#, r#"{"a":null,"b":""}"#),
            // Substation 2.8: an object becomes its text (GJSON's `Raw`, white space and
            // all) in a string; an array stays an array, as `SetValue` types its text.
            (
                "object as its text in a string",
                obj.clone(),
                r#"{"a":{"c": [1, 2]}}"#,
                r#"{"a":{"c": [1, 2]},"b":"{\"c\": [1, 2]}"}"#,
            ),
            (
                "object's spacing kept in the string",
                obj.clone(),
                r#"{"a":{ "b" : 1 }}"#,
                r#"{"a":{ "b" : 1 },"b":"{ \"b\" : 1 }"}"#,
            ),
            (
                "object onto itself",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":{"s":"q\"x","n":1.50}}"#,
                r#"{"a":"{\"s\":\"q\\\"x\",\"n\":1.50}"}"#,
            ),
            (
                "empty object",
                obj.clone(),
                r#"{"a":{}}"#,
                r#"{"a":{},"b":"{}"}"#,
            ),
            (
                "array stays an array",
                obj.clone(),
                r#"{"a":[1, {"c":2} ]}"#,
                r#"{"a":[1, {"c":2} ],"b":[1, {"c":2} ]}"#,
            ),
            (
                "string holding an object is set as the object",
                obj.clone(),
                r#"{"a":"{\"c\":1}"}"#,
                r#"{"a":"{\"c\":1}","b":{"c":1}}"#,
            ),
            (
                "data mode JSON string",
                data.clone(),
                r#""quoted""#,
                "quoted",
            ),
            (
                "data mode object kept as text",
                data.clone(),
                r#"{"a":1}"#,
                r#"{"a":1}"#,
            ),
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
        testing::assert_single_outputs(&r, "object_to_string", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "object_to_string",
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
