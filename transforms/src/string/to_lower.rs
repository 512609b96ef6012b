//! `string_to_lower`: lower-cases text.
//!
//! Substation compatibility: Go's `strings.ToLower`: each character by its one-to-one Unicode mapping (a final `Σ` becomes `σ`, not `ς`). Object mode (both `object.source_key` and
//! `object.target_key`) converts the value's text (GJSON's `String()`) and writes a string
//! at the target; a missing source passes the message through. Data mode (neither key)
//! converts the whole data; bytes that are not UTF-8 are read as U+FFFD.

use compact_str::CompactString;
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, Compute, ConfigError, InPlace, MapTransform, Message, TransformError, Value,
};

use crate::common::Io;

/// Settings of `string_to_lower`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `string_to_lower` transform.
pub(crate) struct StringToLower {
    pub(super) io: Io,
}

impl StringToLower {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(StringToLower {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The conversion.
fn convert(s: &str) -> CompactString {
    // ASCII text (the common case) maps byte for byte, the same as the Unicode mapping.
    if s.is_ascii() {
        let mut out = CompactString::from(s);
        out.as_mut_str().make_ascii_lowercase();
        return out;
    }
    super::simple_case(s, char::to_lowercase)
}

impl MapTransform for StringToLower {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for StringToLower {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        super::compute_text(read, convert)
    }
}

impl StringToLower {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        super::map_text(&self.io, msg, convert)?;
        Ok(())
    }
}

/// What registers the `string_to_lower` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_to_lower",
    aliases: &[],
    library: "sub.tf.str.to.lower",
    summary: "lower-cases text",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
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
                "object mode",
                obj.clone(),
                r#"{"a":"Hello, World"}"#,
                r#"{"a":"Hello, World","b":"hello, world"}"#,
            ),
            (
                "in place",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":"B"}"#,
                r#"{"a":"b"}"#,
            ),
            (
                "boolean as text",
                obj.clone(),
                r#"{"a":true}"#,
                r#"{"a":true,"b":"true"}"#,
            ),
            ("unicode", data.clone(), "ÉΣΑΣ", "éσασ"),
            ("data mode", data.clone(), "ABC def 1", "abc def 1"),
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
        testing::assert_single_outputs(&r, "string_to_lower", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "string_to_lower",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
            ],
        );
    }
}
