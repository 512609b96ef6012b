//! The parsed JSON a message carries: [`Value`] and its object type [`Map`].
//!
//! `serde_json::Value` with key order kept (its `preserve_order` feature) hashes every key
//! with SipHash and allocates every key, and a pipeline does dozens of key lookups and
//! inserts per message: on the Zeek→ECS benchmark that was a quarter of the time. This
//! `Value` has the same shape and method names, but an object keeps its keys inline (no
//! allocation up to 24 bytes) in insertion order and finds them by comparison while it is
//! small (most are), with a fast non-cryptographic hash index once it is large. Parsing and serialising still go through serde_json's reader and writer (serde
//! impls below), so the text handling is serde_json's.

use std::fmt;

use compact_str::CompactString;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use smallvec::SmallVec;
use std::collections::HashMap;

pub use serde_json::Number;

type Hasher = foldhash::fast::RandomState;

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
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object, with key order kept.
    Object(Map),
}

/// A JSON object: keys in insertion order.
///
/// Most objects in log events are small, so entries are kept in a `Vec` and found by
/// comparing keys; an object that grows past [`INDEX_FROM`] keys also gets a hash index, so
/// large objects stay fast too.
#[derive(Clone, Default)]
pub struct Map {
    entries: Vec<Slot>,
    // Boxed so that a small object (the common case) stays three words plus a pointer.
    #[allow(clippy::box_collection)]
    index: Option<Box<HashMap<CompactString, usize, Hasher>>>,
}

/// One key and value of a [`Map`] (opaque), with the key's tag for fast comparison.
#[derive(Clone)]
pub struct Slot {
    tag: u64,
    key: CompactString,
    value: Value,
}

/// A key's length and first seven bytes in one word: keys with different tags differ, and
/// keys of up to seven bytes with equal tags are equal.
#[inline]
fn tag(key: &[u8]) -> u64 {
    let n = key.len();
    let head = if n >= 8 {
        u64::from_le_bytes(key[..8].try_into().expect("8 bytes")) & 0x00ff_ffff_ffff_ffff
    } else {
        // Byte by byte: a variable-length copy would be a library call.
        key.iter()
            .enumerate()
            .fold(0u64, |v, (i, &b)| v | (b as u64) << (8 * i))
    };
    head | (n.min(255) as u64) << 56
}

/// A key's tag, for the `*_tagged` lookups of [`Map`].
pub fn key_tag(key: &str) -> u64 {
    tag(key.as_bytes())
}

/// From this many keys on, an object keeps a hash index of its keys.
pub const INDEX_FROM: usize = 32;

impl Map {
    /// An empty object.
    pub fn new() -> Map {
        Map::default()
    }

