//! `number_math_division`: the quotient (a0 / a1 / …) of the numbers of a JSON array, folded from the left.
//!
//! Substation compatibility: the input must be a JSON array (the value at
//! `object.source_key`, or the data in data mode); anything else, or a missing source,
//! passes the message through unchanged. Elements are read with GJSON's `Float()`
//! (numeric strings parsed, `true` as 1, anything else 0) and folded from the first; an
//! empty array gives 0. Integral results are written as integers, others as floats; in
//! data mode the data becomes the result's text, without exponent.
//! Division by zero, where Substation writes ±Inf (which is not JSON), is an error naming the transform and the element: "number_math_division: division by zero at element 1 (0) of the array".

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, Compute, ConfigError, InPlace, MapTransform, Message, TransformError, Value,
};

use super::Math;
use crate::common::Io;

/// Settings of `number_math_division`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `number_math_division` transform.
pub(crate) struct NumberMathDivision {
    pub(super) math: Math,
}

impl NumberMathDivision {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(NumberMathDivision {
            math: Math {
                type_name: "number_math_division",
                io: Io::new(b, &s.object)?,
                op: |a, b| {
                    if b == 0.0 {
                        Err("division by zero")
                    } else {
                        Ok(a / b)
                    }
                },
            },
        })
    }
}

impl MapTransform for NumberMathDivision {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for NumberMathDivision {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        self.math.compute(read)
    }
}

impl NumberMathDivision {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        self.math.apply(msg)?;
        Ok(())
    }
}

/// What registers the `number_math_division` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_math_division",
    aliases: &[],
    library: "sub.tf.num.math.div",
    summary: "left-folded quotient of an array of numbers",
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
                "integral quotient",
                obj.clone(),
                r#"{"a":[12,3,2]}"#,
                r#"{"a":[12,3,2],"b":2}"#,
            ),
            (
                "fraction",
                obj.clone(),
                r#"{"a":[1,4]}"#,
                r#"{"a":[1,4],"b":0.25}"#,
            ),
            (
                "numeric strings",
                obj.clone(),
                r#"{"a":["9","-3"]}"#,
                r#"{"a":["9","-3"],"b":-3}"#,
            ),
            (
                "zero dividend",
                obj.clone(),
                r#"{"a":[0,5]}"#,
                r#"{"a":[0,5],"b":0}"#,
            ),
            ("data mode", data.clone(), "[10, 4]", "2.5"),
            ("non-array passes", obj.clone(), r#"{"a":5}"#, r#"{"a":5}"#),
            (
                "missing source passes",
                obj.clone(),
                r#"{"z":[1]}"#,
                r#"{"z":[1]}"#,
            ),
            ("data mode non-JSON passes", data.clone(), "1 2", "1 2"),
        ];
        testing::assert_single_outputs(&r, "number_math_division", &cases);
    }

    #[test]
    fn not_finite_is_an_error() {
        let t = testing::build(
            &registry(),
            json!({"type": "number_math_division", "settings": {}}),
        )
        .unwrap();
        let err = testing::run(t, &["[1, 0]"]).unwrap_err().to_string();
        assert!(
            err.contains("number_math_division")
                && err.contains("division by zero at element 1 (0)"),
            "{err}"
        );
        // Read from a multipath, the element is counted among the members that exist.
        let t = testing::build(
            &registry(),
            json!({"type": "number_math_division", "settings": {
                "object": {"source_key": "[a,missing,z]", "target_key": "q"}}}),
        )
        .unwrap();
        let err = testing::run(t, &[r#"{"a":3,"z":"0"}"#])
            .unwrap_err()
            .to_string();
        assert!(err.contains("division by zero at element 1 (0)"), "{err}");
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "number_math_division",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
                (json!({"object": "a"}), "object"),
            ],
        );
    }
}
