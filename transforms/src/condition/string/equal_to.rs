//! `string_equal_to`: the input equals `value` byte for byte.
//!
//! Substation compatibility: the same. The comparand is `value`, or the text of the value at
//! `object.target_key` when that key is set and present in the message; see [`super`] for
//! how the input is read. A missing source value equals nothing, not even `""`
//! (Substation checks that it exists).

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::StringCompare;

/// The `string_equal_to` condition.
pub(crate) struct StringEqualTo(StringCompare);

impl StringEqualTo {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        StringCompare::build(b, |a, b| a == b, true).map(StringEqualTo)
    }
}

impl Condition for StringEqualTo {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `string_equal_to` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_equal_to",
    aliases: &[],
    library: "sub.cnd.str.eq",
    summary: "input == comparand (bytes)",
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
            "string_equal_to",
            vec![
                ("data equal", json!({"value": "foo"}), data("foo"), T),
                ("data not equal", json!({"value": "foo"}), data("foo "), F),
                ("case-sensitive", json!({"value": "foo"}), data("Foo"), F),
                ("empty equals empty", json!({"value": ""}), data(""), T),
                ("object equal", src("bar"), data(r#"{"s":"bar"}"#), T),
                ("object not equal", src("bar"), data(r#"{"s":"baz"}"#), F),
                ("object number text", src("1.5"), data(r#"{"s":1.5}"#), T),
                ("object null is empty", src(""), data(r#"{"s":null}"#), T),
                (
                    "dynamic comparand",
                    dynamic.clone(),
                    data(r#"{"s":"a","t":"a"}"#),
                    T,
                ),
                (
                    "dynamic comparand differs",
                    dynamic.clone(),
                    data(r#"{"s":"a","t":"b"}"#),
                    F,
                ),
                (
                    "missing comparand uses value",
                    dynamic.clone(),
                    data(r#"{"s":"zzz"}"#),
                    T,
                ),
                (
                    "dynamic comparand from metadata",
                    json!({"object": {"source_key": "s", "target_key": "meta t"}}),
                    with_meta(r#"{"s":"x"}"#, json!({"t": "x"})),
                    T,
                ),
                (
                    "dynamic comparand in data mode",
                    json!({"object": {"target_key": "meta t"}}),
                    with_meta("raw", json!({"t": "raw"})),
                    T,
                ),
                ("missing key is false", src(""), data(r#"{"t":""}"#), F),
            ],
        );
        ctrl_is_false("string_equal_to", json!({"value": ""}));
    }

    #[test]
    fn config_errors() {
        config_error("string_equal_to", json!({"value": ["a"]}), "value");
        config_error(
            "string_equal_to",
            json!({"object": {"target_key": {}}}),
            "object.target_key",
        );
        config_error(
            "string_equal_to",
            json!({"object": {"source_key": "a\\"}}),
            "object.source_key",
        );
    }
}
