//! `number_minimum`: the smaller of a number and the `value` setting.
//!
//! Substation compatibility: `value` is a float (Go default 0). Object mode (both
//! `object.source_key` and `object.target_key`) reads the value with GJSON's `Float()`
//! (numeric strings parsed, `true` as 1, anything else 0) and writes the result as a number
//! (integral results as integers); a missing source passes the message through. Data mode
//! (neither key) parses the whole data as a number and replaces it with the result's text;
//! data that is not a finite number is an error naming the transform, as Go's
//! `strconv.ParseFloat` failure is in Substation.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, InPlace, MapTransform, Message, TransformError};

use crate::common::Io;

/// Settings of `number_minimum`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
    /// The number to compare with (default 0).
    pub value: f64,
}

/// The `number_minimum` transform.
pub(crate) struct NumberMinimum {
    io: Io,
    value: f64,
}

impl NumberMinimum {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if !s.value.is_finite() {
            return Err(b.field_error("value", "must be a finite number"));
        }
        Ok(NumberMinimum {
            io: Io::new(b, &s.object)?,
            value: s.value,
        })
    }
}

impl MapTransform for NumberMinimum {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl NumberMinimum {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        if let Some(f) = super::read_number("number_minimum", &self.io, msg)? {
            super::write_number(&self.io, msg, f.min(self.value))?;
        }
        Ok(())
    }
}

/// What registers the `number_minimum` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_minimum",
    aliases: &[],
    library: "sub.tf.num.min",
    summary: "the smaller of a number and `value`",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"value": 1}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let obj = |v: f64| json!({"object": {"source_key": "a", "target_key": "b"}, "value": v});
        let cases = [
            ("input smaller", obj(10.0), r#"{"a":5}"#, r#"{"a":5,"b":5}"#),
            (
                "value smaller",
                obj(-0.5),
                r#"{"a":5}"#,
                r#"{"a":5,"b":-0.5}"#,
            ),
            (
                "numeric string",
                obj(100.0),
                r#"{"a":"2.5"}"#,
                r#"{"a":"2.5","b":2.5}"#,
            ),
            (
                "true is one",
                obj(100.0),
                r#"{"a":true}"#,
                r#"{"a":true,"b":1}"#,
            ),
            (
                "default value is zero",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":3}"#,
                r#"{"a":0}"#,
            ),
            ("data mode", json!({"value": 2.25}), "10", "2.25"),
            (
                "data mode without exponent",
                json!({"value": 1e300}),
                "1e21",
                "1000000000000000000000",
            ),
            (
                "missing source passes",
                obj(1.0),
                r#"{"z":5}"#,
                r#"{"z":5}"#,
            ),
            ("non-JSON data with keys passes", obj(1.0), "plain", "plain"),
        ];
        testing::assert_single_outputs(&r, "number_minimum", &cases);
    }

    #[test]
    fn data_that_is_not_a_number_is_an_error() {
        let t = testing::build(
            &registry(),
            json!({"type": "number_minimum", "settings": {"value": 1}}),
        )
        .unwrap();
        let err = testing::run(t, &["twelve"]).unwrap_err().to_string();
        assert!(
            err.contains("number_minimum") && err.contains("twelve"),
            "{err}"
        );
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "number_minimum",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
                (json!({"value": "ten"}), "value"),
            ],
        );
    }
}
