//! `time_from_string`: parses a time string with a Go layout into epoch nanoseconds.
//!
//! Substation compatibility: the same settings (`format` required, `location` defaulting to
//! UTC) and Go's parsing rules (see [`super::layout`]); the result is a JSON integer in
//! object mode and the integer's text in data mode. A missing source passes through. An
//! unknown `location` or a missing `format` is a configuration error naming the field
//! (Substation reports both only when the first message arrives, or not at all). A parsed
//! time outside the range of epoch nanoseconds (years 1678 to 2262, typically because the
//! layout has no year and Go assumes year 0) is an error where Go silently wraps around.
//! `format` also accepts `unix` and `unix_milli` (epoch seconds or milliseconds as text).

use chrono_tz::Tz;
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, InPlace, MapTransform, Message, TransformError, Value};

use super::layout::Layout;
use crate::common::Io;

/// Settings of `time_from_string`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key`, or neither (data mode).
    pub object: ObjectSettings,
    /// The Go layout of the input (required).
    pub format: Option<String>,
    /// Zone of wall times without zone information: an IANA name (default UTC).
    pub location: String,
}

/// The `time_from_string` transform.
pub(crate) struct TimeFromString {
    io: Io,
    layout: Layout,
    location: Tz,
}

impl TimeFromString {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(TimeFromString {
            io: Io::new(b, &s.object)?,
            layout: super::format(b, &s.format)?,
            location: super::location(b, &s.location)?,
        })
    }
}

impl MapTransform for TimeFromString {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl TimeFromString {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let parsed = match self.io.read_text(msg) {
            Some(text) => Some(
                self.layout
                    .parse(&text, self.location)
                    .map_err(TransformError::Failed)?,
            ),
            None => None,
        };
        if let Some(t) = parsed {
            let ns = super::to_nanos(&t)?;
            self.io.write(msg, Value::from(ns))?;
        }
        Ok(())
    }
}

/// What registers the `time_from_string` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "time_from_string",
    aliases: &[],
    library: "sub.tf.time.from.str",
    summary: "parses a time string (Go layout) into epoch nanoseconds",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"format": "2006-01-02T15:04:05Z07:00"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    const TYPE: &str = "time_from_string";

    #[test]
    fn cases() {
        let r = registry();
        let rfc3339 = "2006-01-02T15:04:05Z07:00";
        let cases = [
            (
                "object mode",
                json!({"object": {"source_key": "ts", "target_key": "ts"}, "format": rfc3339}),
                r#"{"ts":"2020-06-05T14:39:59Z"}"#,
                vec![r#"{"ts":1591367999000000000}"#],
            ),
            (
                "data mode with fraction",
                json!({"format": "2006-01-02T15:04:05.000Z"}),
                "2020-06-05T14:39:59.430Z",
                vec!["1591367999430000000"],
            ),
            (
                "location applies to wall times",
                json!({"object": {"source_key": "a", "target_key": "b"}, "format": "2006-01-02 15:04:05", "location": "America/New_York"}),
                r#"{"a":"2020-06-05 10:39:59"}"#,
                vec![r#"{"a":"2020-06-05 10:39:59","b":1591367999000000000}"#],
            ),
            (
                "offset in the input wins",
                json!({"object": {"source_key": "a", "target_key": "a"}, "format": rfc3339, "location": "Asia/Tokyo"}),
                r#"{"a":"2020-06-05T10:39:59.430166-04:00"}"#,
                vec![r#"{"a":1591367999430166000}"#],
            ),
            (
                "abbreviation",
                json!({"format": "Mon, 02 Jan 2006 15:04:05 MST", "location": "America/Los_Angeles"}),
                "Fri, 05 Jun 2020 07:39:59 PDT",
                vec!["1591367999000000000"],
            ),
            (
                "to metadata",
                json!({"object": {"source_key": "a", "target_key": "meta t"}, "format": "2006-01-02"}),
                r#"{"a":"2020-06-05"}"#,
                vec![r#"{"a":"2020-06-05"}"#],
            ),
            (
                "unix layout",
                json!({"format": "unix"}),
                "1591367999.5",
                vec!["1591367999500000000"],
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
        let cases = [
            (
                "not matching",
                json!({"format": "2006-01-02"}),
                "05/06/2020",
                r#"cannot parse "05/06/2020" as "2006""#,
            ),
            (
                "range",
                json!({"format": "2006-01-02"}),
                "2020-02-30",
                "day out of range",
            ),
            (
                "no year",
                json!({"format": "Jan _2 15:04:05"}),
                "Jun  5 14:39:59",
                "outside the range of epoch nanoseconds",
            ),
        ];
        for (name, settings, input, want) in cases {
            let t = testing::build(&r, json!({"type": TYPE, "settings": settings})).unwrap();
            let err = testing::run(t, &[input]).unwrap_err().to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
        let config = [
            ("missing format", json!({}), "settings.format"),
            (
                "bad location",
                json!({"format": "2006", "location": "Mars/Olympus"}),
                "settings.location",
            ),
            (
                "only a source",
                json!({"format": "2006", "object": {"source_key": "a"}}),
                "settings.object.target_key",
            ),
            (
                "format of the wrong type",
                json!({"format": 2006}),
                "settings.format",
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
}
