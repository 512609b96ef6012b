//! `array_join`: joins the elements of an array into one string.
//!
//! Substation compatibility: each element is taken as GJSON's `String()` (strings as they
//! are, numbers and booleans as text, null as "", objects and arrays as compact JSON) and the
//! pieces are joined with `separator` (Go default: empty). A value that is not an array
//! (or data that is not a JSON array in data mode) passes the message through unchanged, as
//! does a missing source. Object mode needs both `object.source_key` and
//! `object.target_key`; data mode neither.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, InPlace, MapTransform, Message, TransformError, Value, value,
};

use crate::common::Io;

/// Settings of `array_join`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
    /// Put between the elements (default: nothing).
    pub separator: String,
}

/// The `array_join` transform.
pub(crate) struct ArrayJoin {
    io: Io,
    separator: String,
}

impl ArrayJoin {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(ArrayJoin {
            io: Io::new(b, &s.object)?,
            separator: s.separator,
        })
    }
}

impl MapTransform for ArrayJoin {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ArrayJoin {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let joined = match crate::object::read_json(&self.io, msg).as_deref() {
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(value::to_text)
                    .collect::<Vec<_>>()
                    .join(&self.separator),
            ),
            _ => None,
        };
        if let Some(s) = joined {
            self.io.write(msg, Value::String(s.into()))?;
        }
        Ok(())
    }
}

/// What registers the `array_join` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "array_join",
    aliases: &[],
    library: "sub.tf.arr.join",
    summary: "joins an array's elements into a string",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"separator": ","}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}, "separator": "."});
        let cases = [
            (
                "strings",
                obj.clone(),
                r#"{"a":["x","y","z"]}"#,
                r#"{"a":["x","y","z"],"b":"x.y.z"}"#,
            ),
            (
                "mixed elements as text",
                obj.clone(),
                r#"{"a":[1,true,null,{"c":2},"s"]}"#,
                r#"{"a":[1,true,null,{"c":2},"s"],"b":"1.true..{\"c\":2}.s"}"#,
            ),
            (
                "default separator is empty",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":["x","y"]}"#,
                r#"{"a":"xy"}"#,
            ),
            (
                "empty array",
                obj.clone(),
                r#"{"a":[]}"#,
                r#"{"a":[],"b":""}"#,
            ),
            (
                "non-array passes",
                obj.clone(),
                r#"{"a":"x"}"#,
                r#"{"a":"x"}"#,
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"z":[1]}"#,
                r#"{"z":[1]}"#,
            ),
            (
                "data mode",
                json!({"separator": ", "}),
                r#"["a", "b"]"#,
                "a, b",
            ),
            (
                "data mode non-JSON passes",
                json!({"separator": ","}),
                "a b",
                "a b",
            ),
        ];
        for (name, settings, input, want) in cases {
            let t =
                testing::build(&r, json!({"type": "array_join", "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), vec![want], "{name}");
        }
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "array_join",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
                (json!({"separator": 1}), "separator"),
            ],
        );
    }
}
