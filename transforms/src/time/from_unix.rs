//! `time_from_unix`: epoch seconds to epoch nanoseconds.
//!
//! Substation compatibility: object mode (`source_key` and `target_key`) or data mode;
//! a missing source passes through; the result is a JSON integer (its text in data mode).
//! The input may be a JSON number or a numeric string; fractional seconds are kept down to
//! the nanosecond, read from the number's decimal text so no float rounding creeps in.
//! Input that is not a number is an error (Substation reads it as 0, i.e. 1970), and so
//! is a time outside the range of epoch nanoseconds (years 1678 to 2262).

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, Compute, ConfigError, InPlace, MapTransform, Message, TransformError, Value,
};

use crate::common::Io;

/// Settings of `time_from_unix`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key`, or neither (data mode).
    pub object: ObjectSettings,
}

/// The `time_from_unix` transform.
pub(crate) struct TimeFromUnix {
    pub(super) io: Io,
}

impl TimeFromUnix {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(TimeFromUnix {
            io: Io::new(b, &s.object)?,
        })
    }
}

impl MapTransform for TimeFromUnix {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for TimeFromUnix {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        super::compute_one(read, |v| self.convert(v))
    }
}

impl TimeFromUnix {
    /// The value written for the value `v` read.
    fn convert(&self, v: &Value) -> Result<Value, TransformError> {
        super::epoch_nanos(v, 9, "seconds").map(Value::from)
    }

    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        super::apply(&self.io, msg, |v| self.convert(v))?;
        Ok(())
    }
}

/// What registers the `time_from_unix` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "time_from_unix",
    aliases: &[],
    library: "sub.tf.time.from.unix",
    summary: "epoch seconds to epoch nanoseconds",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    const TYPE: &str = "time_from_unix";

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "ts", "target_key": "ts"}});
        let cases = [
            (
                "object mode",
                obj.clone(),
                r#"{"ts":1591367999}"#,
                vec![r#"{"ts":1591367999000000000}"#],
            ),
            (
                "fraction kept to the nanosecond",
                obj.clone(),
                r#"{"ts":1591367999.430166}"#,
                vec![r#"{"ts":1591367999430166000}"#],
            ),
            (
                "numeric string",
                obj.clone(),
                r#"{"ts":"1591367999.123456789"}"#,
                vec![r#"{"ts":1591367999123456789}"#],
            ),
            (
                "negative",
                obj.clone(),
                r#"{"ts":-1.5}"#,
                vec![r#"{"ts":-1500000000}"#],
            ),
            (
                "data mode",
                json!({}),
                "1591367999",
                vec!["1591367999000000000"],
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"a":1}"#,
                vec![r#"{"a":1}"#],
            ),
        ];
        for (name, settings, input, want) in cases {
            let t = testing::build(&r, json!({"type": TYPE, "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn errors() {
        let r = registry();
        let obj = json!({"object": {"source_key": "ts", "target_key": "ts"}});
        let cases = [
            (
                "text",
                r#"{"ts":"yesterday"}"#,
                r#"found the string "yesterday""#,
            ),
            ("object", r#"{"ts":{"s":1}}"#, "found an object"),
            ("too far", r#"{"ts":1e12}"#, "out of range"),
        ];
        for (name, input, want) in cases {
            let t = testing::build(&r, json!({"type": TYPE, "settings": obj})).unwrap();
            let err = testing::run(t, &[input]).unwrap_err().to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
        let err = testing::build(
            &r,
            json!({"type": TYPE, "settings": {"object": {"target_key": "a"}}}),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("settings.object.source_key"), "{err}");
    }
}
