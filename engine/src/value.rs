//! Substation's value conventions, so transforms read and write values the way Substation
//! configs expect (GJSON's `String()`, `Float()`, `Int()`, `Bool()` and SJSON's typing rules).

use std::borrow::Cow;

use crate::json::{Number, Value};
use base64::Engine;

/// GJSON's `String()`: strings without quotes, numbers and booleans as text, null as "",
/// objects and arrays as JSON text (an object parsed and unchanged since as the text it was
/// parsed from, as GJSON returns it; see [`crate::json::write_json`]).
pub fn to_text(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s.as_str()),
        Value::Null => Cow::Borrowed(""),
        Value::Bool(b) => Cow::Borrowed(if *b { "true" } else { "false" }),
        Value::Number(n) => Cow::Owned(n.to_string()),
        other => Cow::Owned(to_json_text(other)),
    }
}

/// JSON text of a value as [`crate::json::write_json`] writes it (GJSON's `Raw`).
pub fn to_json_text(v: &Value) -> String {
    let mut out = Vec::new();
    crate::json::write_json(&mut out, v);
    // JSON text written from `str`s and from UTF-8-checked input: the lossy path never
    // replaces anything, and nothing here can panic.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// GJSON's `Float()`: numbers, numeric strings, `true` = 1; anything else 0.
pub fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::String(s) => s.trim().parse().unwrap_or(0.0),
        Value::Bool(true) => 1.0,
        _ => 0.0,
    }
}

/// GJSON's `Int()`: integers exactly, floats truncated, numeric strings parsed.
pub fn to_i64(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|u| u as i64))
            .unwrap_or_else(|| n.as_f64().unwrap_or(0.0) as i64),
        Value::String(s) => {
            let t = s.trim();
            t.parse::<i64>()
                .unwrap_or_else(|_| t.parse::<f64>().map(|f| f as i64).unwrap_or(0))
        }
        Value::Bool(true) => 1,
        _ => 0,
    }
}

/// GJSON's `Uint()`.
pub fn to_u64(v: &Value) -> u64 {
    match v {
        Value::Number(n) => n.as_u64().unwrap_or_else(|| {
            n.as_f64()
                .map(|f| if f < 0.0 { 0 } else { f as u64 })
                .unwrap_or(0)
        }),
        Value::String(s) => {
            let t = s.trim();
            t.parse::<u64>().unwrap_or_else(|_| {
                t.parse::<f64>()
                    .map(|f| if f < 0.0 { 0 } else { f as u64 })
                    .unwrap_or(0)
            })
        }
        Value::Bool(true) => 1,
        _ => 0,
    }
}

/// GJSON's `Bool()`: `true`, non-zero numbers, and strings Go's `ParseBool` accepts as true.
pub fn to_bool(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => matches!(s.as_str(), "1" | "t" | "T" | "TRUE" | "true" | "True"),
        _ => false,
    }
}

/// A JSON number from a float: integral values become integers (Substation's fix for
/// precision loss, PR #281), others stay floats; NaN and infinities become null.
pub fn number(f: f64) -> Value {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        Value::Number(Number::from(f as i64))
    } else {
        Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// SJSON's typing of bytes written as a value: bytes that start with `{` or `[` and are
/// valid JSON go in as JSON; other UTF-8 becomes a string; anything else a base64 string.
pub fn from_bytes(b: &[u8]) -> Value {
    if let Some(v) = json_container(b) {
        return v;
    }
    match std::str::from_utf8(b) {
        Ok(s) => Value::String(s.into()),
        Err(_) => Value::String(base64::engine::general_purpose::STANDARD.encode(b).into()),
    }
}

/// SJSON's typing of a value written with Substation's `SetValue`: a string holding a JSON
/// object or array (first character `{` or `[`, the whole text valid JSON) goes in as that
/// object or array; anything else as it is.
#[inline]
pub fn sjson_typed(mut v: Value) -> Value {
    sjson_type(&mut v);
    v
}

/// [`sjson_typed`] in place: the value is read where it is and replaced only when it is a
/// string holding an object or array. A value just built by the caller and copied out at
/// once (moved through `sjson_typed`) was read back in wider pieces than it had been
/// written in, and the read waited for the writes to land: half of `Message::set`'s time.
/// Always inlined, down to the check of the first byte: every value a copy run writes
/// passes here, and called it cost two dozen instructions a value.
#[inline(always)]
pub fn sjson_type(v: &mut Value) {
    if let Value::String(s) = v
        && matches!(s.as_bytes().first(), Some(b'{' | b'['))
    {
        sjson_type_text(v);
    }
}

/// [`sjson_type`] of a string that starts as an object or array does.
#[inline(never)]
fn sjson_type_text(v: &mut Value) {
    if let Value::String(s) = v
        && let Some(parsed) = json_container(s.as_bytes())
    {
        *v = parsed;
    }
}

/// The JSON object or array `b` holds, when it starts with `{` or `[` (no white space
/// first, as SJSON's check has it) and is valid JSON as a whole. Inlined: every write of a
/// string passes here, and only the first byte is checked before the text is parsed.
#[inline]
fn json_container(b: &[u8]) -> Option<Value> {
    if !matches!(b.first(), Some(b'{' | b'[')) {
        return None;
    }
    crate::json::parse::from_slice(b)
}

/// Bytes of a value for data-mode output: strings raw, everything else as JSON text.
pub fn to_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        other => to_json_text(other).into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn conversions_table() {
        assert_eq!(to_text(&json!("a")), "a");
        assert_eq!(to_text(&json!(1.5)), "1.5");
        assert_eq!(to_text(&json!(null)), "");
        assert_eq!(to_text(&json!({"a":1})), r#"{"a":1}"#);
        assert_eq!(to_f64(&json!("2.5")), 2.5);
        assert_eq!(to_i64(&json!(30400402455622563i64)), 30400402455622563);
        assert_eq!(to_i64(&json!(2.9)), 2);
        assert_eq!(to_u64(&json!(-3)), 0);
        assert!(to_bool(&json!("true")));
        assert!(!to_bool(&json!("yes")));
        assert_eq!(number(3.0), json!(3));
        assert_eq!(number(3.5), json!(3.5));
        assert_eq!(number(f64::NAN), json!(null));
        assert_eq!(from_bytes(br#"{"a":1}"#), json!({"a":1}));
        assert_eq!(from_bytes(b"{not json"), json!("{not json"));
        assert_eq!(from_bytes(&[0xff, 0xfe]), json!("//4="));
        assert_eq!(sjson_typed(json!(r#"{"b":"c"}"#)), json!({"b": "c"}));
        assert_eq!(sjson_typed(json!("[1,2]")), json!([1, 2]));
        assert_eq!(
            sjson_typed(json!(" [1]")),
            json!(" [1]"),
            "a leading space keeps a string"
        );
        assert_eq!(sjson_typed(json!("{not json")), json!("{not json"));
        assert_eq!(
            sjson_typed(json!("123")),
            json!("123"),
            "only objects and arrays"
        );
    }
}
