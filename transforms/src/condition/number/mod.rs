//! The `number_*` conditions: comparisons (`equal_to`, `greater_than`, `less_than`), bitwise
//! tests (`bitwise_and`, `_or`, `_xor`, `_not`) and length comparisons (`length_*`).
//!
//! Substation compatibility, shared by the family:
//! * Data mode parses the whole data as a number and fails (a condition error, which the
//!   pipeline reports with the transform's id) when it is not one. sluice trims surrounding
//!   ASCII whitespace first (Go's parser does not), so a trailing newline is not an error.
//! * Object mode reads the value with GJSON's conversions (`Float()`, `Int()`): numbers,
//!   numeric strings, `true` = 1, anything else 0.
//! * A missing source value reads as Substation's empty value: number 0, length 0 (so
//!   `number_less_than` with 1 holds and `number_length_equal_to` with 0 holds), except that
//!   `number_equal_to` is false for it (a missing value equals nothing). A ctrl message is
//!   false.

pub(crate) mod bitwise_and;
pub(crate) mod bitwise_not;
pub(crate) mod bitwise_or;
pub(crate) mod bitwise_xor;
pub(crate) mod equal_to;
pub(crate) mod greater_than;
pub(crate) mod length_equal_to;
pub(crate) mod length_greater_than;
pub(crate) mod length_less_than;
pub(crate) mod less_than;

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Key, Message, TransformError, Value, value};

use super::{CompareSettings, Input, Source, SourceSettings, comparand};

/// Settings of `number_equal_to`, `number_greater_than` and `number_less_than`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CompareNumberSettings {
    /// The comparand, unless `object.target_key` is present in the message.
    pub value: f64,
    /// `source_key` (the input) and `target_key` (a dynamic comparand).
    pub object: CompareSettings,
}

/// A float comparison of the input with `value` or the value at `target_key`.
pub(crate) struct NumberCompare {
    source: Source,
    target: Option<Key>,
    value: f64,
    op: fn(f64, f64) -> bool,
    /// `number_equal_to`: a missing value is false instead of 0.
    missing_is_false: bool,
}

impl NumberCompare {
    pub(crate) fn build(
        b: &Build<'_>,
        op: fn(f64, f64) -> bool,
        missing_is_false: bool,
    ) -> Result<Self, ConfigError> {
        let s: CompareNumberSettings = b.settings()?;
        Ok(NumberCompare {
            source: Source::new(b, &s.object.source_key)?,
            target: b.opt_key("object.target_key", &s.object.target_key)?,
            value: s.value,
            op,
            missing_is_false,
        })
    }

    pub(crate) fn test(&self, msg: &Message, name: &str) -> Result<bool, TransformError> {
        let Some(input) = self.source.read(msg) else {
            return Ok(false);
        };
        let v = match input {
            Input::Data(d) => parse_f64(d, name)?,
            Input::Value(v) => value::to_f64(&v),
            Input::Missing if self.missing_is_false => return Ok(false),
            Input::Missing => 0.0,
        };
        let c = comparand(&self.target, msg)
            .map(|t| value::to_f64(&t))
            .unwrap_or(self.value);
        Ok((self.op)(v, c))
    }
}

/// Settings of the `number_bitwise_*` conditions that take an operand.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct BitwiseSettings {
    /// The operand.
    pub value: i64,
    /// `source_key`: where the input is read; absent means the data.
    pub object: SourceSettings,
}

/// The input of a bitwise condition as an integer.
pub(crate) fn read_i64(
    source: &Source,
    msg: &Message,
    name: &str,
) -> Result<Option<i64>, TransformError> {
    Ok(match source.read(msg) {
        None => None,
        Some(Input::Data(d)) => Some(parse_i64(d, name)?),
        Some(Input::Value(v)) => Some(value::to_i64(&v)),
        Some(Input::Missing) => Some(0),
    })
}

/// A bitwise test: `op(input, value) != 0`.
pub(crate) struct Bitwise {
    source: Source,
    value: i64,
    op: fn(i64, i64) -> i64,
}

