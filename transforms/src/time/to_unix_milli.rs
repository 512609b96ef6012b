//! `time_to_unix_milli`: epoch nanoseconds to epoch milliseconds.
//!
//! Substation compatibility: object mode (`source_key` and `target_key`) or data mode; a
//! missing source passes through; the result is a JSON integer (its text in data mode),
//! rounded toward the past as Go's `Time.UnixMilli` does. The input may be a JSON number or
//! a numeric string; anything else is an error (Substation reads it as 0).

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, Compute, ConfigError, InPlace, MapTransform, Message, TransformError, Value,
};

use crate::common::Io;

/// Settings of `time_to_unix_milli`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key`, or neither (data mode).
    pub object: ObjectSettings,
}

/// The `time_to_unix_milli` transform.
pub(crate) struct TimeToUnixMilli {
    pub(super) io: Io,
}

impl TimeToUnixMilli {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(TimeToUnixMilli {
            io: Io::new(b, &s.object)?,
        })
    }
}

impl MapTransform for TimeToUnixMilli {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for TimeToUnixMilli {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        super::compute_one(read, |v| self.convert(v))
    }
}

impl TimeToUnixMilli {
    /// The value written for the value `v` read.
    fn convert(&self, v: &Value) -> Result<Value, TransformError> {
        let ns = super::epoch_nanos(v, 0, "nanoseconds")?;
        Ok(Value::from(ns.div_euclid(1_000_000)))
    }

    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        super::apply(&self.io, msg, |v| self.convert(v))?;
        Ok(())
    }
}

/// What registers the `time_to_unix_milli` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "time_to_unix_milli",
    aliases: &[],
    library: "sub.tf.time.to.unix_milli",
    summary: "epoch nanoseconds to epoch milliseconds",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    const TYPE: &str = "time_to_unix_milli";

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "ts", "target_key": "ms"}});
        let cases = [
            (
                "object mode",
                obj.clone(),
                r#"{"ts":1591367999430166000}"#,
                vec![r#"{"ts":1591367999430166000,"ms":1591367999430}"#],
            ),
            (
                "numeric string",
                obj.clone(),
                r#"{"ts":"1591367999430999999"}"#,
                vec![r#"{"ts":"1591367999430999999","ms":1591367999430}"#],
            ),
            (
                "before 1970 rounds toward the past",
                obj.clone(),
                r#"{"ts":-1500000}"#,
                vec![r#"{"ts":-1500000,"ms":-2}"#],
            ),
            (
                "data mode",
                json!({}),
                "1591367999430166000",
                vec!["1591367999430"],
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
            ("text", r#"{"ts":"later"}"#, "epoch nanoseconds as a number"),
            ("object", r#"{"ts":{}}"#, "found an object"),
            ("too big", r#"{"ts":1e30}"#, "out of range"),
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
