//! `string_to_upper`: upper-cases text.
//!
//! Substation compatibility: Go's `strings.ToUpper`: each character by its one-to-one Unicode mapping (`ß` stays `ß`, where Rust's full mapping would give `SS`). Object mode (both `object.source_key` and
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

/// Settings of `string_to_upper`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `string_to_upper` transform.
pub(crate) struct StringToUpper {
    pub(super) io: Io,
}

impl StringToUpper {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(StringToUpper {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The conversion.
fn convert(s: &str) -> CompactString {
    // ASCII text (the common case) maps byte for byte, the same as the Unicode mapping.
    if s.is_ascii() {
        let mut out = CompactString::from(s);
        out.as_mut_str().make_ascii_uppercase();
        return out;
    }
    super::simple_case(s, char::to_uppercase)
}

impl MapTransform for StringToUpper {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for StringToUpper {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        super::compute_text(read, convert)
    }
}

impl StringToUpper {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        super::map_text(&self.io, msg, convert)?;
        Ok(())
    }
}

/// What registers the `string_to_upper` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_to_upper",
    aliases: &[],
    library: "sub.tf.str.to.upper",
    summary: "upper-cases text",
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
                r#"{"a":"hello, World"}"#,
                r#"{"a":"hello, World","b":"HELLO, WORLD"}"#,
            ),
            (
                "in place",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":"b"}"#,
                r#"{"a":"B"}"#,
            ),
            (
                "an object's text, upper-cased, is written back as an object",
                obj.clone(),
                r#"{"a":{"k":"v"}}"#,
                r#"{"a":{"k":"v"},"b":{"K":"V"}}"#,
            ),
            ("unicode one-to-one only", data.clone(), "éßa", "ÉßA"),
            ("data mode", data.clone(), "abc DEF 1", "ABC DEF 1"),
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
        testing::assert_single_outputs(&r, "string_to_upper", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "string_to_upper",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
            ],
        );
    }
}
