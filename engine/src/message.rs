//! The message: data, metadata and the ctrl flag (Substation's model), plus the
//! acknowledgement tokens that say which input it came from.
//!
//! Data and metadata are bytes to the outside world, but a message parses its JSON at most
//! once and serialises it at most once on its way through a pipeline: a [`Body`] holds the
//! bytes, the parsed value, or both, and converts lazily. Transforms that work on raw bytes
//! (hashes, base64, gzip) never parse; transforms that work on paths never re-serialise.
//!
//! A key that starts with `meta ` (the word and one space) addresses the metadata, as in
//! Substation; `@this` addresses the whole document.

use std::borrow::Cow;

use crate::json::Value;
use bytes::Bytes;
use once_cell::sync::OnceCell;

use crate::ack::{AckSet, AckToken};
use crate::error::TransformError;
use crate::path::{Path, PathError};

mod output_slab;
pub use output_slab::OutputSlab;

/// Bytes that may also be held as parsed JSON.
///
/// Both halves are filled at most once through `&self` (a transform reading by path parses,
/// a send reading bytes serialises), so they are once-cells. Every body starts with one half
/// set and changes through `&mut self`, so a cell is made full (`with_value`) or replaced
/// rather than initialised in place: only the first parse through `&self` pays the cell's
/// atomic initialisation. (`std`'s `OnceLock` has no full constructor: `From` initialises
/// through its `Once` as well, and five of those per message were 2% of a pipeline's time.)
#[derive(Debug, Default)]
pub struct Body {
    raw: OnceCell<Bytes>,
    // `Some(None)` means: parsed, and it is not JSON.
    parsed: OnceCell<Option<Value>>,
}

impl Clone for Body {
    /// A copy shares the serialised bytes (serialising once if needed) and re-parses only if
    /// it is itself read by path. The usual copy is a send's: it needs just the bytes, and
    /// copying a parsed document would cost more than the whole rest of its work.
    fn clone(&self) -> Self {
        Body::from_bytes(self.bytes().clone())
    }
}

impl Body {
    /// A body holding bytes (not parsed yet).
    pub fn from_bytes(b: impl Into<Bytes>) -> Self {
        Body {
            raw: OnceCell::with_value(b.into()),
            parsed: OnceCell::new(),
        }
    }

    /// A body holding a JSON value (not serialised yet).
    pub fn from_value(v: Value) -> Self {
        Body {
            raw: OnceCell::new(),
            parsed: OnceCell::with_value(Some(v)),
        }
    }

    /// The bytes, serialising the value the first time they are asked for.
    pub fn bytes(&self) -> &Bytes {
        self.raw.get_or_init(|| match self.parsed.get() {
            Some(Some(v)) => Bytes::from(serialize(v)),
            _ => Bytes::new(),
        })
    }

    /// The parsed JSON, or `None` when the bytes are not JSON (or empty).
    pub fn value(&self) -> Option<&Value> {
        self.parsed
            .get_or_init(|| self.raw.get().and_then(crate::json::parse::from_bytes))
            .as_ref()
    }

    /// Takes the parsed JSON out (parsing it first if need be, through `&mut self`: no
    /// atomics), leaving the cell empty.
    fn take_parsed(&mut self) -> Option<Value> {
        match self.parsed.take() {
            Some(parsed) => parsed,
            None => self.raw.get().and_then(crate::json::parse::from_bytes),
        }
    }

    /// The JSON for writing. Empty bytes become an empty object (as SJSON does); bytes that
    /// are not JSON are an error. The cached bytes are dropped, since they go stale.
    pub fn value_mut(&mut self) -> Result<&mut Value, TransformError> {
        // Unless the document is already parsed and written into (no bytes cached), which is
        // what every write after a message's first finds: parse it, and drop the bytes.
        if self.raw.get().is_some() || !matches!(self.parsed.get(), Some(Some(_))) {
            let is_empty = self.is_empty();
            let v = match self.take_parsed() {
                Some(v) => v,
                None if is_empty => Value::Object(Default::default()),
                None => {
                    self.parsed = OnceCell::with_value(None);
                    return Err(TransformError::NotJson(
                        "cannot set a key: the data is not JSON".into(),
                    ));
                }
            };
            self.raw = OnceCell::new();
            self.parsed = OnceCell::with_value(Some(v));
        }
        // A once-cell made full gives its value back only as an `Option`.
        match self.parsed.get_mut() {
            Some(Some(v)) => Ok(v),
            _ => Err(TransformError::Failed(
                "the message lost its parsed JSON while it was written into (a bug in sluice)"
                    .into(),
            )),
        }
    }

