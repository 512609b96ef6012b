//! `string_less_than`: the input sorts before `value` (byte-wise lexicographic order).
//!
//! Substation compatibility: the same. The comparand is `value`, or the text of the value at
//! `object.target_key` when that key is set and present in the message; see [`super`] for
//! how the input is read. A missing source value is the empty string, as in Substation.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::StringCompare;

/// The `string_less_than` condition.
pub(crate) struct StringLessThan(StringCompare);

impl StringLessThan {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        StringCompare::build(b, |a, b| a < b, false).map(StringLessThan)
    }
}

impl Condition for StringLessThan {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `string_less_than` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_less_than",
    aliases: &[],
    library: "sub.cnd.str.lt",
    summary: "input sorts before comparand",
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
        let dynamic = json!({"value": "zzz", "object": {"source_key": "s", "target_key": "t"}});
        run_table(
            "string_less_than",
            vec![
                ("data less", json!({"value": "b"}), data("a"), T),
                ("data greater", json!({"value": "a"}), data("b"), F),
                ("equal is not less", json!({"value": "a"}), data("a"), F),
                ("prefix is less", json!({"value": "abc"}), data("ab"), T),
                ("empty is less", json!({"value": "a"}), data(""), T),
                ("object less", src("m"), data(r#"{"s":"apple"}"#), T),
                (
                    "dynamic comparand",
                    dynamic.clone(),
                    data(r#"{"s":"a","t":"b"}"#),
                    T,
                ),
                (
                    "dynamic comparand smaller",
                    dynamic.clone(),
                    data(r#"{"s":"b","t":"a"}"#),
                    F,
                ),
                (
                    "missing comparand uses value",
                    dynamic.clone(),
                    data(r#"{"s":"b"}"#),
                    T,
                ),
                (
                    "missing key is not less than \"\"",
                    src(""),
                    data(r#"{"t":""}"#),
                    F,
                ),
                (
                    "missing key is less than \"a\"",
                    src("a"),
                    data(r#"{"t":""}"#),
                    T,
                ),
            ],
        );
        ctrl_is_false("string_less_than", json!({"value": ""}));
    }

    #[test]
    fn config_errors() {
        config_error("string_less_than", json!({"value": ["a"]}), "value");
        config_error(
            "string_less_than",
            json!({"object": {"target_key": {}}}),
            "object.target_key",
        );
        config_error(
            "string_less_than",
            json!({"object": {"source_key": "a\\"}}),
            "object.source_key",
        );
    }
}