    /// An empty object with room for `n` keys.
    pub fn with_capacity(n: usize) -> Map {
        Map {
            entries: Vec::with_capacity(n),
            index: None,
        }
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it has no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The position of `key`.
    pub fn get_index_of(&self, key: &str) -> Option<usize> {
        self.get_index_of_tagged(key, tag(key.as_bytes()))
    }

    /// The position of `key`, whose [`key_tag`] is `t` (paths compute it once, when they
    /// are compiled).
    pub fn get_index_of_tagged(&self, key: &str, t: u64) -> Option<usize> {
        match &self.index {
            Some(ix) => ix.get(key).copied(),
            None => {
                let key = key.as_bytes();
                if key.len() <= 7 {
                    self.entries.iter().position(|e| e.tag == t)
                } else {
                    self.entries
                        .iter()
                        .position(|e| e.tag == t && e.key.as_bytes() == key)
                }
            }
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.get_index_of(key).map(|i| &self.entries[i].value)
    }

    /// The value of `key`, whose [`key_tag`] is `t`.
    pub fn get_tagged(&self, key: &str, t: u64) -> Option<&Value> {
        self.get_index_of_tagged(key, t)
            .map(|i| &self.entries[i].value)
    }

    /// The value of `key`, for changing.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.get_index_of(key).map(|i| &mut self.entries[i].value)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get_index_of(key).is_some()
    }

    fn push(&mut self, key: CompactString, v: Value) -> usize {
        let i = self.entries.len();
        if let Some(ix) = &mut self.index {
            ix.insert(key.clone(), i);
        }
        self.entries.push(Slot {
            tag: tag(key.as_bytes()),
            key,
            value: v,
        });
        if self.index.is_none() && self.entries.len() > INDEX_FROM {
            self.reindex();
        }
        i
    }

    fn reindex(&mut self) {
        if self.entries.len() > INDEX_FROM {
            let mut ix =
                HashMap::with_capacity_and_hasher(self.entries.len() * 2, Hasher::default());
            for (i, e) in self.entries.iter().enumerate() {
                ix.insert(e.key.clone(), i);
            }
            self.index = Some(Box::new(ix));
        } else {
            self.index = None;
        }
    }

    /// Sets `key`; a new key goes last, an existing one keeps its place. Returns the old value.
    pub fn insert(&mut self, key: impl Into<CompactString>, v: Value) -> Option<Value> {
        let key = key.into();
        match self.get_index_of(&key) {
            Some(i) => Some(std::mem::replace(&mut self.entries[i].value, v)),
            None => {
                self.push(key, v);
                None
            }
        }
    }

    /// Removes `key`, keeping the order of the others.
    pub fn shift_remove(&mut self, key: &str) -> Option<Value> {
        let i = self.get_index_of(key)?;
        let e = self.entries.remove(i);
        if self.index.is_some() {
            self.reindex();
        }
        Some(e.value)
    }

    /// Removes `key`, keeping the order of the others (as serde_json's `remove` with
    /// `preserve_order`).
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.shift_remove(key)
    }

    /// The entry of `key`.
    pub fn entry(&mut self, key: impl Into<CompactString>) -> Entry<'_> {
        let key = key.into();
        match self.get_index_of(&key) {
            Some(i) => Entry::Occupied(&mut self.entries[i].value),
            None => Entry::Vacant(self, key),
        }
    }

    /// The value of `key`, inserted as `null` first when missing; one lookup, and the key is
    /// only copied when it is inserted.
    pub fn get_or_insert_null(&mut self, key: &CompactString) -> &mut Value {
        self.get_or_insert_null_tagged(key, tag(key.as_bytes()))
    }

    /// [`Map::get_or_insert_null`] for a key whose [`key_tag`] is `t`.
    pub fn get_or_insert_null_tagged(&mut self, key: &CompactString, t: u64) -> &mut Value {
        let i = match self.get_index_of_tagged(key, t) {
            Some(i) => i,
            None => self.push(key.clone(), Value::Null),
        };
        &mut self.entries[i].value
    }

    /// Keys and values in order.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = (&CompactString, &Value)> + ExactSizeIterator {
        self.entries.iter().map(|e| (&e.key, &e.value))
    }

    /// Keys and values in order, values changeable.
    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&CompactString, &mut Value)> + ExactSizeIterator {
        self.entries.iter_mut().map(|e| (&e.key, &mut e.value))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &CompactString> + ExactSizeIterator {
        self.entries.iter().map(|e| &e.key)
    }

    /// Values in order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.entries.iter().map(|e| &e.value)
    }

    /// Values in order, changeable.
    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Value> + ExactSizeIterator {
        self.entries.iter_mut().map(|e| &mut e.value)
    }

    /// Sorts the keys.
    pub fn sort_keys(&mut self) {
        self.entries.sort_by(|a, b| a.key.cmp(&b.key));
        if self.index.is_some() {
            self.reindex();
        }
    }

    /// Keeps the entries for which `f` holds.
    pub fn retain(&mut self, mut f: impl FnMut(&str, &mut Value) -> bool) {
        self.entries.retain_mut(|e| f(e.key.as_str(), &mut e.value));
        if self.index.is_some() {
            self.reindex();
        }
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.index = None;
    }
}

