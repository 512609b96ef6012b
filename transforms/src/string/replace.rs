//! `string_replace`: replaces every match of a regular expression.
//!
//! Substation compatibility: `pattern` (required) is a regular expression in Go's RE2
//! syntax and `replacement` (default empty: matches are removed; the library's `repl` is an
//! abbreviation of it) is expanded as Go's `Regexp.ReplaceAll` does: `$1`, `${1}`, `$name`
//! and `${name}` insert groups, a name is as long as possible (`$1x` is the group named
//! `1x`), groups that do not exist or did not match insert nothing, and `$$` is a `$`.
//! Object mode (both `object.source_key` and `object.target_key`) replaces in the value's
//! text and writes a string; a missing source passes the message through. Data mode
//! (neither key) replaces in the raw data bytes, so bytes that are not UTF-8 outside the
//! matches are kept.

use regex::Regex;
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, InPlace, MapTransform, Message, TransformError, Value};

use crate::common::Io;

/// Settings of `string_replace`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
    /// The regular expression (required).
    pub pattern: String,
    /// What each match becomes (`$n` / `${name}` expanded).
    pub replacement: String,
}

/// The `string_replace` transform.
pub(crate) struct StringReplace {
    io: Io,
    re: Regex,
    re_bytes: regex::bytes::Regex,
    replacement: String,
}

impl StringReplace {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.pattern.is_empty() {
            return Err(b.field_error(
                "pattern",
                "missing required option: the regular expression to replace",
            ));
        }
        let re = b.regex("pattern", &s.pattern)?;
        let re_bytes = b.bytes_regex("pattern", &s.pattern)?;
        Ok(StringReplace {
            io: Io::new(b, &s.object)?,
            re,
            re_bytes,
            replacement: s.replacement,
        })
    }
}

impl MapTransform for StringReplace {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl StringReplace {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        match &self.io {
            Io::Object { .. } => {
                let replaced = self.io.read_text(msg).map(|t| {
                    self.re
                        .replace_all(&t, self.replacement.as_str())
                        .into_owned()
                });
                if let Some(r) = replaced {
                    self.io.write(msg, Value::String(r.into()))?;
                }
            }
            Io::Data => {
                let replaced = self
                    .re_bytes
                    .replace_all(msg.data(), self.replacement.as_bytes())
                    .into_owned();
                msg.set_data(replaced);
            }
        }
        Ok(())
    }
}

/// What registers the `string_replace` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_replace",
    aliases: &[],
    library: "sub.tf.str.replace",
    summary: "replaces every regex match",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"pattern": "a", "replacement": "b"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{Message, Pipeline, json, testing};
    use std::sync::Arc;

    #[test]
    fn cases() {
        let r = registry();
        let obj = |pattern: &str, replacement: &str| json!({"object": {"source_key": "a", "target_key": "b"}, "pattern": pattern, "replacement": replacement});
        let cases = [
            (
                "every match",
                obj("o", "0"),
                r#"{"a":"foo boo"}"#,
                r#"{"a":"foo boo","b":"f00 b00"}"#,
            ),
            (
                "numbered groups",
                obj(r"(\w+)@(\w+)", "$2 at ${1}"),
                r#"{"a":"me@host"}"#,
                r#"{"a":"me@host","b":"host at me"}"#,
            ),
            (
                "named groups",
                obj(r"(?P<first>\w+) (?P<last>\w+)", "${last}, $first"),
                r#"{"a":"Ada Lovelace"}"#,
                r#"{"a":"Ada Lovelace","b":"Lovelace, Ada"}"#,
            ),
            (
                "longest name: $1x is group 1x",
                obj(r"(a)", "$1x|${1}x"),
                r#"{"a":"a"}"#,
                r#"{"a":"a","b":"|ax"}"#,
            ),
            (
                "dollar escape",
                obj(r"\d+", "$$"),
                r#"{"a":"cost 5"}"#,
                r#"{"a":"cost 5","b":"cost $"}"#,
            ),
            (
                "default replacement removes",
                json!({"object": {"source_key": "a", "target_key": "a"}, "pattern": r"\s+"}),
                r#"{"a":"a b  c"}"#,
                r#"{"a":"abc"}"#,
            ),
            (
                "missing source passes",
                obj("x", "y"),
                r#"{"z":"x"}"#,
                r#"{"z":"x"}"#,
            ),
            ("non-JSON data with keys passes", obj("x", "y"), "x", "x"),
            (
                "data mode",
                json!({"pattern": "(?i)secret=\\S+", "replacement": "secret=***"}),
                "user=a SECRET=hunter2 x",
                "user=a secret=*** x",
            ),
        ];
        testing::assert_single_outputs(&r, "string_replace", &cases);
    }

    #[test]
    fn data_mode_keeps_raw_bytes() {
        let t = testing::build(
            &registry(),
            json!({"type": "string_replace", "settings": {"pattern": "a", "replacement": "b"}}),
        )
        .unwrap();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let out = testing::block_on(p.apply(vec![Message::new(vec![0xff, b'a', 0xfe])])).unwrap();
        assert_eq!(&out[0].data()[..], &[0xff, b'b', 0xfe]);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "string_replace",
            &[
                (json!({"replacement": "x"}), "settings.pattern"),
                (json!({"pattern": "[z-a]"}), "settings.pattern"),
                (json!({"pattern": "x", "replacement": 1}), "replacement"),
                (
                    json!({"pattern": "x", "object": {"source_key": "a"}}),
                    "object.target_key",
                ),
                (
                    json!({"pattern": "x", "object": {"target_key": "a"}}),
                    "object.source_key",
                ),
            ],
        );
    }
}
