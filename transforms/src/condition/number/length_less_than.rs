//! `number_length_less_than`: the length of the input is less than \`value\`.
//!
//! Substation compatibility: `measurement` is `byte` (the default) or `char` (also
//! accepted as `rune`): Unicode characters counted as Go counts runes, each byte of an
//! invalid UTF-8 sequence counting as one. An array value's length is its element count,
//! whatever the measurement; other values are measured as their text (GJSON `String()`), the
//! data as its bytes. A missing source value has length 0, as in Substation.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::LengthCompare;

/// The `number_length_less_than` condition.
pub(crate) struct NumberLengthLessThan(LengthCompare);

impl NumberLengthLessThan {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        LengthCompare::build(b, |a, b| a < b).map(NumberLengthLessThan)
    }
}

impl Condition for NumberLengthLessThan {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `number_length_less_than` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_length_less_than",
    aliases: &[],
    library: "sub.cnd.num.len.lt",
    summary: "length < `value`",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"value": 1}"#,
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::json;

    #[test]
    fn cases() {
        let src = |v: i64| json!({"value": v, "object": {"source_key": "s"}});
        let chars =
            |v: i64| json!({"value": v, "measurement": "char", "object": {"source_key": "s"}});
        run_table(
            "number_length_less_than",
            vec![
                ("data shorter", json!({"value": 6}), data("hello"), T),
                (
                    "data equal is not less",
                    json!({"value": 5}),
                    data("hello"),
                    F,
                ),
                (
                    "data chars",
                    json!({"value": 6, "measurement": "char"}),
                    data("h\u{e9}llo"),
                    T,
                ),
                ("data bytes", json!({"value": 6}), data("h\u{e9}llo"), F),
                ("object string", src(4), data(r#"{"s":"abc"}"#), T),
                ("object array", src(3), data(r#"{"s":[1,2,3]}"#), F),
                (
                    "object object is its text",
                    src(8),
                    data(r#"{"s":{"a":1}}"#),
                    T,
                ),
                ("object chars", chars(3), data(r#"{"s":"\u00e9\u00e9"}"#), T),
                ("missing key has length 0", src(0), data(r#"{"t":""}"#), F),
                (
                    "missing key has length 0 < 1",
                    src(1),
                    data(r#"{"t":""}"#),
                    T,
                ),
            ],
        );
        ctrl_is_false("number_length_less_than", json!({"value": -1}));
    }

    #[test]
    fn config_errors() {
        config_error(
            "number_length_less_than",
            json!({"measurement": "bytes"}),
            "measurement",
        );
        config_error("number_length_less_than", json!({"value": "3"}), "value");
        config_error(
            "number_length_less_than",
            json!({"measurement": 1}),
            "measurement",
        );
    }
}
