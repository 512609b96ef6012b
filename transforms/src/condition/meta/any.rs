//! `meta_any` (alias `any`): some inner condition holds; with an array at
//! `object.source_key`, some element satisfies some condition.
//!
//! Substation compatibility: the same. An empty `conditions` list is false; an empty array
//! at the source key is false; a missing source value is false.

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::{Inner, Quantifier};

/// The `meta_any` condition.
pub(crate) struct MetaAny(Inner);

impl MetaAny {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Inner::build(b, Quantifier::Any).map(MetaAny)
    }
}

impl Condition for MetaAny {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// What registers the `meta_any` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "meta_any",
    // Substation's short name, which older Substation configs use.
    aliases: &["any"],
    library: "sub.cnd.meta.any",
    summary: "some inner condition holds",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"conditions": [{"type": "format_json"}]}"#,
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::json;

    #[test]
    fn cases() {
        let lt1 = json!({"type": "number_less_than", "settings": {"value": 1}});
        let gt10 = json!({"type": "number_greater_than", "settings": {"value": 10}});
        let pre = json!({"type": "string_starts_with", "settings": {"value": "ab"}});
        for ty in ["meta_any", "any"] {
            run_table(
                ty,
                vec![
                    (
                        "data: second holds",
                        json!({"conditions": [lt1, gt10]}),
                        data("50"),
                        T,
                    ),
                    (
                        "data: neither holds",
                        json!({"conditions": [lt1, gt10]}),
                        data("5"),
                        F,
                    ),
                    ("empty list is false", json!({}), data("5"), F),
                    (
                        "error propagates",
                        json!({"conditions": [lt1]}),
                        data("x"),
                        Err,
                    ),
                    (
                        "object: one element holds",
                        json!({"conditions": [pre], "object": {"source_key": "s"}}),
                        data(r#"{"s":["xy","abc"]}"#),
                        T,
                    ),
                    (
                        "object: no element holds",
                        json!({"conditions": [pre], "object": {"source_key": "s"}}),
                        data(r#"{"s":["xy","zab"]}"#),
                        F,
                    ),
                    (
                        "object: string value is its raw text",
                        json!({"conditions": [pre], "object": {"source_key": "s"}}),
                        data(r#"{"s":"abz"}"#),
                        T,
                    ),
                    (
                        "object: empty array is false",
                        json!({"conditions": [pre], "object": {"source_key": "s"}}),
                        data(r#"{"s":[]}"#),
                        F,
                    ),
                    (
                        "object: missing key is false",
                        json!({"conditions": [pre], "object": {"source_key": "z"}}),
                        data(r#"{"s":"abz"}"#),
                        F,
                    ),
                ],
            );
            ctrl_is_false(ty, json!({"conditions": [pre]}));
        }
    }

    #[test]
    fn config_errors() {
        config_error("any", json!({"conditions": {}}), "conditions");
        let err = build_error("meta_any", json!({"conditions": [1]}));
        assert_eq!(
            err.location, "tests[0].condition.settings.conditions[0]",
            "{err}"
        );
        assert!(err.message.contains("must be an object"), "{err}");
    }
}
