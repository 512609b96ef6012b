//! `string_capture`: extracts text with a regular expression.
//!
//! Substation compatibility: `pattern` (required) is a regular expression in Go's RE2
//! syntax; `count` defaults to 0.
//!
//! * Named groups: as in Substation, a pattern is read as one with named groups when it
//!   contains `(?P<` (a pattern whose only names are written `(?<name>…)` is read by
//!   `count` as below). The first match's named groups become an object of strings. Object
//!   mode writes each group at `<target_key>.<name>` (keeping what else an object target
//!   holds; a target that holds a string or number is replaced by the object); data mode
//!   replaces the data with the object. A group that did not take part in the match is
//!   `""`. With no match object mode changes nothing and data mode gives empty data.
//!   `count` is not used with named groups. Each group's text is written with `SetValue`'s
//!   typing (text holding a JSON object or array goes in as that value).
//! * `count` 0: the last group of the first match (the whole match when the pattern has no
//!   group) as a string; no match gives `""`.
//! * `count` n > 0: an array of the last group of each of the first n matches; a negative
//!   count takes every match, as Go's `FindAll` does with n < 0. With no match, object mode
//!   writes `null` and data mode gives empty data, as Substation's nil list does.
//!
//! Object mode (both `object.source_key` and `object.target_key`) reads the value's text;
//! a missing source passes the message through. Data mode (neither key) reads the data
//! (bytes that are not UTF-8 are read as U+FFFD).

use regex::{Captures, Regex};
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, Key, Message, StatelessTransform, TransformError, Value, async_trait, value,
};

use crate::common::Io;

/// Settings of `string_capture`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
    /// The regular expression (required).
    pub pattern: String,
    /// How many matches: 0 = the first as a string, n = up to n as an array, < 0 = all.
    pub count: i64,
}

/// The `string_capture` transform.
pub(crate) struct StringCapture {
    io: Io,
    re: Regex,
    count: i64,
    /// Named groups: (group index, name, key `<target_key>.<name>` in object mode).
    named: Vec<(usize, String, Option<Key>)>,
}

impl StringCapture {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.pattern.is_empty() {
            return Err(b.field_error(
                "pattern",
                "missing required option: the regular expression to capture with",
            ));
        }
        let io = Io::new(b, &s.object)?;
        let re = b.regex("pattern", &s.pattern)?;
        let mut named = Vec::new();
        // Substation looks for named groups by this text alone.
        let has_named = s.pattern.contains("(?P<");
        for (i, name) in re.capture_names().enumerate() {
            if !has_named {
                break;
            }
            let Some(name) = name else { continue };
            let key = match &io {
                Io::Object { target, .. } => {
                    Some(b.key("object.target_key", &format!("{}.{name}", target.as_str()))?)
                }
                Io::Data => None,
            };
            named.push((i, name.to_string(), key));
        }
        Ok(StringCapture {
            io,
            re,
            count: s.count,
            named,
        })
    }

    /// The text of the last group of a match (the whole match when there is no group).
    fn last_group(caps: &Captures<'_>) -> Value {
        let text = caps.get(caps.len() - 1).map(|m| m.as_str()).unwrap_or("");
        Value::from(text)
    }
}

