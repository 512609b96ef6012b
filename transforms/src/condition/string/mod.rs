//! The `string_*` conditions: byte-wise tests of the data, or of the text of the value at
//! `object.source_key` (GJSON `String()`: strings unquoted, numbers and booleans as written,
//! objects and arrays as compact JSON).
//!
//! Substation compatibility: the comparisons are on bytes, case-sensitive, with no
//! normalisation. `string_equal_to`, `string_greater_than` and `string_less_than` compare
//! dynamically: when `object.target_key` is set and the message has a value there, its text
//! replaces `value`. A missing source value reads as `""`, as in Substation, except that
//! `string_equal_to` is false for it (a missing value equals nothing, not even `""`); a
//! ctrl message is false.

pub(crate) mod contains;
pub(crate) mod ends_with;
pub(crate) mod equal_to;
pub(crate) mod greater_than;
pub(crate) mod less_than;
pub(crate) mod r#match;
pub(crate) mod starts_with;

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Key, Message, TransformError, value};

use super::{CompareSettings, Input, Source, SourceSettings, comparand};

/// Settings of `string_contains`, `string_ends_with` and `string_starts_with`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AffixSettings {
    /// The string to look for.
    pub value: String,
    /// `source_key`: where the input is read; absent means the data.
    pub object: SourceSettings,
}

/// A test of the input against a fixed string.
pub(crate) struct Affix {
    source: Source,
    value: String,
    op: fn(&[u8], &[u8]) -> bool,
}

impl Affix {
    pub(crate) fn build(b: &Build<'_>, op: fn(&[u8], &[u8]) -> bool) -> Result<Self, ConfigError> {
        let s: AffixSettings = b.settings()?;
        Ok(Affix {
            source: Source::new(b, &s.object.source_key)?,
            value: s.value,
            op,
        })
    }

    pub(crate) fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        Ok(self
            .source
            .read(msg)
            .is_some_and(|input| (self.op)(&input.bytes(), self.value.as_bytes())))
    }
}

/// Settings of `string_equal_to`, `string_greater_than` and `string_less_than`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CompareStringSettings {
    /// The comparand, unless `object.target_key` is present in the message.
    pub value: String,
    /// `source_key` (the input) and `target_key` (a dynamic comparand).
    pub object: CompareSettings,
}

/// A byte-wise comparison of the input with `value` or the text at `target_key`.
pub(crate) struct StringCompare {
    source: Source,
    target: Option<Key>,
    value: String,
    op: fn(&[u8], &[u8]) -> bool,
    /// `string_equal_to`: a missing value is false instead of `""`.
    missing_is_false: bool,
}

impl StringCompare {
    pub(crate) fn build(
        b: &Build<'_>,
        op: fn(&[u8], &[u8]) -> bool,
        missing_is_false: bool,
    ) -> Result<Self, ConfigError> {
        let s: CompareStringSettings = b.settings()?;
        Ok(StringCompare {
            source: Source::new(b, &s.object.source_key)?,
            target: b.opt_key("object.target_key", &s.object.target_key)?,
            value: s.value,
            op,
            missing_is_false,
        })
    }

    pub(crate) fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        let Some(input) = self.source.read(msg) else {
            return Ok(false);
        };
        if self.missing_is_false && matches!(input, Input::Missing) {
            return Ok(false);
        }
        let input = input.bytes();
        Ok(match comparand(&self.target, msg) {
            Some(t) => (self.op)(&input, value::to_text(&t).as_bytes()),
            None => (self.op)(&input, self.value.as_bytes()),
        })
    }
}

/// Whether `needle` occurs in `hay` (the empty needle always does).
pub(crate) fn contains_bytes(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}
