//! `number_bitwise_or`: the input OR \`value\` is not zero (either is non-zero).
//!
//! Substation compatibility: `value` is a 64-bit integer. Data mode parses the data as an
//! integer (an error when it is not one); object mode reads GJSON's `Int()` of the value
//! (floats truncated, numeric strings parsed, anything else 0). A missing source value is
//! 0, as in Substation.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::Bitwise;

/// The `number_bitwise_or` condition.
pub(crate) struct NumberBitwiseOr(Bitwise);

impl NumberBitwiseOr {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Bitwise::build(b, |a, b| a | b).map(NumberBitwiseOr)
    }
}

impl Condition for NumberBitwiseOr {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg, "number_bitwise_or")
    }
}

/// What registers the `number_bitwise_or` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_bitwise_or",
    aliases: &[],
    library: "sub.cnd.num.bitwise.or",
    summary: "input OR `value` ≠ 0",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"value": 1}"#,
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::json;

    #[test]
    fn cases() {
        let src = |v: i64| json!({"value": v, "object": {"source_key": "n"}});
        run_table(
            "number_bitwise_or",
            vec![
                ("data non-zero", json!({"value": 0}), data("5"), T),
                ("data both zero", json!({"value": 0}), data("0"), F),
                ("value non-zero", json!({"value": 3}), data("0"), T),
                ("object non-zero", src(0), data(r#"{"n":1}"#), T),
                ("object zero", src(0), data(r#"{"n":0}"#), F),
                ("object null is 0", src(0), data(r#"{"n":null}"#), F),
                ("object true is 1", src(0), data(r#"{"n":true}"#), T),
                (
                    "data not an integer is an error",
                    json!({"value": 1}),
                    data("1.5"),
                    Err,
                ),
                ("data text is an error", json!({"value": 1}), data("x"), Err),
                ("missing key is 0", src(-1), data(r#"{"m":1}"#), T),
                ("missing key is 0, or 0", src(0), data(r#"{"m":1}"#), F),
            ],
        );
        ctrl_is_false("number_bitwise_or", json!({"value": -1}));
    }

    #[test]
    fn config_errors() {
        config_error("number_bitwise_or", json!({"value": 1.5}), "value");
        config_error("number_bitwise_or", json!({"value": "1"}), "value");
        config_error(
            "number_bitwise_or",
            json!({"object": {"source_key": false}}),
            "object.source_key",
        );
    }
}
