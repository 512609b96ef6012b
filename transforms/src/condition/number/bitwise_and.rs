//! `number_bitwise_and`: the input AND \`value\` is not zero (some bit of \`value\` is set in the input).
//!
//! Substation compatibility: `value` is a 64-bit integer. Data mode parses the data as an
//! integer (an error when it is not one); object mode reads GJSON's `Int()` of the value
//! (floats truncated, numeric strings parsed, anything else 0). A missing source value is
//! 0, as in Substation.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::Bitwise;

/// The `number_bitwise_and` condition.
pub(crate) struct NumberBitwiseAnd(Bitwise);

impl NumberBitwiseAnd {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Bitwise::build(b, |a, b| a & b).map(NumberBitwiseAnd)
    }
}

impl Condition for NumberBitwiseAnd {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg, "number_bitwise_and")
    }
}

/// What registers the `number_bitwise_and` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_bitwise_and",
    aliases: &[],
    library: "sub.cnd.num.bitwise.and",
    summary: "input AND `value` ≠ 0",
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
            "number_bitwise_and",
            vec![
                ("data bit set", json!({"value": 4}), data("6"), T),
                ("data bit clear", json!({"value": 1}), data("6"), F),
                ("data zero", json!({"value": -1}), data("0"), F),
                ("data negative", json!({"value": 2}), data("-2"), T),
                ("object bit set", src(8), data(r#"{"n":12}"#), T),
                ("object bit clear", src(8), data(r#"{"n":7}"#), F),
                ("object float truncated", src(1), data(r#"{"n":3.9}"#), T),
                ("object numeric string", src(2), data(r#"{"n":"2"}"#), T),
                ("object text is 0", src(-1), data(r#"{"n":"x"}"#), F),
                (
                    "data not an integer is an error",
                    json!({"value": 1}),
                    data("1.5"),
                    Err,
                ),
                ("data text is an error", json!({"value": 1}), data("x"), Err),
                ("missing key is 0", src(-1), data(r#"{"m":1}"#), F),
            ],
        );
        ctrl_is_false("number_bitwise_and", json!({"value": -1}));
    }

    #[test]
    fn config_errors() {
        config_error("number_bitwise_and", json!({"value": 1.5}), "value");
        config_error("number_bitwise_and", json!({"value": "1"}), "value");
        config_error(
            "number_bitwise_and",
            json!({"object": {"source_key": false}}),
            "object.source_key",
        );
    }
}
