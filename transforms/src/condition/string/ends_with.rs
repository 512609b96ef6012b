//! `string_ends_with`: the input ends with `value`.
//!
//! Substation compatibility: the same, on bytes and case-sensitive; see [`super`] for how
//! the input is read. A missing source value is the empty string, as in Substation (true
//! only when `value` is empty).

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::Affix;

/// The `string_ends_with` condition.
pub(crate) struct StringEndsWith(Affix);

impl StringEndsWith {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Affix::build(b, <[u8]>::ends_with).map(StringEndsWith)
    }
}

impl Condition for StringEndsWith {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `string_ends_with` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_ends_with",
    aliases: &[],
    library: "sub.cnd.str.ends_with",
    summary: "input ends with `value`",
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
            "string_ends_with",
            vec![
                ("data suffix", json!({"value": "lo"}), data("hello"), T),
                ("data not suffix", json!({"value": "he"}), data("hello"), F),
                ("whole data", json!({"value": "hello"}), data("hello"), T),
                ("empty value", json!({"value": ""}), data("hello"), T),
                (
                    "object suffix",
                    src(".com"),
                    data(r#"{"s":"example.com"}"#),
                    T,
                ),
                (
                    "object not suffix",
                    src(".org"),
                    data(r#"{"s":"example.com"}"#),
                    F,
                ),
                ("object number text", src("5"), data(r#"{"s":1.5}"#), T),
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
        ctrl_is_false("string_ends_with", json!({"value": ""}));
    }

    #[test]
    fn config_errors() {
        config_error("string_ends_with", json!({"value": 1}), "value");
        config_error(
            "string_ends_with",
            json!({"object": {"source_key": 1}}),
            "object.source_key",
        );
    }
}
