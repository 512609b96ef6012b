//! `number_less_than`: the input number is less than the comparand.
//!
//! Substation compatibility: `value` is a float; when `object.target_key` is set and the
//! message has a value there, that value (GJSON `Float()`) is the comparand instead. See
//! [`super`] for data mode (an error when the data is not a number), object mode and
//! missing values (0).

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::NumberCompare;

/// The `number_less_than` condition.
pub(crate) struct NumberLessThan(NumberCompare);

impl NumberLessThan {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        NumberCompare::build(b, |a, b| a < b, false).map(NumberLessThan)
    }
}

impl Condition for NumberLessThan {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg, "number_less_than")
    }
}

/// What registers the `number_less_than` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_less_than",
    aliases: &[],
    library: "sub.cnd.num.lt",
    summary: "input < comparand",
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
            "number_less_than",
            vec![
                ("data less", json!({"value": 10}), data("9.99"), T),
                (
                    "data equal is not less",
                    json!({"value": 10}),
                    data("10"),
                    F,
                ),
                ("data exponent", json!({"value": 1000}), data("1e2"), T),
                ("object less", src(3.0), data(r#"{"n":-4}"#), T),
                ("object greater", src(3.0), data(r#"{"n":20}"#), F),
                ("object null is 0", src(1.0), data(r#"{"n":null}"#), T),
                (
                    "dynamic comparand",
                    dynamic.clone(),
                    data(r#"{"n":5,"limit":6}"#),
                    T,
                ),
                (
                    "dynamic comparand smaller",
                    dynamic.clone(),
                    data(r#"{"n":5,"limit":1}"#),
                    F,
                ),
                (
                    "missing comparand uses value",
                    dynamic.clone(),
                    data(r#"{"n":-1}"#),
                    T,
                ),
                (
                    "data not a number is an error",
                    json!({"value": 1}),
                    data("abc"),
                    Err,
                ),
                ("empty data is an error", json!({"value": 0}), data(""), Err),
                ("missing key is 0", src(0.0), data(r#"{"x":1}"#), F),
                ("missing key is 0 < 1", src(1.0), data(r#"{"x":1}"#), T),
                (
                    "non-JSON data with a key is false",
                    src(0.0),
                    data("plain"),
                    F,
                ),
            ],
        );
        ctrl_is_false("number_less_than", json!({"value": 0}));
    }

    #[test]
    fn config_errors() {
        config_error("number_less_than", json!({"value": "ten"}), "value");
        config_error(
            "number_less_than",
            json!({"object": {"target_key": 1}}),
            "object.target_key",
        );
        config_error(
            "number_less_than",
            json!({"object": {"source_key": "a\\"}}),
            "object.source_key",
        );
    }
}
