//! `meta_none` (alias `none`): no inner condition holds (NOR); with an array at
//! `object.source_key`, no element satisfies any condition.
//!
//! Substation compatibility: at least one condition is required, as in Substation. Fixes
//! Substation's **\[bug\]**: for a source value that is not an array, Substation evaluates the
//! conditions on the whole message data instead of the value; sluice evaluates the value
//! (as `meta_all` and `meta_any` do), so `none` with a source key means the same whatever
//! the value's shape. An empty array at the source key is true (no element matches); a
//! missing source value is false, as for `meta_all` and `meta_any`. Without a source key a
//! ctrl message is true, since no leaf condition holds on ctrl.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::{Inner, Quantifier};

/// The `meta_none` condition.
pub(crate) struct MetaNone(Inner);

impl MetaNone {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Inner::build(b, Quantifier::None).map(MetaNone)
    }
}

impl Condition for MetaNone {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `meta_none` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "meta_none",
    // Substation's short name, which older Substation configs use.
    aliases: &["none"],
    library: "sub.cnd.meta.none",
    summary: "no inner condition holds",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"conditions": [{"type": "format_json"}]}"#,
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use crate::registry;
    use sluice_engine::{Message, json};

    #[test]
    fn cases() {
        let has_a = json!({"type": "string_contains", "settings": {"value": "a"}});
        let has_b = json!({"type": "string_contains", "settings": {"value": "b"}});
        let num = json!({"type": "number_equal_to", "settings": {"value": 1}});
        for ty in ["meta_none", "none"] {
            run_table(
                ty,
                vec![
                    (
                        "data: neither holds",
                        json!({"conditions": [has_a, has_b]}),
                        data("xyz"),
                        T,
                    ),
                    (
                        "data: one holds",
                        json!({"conditions": [has_a, has_b]}),
                        data("xbz"),
                        F,
                    ),
                    (
                        "error propagates",
                        json!({"conditions": [num]}),
                        data("x"),
                        Err,
                    ),
                    (
                        "object: no element holds",
                        json!({"conditions": [has_a], "object": {"source_key": "l"}}),
                        data(r#"{"l":["x","y"]}"#),
                        T,
                    ),
                    (
                        "object: one element holds",
                        json!({"conditions": [has_a], "object": {"source_key": "l"}}),
                        data(r#"{"l":["x","a"]}"#),
                        F,
                    ),
                    (
                        // Substation's bug would test the whole data, which contains "a".
                        "object: non-array value is evaluated, not the data",
                        json!({"conditions": [has_a], "object": {"source_key": "v"}}),
                        data(r#"{"a":1,"v":"xyz"}"#),
                        T,
                    ),
                    (
                        "object: non-array value that matches",
                        json!({"conditions": [has_a], "object": {"source_key": "v"}}),
                        data(r#"{"v":"cat"}"#),
                        F,
                    ),
                    (
                        "object: empty array is true",
                        json!({"conditions": [has_a], "object": {"source_key": "l"}}),
                        data(r#"{"l":[]}"#),
                        T,
                    ),
                    (
                        "object: missing key is false",
                        json!({"conditions": [has_a], "object": {"source_key": "z"}}),
                        data(r#"{"l":[]}"#),
                        F,
                    ),
                ],
            );
        }
    }

    #[test]
    fn ctrl() {
        let has_a = json!({"type": "string_contains", "settings": {"value": "a"}});
        // With a source key, a ctrl message has no value: false.
        ctrl_is_false(
            "none",
            json!({"conditions": [has_a], "object": {"source_key": "l"}}),
        );
        // Without one, no leaf condition holds on ctrl, so their NOR does.
        let c = registry()
            .build_condition(
                &json!({"type": "none", "settings": {"conditions": [has_a]}}),
                "c",
            )
            .unwrap()
            .value;
        assert!(c.test(&Message::ctrl()).unwrap());
    }

    #[test]
    fn config_errors() {
        config_error("meta_none", json!({}), "conditions");
        config_error("none", json!({"conditions": []}), "conditions");
        config_error("none", json!({"conditions": null}), "conditions");
    }
}
