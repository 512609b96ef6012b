//! `number_greater_than`: the input number is greater than the comparand.
//!
//! Substation compatibility: `value` is a float; when `object.target_key` is set and the
//! message has a value there, that value (GJSON `Float()`) is the comparand instead. See
//! [`super`] for data mode (an error when the data is not a number), object mode and
//! missing values (0).

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::NumberCompare;

/// The `number_greater_than` condition.
pub(crate) struct NumberGreaterThan(NumberCompare);

impl NumberGreaterThan {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        NumberCompare::build(b, |a, b| a > b, false).map(NumberGreaterThan)
    }
}

impl Condition for NumberGreaterThan {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg, "number_greater_than")
    }
}

/// What registers the `number_greater_than` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_greater_than",
    aliases: &[],
    library: "sub.cnd.num.gt",
    summary: "input > comparand",
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
            "number_greater_than",
            vec![
                ("data greater", json!({"value": 10}), data("10.5"), T),
                (
                    "data equal is not greater",
                    json!({"value": 10}),
                    data("10"),
                    F,
                ),
                ("data negative", json!({"value": -1}), data("-2"), F),
                ("object greater", src(3.0), data(r#"{"n":4}"#), T),
                ("object less", src(3.0), data(r#"{"n":2}"#), F),
                ("object true is 1", src(0.5), data(r#"{"n":true}"#), T),
                (
                    "dynamic comparand",
                    dynamic.clone(),
                    data(r#"{"n":5,"limit":4}"#),
                    T,
                ),
                (
                    "dynamic comparand larger",
                    dynamic.clone(),
                    data(r#"{"n":5,"limit":9}"#),
                    F,
                ),
                (
                    "dynamic comparand from metadata",
                    json!({"value": 100, "object": {"source_key": "n", "target_key": "meta limit"}}),
                    with_meta(r#"{"n":5}"#, json!({"limit": 1})),
                    T,
                ),
                (
                    "missing comparand uses value",
                    dynamic.clone(),
                    data(r#"{"n":1}"#),
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
                ("missing key is 0 > -1", src(-1.0), data(r#"{"x":1}"#), T),
                (
                    "non-JSON data with a key is false",
                    src(0.0),
                    data("plain"),
                    F,
                ),
            ],
        );
        ctrl_is_false("number_greater_than", json!({"value": 0}));
    }

    #[test]
    fn config_errors() {
        config_error("number_greater_than", json!({"value": "ten"}), "value");
        config_error(
            "number_greater_than",
            json!({"object": {"target_key": 1}}),
            "object.target_key",
        );
        config_error(
            "number_greater_than",
            json!({"object": {"source_key": "a\\"}}),
            "object.source_key",
        );
    }
}