    /// Whether the body is empty (no bytes and no value).
    pub fn is_empty(&self) -> bool {
        match (self.raw.get(), self.parsed.get()) {
            (Some(b), _) => b.is_empty(),
            (None, Some(Some(_))) => false,
            _ => true,
        }
    }

    /// Takes the parsed JSON out (parsing if needed), leaving the body empty; `None` when
    /// it is not JSON. Lets a transform move a document instead of cloning it.
    pub fn take_value(&mut self) -> Option<Value> {
        let v = self.take_parsed();
        if v.is_some() {
            *self = Body::default();
        } else {
            // Not JSON: remember that, as a read would.
            self.parsed = OnceCell::with_value(None);
        }
        v
    }

    /// Keeps only the bytes, serialising the value first if need be (into `out`), and frees
    /// the parsed JSON.
    pub fn keep_bytes_only(&mut self, out: &mut OutputSlab) {
        let Some(parsed) = self.parsed.take() else {
            return;
        };
        if self.raw.get().is_none() {
            let bytes = match &parsed {
                Some(v) => out.serialize(v),
                None => Bytes::new(),
            };
            self.raw = OnceCell::with_value(bytes);
        }
    }

    /// Appends the bytes to `out`: the bytes held, or the value written there (without
    /// keeping a copy: the body is about to go).
    pub fn append_bytes_to(&self, out: &mut Vec<u8>) {
        match (self.raw.get(), self.parsed.get()) {
            (Some(b), _) => out.extend_from_slice(b),
            (None, Some(Some(v))) => crate::json::write_json(out, v),
            _ => {}
        }
    }

    /// Whether it holds parsed JSON (tests of who parses and frees what).
    #[cfg(test)]
    pub(crate) fn holds_value(&self) -> bool {
        matches!(self.parsed.get(), Some(Some(_)))
    }

    /// Replaces the content with bytes.
    pub fn set_bytes(&mut self, b: impl Into<Bytes>) {
        *self = Body::from_bytes(b);
    }

    /// Replaces the content with a JSON value.
    pub fn set_value(&mut self, v: Value) {
        *self = Body::from_value(v);
    }
}

/// Parses JSON bytes; `None` for empty input or anything that is not one JSON value.
pub fn parse_json(b: &[u8]) -> Option<Value> {
    crate::json::parse::from_slice(b)
}

/// JSON text of a value: compact, but an object parsed and unchanged since is its own text
/// (see [`crate::json::write_json`]).
pub fn serialize(v: &Value) -> Vec<u8> {
    thread_local! {
        // The size of the last document written on this thread: consecutive messages are
        // usually alike, so this sizes the buffer right the first time.
        static LAST: std::cell::Cell<usize> = const { std::cell::Cell::new(256) };
    }
    let mut out = Vec::with_capacity(LAST.get() + LAST.get() / 8 + 16);
    crate::json::write_json(&mut out, v);
    LAST.set(out.len().clamp(64, 1 << 20));
    out
}

/// Which document a key addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The message data.
    Data,
    /// The message metadata (`meta ` prefix).
    Meta,
}

/// A compiled key: a path into the data or, with the `meta ` prefix, the metadata.
#[derive(Debug, Clone)]
pub struct Key {
    target: Target,
    path: Path,
    text: String,
}

impl Key {
    /// Compiles a key as written in a config.
    pub fn parse(key: &str) -> Result<Key, PathError> {
        let (target, rest) = match key.strip_prefix("meta ") {
            Some(rest) => (Target::Meta, rest.trim()),
            None => (Target::Data, key.trim()),
        };
        Ok(Key {
            target,
            path: Path::parse(rest)?,
            text: key.to_string(),
        })
    }

