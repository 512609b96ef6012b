//! `string_split`: splits text on a separator into a JSON array of strings.
//!
//! Substation compatibility: `separator` is required (the library's `sep` is an
//! abbreviation of it). Splitting follows Go's `strings.Split`: every occurrence separates,
//! so empty pieces are kept (`a,,b,` gives `["a","","b",""]`) and empty text gives `[""]`.
//! Object mode (both `object.source_key` and `object.target_key`) splits the value's text and
//! writes the array at the target; a missing source passes the message through. Data mode
//! (neither key) replaces the data with the array (bytes that are not UTF-8 are read as
//! U+FFFD); there, as Substation appends each piece with `SetValue`, a piece that holds a
//! JSON object or array goes in as that value.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, InPlace, MapTransform, Message, TransformError, Value, value,
};

use crate::common::Io;

/// Settings of `string_split`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
    /// What to split on (required).
    pub separator: String,
}

/// The `string_split` transform.
pub(crate) struct StringSplit {
    io: Io,
    separator: String,
}

impl StringSplit {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.separator.is_empty() {
            return Err(b.field_error("separator", "missing required option: the text to split on"));
        }
        Ok(StringSplit {
            io: Io::new(b, &s.object)?,
            separator: s.separator,
        })
    }
}

impl MapTransform for StringSplit {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl StringSplit {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let typed = matches!(self.io, Io::Data);
        let pieces = self.io.read_text(msg).map(|t| {
            t.split(self.separator.as_str())
                .map(|p| {
                    let s = Value::from(p);
                    if typed { value::sjson_typed(s) } else { s }
                })
                .collect::<Vec<_>>()
        });
        if let Some(p) = pieces {
            self.io.write(msg, Value::Array(p.into()))?;
        }
        Ok(())
    }
}

/// What registers the `string_split` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_split",
    aliases: &[],
    library: "sub.tf.str.split",
    summary: "splits text into an array",
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
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}, "separator": ","});
        let cases = [
            (
                "object mode",
                obj.clone(),
                r#"{"a":"x,y,z"}"#,
                r#"{"a":"x,y,z","b":["x","y","z"]}"#,
            ),
            (
                "empty pieces kept",
                obj.clone(),
                r#"{"a":"x,,y,"}"#,
                r#"{"a":"x,,y,","b":["x","","y",""]}"#,
            ),
            (
                "no separator in text",
                obj.clone(),
                r#"{"a":"xyz"}"#,
                r#"{"a":"xyz","b":["xyz"]}"#,
            ),
            (
                "empty text",
                obj.clone(),
                r#"{"a":""}"#,
                r#"{"a":"","b":[""]}"#,
            ),
            (
                "number as text",
                obj.clone(),
                r#"{"a":1.5}"#,
                r#"{"a":1.5,"b":["1.5"]}"#,
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"z":"x,y"}"#,
                r#"{"z":"x,y"}"#,
            ),
            ("non-JSON data with keys passes", obj.clone(), "x,y", "x,y"),
            (
                "data mode multi-char separator",
                json!({"separator": " | "}),
                "a | b | c",
                r#"["a","b","c"]"#,
            ),
            (
                "data mode pieces holding JSON objects or arrays are those values",
                json!({"separator": "|"}),
                r#"{"a":1}|[2]|3"#,
                r#"[{"a":1},[2],"3"]"#,
            ),
            (
                "object mode pieces stay strings",
                json!({"separator": "|", "object": {"source_key": "s", "target_key": "t"}}),
                r#"{"s":"{\"a\":1}|x"}"#,
                r#"{"s":"{\"a\":1}|x","t":["{\"a\":1}","x"]}"#,
            ),
        ];
        for (name, settings, input, want) in cases {
            let t =
                testing::build(&r, json!({"type": "string_split", "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), vec![want], "{name}");
        }
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "string_split",
            &[
                (json!({}), "settings.separator"),
                (json!({"separator": ""}), "settings.separator"),
                (
                    json!({"object": {"source_key": "a"}, "separator": ","}),
                    "object.target_key",
                ),
                (
                    json!({"object": {"target_key": "a"}, "separator": ","}),
                    "object.source_key",
                ),
            ],
        );
    }
}
