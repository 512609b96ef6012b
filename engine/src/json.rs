//! The parsed JSON a message carries: [`Value`] and its object type [`Map`].
//!
//! `serde_json::Value` with key order kept (its `preserve_order` feature) hashes every key
//! with SipHash and allocates every key, and a pipeline does dozens of key lookups and
//! inserts per message: on the Zeek→ECS benchmark that was a quarter of the time. This
//! `Value` has the same shape and method names, but an object keeps its keys inline (no
//! allocation up to 24 bytes) in insertion order and finds them by comparison while it is
//! small (most are), with a fast non-cryptographic hash index once it is large ([`Map`],
//! in `map.rs`). Text is read by our own reader (`parse.rs`, which accepts what serde_json
//! accepts and lets each object keep its text, as Substation's SJSON keeps it) and written
//! directly (`write.rs`); serde's traits are implemented too (`serde_impls.rs`).

mod array;
mod map;
pub mod parse;
pub mod pretty;
mod scan;
mod serde_impls;
mod splice;
#[doc(hidden)]
pub mod unread_check;
mod write;

use std::fmt;

pub use array::Array;
pub use compact_str::CompactString;
pub use map::{CREATED_OBJECT_ROOM, Entry, INDEX_FROM, KeyHint, Map, Slot};
pub use serde_json::Number;
pub use write::{write_compact, write_json};

/// A JSON value.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number (integers kept exact).
    Number(Number),
    /// A string: kept inline up to 24 bytes, as keys are (most strings in log events are
    /// short: addresses, ids, names), so reading, copying and dropping one allocates nothing.
    String(CompactString),
    /// An array.
    Array(Array),
    /// An object, with key order kept.
    Object(Map),
}

impl Value {
    /// Drops the text every object and array in it was parsed from, so that it is written
    /// compact.
    pub fn forget_text(&mut self) {
        match self {
            Value::Object(m) => {
                m.forget_text();
                m.values_mut().for_each(Value::forget_text);
            }
            Value::Array(a) => {
                a.forget_text();
                a.iter_mut().for_each(Value::forget_text);
            }
            _ => {}
        }
    }

    /// The object it is, taken.
    pub(crate) fn into_object(self) -> Option<Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The array it is, taken.
    pub(crate) fn into_array(self) -> Option<Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Whether it is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    /// Whether it is a boolean.
    pub fn is_boolean(&self) -> bool {
        matches!(self, Value::Bool(_))
    }
    /// Whether it is a number.
    pub fn is_number(&self) -> bool {
        matches!(self, Value::Number(_))
    }
    /// Whether it is a string.
    pub fn is_string(&self) -> bool {
        matches!(self, Value::String(_))
    }
    /// Whether it is an array.
    pub fn is_array(&self) -> bool {
        matches!(self, Value::Array(_))
    }
    /// Whether it is an object.
    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }
    /// Whether it is a number that fits an `i64`.
    pub fn is_i64(&self) -> bool {
        matches!(self, Value::Number(n) if n.is_i64())
    }
    /// Whether it is a number that fits a `u64`.
    pub fn is_u64(&self) -> bool {
        matches!(self, Value::Number(n) if n.is_u64())
    }
    /// Whether it is a floating-point number.
    pub fn is_f64(&self) -> bool {
        matches!(self, Value::Number(n) if n.is_f64())
    }
    /// The boolean, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// The number as `f64`, if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.as_f64(),
            _ => None,
        }
    }
    /// The number as `i64`, if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.as_i64(),
            _ => None,
        }
    }
    /// The number as `u64`, if it is a non-negative integer that fits.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }
    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    /// The array, if it is one.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    /// The array for changing, if it is one.
    pub fn as_array_mut(&mut self) -> Option<&mut Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    /// The object, if it is one.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }
    /// The object for changing, if it is one.
    pub fn as_object_mut(&mut self) -> Option<&mut Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }
    /// The value of an object key or an array index.
    pub fn get<I: JsonIndex>(&self, index: I) -> Option<&Value> {
        index.index_into(self)
    }
    /// The value out, leaving `null`.
    pub fn take(&mut self) -> Value {
        std::mem::take(self)
    }
}