    /// Which document it addresses.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The path within that document.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// A message flowing through a pipeline.
///
/// The contents are boxed: a message moves through every transform call and output list,
/// and moving a pointer is much cheaper than moving two bodies.
#[derive(Debug, Clone, Default)]
pub struct Message {
    inner: Box<Contents>,
}

#[derive(Debug, Clone, Default)]
struct Contents {
    data: Body,
    meta: Body,
    ctrl: bool,
    /// A ctrl that marks a boundary within the input, not its end (see
    /// [`Message::checkpoint`]).
    boundary: bool,
    acks: AckSet,
}

impl Message {
    /// A data message with these bytes.
    pub fn new(data: impl Into<Bytes>) -> Self {
        Message {
            inner: Box::new(Contents {
                data: Body::from_bytes(data),
                ..Default::default()
            }),
        }
    }

    /// A data message holding a JSON value.
    pub fn from_value(v: Value) -> Self {
        Message {
            inner: Box::new(Contents {
                data: Body::from_value(v),
                ..Default::default()
            }),
        }
    }

    /// A ctrl message: no data, no metadata; every stateful transform flushes on it.
    pub fn ctrl() -> Self {
        Message {
            inner: Box::new(Contents {
                ctrl: true,
                ..Default::default()
            }),
        }
    }

    /// A ctrl message that marks a boundary within the input rather than its end
    /// (`utility_control`, a transform's own flush of what it wraps): stateful transforms
    /// flush on it as on any ctrl, but what waits on something outside the process (the
    /// lock's messages whose keys another process holds) may go on waiting past it.
    pub fn checkpoint() -> Self {
        Message {
            inner: Box::new(Contents {
                ctrl: true,
                boundary: true,
                ..Default::default()
            }),
        }
    }

    /// Whether this is a ctrl message.
    pub fn is_ctrl(&self) -> bool {
        self.inner.ctrl
    }

    /// Whether this is a ctrl message that ends the input (an adapter's: the end of a
    /// file or of an invocation), after which nothing may be left waiting.
    pub fn ends_input(&self) -> bool {
        self.inner.ctrl && !self.inner.boundary
    }

    /// The data bytes (serialised from JSON the first time if needed). Empty for ctrl.
    pub fn data(&self) -> &Bytes {
        self.inner.data.bytes()
    }

    /// The data as parsed JSON, if it is JSON.
    pub fn data_value(&self) -> Option<&Value> {
        self.inner.data.value()
    }

    /// The data body, for transforms that manage bytes and JSON themselves.
    pub fn data_body(&self) -> &Body {
        &self.inner.data
    }

    /// The data for writing as JSON (see [`Body::value_mut`]).
    pub fn data_value_mut(&mut self) -> Result<&mut Value, TransformError> {
        self.inner.data.value_mut()
    }

    /// Takes the data out as parsed JSON (see [`Body::take_value`]); `None` when it is not
    /// JSON, in which case the data is left as it was.
    pub fn take_data_value(&mut self) -> Option<Value> {
        self.inner.data.take_value()
    }

    /// Appends the data's bytes to `out` (see [`Body::append_bytes_to`]).
    pub fn append_data_to(&self, out: &mut Vec<u8>) {
        self.inner.data.append_bytes_to(out);
    }

    /// Keeps only the data's bytes (see [`Body::keep_bytes_only`]): what the pipeline does
    /// on a worker before a transform that [takes bytes](crate::StatefulTransform::takes_bytes).
    pub fn keep_data_bytes_only(&mut self, out: &mut OutputSlab) {
        self.inner.data.keep_bytes_only(out);
    }

    /// Replaces the data with bytes. Ignored on ctrl messages, as in Substation.
    pub fn set_data(&mut self, b: impl Into<Bytes>) {
        if !self.inner.ctrl {
            self.inner.data.set_bytes(b);
        }
    }

    /// Replaces the data with a JSON value. Ignored on ctrl messages.
    pub fn set_data_value(&mut self, v: Value) {
        if !self.inner.ctrl {
            self.inner.data.set_value(v);
        }
    }

    /// The metadata bytes.
    pub fn metadata(&self) -> &Bytes {
        self.inner.meta.bytes()
    }

    /// The metadata as parsed JSON, if it is JSON.
    pub fn metadata_value(&self) -> Option<&Value> {
        self.inner.meta.value()
    }

    /// Replaces the metadata with bytes. Ignored on ctrl messages.
    pub fn set_metadata(&mut self, b: impl Into<Bytes>) {
        if !self.inner.ctrl {
            self.inner.meta.set_bytes(b);
        }
    }