/// A key's place in a [`Map`], for inserting only when missing.
pub enum Entry<'m> {
    /// The key is there.
    Occupied(&'m mut Value),
    /// The key is missing.
    Vacant(&'m mut Map, CompactString),
}

impl<'m> Entry<'m> {
    /// The value, inserting `v` when missing.
    pub fn or_insert(self, v: Value) -> &'m mut Value {
        self.or_insert_with(|| v)
    }

    /// The value, inserting `f()` when missing.
    pub fn or_insert_with(self, f: impl FnOnce() -> Value) -> &'m mut Value {
        match self {
            Entry::Occupied(v) => v,
            Entry::Vacant(m, k) => {
                let i = m.push(k, f());
                &mut m.entries[i].value
            }
        }
    }

    /// The value, inserting `null` when missing.
    pub fn or_default(self) -> &'m mut Value {
        self.or_insert_with(Value::default)
    }
}

impl PartialEq for Map {
    /// Objects are equal when they have the same keys and values, in any order (as JSON).
    fn eq(&self, other: &Map) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k.as_str()) == Some(v))
    }
}

impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Into<CompactString>> FromIterator<(K, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut m = Map::with_capacity(iter.size_hint().0);
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl<K: Into<CompactString>> Extend<(K, Value)> for Map {
    fn extend<I: IntoIterator<Item = (K, Value)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl IntoIterator for Map {
    type Item = (CompactString, Value);
    type IntoIter = std::iter::Map<std::vec::IntoIter<Slot>, fn(Slot) -> (CompactString, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter().map(|e| (e.key, e.value))
    }
}

type Pairs<'a> =
    std::iter::Map<std::slice::Iter<'a, Slot>, fn(&'a Slot) -> (&'a CompactString, &'a Value)>;

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a CompactString, &'a Value);
    type IntoIter = Pairs<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|e| (&e.key, &e.value))
    }
}

impl Value {
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
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    /// The array for changing, if it is one.
    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Value>> {
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
    /// Compact JSON text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&s)
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) => n.serialize(s),
            Value::String(v) => s.serialize_str(v),
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Value::Object(m) => m.serialize(s),
        }
    }
}

impl Serialize for Map {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k.as_str(), v)?;
        }
        map.end()
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Deserialize::deserialize(d)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(e) = seq.next_element()? {
            v.push(e);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        // JSON gives no length up front: collect entries on the stack and allocate the
        // object once, at its size, instead of growing it (and copying it) as keys arrive.
        let mut buf: SmallVec<[Slot; 24]> = SmallVec::new();
        // One bit per key seen, chosen by its tag: a key whose bit is clear cannot be a
        // duplicate, so the comparison with every earlier key is skipped.
        let mut seen: u64 = 0;
        while let Some(k) = access.next_key::<KeyText>()? {
            let value: Value = access.next_value()?;
            let key = k.0;
            let tag = tag(key.as_bytes());
            let bit = 1u64 << (tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58);
            if seen & bit != 0
                && let Some(e) = buf.iter_mut().find(|e| e.tag == tag && e.key == key)
            {
                e.value = value;
                continue;
            }
            seen |= bit;
            buf.push(Slot { tag, key, value });
            if buf.len() > INDEX_FROM {
                // A large object: finish it through the indexed map.
                let mut m = Map {
                    entries: buf.into_vec(),
                    index: None,
                };
                m.reindex();
                while let Some(k) = access.next_key::<KeyText>()? {
                    let v: Value = access.next_value()?;
                    m.insert(k.0, v);
                }
                return Ok(Value::Object(m));
            }
        }
        Ok(Value::Object(Map {
            entries: buf.into_vec(),
            index: None,
        }))
    }
}

