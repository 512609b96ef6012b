//! `string_contains`: the input contains `value`.
//!
//! Substation compatibility: the same, on bytes and case-sensitive; see [`super`] for how
//! the input is read. A missing source value is the empty string, as in Substation (true
//! only when `value` is empty).

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::Affix;

/// The `string_contains` condition.
pub(crate) struct StringContains(Affix);

impl StringContains {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Affix::build(b, super::contains_bytes).map(StringContains)
    }
}

impl Condition for StringContains {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `string_contains` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_contains",
    aliases: &[],
    library: "sub.cnd.str.contains",
    summary: "input contains `value`",
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
        run_table(
            "string_contains",
            vec![
                ("data contains", json!({"value": "ell"}), data("hello"), T),
                (
                    "data does not contain",
                    json!({"value": "xyz"}),
                    data("hello"),
                    F,
                ),
                ("case-sensitive", json!({"value": "ELL"}), data("hello"), F),
                (
                    "empty value is contained",
                    json!({"value": ""}),
                    data("hello"),
                    T,
                ),
                (
                    "longer than data",
                    json!({"value": "hello!"}),
                    data("hello"),
                    F,
                ),
                ("object contains", src("oo"), data(r#"{"s":"foo"}"#), T),
                (
                    "object does not contain",
                    src("x"),
                    data(r#"{"s":"foo"}"#),
                    F,
                ),
                (
                    "object array text",
                    src("\"b\""),
                    data(r#"{"s":["a","b"]}"#),
                    T,
                ),
                (
                    "metadata",
                    json!({"value": "ar", "object": {"source_key": "meta s"}}),
                    with_meta("", json!({"s": "bar"})),
                    T,
                ),
                (
                    "missing key is the empty string",
                    src("a"),
                    data(r#"{"t":"a"}"#),
                    F,
                ),
                (
                    "missing key holds an empty value",
                    src(""),
                    data(r#"{"t":"a"}"#),
                    T,
                ),
            ],
        );
        ctrl_is_false("string_contains", json!({"value": ""}));
    }

    #[test]
    fn config_errors() {
        config_error("string_contains", json!({"value": 1}), "value");
        config_error(
            "string_contains",
            json!({"object": {"source_key": 1}}),
            "object.source_key",
        );
    }
}