/// What [`Value::get`] takes: an object key or an array index.
pub trait JsonIndex {
    /// The value at this index of `v`.
    fn index_into<'v>(&self, v: &'v Value) -> Option<&'v Value>;
}

impl JsonIndex for usize {
    fn index_into<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        v.as_array()?.get(*self)
    }
}

impl JsonIndex for &str {
    fn index_into<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        v.as_object()?.get(self)
    }
}

impl JsonIndex for String {
    fn index_into<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        v.as_object()?.get(self.as_str())
    }
}

static NULL: Value = Value::Null;

impl<I: JsonIndex> std::ops::Index<I> for Value {
    type Output = Value;
    /// `null` when missing, as serde_json does.
    fn index(&self, i: I) -> &Value {
        i.index_into(self).unwrap_or(&NULL)
    }
}

impl fmt::Display for Value {
    /// Compact JSON text (whatever text an object was parsed from).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        write_compact(&mut out, self);
        f.write_str(&String::from_utf8_lossy(&out))
    }
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => Value::Number(n),
            serde_json::Value::String(s) => Value::String(s.into()),
            serde_json::Value::Array(a) => Value::Array(a.into_iter().map(Value::from).collect()),
            serde_json::Value::Object(m) => {
                Value::Object(m.into_iter().map(|(k, v)| (k, Value::from(v))).collect())
            }
        }
    }
}

impl From<Value> for serde_json::Value {
    fn from(v: Value) -> serde_json::Value {
        match v {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(b),
            Value::Number(n) => serde_json::Value::Number(n),
            Value::String(s) => serde_json::Value::String(s.into_string()),
            Value::Array(a) => {
                serde_json::Value::Array(a.into_iter().map(serde_json::Value::from).collect())
            }
            Value::Object(m) => serde_json::Value::Object(
                m.into_iter()
                    .map(|(k, v)| (k.into_string(), serde_json::Value::from(v)))
                    .collect(),
            ),
        }
    }
}

impl PartialEq<serde_json::Value> for Value {
    fn eq(&self, other: &serde_json::Value) -> bool {
        match (self, other) {
            (Value::Null, serde_json::Value::Null) => true,
            (Value::Bool(a), serde_json::Value::Bool(b)) => a == b,
            (Value::Number(a), serde_json::Value::Number(b)) => a == b,
            (Value::String(a), serde_json::Value::String(b)) => a == b,
            (Value::Array(a), serde_json::Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
            }
            (Value::Object(a), serde_json::Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, v)| b.get(k.as_str()).is_some_and(|w| v == w))
            }
            _ => false,
        }
    }
}

macro_rules! from_number {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Value {
                Value::Number(n.into())
            }
        }
    )*};
}
from_number!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl From<f64> for Value {
    /// A float; NaN and infinities become `null`.
    fn from(f: f64) -> Value {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s.into())
    }
}

impl From<CompactString> for Value {
    fn from(s: CompactString) -> Value {
        Value::String(s)
    }
}

impl From<std::borrow::Cow<'_, str>> for Value {
    /// A string: one that fits inline is copied without an allocation, an owned one that
    /// does not keeps its buffer.
    fn from(s: std::borrow::Cow<'_, str>) -> Value {
        Value::String(s.into())
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.into())
    }
}

impl From<Number> for Value {
    fn from(n: Number) -> Value {
        Value::Number(n)
    }
}

impl From<Map> for Value {
    fn from(m: Map) -> Value {
        Value::Object(m)
    }
}

impl From<Array> for Value {
    fn from(a: Array) -> Value {
        Value::Array(a)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Value {
        Value::Array(v.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<Value>> FromIterator<T> for Value {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Value {
        Value::Array(iter.into_iter().map(Into::into).collect())
    }
}

/// Builds a [`Value`] with serde_json's `json!` syntax.
#[macro_export]
macro_rules! json {
    ($($t:tt)+) => {
        $crate::json::Value::from($crate::json::__serde_json::json!($($t)+))
    };
}

#[doc(hidden)]
pub use serde_json as __serde_json;

#[cfg(test)]
mod tests;