impl Bitwise {
    pub(crate) fn build(b: &Build<'_>, op: fn(i64, i64) -> i64) -> Result<Self, ConfigError> {
        let s: BitwiseSettings = b.settings()?;
        Ok(Bitwise {
            source: Source::new(b, &s.object.source_key)?,
            value: s.value,
            op,
        })
    }

    pub(crate) fn test(&self, msg: &Message, name: &str) -> Result<bool, TransformError> {
        Ok(read_i64(&self.source, msg, name)?.is_some_and(|v| (self.op)(v, self.value) != 0))
    }
}

/// How a length is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Measurement {
    /// Bytes.
    Byte,
    /// Unicode characters (Go runes; each invalid UTF-8 byte counts as one).
    Char,
}

/// Settings of the `number_length_*` conditions.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct LengthSettings {
    /// The length to compare with.
    pub value: i64,
    /// `byte` (default), or `char` / `rune` for Unicode characters.
    pub measurement: String,
    /// `source_key`: where the input is read; absent means the data.
    pub object: SourceSettings,
}

impl Default for LengthSettings {
    fn default() -> Self {
        LengthSettings {
            value: 0,
            measurement: "byte".into(),
            object: SourceSettings::default(),
        }
    }
}

/// A comparison of the input's length with `value`.
pub(crate) struct LengthCompare {
    source: Source,
    value: i64,
    measurement: Measurement,
    op: fn(i64, i64) -> bool,
}

impl LengthCompare {
    pub(crate) fn build(b: &Build<'_>, op: fn(i64, i64) -> bool) -> Result<Self, ConfigError> {
        let s: LengthSettings = b.settings()?;
        let measurement = match s.measurement.as_str() {
            "byte" | "" => Measurement::Byte,
            "char" | "rune" => Measurement::Char,
            other => {
                return Err(b.field_error(
                    "measurement",
                    format!(
                        "invalid measurement {other:?}: expected \"byte\", \"char\" or \"rune\""
                    ),
                ));
            }
        };
        Ok(LengthCompare {
            source: Source::new(b, &s.object.source_key)?,
            value: s.value,
            measurement,
            op,
        })
    }

    pub(crate) fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        let Some(input) = self.source.read(msg) else {
            return Ok(false);
        };
        let len = match &input {
            Input::Value(v) if matches!(v.as_ref(), Value::Array(_)) => {
                v.as_array().map_or(0, |a| a.len())
            }
            _ => {
                let b = input.bytes();
                match self.measurement {
                    Measurement::Byte => b.len(),
                    Measurement::Char => rune_count(&b),
                }
            }
        };
        Ok((self.op)(len as i64, self.value))
    }
}

/// Go's `utf8.RuneCount`: characters, each byte of an invalid sequence counting as one.
pub(crate) fn rune_count(b: &[u8]) -> usize {
    b.utf8_chunks()
        .map(|c| c.valid().chars().count() + c.invalid().len())
        .sum()
}

fn not_a_number(d: &[u8], name: &str, what: &str) -> TransformError {
    let shown: String = String::from_utf8_lossy(d).chars().take(64).collect();
    TransformError::Condition(format!("{name}: the data {shown:?} is not {what}"))
}

/// The data as a float, or an error naming the condition.
pub(crate) fn parse_f64(d: &[u8], name: &str) -> Result<f64, TransformError> {
    std::str::from_utf8(d)
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .ok_or_else(|| not_a_number(d, name, "a number"))
}

/// The data as an integer, or an error naming the condition.
pub(crate) fn parse_i64(d: &[u8], name: &str) -> Result<i64, TransformError> {
    std::str::from_utf8(d)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .ok_or_else(|| not_a_number(d, name, "an integer"))
}

#[cfg(test)]
mod tests {
    use super::rune_count;

    #[test]
    fn runes_as_go_counts_them() {
        assert_eq!(rune_count(b""), 0);
        assert_eq!(rune_count("h\u{e9}llo".as_bytes()), 5);
        assert_eq!(rune_count("\u{1f600}".as_bytes()), 1);
        assert_eq!(rune_count(b"a\xe2\x82"), 3);
        assert_eq!(rune_count(b"\xff\xfe"), 2);
    }
}
