//! `string_match`: the input matches the regular expression `pattern` (anywhere in it,
//! unless the pattern is anchored).
//!
//! Substation compatibility: the same. Go's RE2 syntax and Rust's `regex` syntax agree for
//! the patterns configs use (both linear-time, no backreferences or look-around). Data that
//! is not UTF-8 is matched with its invalid bytes replaced by U+FFFD, much as Go's matcher
//! reads them. `pattern` is required and must compile. A missing source value is the empty string, as in Substation.

use regex::Regex;
use serde::Deserialize;
use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use crate::condition::{Source, SourceSettings};

/// Settings of `string_match`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The regular expression.
    pub pattern: String,
    /// `source_key`: where the input is read; absent means the data.
    pub object: SourceSettings,
}

/// The `string_match` condition.
pub(crate) struct StringMatch {
    source: Source,
    pattern: Regex,
}

impl StringMatch {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.pattern.is_empty() {
            return Err(b.field_error(
                "pattern",
                "missing required option: a regular expression to match",
            ));
        }
        Ok(StringMatch {
            source: Source::new(b, &s.object.source_key)?,
            pattern: b.regex("pattern", &s.pattern)?,
        })
    }
}

impl Condition for StringMatch {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        Ok(self
            .source
            .read(msg)
            .is_some_and(|input| self.pattern.is_match(&input.text())))
    }
}

/// What registers the `string_match` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_match",
    aliases: &[],
    library: "sub.cnd.str.match",
    summary: "input matches the regex `pattern`",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"pattern": "a"}"#,
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::{Message, json};

    #[test]
    fn cases() {
        let src = |p: &str| json!({"pattern": p, "object": {"source_key": "s"}});
        run_table(
            "string_match",
            vec![
                (
                    "data matches",
                    json!({"pattern": "^h.*o$"}),
                    data("hello"),
                    T,
                ),
                (
                    "data does not match",
                    json!({"pattern": "^x"}),
                    data("hello"),
                    F,
                ),
                ("unanchored", json!({"pattern": "ll"}), data("hello"), T),
                (
                    "case-insensitive flag",
                    json!({"pattern": "(?i)HELLO"}),
                    data("hello"),
                    T,
                ),
                (
                    "non-UTF-8 data",
                    json!({"pattern": "^ab"}),
                    Message::new(b"ab\xff".to_vec()),
                    T,
                ),
                (
                    "object matches",
                    src(r"^\d+\.\d+\.\d+\.\d+$"),
                    data(r#"{"s":"10.0.0.1"}"#),
                    T,
                ),
                (
                    "object does not match",
                    src(r"^\d+$"),
                    data(r#"{"s":"10.0.0.1"}"#),
                    F,
                ),
                ("object number text", src(r"^\d+$"), data(r#"{"s":42}"#), T),
                (
                    "missing key is the empty string",
                    src(".*"),
                    data(r#"{"t":"x"}"#),
                    T,
                ),
                ("missing key matches ^$", src("^$"), data(r#"{"t":"x"}"#), T),
                (
                    "missing key misses a non-empty pattern",
                    src("x"),
                    data(r#"{"t":"x"}"#),
                    F,
                ),
            ],
        );
        ctrl_is_false("string_match", json!({"pattern": ".*"}));
    }

    #[test]
    fn config_errors() {
        config_error("string_match", json!({}), "pattern");
        config_error("string_match", json!({"pattern": "(unclosed"}), "pattern");
        config_error("string_match", json!({"pattern": 5}), "pattern");
    }
}
