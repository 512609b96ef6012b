//! `time_to_unix`: epoch nanoseconds to epoch seconds.
//!
//! Substation compatibility: object mode (`source_key` and `target_key`) or data mode; a
//! missing source passes through; the result is a JSON integer (its text in data mode),
//! rounded toward the past as Go's `Time.Unix` does (-1 ns is second -1). The input may be
//! a JSON number or a numeric string; anything else is an error (Substation reads it as 0).

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, Compute, ConfigError, InPlace, MapTransform, Message, TransformError, Value,
};

use crate::common::Io;

/// Settings of `time_to_unix`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key`, or neither (data mode).
    pub object: ObjectSettings,
}

/// The `time_to_unix` transform.
pub(crate) struct TimeToUnix {
    pub(super) io: Io,
}

impl TimeToUnix {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(TimeToUnix {
            io: Io::new(b, &s.object)?,
        })
    }
}

impl MapTransform for TimeToUnix {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for TimeToUnix {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        super::compute_one(read, |v| self.convert(v))
    }
}

impl TimeToUnix {
    /// The value written for the value `v` read.
    fn convert(&self, v: &Value) -> Result<Value, TransformError> {
        let ns = super::epoch_nanos(v, 0, "nanoseconds")?;
        Ok(Value::from(ns.div_euclid(1_000_000_000)))
    }

    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        super::apply(&self.io, msg, |v| self.convert(v))?;
        Ok(())
    }
}

/// What registers the `time_to_unix` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "time_to_unix",
    aliases: &[],
    library: "sub.tf.time.to.unix",
    summary: "epoch nanoseconds to epoch seconds",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    const TYPE: &str = "time_to_unix";

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "ts", "target_key": "ts"}});
        let cases = [
            (
                "object mode",
                obj.clone(),
                r#"{"ts":1591367999430166000}"#,
                vec![r#"{"ts":1591367999}"#],
            ),
            (
                "numeric string",
                obj.clone(),
                r#"{"ts":"1591367999999999999"}"#,
                vec![r#"{"ts":1591367999}"#],
            ),
            (
                "before 1970 rounds toward the past",
                obj.clone(),
                r#"{"ts":-1}"#,
                vec![r#"{"ts":-1}"#],
            ),
            (
                "data mode",
                json!({}),
                "1591367999430166000",
                vec!["1591367999"],
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
                r#"{"ts":"2020-06-05"}"#,
                "epoch nanoseconds as a number",
            ),
            ("array", r#"{"ts":[1]}"#, "found an array"),
            ("null", r#"{"ts":null}"#, "found null"),
        ];
        for (name, input, want) in cases {
            let t = testing::build(&r, json!({"type": TYPE, "settings": obj})).unwrap();
            let err = testing::run(t, &[input]).unwrap_err().to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
        let t = testing::build(&r, json!({"type": TYPE})).unwrap();
        assert!(testing::run(t, &["soon"]).is_err());
        let err = testing::build(
            &r,
            json!({"type": TYPE, "settings": {"object": {"source_key": "a"}}}),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("settings.object.target_key"), "{err}");
    }
}