/// A key read without allocating when it is short.
struct KeyText(CompactString);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(CompactString::from(v)))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<KeyText, E> {
                Ok(KeyText(CompactString::from(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

impl<'de> Deserialize<'de> for Map {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Map, D::Error> {
        match Value::deserialize(d)? {
            Value::Object(m) => Ok(m),
            _ => Err(de::Error::custom("expected a JSON object")),
        }
    }
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => Value::Number(n),
            serde_json::Value::String(s) => Value::String(s),
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
            Value::String(s) => serde_json::Value::String(s),
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
        Value::String(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
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

/// Compact JSON text of `v`, appended to `out`: the same bytes as `serde_json::to_writer`,
/// written directly (no serializer dispatch per value; runs of plain characters are
/// copied at once).
pub fn write_compact(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if let Some(i) = n.as_u64() {
                out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
            } else if let Some(i) = n.as_i64() {
                out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
            } else {
                serde_json::to_writer(&mut *out, n).expect("writing to a Vec cannot fail");
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_compact(out, x);
            }
            out.push(b']');
        }
        Value::Object(m) => {
            out.push(b'{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write_compact(out, x);
            }
            out.push(b'}');
        }
    }
}

// What follows a backslash for each byte that must be escaped (0 = none; b'u' = \u00XX),
// as serde_json escapes: control characters, the quote and the backslash.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Whether any of the 8 bytes of `w` must be escaped (a control character, `"` or `\\`),
/// tested on the whole word at once (exact for presence, see "bit twiddling hacks").
#[inline]
fn word_needs_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    let q = w ^ (ONES * b'"' as u64);
    let quote = q.wrapping_sub(ONES) & !q;
    let b = w ^ (ONES * b'\\' as u64);
    let backslash = b.wrapping_sub(ONES) & !b;
    (control | quote | backslash) & HIGHS != 0
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    // Most keys and values are short: copy them with fixed-size moves (a variable-length
    // copy is a library call per string) into a buffer padded with a plain byte, check three
    // words for anything to escape, and write quote, text and quote at once.
    let n = bytes.len();
    if n <= 24 {
        let mut quoted = [b'a'; 32];
        let mut i = 0;
        while i + 8 <= n {
            quoted[1 + i..9 + i].copy_from_slice(&bytes[i..i + 8]);
            i += 8;
        }
        if n - i >= 4 {
            quoted[1 + i..5 + i].copy_from_slice(&bytes[i..i + 4]);
            i += 4;
        }
        if n - i >= 2 {
            quoted[1 + i..3 + i].copy_from_slice(&bytes[i..i + 2]);
            i += 2;
        }
        if n - i == 1 {
            quoted[1 + i] = bytes[i];
        }
        let word = |at: usize| u64::from_le_bytes(quoted[at..at + 8].try_into().expect("8 bytes"));
        if !(word_needs_escape(word(1))
            || word_needs_escape(word(9))
            || word_needs_escape(word(17)))
        {
            quoted[0] = b'"';
            quoted[n + 1] = b'"';
            let at = out.len();
            out.extend_from_slice(&quoted);
            out.truncate(at + n + 2);
            return;
        }
    }
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Skip eight plain bytes at a time.
        if i + 8 <= bytes.len() {
            let w = u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
            if !word_needs_escape(w) {
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        let esc = ESCAPE[b as usize];
        if esc != 0 {
            out.extend_from_slice(&bytes[start..i]);
            if esc == b'u' {
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xf) as usize],
                ]);
            } else {
                out.extend_from_slice(&[b'\\', esc]);
            }
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
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
mod tests {
    use super::*;

    #[test]
    fn parses_and_serialises_keeping_key_order() {
        let text = r#"{"z":1,"a":{"y":[1,2.5,"s",null,true]},"m":-3,"big":30400402455622563}"#;
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), text);
        assert_eq!(v["a"]["y"][1], json!(2.5));
        assert_eq!(
            v.get("big").and_then(Value::as_i64),
            Some(30400402455622563)
        );
    }

    #[test]
    fn insert_keeps_place_and_remove_keeps_order() {
        let mut m = Map::new();
        m.insert("b", json!(1));
        m.insert("a", json!(2));
        m.insert("b", json!(3));
        m.insert(String::from("c"), json!(4));
        assert_eq!(
            m.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["b", "a", "c"]
        );
        m.shift_remove("b");
        assert_eq!(m.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(
            *m.get_or_insert_null(&CompactString::from("d")),
            Value::Null
        );
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn duplicate_keys_keep_the_last_value_in_the_first_place() {
        let v: Value = serde_json::from_str(r#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(v.to_string(), r#"{"a":3,"b":2}"#);
        // Many keys, so that the parser's seen-bits collide, with duplicates throughout.
        let keys: Vec<String> = (0..200).map(|i| format!("key{}", i % 70)).collect();
        let text = format!(
            "{{{}}}",
            keys.iter()
                .enumerate()
                .map(|(i, k)| format!("\"{k}\":{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        let want: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v, want);
        assert_eq!(v.as_object().unwrap().len(), 70);
        assert_eq!(v.to_string(), serde_json::to_string(&want).unwrap());
    }

    #[test]
    fn converts_to_and_from_serde_json() {
        let s = serde_json::json!({"a": [1, {"b": null}], "c": "d"});
        let v = Value::from(s.clone());
        assert_eq!(v, s);
        assert_eq!(serde_json::Value::from(v), s);
    }

    #[test]
    fn large_objects_use_an_index_that_follows_changes() {
        let mut m = Map::new();
        for i in 0..100 {
            m.insert(format!("k{i}"), json!(i));
        }
        assert!(m.index.is_some());
        assert_eq!(m.get("k57"), Some(&json!(57)));
        assert_eq!(m.shift_remove("k10"), Some(json!(10)));
        assert_eq!(m.get("k11"), Some(&json!(11)));
        assert_eq!(m.get_index_of("k11"), Some(10));
        m.retain(|k, _| k.ends_with('7'));
        assert_eq!(m.len(), 10);
        assert!(m.index.is_none());
        assert_eq!(m.get("k97"), Some(&json!(97)));
        *m.entry("new").or_insert(json!(1)) = json!(2);
        assert_eq!(m.get("new"), Some(&json!(2)));
        m.sort_keys();
        assert_eq!(m.keys().next().map(|k| k.as_str()), Some("k17"));
    }

    #[test]
    fn the_direct_writer_writes_what_serde_json_writes() {
        let mut texts: Vec<String> = vec![
            r#"{"a":"x\"y\\z\n\t\r\b\f\u0001\u001f/é😀","b":[1,-2,2.5,1e300,-0.0,18446744073709551615,null,true,false],"c":{}}"#.into(),
            r#"[[],[{}],"",0,-9223372036854775808]"#.into(),
        ];
        // Every single byte value 0..128 inside a string and as a key, alone and at every
        // position of a longer string (the writer skips eight plain bytes at a time).
        for b in 0u8..128 {
            let s = serde_json::to_string(&String::from(b as char)).unwrap();
            texts.push(format!("{{{s}:{s}}}"));
            for pos in 0..20 {
                let mut long: String = "abcdefghijklmnopqrs".into();
                long.insert(pos, b as char);
                let long = serde_json::to_string(&long).unwrap();
                texts.push(format!("[{long}]"));
            }
        }
        // Plain strings of every length around the short-string path's limit.
        for n in 0..=40 {
            let plain: String = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"[..n].into();
            texts.push(format!("{{\"{plain}\":\"{plain}\"}}"));
        }
        for t in texts {
            let v: Value = serde_json::from_str(&t).unwrap();
            let mut mine = Vec::new();
            write_compact(&mut mine, &v);
            assert_eq!(
                String::from_utf8(mine).unwrap(),
                serde_json::to_string(&v).unwrap(),
                "{t}"
            );
        }
    }

    #[test]
    fn keys_that_share_a_tag_are_told_apart() {
        let mut m = Map::new();
        for k in ["abcdefgX", "abcdefgY", "abcdefg", "abc", "", "abcdefgXY"] {
            m.insert(k, json!(k));
        }
        for k in ["abcdefgX", "abcdefgY", "abcdefg", "abc", "", "abcdefgXY"] {
            assert_eq!(m.get(k), Some(&json!(k)), "{k:?}");
        }
        assert_eq!(m.get("abcdefgZ"), None);
        assert_eq!(m.get("ab"), None);
        let long = "k".repeat(300);
        m.insert(long.as_str(), json!(1));
        assert_eq!(m.get(long.as_str()), Some(&json!(1)));
        assert_eq!(m.get("k".repeat(299).as_str()), None);
    }

    #[test]
    fn objects_compare_as_json() {
        assert_eq!(json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1}));
        assert_ne!(json!({"a": 1}), json!({"a": 2}));
    }
}