    /// Replaces the metadata with a JSON value. Ignored on ctrl messages.
    pub fn set_metadata_value(&mut self, v: Value) {
        if !self.inner.ctrl {
            self.inner.meta.set_value(v);
        }
    }

    /// A new data message carrying this message's metadata and acknowledgement tokens,
    /// with other data: what fan-out transforms emit.
    pub fn derive(&self, data: Body) -> Message {
        Message {
            inner: Box::new(Contents {
                data,
                meta: self.inner.meta.clone(),
                ctrl: false,
                boundary: false,
                acks: self.inner.acks.clone(),
            }),
        }
    }

    fn body(&self, t: Target) -> &Body {
        match t {
            Target::Data => &self.inner.data,
            Target::Meta => &self.inner.meta,
        }
    }

    fn body_mut(&mut self, t: Target) -> &mut Body {
        match t {
            Target::Data => &mut self.inner.data,
            Target::Meta => &mut self.inner.meta,
        }
    }

    /// The value at `key`, or `None` when it does not exist (or the document is not JSON).
    pub fn get(&self, key: &Key) -> Option<Cow<'_, Value>> {
        if self.inner.ctrl {
            return None;
        }
        let doc = self.body(key.target).value()?;
        key.path.get(doc)
    }

    /// What [`Message::get`] reads at a key that is an array multipath and nothing else
    /// (`[a.b,c,!1]`): the value of each member that exists, in order, without building the
    /// array ([`Path::multi_values`](crate::path::Path::multi_values)). `None` when the key
    /// is no such path, or when `get` would give `None` (a ctrl message, no JSON document).
    pub fn get_multi<'m>(
        &'m self,
        key: &'m Key,
    ) -> Option<impl Iterator<Item = Cow<'m, Value>> + 'm> {
        if self.inner.ctrl {
            return None;
        }
        let doc = self.body(key.target).value()?;
        key.path.multi_values(doc)
    }

    /// Sets the value at `key`, creating intermediate objects. `@this` replaces the document.
    ///
    /// As Substation's `SetValue` does, a string that holds a JSON object or array (its
    /// first character `{` or `[`, the whole text valid JSON) is set as that object or
    /// array, so `{"a":"{\"b\":1}"}` copied from `a` to `a` becomes `{"a":{"b":1}}`.
    pub fn set(&mut self, key: &Key, mut v: Value) -> Result<(), TransformError> {
        if self.inner.ctrl {
            return Ok(());
        }
        crate::value::sjson_type(&mut v);
        let body = self.body_mut(key.target);
        if key.path.is_this() {
            body.set_value(v);
            return Ok(());
        }
        let doc = body.value_mut()?;
        key.path.set(doc, v)?;
        Ok(())
    }

    /// Deletes the value at `key`; a missing key is not an error.
    pub fn delete(&mut self, key: &Key) -> Result<(), TransformError> {
        if self.inner.ctrl {
            return Ok(());
        }
        let body = self.body_mut(key.target);
        if body.value().is_none() {
            return Ok(());
        }
        let doc = body.value_mut()?;
        key.path.delete(doc)?;
        Ok(())
    }

    /// The acknowledgement tokens this message carries.
    pub fn acks(&self) -> &crate::ack::AckSet {
        &self.inner.acks
    }

    /// Adds a token (an adapter or the lock tracking this message).
    pub fn add_ack(&mut self, token: AckToken) {
        self.inner.acks.push(token);
    }

    /// Adds several tokens (an aggregate merging its inputs).
    pub fn extend_acks<'a>(&mut self, tokens: impl IntoIterator<Item = &'a AckToken>) {
        self.inner.acks.extend(tokens.into_iter().cloned());
    }

    /// Removes and returns the tokens for which `pred` holds.
    pub fn take_acks_where(&mut self, pred: impl Fn(&AckToken) -> bool) -> AckSet {
        let mut taken = AckSet::new();
        let mut kept = AckSet::new();
        for t in self.inner.acks.drain(..) {
            if pred(&t) {
                taken.push(t)
            } else {
                kept.push(t)
            }
        }
        self.inner.acks = kept;
        taken
    }

    /// Removes and returns every token (whoever takes them answers for the message).
    pub fn take_acks(&mut self) -> AckSet {
        std::mem::take(&mut self.inner.acks)
    }

    /// Marks every token failed (this message could not be delivered).
    pub fn fail_acks(&self, reason: &str) {
        crate::ack::fail_all(&self.inner.acks, reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    /// JSON's white space around a document, and nothing else (found by the `json` fuzz
    /// target: a form feed was taken for white space).
    #[test]
    fn only_json_white_space_is_skipped() {
        assert_eq!(parse_json(b" \t\r\n44 "), Some(json!(44)));
        assert_eq!(parse_json(b"\x0c44"), None);
        assert_eq!(parse_json(b"\x0b44"), None);
        assert_eq!(parse_json(b"  "), None);
    }

    #[test]
    fn parses_once_and_serialises_once() {
        let mut m = Message::new(&b"{\"a\":1}"[..]);
        let k = Key::parse("b").unwrap();
        m.set(&k, json!("x")).unwrap();
        assert_eq!(&m.data()[..], br#"{"a":1,"b":"x"}"#);
        assert!(m.data_body().raw.get().is_some());
        assert_eq!(std::mem::size_of::<Message>(), std::mem::size_of::<usize>());
    }

    /// A write finds the document already parsed and no bytes cached (the short way), or
    /// bytes cached since the last write, which it drops: they would be stale.
    #[test]
    fn writes_after_the_bytes_were_read_drop_them() {
        let mut m = Message::new(&b"{\"a\":1}"[..]);
        m.set(&Key::parse("b").unwrap(), json!(2)).unwrap();
        assert!(m.data_body().raw.get().is_none());
        m.set(&Key::parse("c").unwrap(), json!(3)).unwrap();
        assert_eq!(&m.data()[..], br#"{"a":1,"b":2,"c":3}"#);
        m.set(&Key::parse("d").unwrap(), json!(4)).unwrap();
        assert!(m.data_body().raw.get().is_none());
        assert_eq!(&m.data()[..], br#"{"a":1,"b":2,"c":3,"d":4}"#);
        m.set(&Key::parse("a").unwrap(), json!(0)).unwrap();
        m.set(&Key::parse("e").unwrap(), json!(5)).unwrap();
        assert_eq!(&m.data()[..], br#"{"a":0,"b":2,"c":3,"d":4,"e":5}"#);
    }

    #[test]
    fn copies_share_bytes_and_reparse_on_demand() {
        let mut m = Message::new(&b"{\"a\":1}"[..]);
        m.set(&Key::parse("b").unwrap(), json!(2)).unwrap();
        let c = m.clone();
        assert!(c.data_body().parsed.get().is_none());
        assert_eq!(&c.data()[..], br#"{"a":1,"b":2}"#);
        assert_eq!(
            c.get(&Key::parse("b").unwrap()).unwrap().as_ref(),
            &json!(2)
        );
        // The original's bytes were cached by the copy and are the same allocation.
        assert_eq!(c.data().as_ptr(), m.data().as_ptr());
    }

    #[test]
    fn meta_prefix_addresses_metadata() {
        let mut m = Message::new(&b"{}"[..]);
        m.set(&Key::parse("meta x").unwrap(), json!(1)).unwrap();
        assert_eq!(&m.metadata()[..], br#"{"x":1}"#);
        assert_eq!(&m.data()[..], b"{}");
        assert_eq!(
            m.get(&Key::parse("meta   x").unwrap()).unwrap().as_ref(),
            &json!(1)
        );
    }

    #[test]
    fn writes_to_empty_data_create_an_object() {
        let mut m = Message::new(Bytes::new());
        m.set(&Key::parse("a.b").unwrap(), json!(true)).unwrap();
        assert_eq!(&m.data()[..], br#"{"a":{"b":true}}"#);
    }

    #[test]
    fn writes_to_non_json_data_are_errors() {
        let mut m = Message::new(&b"hello"[..]);
        assert!(m.set(&Key::parse("a").unwrap(), json!(1)).is_err());
        assert!(m.get(&Key::parse("a").unwrap()).is_none());
    }

    #[test]
    fn ctrl_ignores_writes() {
        let mut m = Message::ctrl();
        m.set_data(&b"x"[..]);
        assert!(m.data().is_empty());
        assert!(m.is_ctrl());
    }
}
