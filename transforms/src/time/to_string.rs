//! `time_to_string`: formats epoch nanoseconds with a Go layout.
//!
//! Substation compatibility: the same settings (`format` required, `location` defaulting to
//! UTC, an IANA name the time is shown in) and Go's formatting (see [`super::layout`]);
//! object mode (`source_key` and `target_key`) or data mode; a missing source passes
//! through. An unknown `location` or a missing `format` is a configuration error naming the
//! field. Input that is not a number is an error (Substation reads it as 0 and prints
//! 1970). `format` also accepts `unix` and `unix_milli`, which print epoch seconds or
//! milliseconds (Go would print the word itself).

use chrono_tz::Tz;
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, Compute, ConfigError, InPlace, MapTransform, Message, TransformError, Value,
};

use super::layout::Layout;
use crate::common::Io;

/// Settings of `time_to_string`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key`, or neither (data mode).
    pub object: ObjectSettings,
    /// The Go layout of the output (required).
    pub format: Option<String>,
    /// Zone the time is shown in: an IANA name (default UTC).
    pub location: String,
}

/// The `time_to_string` transform.
pub(crate) struct TimeToString {
    pub(super) io: Io,
    layout: Layout,
    location: Tz,
}

impl TimeToString {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(TimeToString {
            io: Io::new(b, &s.object)?,
            layout: super::format(b, &s.format)?,
            location: super::location(b, &s.location)?,
        })
    }
}

impl MapTransform for TimeToString {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for TimeToString {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        super::compute_one(read, |v| self.convert(v))
    }
}

impl TimeToString {
    /// The value written for the value `v` read.
    fn convert(&self, v: &Value) -> Result<Value, TransformError> {
        let ns = super::epoch_nanos(v, 0, "nanoseconds")?;
        let t = super::from_nanos(ns).with_timezone(&self.location);
        Ok(Value::String(self.layout.format(&t)))
    }

    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        super::apply(&self.io, msg, |v| self.convert(v))?;
        Ok(())
    }
}

/// What registers the `time_to_string` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "time_to_string",
    aliases: &[],
    library: "sub.tf.time.to.str",
    summary: "formats epoch nanoseconds with a Go layout",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"format": "2006-01-02"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    const TYPE: &str = "time_to_string";

    #[test]
    fn cases() {
        let r = registry();
        let rfc3339 = "2006-01-02T15:04:05Z07:00";
        let cases = [
            (
                "object mode",
                json!({"object": {"source_key": "ts", "target_key": "ts"}, "format": rfc3339}),
                r#"{"ts":1591367999430166000}"#,
                vec![r#"{"ts":"2020-06-05T14:39:59Z"}"#],
            ),
            (
                "fractional seconds",
                json!({"object": {"source_key": "ts", "target_key": "s"}, "format": "2006-01-02T15:04:05.000000Z07:00"}),
                r#"{"ts":1591367999430166000}"#,
                vec![r#"{"ts":1591367999430166000,"s":"2020-06-05T14:39:59.430166Z"}"#],
            ),
            (
                "location",
                json!({"format": "Mon, 02 Jan 2006 15:04:05 MST -0700", "location": "America/New_York"}),
                "1591367999430166000",
                vec!["Fri, 05 Jun 2020 10:39:59 EDT -0400"],
            ),
            (
                "data mode, trailing newline",
                json!({"format": "2006/01/02"}),
                "1591367999430166000\n",
                vec!["2020/06/05"],
            ),
            (
                "before 1970",
                json!({"format": "2006-01-02T15:04:05.999999999Z07:00"}),
                "-1",
                vec!["1969-12-31T23:59:59.999999999Z"],
            ),
            (
                "unix milli layout",
                json!({"format": "unix_milli"}),
                "1591367999430166000",
                vec!["1591367999430"],
            ),
            (
                "missing source passes",
                json!({"object": {"source_key": "z", "target_key": "b"}, "format": rfc3339}),
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
        let settings =
            json!({"object": {"source_key": "ts", "target_key": "ts"}, "format": "2006"});
        for (input, want) in [
            (r#"{"ts":"2020"}"#, ""),
            (r#"{"ts":"x"}"#, r#"found the string "x""#),
            (r#"{"ts":{"a":1}}"#, "found an object"),
        ] {
            let t = testing::build(&r, json!({"type": TYPE, "settings": settings})).unwrap();
            let got = testing::run(t, &[input]);
            if want.is_empty() {
                assert_eq!(got.unwrap(), vec![r#"{"ts":"1970"}"#], "{input}");
            } else {
                let err = got.unwrap_err().to_string();
                assert!(err.contains(want), "{input}: {err}");
            }
        }
        let config = [
            (
                "missing format",
                json!({"location": "UTC"}),
                "settings.format",
            ),
            ("empty format", json!({"format": ""}), "settings.format"),
            (
                "bad location",
                json!({"format": "2006", "location": "EST5EDT-ish"}),
                "settings.location: unknown time zone",
            ),
        ];
        for (name, settings, want) in config {
            let err = testing::build(&r, json!({"type": TYPE, "settings": settings}))
                .err()
                .unwrap_or_else(|| panic!("{name}: built"))
                .to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn literal_format_warns() {
        let built = registry()
            .build_transform(
                &json!({"type": TYPE, "settings": {"format": "YYYY-MM-DD"}}),
                "transforms[0]",
            )
            .ok()
            .unwrap();
        assert!(
            built
                .warnings
                .iter()
                .any(|w| w.message.contains("no Go layout element")),
            "a warning"
        );
        let built = registry()
            .build_transform(
                &json!({"type": TYPE, "settings": {"format": "2006-01-02"}}),
                "transforms[0]",
            )
            .ok()
            .unwrap();
        assert!(built.warnings.is_empty());
    }
}
