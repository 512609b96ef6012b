//! `meta_all` (alias `all`): every inner condition holds; with an array at
//! `object.source_key`, every element satisfies every condition.
//!
//! Substation compatibility: the same. An empty `conditions` list is true (Substation does
//! not validate it); an empty array at the source key is true; a missing source value is
//! false. On a ctrl message the leaf conditions are false, so `all` of them is false unless
//! the list is empty.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::{Inner, Quantifier};

/// The `meta_all` condition.
pub(crate) struct MetaAll(Inner);

impl MetaAll {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Inner::build(b, Quantifier::All).map(MetaAll)
    }
}

impl Condition for MetaAll {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `meta_all` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "meta_all",
    // Substation's short name, which older Substation configs use.
    aliases: &["all"],
    library: "sub.cnd.meta.all",
    summary: "every inner condition holds",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"conditions": [{"type": "format_json"}]}"#,
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::json;

    #[test]
    fn cases() {
        let gt1 = json!({"type": "number_greater_than", "settings": {"value": 1}});
        let lt10 = json!({"type": "number_less_than", "settings": {"value": 10}});
        let a_is_x = json!({"type": "string_equal_to", "settings": {"object": {"source_key": "a"}, "value": "x"}});
        let m_is_y = json!({"type": "string_equal_to", "settings": {"object": {"source_key": "meta m"}, "value": "y"}});
        for ty in ["meta_all", "all"] {
            run_table(
                ty,
                vec![
                    (
                        "data: both hold",
                        json!({"conditions": [gt1, lt10]}),
                        data("5"),
                        T,
                    ),
                    (
                        "data: one fails",
                        json!({"conditions": [gt1, lt10]}),
                        data("50"),
                        F,
                    ),
                    ("empty list is true", json!({}), data("x"), T),
                    (
                        "error propagates",
                        json!({"conditions": [gt1]}),
                        data("abc"),
                        Err,
                    ),
                    (
                        "object: every element",
                        json!({"conditions": [gt1, lt10], "object": {"source_key": "n"}}),
                        data(r#"{"n":[2,3,9]}"#),
                        T,
                    ),
                    (
                        "object: one element fails",
                        json!({"conditions": [gt1, lt10], "object": {"source_key": "n"}}),
                        data(r#"{"n":[2,30,9]}"#),
                        F,
                    ),
                    (
                        "object: non-array value is one message",
                        json!({"conditions": [gt1], "object": {"source_key": "n"}}),
                        data(r#"{"n":7}"#),
                        T,
                    ),
                    (
                        "object: empty array is true",
                        json!({"conditions": [gt1], "object": {"source_key": "n"}}),
                        data(r#"{"n":[]}"#),
                        T,
                    ),
                    (
                        "object: missing key is false",
                        json!({"conditions": [gt1], "object": {"source_key": "z"}}),
                        data(r#"{"n":7}"#),
                        F,
                    ),
                    (
                        "elements are objects, metadata copied",
                        json!({"conditions": [a_is_x, m_is_y], "object": {"source_key": "l"}}),
                        with_meta(r#"{"l":[{"a":"x"},{"a":"x"}]}"#, json!({"m": "y"})),
                        T,
                    ),
                    (
                        "metadata condition fails",
                        json!({"conditions": [a_is_x, m_is_y], "object": {"source_key": "l"}}),
                        with_meta(r#"{"l":[{"a":"x"}]}"#, json!({"m": "z"})),
                        F,
                    ),
                ],
            );
            ctrl_is_false(ty, json!({"conditions": [gt1]}));
        }
    }

    #[test]
    fn config_errors() {
        let err = build_error(
            "meta_all",
            json!({"conditions": [{"type": "string_equal_to"}, {"type": "nope"}]}),
        );
        assert_eq!(
            err.location, "tests[0].condition.settings.conditions[1]",
            "{err}"
        );
        config_error("all", json!({"conditions": "x"}), "conditions");
        config_error(
            "all",
            json!({"object": {"source_key": 3}}),
            "object.source_key",
        );
    }
}
