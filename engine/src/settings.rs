//! Typed settings shared by many transforms, and the decoder that turns a config's
//! `settings` object into a transform's settings struct.
//!
//! The settings struct is the schema: serde gives parsing and defaults; the decoder reports a
//! bad value with the field's path and reports keys the struct does not know as warnings
//! (Substation silently ignores them, which hides typos).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Decodes `settings` into `T`. Unknown keys are returned as dotted paths.
pub fn decode<T: DeserializeOwned>(settings: &Value) -> Result<(T, Vec<String>), (String, String)> {
    let mut unknown = Vec::new();
    let mut record = |path: serde_ignored::Path<'_>| unknown.push(path.to_string());
    let de = serde_ignored::Deserializer::new(settings, &mut record);
    match serde_path_to_error::deserialize::<_, T>(de) {
        Ok(v) => Ok((v, unknown)),
        Err(e) => {
            let field = e.path().to_string();
            let msg = e.into_inner().to_string();
            Err((if field == "." { String::new() } else { field }, msg))
        }
    }
}

/// The top-level setting names `T` takes (its struct's fields, as serde names them); empty
/// for a type that is not a plain struct (a map, or a struct with flattened fields).
pub fn field_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut names));
    names
}

/// A deserializer that only notes the fields of the struct asked of it, then stops.
struct FieldNames<'n>(&'n mut &'static [&'static str]);

/// What stops [`FieldNames`].
#[derive(Debug)]
struct Noted;

impl std::fmt::Display for Noted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names noted")
    }
}

impl std::error::Error for Noted {}

impl serde::de::Error for Noted {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Noted
    }
}

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = Noted;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Noted> {
        Err(Noted)
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Noted> {
        *self.0 = fields;
        Err(Noted)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Parses a Go duration string (`300ms`, `1.5h`, `2h45m`, `1us`, `0`).
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (examples: \"500ms\", \"30s\", \"15m\", \"1h\")");
    let t = s.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.starts_with('-') {
        return Err(format!("negative duration {s:?}"));
    }
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_end == 0 {
            return Err(bad());
        }
        let n: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        total += n * nanos;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

/// A duration written as a Go duration string in configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GoDuration(pub Duration);

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_go_duration(&s)
            .map(GoDuration)
            .map_err(serde::de::Error::custom)
    }
}

/// `batch`: the limits of a batch (Substation's Go defaults: 1000 items, 1 MiB, 1 minute).
/// `duration` is a maximum age, enforced by a timer (Substation's is an idle gap).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default)]
pub struct BatchSettings {
    /// Most items in one batch.
    pub count: usize,
    /// Most bytes (sum of item sizes) in one batch.
    pub size: usize,
    /// Oldest a batch may get before it is flushed.
    pub duration: GoDuration,
}

impl Default for BatchSettings {
    fn default() -> Self {
        BatchSettings {
            count: 1000,
            size: 1_048_576,
            duration: GoDuration(Duration::from_secs(60)),
        }
    }
}

/// `retry`: how often and how long to wait (Go default count 0; sluice treats 0 as 0 retries).
#[derive(Debug, Clone, Copy, Deserialize, Default)]
#[serde(default)]
pub struct RetrySettings {
    /// Retries after the first attempt.
    pub count: u32,
    /// Wait between attempts.
    pub delay: GoDuration,
}

/// The common `object` settings of single-value transforms.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ObjectSettings {
    /// Where the input value is read.
    pub source_key: Option<String>,
    /// Where the result is written.
    pub target_key: Option<String>,
    /// What partitions batches.
    pub batch_key: Option<String>,
}

/// A settings value that may be any JSON (e.g. `object_insert.value`).
pub type AnyValue = crate::json::Value;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            ("1s", Duration::from_secs(1)),
            ("15m", Duration::from_secs(900)),
            ("1h30m", Duration::from_secs(5400)),
            ("1.5h", Duration::from_secs(5400)),
            ("300ms", Duration::from_millis(300)),
            ("2us", Duration::from_micros(2)),
            ("0", Duration::ZERO),
        ];
        for (s, d) in cases {
            assert_eq!(parse_go_duration(s), Ok(d), "{s}");
        }
        for bad in ["", "1d", "s", "-1s", "1", "abc"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct S {
        #[serde(default)]
        object: ObjectSettings,
        count: u32,
    }

    #[test]
    fn decode_reports_field_and_unknown_keys() {
        let (s, unknown) =
            decode::<S>(&serde_json::json!({"count": 1, "objcet": {}, "object": {"src": "a"}}))
                .unwrap();
        assert_eq!(s.count, 1);
        assert_eq!(
            unknown,
            vec!["objcet".to_string(), "object.src".to_string()]
        );
        let (field, msg) = decode::<S>(&serde_json::json!({"count": "x"})).unwrap_err();
        assert_eq!(field, "count");
        assert!(msg.contains("invalid type"), "{msg}");
    }
}
