//! `number_math_addition`: the sum of the numbers of a JSON array, folded from the left.
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

/// Settings of `number_math_addition`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `number_math_addition` transform.
pub(crate) struct NumberMathAddition {
    pub(super) math: Math,
}

impl NumberMathAddition {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(NumberMathAddition {
            math: Math {
                type_name: "number_math_addition",
                io: Io::new(b, &s.object)?,
                op: |a, b| Ok(a + b),
            },
        })
    }
}

impl MapTransform for NumberMathAddition {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for NumberMathAddition {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        self.math.compute(read)
    }
}

impl NumberMathAddition {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        self.math.apply(msg)?;
        Ok(())
    }
}

/// What registers the `number_math_addition` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_math_addition",
    aliases: &[],
    library: "sub.tf.num.math.add",
    summary: "sum of an array of numbers",
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
                r#"{"a":[1,2,3]}"#,
                r#"{"a":[1,2,3],"b":6}"#,
            ),
            (
                "floats",
                obj.clone(),
                r#"{"a":[0.5,"0.25",true]}"#,
                r#"{"a":[0.5,"0.25",true],"b":1.75}"#,
            ),
            (
                "non-numeric elements are zero",
                obj.clone(),
                r#"{"a":[1,"x",null]}"#,
                r#"{"a":[1,"x",null],"b":1}"#,
            ),
            (
                "empty array is zero",
                obj.clone(),
                r#"{"a":[]}"#,
                r#"{"a":[],"b":0}"#,
            ),
            ("data mode", data.clone(), "[1.5, 1.5]", "3"),
            (
                "data mode float",
                data.clone(),
                "[0.1, 0.2]",
                "0.30000000000000004",
            ),
            ("non-array passes", obj.clone(), r#"{"a":5}"#, r#"{"a":5}"#),
            (
                "missing source passes",
                obj.clone(),
                r#"{"z":[1]}"#,
                r#"{"z":[1]}"#,
            ),
            ("data mode non-JSON passes", data.clone(), "1 2", "1 2"),
            (
                "a multipath source",
                json!({"object": {"source_key": "[a,c.d]", "target_key": "b"}}),
                r#"{"a":1,"c":{"d":"2.5"}}"#,
                r#"{"a":1,"c":{"d":"2.5"},"b":3.5}"#,
            ),
            (
                "a multipath's missing members are left out",
                json!({"object": {"source_key": "[x,a,y]", "target_key": "b"}}),
                r#"{"a":4}"#,
                r#"{"a":4,"b":4}"#,
            ),
            (
                "a multipath with a literal",
                json!({"object": {"source_key": "[a,!1000000000]", "target_key": "b"}}),
                r#"{"a":0.25}"#,
                r#"{"a":0.25,"b":1000000000.25}"#,
            ),
            (
                "a multipath none of whose members exist is zero",
                json!({"object": {"source_key": "[x,y]", "target_key": "b"}}),
                r#"{"a":1}"#,
                r#"{"a":1,"b":0}"#,
            ),
            (
                "a multipath into data that is not JSON passes",
                json!({"object": {"source_key": "[x,y]", "target_key": "b"}}),
                "1 2",
                "1 2",
            ),
        ];
        testing::assert_single_outputs(&r, "number_math_addition", &cases);
    }

    #[test]
    fn not_finite_is_an_error() {
        let t = testing::build(
            &registry(),
            json!({"type": "number_math_addition", "settings": {}}),
        )
        .unwrap();
        let err = testing::run(t, &["[1.7976931348623157e308, 1.7976931348623157e308]"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("number_math_addition") && err.contains("not a finite number"),
            "{err}"
        );
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "number_math_addition",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
                (json!({"object": "a"}), "object"),
            ],
        );
    }
}
