//! `format_json`: the data is one valid JSON value.
//!
//! Substation compatibility: the same (Go's `json.Valid`): whitespace around the value is
//! allowed, empty data is not JSON, and any JSON value counts, not only objects. It has no
//! settings; Substation's library drops the argument of `sub.cnd.fmt.json()`, sluice's passes
//! it on, so a stray `object` is reported as an unknown setting.

use serde::Deserialize;
use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

/// Settings of `format_json`: none.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {}

/// The `format_json` condition.
pub(crate) struct FormatJson;

impl FormatJson {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let _: Settings = b.settings()?;
        Ok(FormatJson)
    }
}

impl Condition for FormatJson {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        // The parse is cached in the message, so later transforms do not parse again.
        Ok(!msg.is_ctrl() && msg.data_value().is_some())
    }
}

/// What registers the `format_json` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "format_json",
    aliases: &[],
    library: "sub.cnd.fmt.json",
    summary: "the data is one valid JSON value",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::json;

    #[test]
    fn cases() {
        let s = json!({});
        run_table(
            "format_json",
            vec![
                ("object", s.clone(), data(r#"{"a":1}"#), T),
                ("array with whitespace", s.clone(), data(" [1, 2]\n"), T),
                ("scalar", s.clone(), data("12.5"), T),
                ("string", s.clone(), data(r#""x""#), T),
                ("text", s.clone(), data("hello"), F),
                ("truncated", s.clone(), data(r#"{"a":"#), F),
                ("two values", s.clone(), data("{} {}"), F),
                ("empty", s.clone(), data(""), F),
            ],
        );
        ctrl_is_false("format_json", json!({}));
    }

    #[test]
    fn config_errors() {
        // Unknown settings only warn; a settings value that is not an object is an error.
        let err = build_error("format_json", json!("x"));
        assert!(err.to_string().contains("format_json"), "{err}");
    }
}
