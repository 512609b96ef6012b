//! `number_equal_to`: the input number equals the comparand.
//!
//! Substation compatibility: `value` is a float; when `object.target_key` is set and the
//! message has a value there, that value (GJSON `Float()`) is the comparand instead. See
//! [`super`] for data mode (an error when the data is not a number), object mode and
//! missing values (false: a missing value equals
//! nothing, as in Substation).

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::NumberCompare;

/// The `number_equal_to` condition.
pub(crate) struct NumberEqualTo(NumberCompare);

impl NumberEqualTo {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        NumberCompare::build(b, |a, b| a == b, true).map(NumberEqualTo)
    }
}

impl Condition for NumberEqualTo {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg, "number_equal_to")
    }
}

/// What registers the `number_equal_to` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_equal_to",
    aliases: &[],
    library: "sub.cnd.num.eq",
    summary: "input == comparand",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"value": 1}"#,
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::json;

    #[test]
    fn cases() {
        let src = |v: f64| json!({"value": v, "object": {"source_key": "n"}});
        let dynamic = json!({"value": 0, "object": {"source_key": "n", "target_key": "limit"}});
        run_table(
            "number_equal_to",
            vec![
                ("data equal", json!({"value": 10}), data("10"), T),
                ("data float equal", json!({"value": 2.5}), data("2.50"), T),
                ("data not equal", json!({"value": 10}), data("11"), F),
                ("data trimmed", json!({"value": 7}), data(" 7\n"), T),
                ("object equal", src(3.0), data(r#"{"n":3}"#), T),
                ("object numeric string", src(3.0), data(r#"{"n":"3"}"#), T),
                ("object not equal", src(3.0), data(r#"{"n":4}"#), F),
                (
                    "object non-numeric string is 0",
                    src(0.0),
                    data(r#"{"n":"abc"}"#),
                    T,
                ),
                (
                    "metadata value",
                    json!({"value": 1, "object": {"source_key": "meta n"}}),
                    with_meta("", json!({"n": 1})),
                    T,
                ),
                (
                    "dynamic comparand",
                    dynamic.clone(),
                    data(r#"{"n":5,"limit":5}"#),
                    T,
                ),
                (
                    "dynamic comparand differs",
                    dynamic.clone(),
                    data(r#"{"n":5,"limit":6}"#),
                    F,
                ),
                (
                    "missing comparand uses value",
                    dynamic.clone(),
                    data(r#"{"n":0}"#),
                    T,
                ),
                (
                    "dynamic comparand in data mode",
                    json!({"value": 1, "object": {"target_key": "meta limit"}}),
                    with_meta("9", json!({"limit": 9})),
                    T,
                ),
                (
                    "data not a number is an error",
                    json!({"value": 1}),
                    data("abc"),
                    Err,
                ),
                ("empty data is an error", json!({"value": 0}), data(""), Err),
                ("missing key is false", src(0.0), data(r#"{"x":1}"#), F),
                (
                    "non-JSON data with a key is false",
                    src(0.0),
                    data("plain"),
                    F,
                ),
            ],
        );
        ctrl_is_false("number_equal_to", json!({"value": 0}));
    }

    #[test]
    fn config_errors() {
        config_error("number_equal_to", json!({"value": "ten"}), "value");
        config_error(
            "number_equal_to",
            json!({"object": {"target_key": 1}}),
            "object.target_key",
        );
        config_error(
            "number_equal_to",
            json!({"object": {"source_key": "a\\"}}),
            "object.source_key",
        );
    }
}
