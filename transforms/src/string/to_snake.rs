//! `string_to_snake`: converts text to snake_case.
//!
//! Substation compatibility: word boundaries at spaces, punctuation and case changes, as Go's `strcase.ToSnake` finds them (`AnyKind of_string` becomes `any_kind_of_string`); acronyms stay one word (`HTTPRequest` becomes `http_request`). Object mode (both `object.source_key` and
//! `object.target_key`) converts the value's text (GJSON's `String()`) and writes a string
//! at the target; a missing source passes the message through. Data mode (neither key)
//! converts the whole data; bytes that are not UTF-8 are read as U+FFFD.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, InPlace, MapTransform, Message, TransformError};

use crate::common::Io;

/// Settings of `string_to_snake`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `string_to_snake` transform.
pub(crate) struct StringToSnake {
    io: Io,
}

impl StringToSnake {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(StringToSnake {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The conversion.
fn convert(s: &str) -> String {
    heck::ToSnakeCase::to_snake_case(s)
}

impl MapTransform for StringToSnake {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl StringToSnake {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        super::map_text(&self.io, msg, convert)?;
        Ok(())
    }
}

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
                "camel case",
                obj.clone(),
                r#"{"a":"helloWorld"}"#,
                r#"{"a":"helloWorld","b":"hello_world"}"#,
            ),
            (
                "mixed separators",
                obj.clone(),
                r#"{"a":"AnyKind of_string"}"#,
                r#"{"a":"AnyKind of_string","b":"any_kind_of_string"}"#,
            ),
            (
                "acronym",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":"HTTPRequest"}"#,
                r#"{"a":"http_request"}"#,
            ),
            ("kebab", data.clone(), "user-agent", "user_agent"),
            (
                "data mode",
                data.clone(),
                "SourceIPAddress",
                "source_ip_address",
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"z":"Q"}"#,
                r#"{"z":"Q"}"#,
            ),
            (
                "non-JSON data with keys passes",
                obj.clone(),
                "Plain Text",
                "Plain Text",
            ),
        ];
        testing::assert_single_outputs(&r, "string_to_snake", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "string_to_snake",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
            ],
        );
    }
}
