//! `number_length_equal_to`: the length of the input equals \`value\`.
//!
//! Substation compatibility: `measurement` is `byte` (the default) or `char` (also
//! accepted as `rune`): Unicode characters counted as Go counts runes, each byte of an
//! invalid UTF-8 sequence counting as one. An array value's length is its element count,
//! whatever the measurement; other values are measured as their text (GJSON `String()`), the
//! data as its bytes. A missing source value has length 0, as in Substation.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::LengthCompare;

/// The `number_length_equal_to` condition.
pub(crate) struct NumberLengthEqualTo(LengthCompare);

impl NumberLengthEqualTo {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        LengthCompare::build(b, |a, b| a == b).map(NumberLengthEqualTo)
    }
}

impl Condition for NumberLengthEqualTo {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `number_length_equal_to` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_length_equal_to",
    aliases: &[],
    library: "sub.cnd.num.len.eq",
    summary: "length == `value`",
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
            "number_length_equal_to",
            vec![
                ("data bytes", json!({"value": 5}), data("hello"), T),
                ("data bytes differ", json!({"value": 4}), data("hello"), F),
                (
                    "data utf-8 bytes",
                    json!({"value": 6}),
                    data("h\u{e9}llo"),
                    T,
                ),
                (
                    "data chars",
                    json!({"value": 5, "measurement": "char"}),
                    data("h\u{e9}llo"),
                    T,
                ),
                (
                    "data runes",
                    json!({"value": 1, "measurement": "rune"}),
                    data("\u{1f600}"),
                    T,
                ),
                ("empty data", json!({"value": 0}), data(""), T),
                ("object string", src(3), data(r#"{"s":"abc"}"#), T),
                ("object chars", chars(2), data(r#"{"s":"\u00e9\u00e9"}"#), T),
                (
                    "object bytes of chars",
                    src(4),
                    data(r#"{"s":"\u00e9\u00e9"}"#),
                    T,
                ),
                (
                    "object array counts elements",
                    src(2),
                    data(r#"{"s":["abc","de"]}"#),
                    T,
                ),
                (
                    "object array not its text",
                    src(14),
                    data(r#"{"s":["abc","de"]}"#),
                    F,
                ),
                ("object number text", src(3), data(r#"{"s":123}"#), T),
                ("object empty string", src(0), data(r#"{"s":""}"#), T),
                ("missing key has length 0", src(0), data(r#"{"t":""}"#), T),
                (
                    "missing key has length 0, not 1",
                    src(1),
                    data(r#"{"t":""}"#),
                    F,
                ),
            ],
        );
        ctrl_is_false("number_length_equal_to", json!({"value": -1}));
    }

    #[test]
    fn config_errors() {
        config_error(
            "number_length_equal_to",
            json!({"measurement": "bytes"}),
            "measurement",
        );
        config_error("number_length_equal_to", json!({"value": "3"}), "value");
        config_error(
            "number_length_equal_to",
            json!({"measurement": 1}),
            "measurement",
        );
    }
}