#[async_trait]
impl StatelessTransform for StringCapture {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let Some(text) = self.io.read_text(&msg).map(|t| t.into_owned()) else {
            out.push(msg);
            return Ok(());
        };
        if !self.named.is_empty() {
            let groups: Vec<(&(usize, String, Option<Key>), String)> = match self.re.captures(&text)
            {
                Some(caps) => self
                    .named
                    .iter()
                    .map(|g| {
                        let t = caps.get(g.0).map(|m| m.as_str()).unwrap_or("");
                        (g, t.to_string())
                    })
                    .collect(),
                None => Vec::new(),
            };
            match &self.io {
                Io::Object { .. } => {
                    for ((_, _, key), t) in groups {
                        if let Some(key) = key {
                            msg.set(key, Value::String(t.into()))?;
                        }
                    }
                }
                Io::Data if groups.is_empty() => msg.set_data(Vec::new()),
                Io::Data => {
                    let obj = groups
                        .into_iter()
                        .map(|((_, name, _), t)| {
                            (name.clone(), value::sjson_typed(Value::String(t.into())))
                        })
                        .collect();
                    msg.set_data_value(Value::Object(obj));
                }
            }
        } else if self.count == 0 {
            let v = self
                .re
                .captures(&text)
                .map(|c| Self::last_group(&c))
                .unwrap_or_else(|| Value::String(Default::default()));
            self.io.write(&mut msg, v)?;
        } else {
            let limit = usize::try_from(self.count).unwrap_or(usize::MAX);
            let all = self
                .re
                .captures_iter(&text)
                .take(limit)
                .map(|c| Self::last_group(&c))
                .collect::<Vec<_>>();
            match (&self.io, all.is_empty()) {
                (Io::Data, true) => msg.set_data(Vec::new()),
                (_, true) => self.io.write(&mut msg, Value::Null)?,
                (_, false) => self.io.write(&mut msg, Value::Array(all.into()))?,
            }
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `string_capture` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_capture",
    aliases: &[],
    library: "sub.tf.str.capture",
    summary: "extracts text with a regular expression",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"pattern": "(\\w+)"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let obj = |pattern: &str, count: i64| json!({"object": {"source_key": "a", "target_key": "b"}, "pattern": pattern, "count": count});
        let cases = [
            (
                "first match, last group",
                obj(r"^([^@]*)@(.*)$", 0),
                r#"{"a":"me@example.com"}"#,
                r#"{"a":"me@example.com","b":"example.com"}"#,
            ),
            (
                "no group gives the whole match",
                obj(r"\d+", 0),
                r#"{"a":"ab12cd34"}"#,
                r#"{"a":"ab12cd34","b":"12"}"#,
            ),
            (
                "no match gives empty string",
                obj(r"(\d+)", 0),
                r#"{"a":"abc"}"#,
                r#"{"a":"abc","b":""}"#,
            ),
            (
                "count limits matches",
                obj(r"(\w)\d", 2),
                r#"{"a":"a1 b2 c3"}"#,
                r#"{"a":"a1 b2 c3","b":["a","b"]}"#,
            ),
            (
                "count larger than matches",
                obj(r"(\w)\d", 10),
                r#"{"a":"a1 b2"}"#,
                r#"{"a":"a1 b2","b":["a","b"]}"#,
            ),
            (
                "negative count takes all",
                obj(r"\d", -1),
                r#"{"a":"1 2 3"}"#,
                r#"{"a":"1 2 3","b":["1","2","3"]}"#,
            ),
            (
                "count with no match is null",
                obj(r"\d", 3),
                r#"{"a":"x"}"#,
                r#"{"a":"x","b":null}"#,
            ),
            (
                "named groups replace a string target",
                obj(r"(?P<w>\w+)", 0),
                r#"{"a":"hi","b":"old"}"#,
                r#"{"a":"hi","b":{"w":"hi"}}"#,
            ),
            (
                "(?<n>) alone is not read as named, as in Substation",
                obj(r"(?<w>\w+)", 0),
                r#"{"a":"hi"}"#,
                r#"{"a":"hi","b":"hi"}"#,
            ),
            (
                "data mode count with no match is empty",
                json!({"pattern": r"\d", "count": 2}),
                "abc",
                "",
            ),
            (
                "named groups under the target",
                obj(r"(?P<user>[^@]+)@(?P<domain>.+)", 0),
                r#"{"a":"me@example.com","b":{"keep":1}}"#,
                r#"{"a":"me@example.com","b":{"keep":1,"user":"me","domain":"example.com"}}"#,
            ),
            (
                "named group not taking part is empty",
                obj(r"(?P<x>a)|(?P<y>b)", 0),
                r#"{"a":"b"}"#,
                r#"{"a":"b","b":{"x":"","y":"b"}}"#,
            ),
            (
                "named groups without match change nothing",
                obj(r"(?P<x>\d)", 0),
                r#"{"a":"b"}"#,
                r#"{"a":"b"}"#,
            ),
            (
                "missing source passes",
                obj(r"(.)", 0),
                r#"{"z":"b"}"#,
                r#"{"z":"b"}"#,
            ),
            (
                "non-JSON data with keys passes",
                obj(r"(.)", 0),
                "plain",
                "plain",
            ),
            (
                "data mode",
                json!({"pattern": r"id=(\d+)"}),
                "user id=42 ok",
                "42",
            ),
            (
                "data mode array",
                json!({"pattern": r"\d+", "count": 2}),
                "1 22 333",
                r#"["1","22"]"#,
            ),
            (
                "data mode named groups",
                json!({"pattern": r"(?P<k>\w+)=(?P<v>\w+)"}),
                "k1=v1 k2=v2",
                r#"{"k":"k1","v":"v1"}"#,
            ),
            (
                "data mode named groups without match",
                json!({"pattern": r"(?P<k>\d)"}),
                "abc",
                "",
            ),
        ];
        testing::assert_single_outputs(&r, "string_capture", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "string_capture",
            &[
                (json!({}), "settings.pattern"),
                (json!({"pattern": "(unclosed"}), "settings.pattern"),
                (json!({"pattern": "x", "count": "two"}), "count"),
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
