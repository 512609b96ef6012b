//! `string_starts_with`: the input starts with `value`.
//!
//! Substation compatibility: the same, on bytes and case-sensitive; see [`super`] for how
//! the input is read. A missing source value is the empty string, as in Substation (true
//! only when `value` is empty).

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::Affix;

/// The `string_starts_with` condition.
pub(crate) struct StringStartsWith(Affix);

impl StringStartsWith {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Affix::build(b, <[u8]>::starts_with).map(StringStartsWith)
    }
}

impl Condition for StringStartsWith {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `string_starts_with` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_starts_with",
    aliases: &[],
    library: "sub.cnd.str.starts_with",
    summary: "input starts with `value`",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"value": "a"}"#,
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::json;

    #[test]
    fn cases() {
        let src = |v: &str| json!({"value": v, "object": {"source_key": "s"}});
        run_table(
            "string_starts_with",
            vec![
                ("data prefix", json!({"value": "he"}), data("hello"), T),
                ("data not prefix", json!({"value": "lo"}), data("hello"), F),
                (
                    "binary data",
                    json!({"value": "\u{1f}"}),
                    data("\u{1f}\u{8b}"),
                    T,
                ),
                ("empty value", json!({"value": ""}), data(""), T),
                ("object prefix", src("10."), data(r#"{"s":"10.0.0.1"}"#), T),
                (
                    "object not prefix",
                    src("192."),
                    data(r#"{"s":"10.0.0.1"}"#),
                    F,
                ),
                (
                    "object object text",
                    src("{\"a\""),
                    data(r#"{"s":{"a":1}}"#),
                    T,
                ),
                (
                    "missing key is the empty string",
                    src("a"),
                    data(r#"{"t":"a"}"#),
                    F,
                ),
                (
                    "missing key holds an empty value",
                    src(""),
                    data(r#"{"t":"a"}"#),
                    T,
                ),
            ],
        );
        ctrl_is_false("string_starts_with", json!({"value": ""}));
    }

    #[test]
    fn config_errors() {
        config_error("string_starts_with", json!({"value": 1}), "value");
        config_error(
            "string_starts_with",
            json!({"object": {"source_key": 1}}),
            "object.source_key",
        );
    }
}
