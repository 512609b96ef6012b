//! `string_greater_than`: the input sorts after `value` (byte-wise lexicographic order).
//!
//! Substation compatibility: the same. The comparand is `value`, or the text of the value at
//! `object.target_key` when that key is set and present in the message; see [`super`] for
//! how the input is read. A missing source value is the empty string, as in Substation.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::StringCompare;

/// The `string_greater_than` condition.
pub(crate) struct StringGreaterThan(StringCompare);

impl StringGreaterThan {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        StringCompare::build(b, |a, b| a > b, false).map(StringGreaterThan)
    }
}

impl Condition for StringGreaterThan {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `string_greater_than` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_greater_than",
    aliases: &[],
    library: "sub.cnd.str.gt",
    summary: "input sorts after comparand",
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
            "string_greater_than",
            vec![
                ("data greater", json!({"value": "a"}), data("b"), T),
                ("data less", json!({"value": "b"}), data("a"), F),
                ("equal is not greater", json!({"value": "a"}), data("a"), F),
                ("longer is greater", json!({"value": "ab"}), data("abc"), T),
                (
                    "byte order: lowercase after uppercase",
                    json!({"value": "Z"}),
                    data("a"),
                    T,
                ),
                ("numbers compare as text", src("9"), data(r#"{"s":10}"#), F),
                (
                    "object greater",
                    src("2024-01-01"),
                    data(r#"{"s":"2024-06-01"}"#),
                    T,
                ),
                (
                    "dynamic comparand",
                    dynamic.clone(),
                    data(r#"{"s":"b","t":"a"}"#),
                    T,
                ),
                (
                    "dynamic comparand larger",
                    dynamic.clone(),
                    data(r#"{"s":"b","t":"c"}"#),
                    F,
                ),
                (
                    "missing comparand uses value",
                    dynamic.clone(),
                    data(r#"{"s":"b"}"#),
                    F,
                ),
                (
                    "missing key (the empty string) is not greater",
                    src(""),
                    data(r#"{"t":""}"#),
                    F,
                ),
            ],
        );
        ctrl_is_false("string_greater_than", json!({"value": ""}));
    }

    #[test]
    fn config_errors() {
        config_error("string_greater_than", json!({"value": ["a"]}), "value");
        config_error(
            "string_greater_than",
            json!({"object": {"target_key": {}}}),
            "object.target_key",
        );
        config_error(
            "string_greater_than",
            json!({"object": {"source_key": "a\\"}}),
            "object.source_key",
        );
    }
}
