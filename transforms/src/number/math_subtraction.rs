//! `number_math_subtraction`: the difference (a0 − a1 − …) of the numbers of a JSON array, folded from the left.
//!
//! Substation compatibility: the input must be a JSON array (the value at
//! `object.source_key`, or the data in data mode); anything else, or a missing source,
//! passes the message through unchanged. Elements are read with GJSON's `Float()`
//! (numeric strings parsed, `true` as 1, anything else 0) and folded from the first; an
//! empty array gives 0. Integral results are written as integers, others as floats; in
//! data mode the data becomes the result's text, without exponent.
//! Overflow to ±Inf (not JSON) is an error naming the transform and the element.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, Compute, ConfigError, InPlace, MapTransform, Message, TransformError, Value,
};

use super::Math;
use crate::common::Io;

/// Settings of `number_math_subtraction`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `number_math_subtraction` transform.
pub(crate) struct NumberMathSubtraction {
    pub(super) math: Math,
}

impl NumberMathSubtraction {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(NumberMathSubtraction {
            math: Math {
                type_name: "number_math_subtraction",
                io: Io::new(b, &s.object)?,
                op: |a, b| Ok(a - b),
            },
        })
    }
}

impl MapTransform for NumberMathSubtraction {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for NumberMathSubtraction {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        self.math.compute(read)
    }
}

impl NumberMathSubtraction {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        self.math.apply(msg)?;
        Ok(())
    }
}

/// What registers the `number_math_subtraction` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_math_subtraction",
    aliases: &[],
    library: "sub.tf.num.math.sub",
    summary: "left-folded difference of an array of numbers",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}});
        let data = json!({});
        let cases = [
            (
                "integers",
                obj.clone(),
                r#"{"a":[10,2,3]}"#,
                r#"{"a":[10,2,3],"b":5}"#,
            ),
            (
                "negative result",
                obj.clone(),
                r#"{"a":[1,2.5]}"#,
                r#"{"a":[1,2.5],"b":-1.5}"#,
            ),
            (
                "single element",
                obj.clone(),
                r#"{"a":["7"]}"#,
                r#"{"a":["7"],"b":7}"#,
            ),
            (
                "empty array is zero",
                obj.clone(),
                r#"{"a":[]}"#,
                r#"{"a":[],"b":0}"#,
            ),
            ("data mode", data.clone(), "[5, 0.5]", "4.5"),
            ("non-array passes", obj.clone(), r#"{"a":5}"#, r#"{"a":5}"#),
            (
                "missing source passes",
                obj.clone(),
                r#"{"z":[1]}"#,
                r#"{"z":[1]}"#,
            ),
            ("data mode non-JSON passes", data.clone(), "1 2", "1 2"),
        ];
        testing::assert_single_outputs(&r, "number_math_subtraction", &cases);
    }

    #[test]
    fn not_finite_is_an_error() {
        let t = testing::build(
            &registry(),
            json!({"type": "number_math_subtraction", "settings": {}}),
        )
        .unwrap();
        let err = testing::run(t, &["[-1.7976931348623157e308, 1.7976931348623157e308]"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("number_math_subtraction") && err.contains("not a finite number"),
            "{err}"
        );
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "number_math_subtraction",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
                (json!({"object": "a"}), "object"),
            ],
        );
    }
}
