//! `number_bitwise_xor`: the input XOR \`value\` is not zero (they differ).
//!
//! Substation compatibility: `value` is a 64-bit integer. Data mode parses the data as an
//! integer (an error when it is not one); object mode reads GJSON's `Int()` of the value
//! (floats truncated, numeric strings parsed, anything else 0). A missing source value is
//! 0, as in Substation.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::Bitwise;

/// The `number_bitwise_xor` condition.
pub(crate) struct NumberBitwiseXor(Bitwise);

impl NumberBitwiseXor {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Bitwise::build(b, |a, b| a ^ b).map(NumberBitwiseXor)
    }
}

impl Condition for NumberBitwiseXor {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg, "number_bitwise_xor")
    }
}

/// What registers the `number_bitwise_xor` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_bitwise_xor",
    aliases: &[],
    library: "sub.cnd.num.bitwise.xor",
    summary: "input XOR `value` ≠ 0",
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
            "number_bitwise_xor",
            vec![
                ("data differs", json!({"value": 5}), data("4"), T),
                ("data same", json!({"value": 5}), data("5"), F),
                ("data negative same", json!({"value": -9}), data("-9"), F),
                ("object differs", src(1), data(r#"{"n":3}"#), T),
                ("object same", src(3), data(r#"{"n":3}"#), F),
                ("object string same", src(3), data(r#"{"n":"3"}"#), F),
                (
                    "data not an integer is an error",
                    json!({"value": 1}),
                    data("1.5"),
                    Err,
                ),
                ("data text is an error", json!({"value": 1}), data("x"), Err),
                ("missing key is 0", src(-1), data(r#"{"m":1}"#), T),
                ("missing key is 0, xor 0", src(0), data(r#"{"m":1}"#), F),
            ],
        );
        ctrl_is_false("number_bitwise_xor", json!({"value": -1}));
    }

    #[test]
    fn config_errors() {
        config_error("number_bitwise_xor", json!({"value": 1.5}), "value");
        config_error("number_bitwise_xor", json!({"value": "1"}), "value");
        config_error(
            "number_bitwise_xor",
            json!({"object": {"source_key": false}}),
            "object.source_key",
        );
    }
}
