//! `number_length_greater_than`: the length of the input is greater than \`value\` (\`value: 0\` means "not empty").
//!
//! Substation compatibility: `measurement` is `byte` (the default) or `char` (also
//! accepted as `rune`): Unicode characters counted as Go counts runes, each byte of an
//! invalid UTF-8 sequence counting as one. An array value's length is its element count,
//! whatever the measurement; other values are measured as their text (GJSON `String()`), the
//! data as its bytes. A missing source value has length 0, as in Substation.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::LengthCompare;

/// The `number_length_greater_than` condition.
pub(crate) struct NumberLengthGreaterThan(LengthCompare);

impl NumberLengthGreaterThan {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        LengthCompare::build(b, |a, b| a > b).map(NumberLengthGreaterThan)
    }
}

impl Condition for NumberLengthGreaterThan {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `number_length_greater_than` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_length_greater_than",
    aliases: &[],
    library: "sub.cnd.num.len.gt",
    summary: "length > `value`",
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
            "number_length_greater_than",
            vec![
                ("data non-empty", json!({"value": 0}), data("x"), T),
                ("data empty", json!({"value": 0}), data(""), F),
                (
                    "data equal is not greater",
                    json!({"value": 5}),
                    data("hello"),
                    F,
                ),
                (
                    "data bytes count more than chars",
                    json!({"value": 5}),
                    data("h\u{e9}llo"),
                    T,
                ),
                (
                    "data chars",
                    json!({"value": 5, "measurement": "char"}),
                    data("h\u{e9}llo"),
                    F,
                ),
                ("object string", src(2), data(r#"{"s":"abc"}"#), T),
                ("object array", src(2), data(r#"{"s":[1,2,3]}"#), T),
                ("object empty array", src(0), data(r#"{"s":[]}"#), F),
                ("object chars", chars(1), data(r#"{"s":"\u00e9\u00e9"}"#), T),
                ("missing key has length 0", src(0), data(r#"{"t":""}"#), F),
                (
                    "missing key has length 0 > -1",
                    src(-1),
                    data(r#"{"t":""}"#),
                    T,
                ),
            ],
        );
        ctrl_is_false("number_length_greater_than", json!({"value": -1}));
    }

    #[test]
    fn config_errors() {
        config_error(
            "number_length_greater_than",
            json!({"measurement": "bytes"}),
            "measurement",
        );
        config_error("number_length_greater_than", json!({"value": "3"}), "value");
        config_error(
            "number_length_greater_than",
            json!({"measurement": 1}),
            "measurement",
        );
    }
}
