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
use crate::path::{Path, PathError, TopWrite};

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
    parsed: OnceCell<Reading>,
}

/// What a body's bytes read as.
#[derive(Debug)]
enum Reading {
    /// Not JSON, or empty.
    NotJson,
    /// One JSON value (JSON white space around it allowed).
    Json(Value),
    /// An object or array with bytes around it that are kept (see [`Framed`]).
    Framed(Box<Framed>),
}

/// An object or array as GJSON reads it out of data that holds more than that value, and
/// the bytes around it, which SJSON's edits keep or drop (see [`Body::set_at`]).
///
/// GJSON reads a path in the first object or array of the data, whatever follows it, and
/// SJSON edits that text in place: so `{"a":1} x` reads `a` as 1, and setting `a` to 2
/// gives `{"a":2} x`. The value also stands framed when it is JSON with white space around
/// it (`{"a":1}\n`), which an edit in place keeps as well, and when its closing bracket is
/// missing at the end of the data (`{"a":"x"`: GJSON reads up to the end), which an edit in
/// place does not add.
#[derive(Debug)]
struct Framed {
    value: Value,
    /// The bytes before it: JSON white space.
    head: Bytes,
    /// The bytes after it (any).
    tail: Bytes,
    /// The data ends where the value's closing bracket should be: the value was read with
    /// one added, which is the last byte of its text and is not written.
    cut: bool,
    /// Head and tail are JSON white space and nothing is cut: the data is one JSON value.
    json: bool,
}

impl Framed {
    /// The text of the value and what follows it (the bytes from the value's first on:
    /// GJSON's `Raw` of the data, which SJSON adds members to).
    fn write_value_and_tail(&self, out: &mut Vec<u8>) {
        crate::json::write_json(out, &self.value);
        if self.cut {
            out.pop();
        }
        out.extend_from_slice(&self.tail);
    }

    /// The bytes, head and tail around the value's text.
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head);
        self.write_value_and_tail(out);
    }

    fn to_bytes(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.head.len() + self.tail.len() + 256);
        self.write_to(&mut out);
        Bytes::from(out)
    }
}

/// JSON's white space: what may stand around a JSON value.
fn json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// What `src` reads as: one JSON value (an object or array with white space around it
/// framed by that white space), else the object or array GJSON reads at its beginning
/// (framed by what follows it, or cut short), else not JSON.
fn read(src: &Bytes) -> Reading {
    if let Some(v) = crate::json::parse::from_bytes(src) {
        let padded = src.first().is_some_and(|&b| json_space(b))
            || src.last().is_some_and(|&b| json_space(b));
        if !padded || !matches!(v, Value::Object(_) | Value::Array(_)) {
            return Reading::Json(v);
        }
        let start = src.iter().take_while(|&&b| json_space(b)).count();
        let end = src.len() - src.iter().rev().take_while(|&&b| json_space(b)).count();
        return Reading::Framed(Box::new(Framed {
            value: v,
            head: src.slice(..start),
            tail: src.slice(end..),
            cut: false,
            json: true,
        }));
    }
    read_leading(src).map_or(Reading::NotJson, |f| Reading::Framed(Box::new(f)))
}

/// The object or array GJSON reads at the beginning of `src`, which is not one JSON value:
/// the first value, when it is a (valid) object or array followed by other bytes; or the
/// object or array the data is once its closing bracket is added at the end (`{"a":1`).
fn read_leading(src: &Bytes) -> Option<Framed> {
    let start = src.iter().take_while(|&&b| json_space(b)).count();
    let close = match src.get(start)? {
        b'{' => b'}',
        b'[' => b']',
        _ => return None,
    };
    let head = src.slice(..start);
    if let Some((value, _, end)) = crate::json::parse::leading_value(src) {
        return Some(Framed {
            value,
            head,
            tail: src.slice(end..),
            cut: false,
            json: false,
        });
    }
    let mut closed = Vec::with_capacity(src.len() - start + 1);
    closed.extend_from_slice(&src[start..]);
    closed.push(close);
    let value = crate::json::parse::from_bytes(&Bytes::from(closed))?;
    Some(Framed {
        value,
        head,
        tail: Bytes::new(),
        cut: true,
        json: false,
    })
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
            parsed: OnceCell::with_value(Reading::Json(v)),
        }
    }

    /// The bytes, serialising the value the first time they are asked for.
    pub fn bytes(&self) -> &Bytes {
        self.raw.get_or_init(|| match self.parsed.get() {
            Some(Reading::Json(v)) => Bytes::from(serialize(v)),
            Some(Reading::Framed(f)) => f.to_bytes(),
            _ => Bytes::new(),
        })
    }

    /// What the bytes read as, read the first time it is asked for.
    fn reading(&self) -> &Reading {
        self.parsed.get_or_init(|| match self.raw.get() {
            Some(b) => read(b),
            None => Reading::NotJson,
        })
    }

    /// The parsed JSON, or `None` when the bytes are not one JSON value (or empty): what
    /// Substation checks with `json.Valid` before it takes data as JSON.
    pub fn value(&self) -> Option<&Value> {
        match self.reading() {
            Reading::Json(v) => Some(v),
            Reading::Framed(f) if f.json => Some(&f.value),
            _ => None,
        }
    }

    /// The document a path reads in, as GJSON reads it: the JSON value, or the object or
    /// array at the beginning of data that holds more (`{"a":1} x`) or is cut short of its
    /// closing bracket (`{"a":1`). `None` when there is none.
    pub fn document(&self) -> Option<&Value> {
        match self.reading() {
            Reading::Json(v) => Some(v),
            Reading::Framed(f) => Some(&f.value),
            Reading::NotJson => None,
        }
    }

    /// Whether the document stands with bytes around it that are kept ([`Framed`]):
    /// writes into it go through [`Body::set_at`] and [`Body::delete_at`].
    pub fn is_framed(&self) -> bool {
        matches!(self.reading(), Reading::Framed(_))
    }

    /// Takes what the bytes read as out (reading them first if need be, through
    /// `&mut self`: no atomics), leaving the cell empty.
    fn take_reading(&mut self) -> Reading {
        match self.parsed.take() {
            Some(r) => r,
            None => self.raw.get().map_or(Reading::NotJson, read),
        }
    }

    /// The JSON for writing. Empty bytes become an empty object (as SJSON does); bytes that
    /// are not one JSON value are an error. The cached bytes are dropped, since they go
    /// stale, and so is any white space around the value.
    pub fn value_mut(&mut self) -> Result<&mut Value, TransformError> {
        // Unless the document is already parsed and written into (no bytes cached), which is
        // what every write after a message's first finds: parse it, and drop the bytes.
        if self.raw.get().is_some() || !matches!(self.parsed.get(), Some(Reading::Json(_))) {
            let is_empty = self.is_empty();
            let v = match self.take_reading() {
                Reading::Json(v) => v,
                Reading::Framed(f) if f.json => f.value,
                Reading::NotJson if is_empty => Value::Object(Default::default()),
                other => {
                    self.parsed = OnceCell::with_value(other);
                    return Err(not_json());
                }
            };
            self.raw = OnceCell::new();
            self.parsed = OnceCell::with_value(Reading::Json(v));
        }
        // A once-cell made full gives its value back only as an `Option`.
        match self.parsed.get_mut() {
            Some(Reading::Json(v)) => Ok(v),
            _ => Err(TransformError::Failed(
                "the message lost its parsed JSON while it was written into (a bug in sluice)"
                    .into(),
            )),
        }
    }

    /// Sets `v` at `path` (not `@this`) as SJSON sets it: into the JSON document
    /// ([`Body::value_mut`]), or into a framed one as SJSON edits its text. A value at a
    /// key or index the document has is set in place, the bytes around it kept; a member
    /// added to the object, or an element appended to the array, goes before the data's
    /// last `}` (`]` when appending: its end), so with no such bracket after the value it
    /// is added to it and the bytes around it go; an index past an array's end writes the
    /// array anew, without them. Adding to data cut short of its closing bracket is an
    /// error ([`cut_short_add`]).
    pub(crate) fn set_at(&mut self, path: &Path, v: Value) -> Result<(), TransformError> {
        // What every write after a message's first finds: a document parsed and written
        // into (no bytes kept), so neither framed nor to be parsed.
        if self.raw.get().is_none()
            && let Some(Reading::Json(doc)) = self.parsed.get_mut()
        {
            path.set(doc, v)?;
            return Ok(());
        }
        if !self.is_framed_now() {
            let doc = self.value_mut()?;
            path.set(doc, v)?;
            return Ok(());
        }
        let Some(Reading::Framed(f)) = self.parsed.get_mut() else {
            return Err(lost_framed());
        };
        match path.top_write(&f.value)? {
            TopWrite::Inside => {
                path.set(&mut f.value, v)?;
                self.raw = OnceCell::new();
            }
            TopWrite::Anew => {
                path.set(&mut f.value, v)?;
                let value = std::mem::take(&mut f.value);
                *self = Body::from_value(value);
            }
            TopWrite::Added if f.cut => return Err(cut_short_add(path)),
            TopWrite::Added => {
                let text = added_text(f, path, v)?;
                *self = Body::from_bytes(text);
            }
        }
        Ok(())
    }

    /// Deletes the value at `path` (not `@this`); `false` when nothing was there. In a
    /// framed document it is deleted in place, the bytes around it kept.
    pub(crate) fn delete_at(&mut self, path: &Path) -> Result<bool, TransformError> {
        if !self.is_framed_now() {
            if self.document().is_none() {
                return Ok(false);
            }
            let doc = self.value_mut()?;
            return Ok(path.delete(doc)?);
        }
        let Some(Reading::Framed(f)) = self.parsed.get_mut() else {
            return Err(lost_framed());
        };
        let deleted = path.delete(&mut f.value)?;
        if deleted {
            self.raw = OnceCell::new();
        }
        Ok(deleted)
    }

    /// [`Body::is_framed`], reading the bytes through `&mut self` if need be.
    fn is_framed_now(&mut self) -> bool {
        if self.parsed.get().is_none() {
            let r = self.take_reading();
            self.parsed = OnceCell::with_value(r);
        }
        matches!(self.parsed.get(), Some(Reading::Framed(_)))
    }

    /// Whether the body is empty (no bytes and no value).
    pub fn is_empty(&self) -> bool {
        match (self.raw.get(), self.parsed.get()) {
            (Some(b), _) => b.is_empty(),
            (None, Some(Reading::Json(_) | Reading::Framed(_))) => false,
            _ => true,
        }
    }

    /// Takes the parsed JSON out (parsing if needed), leaving the body empty; `None` when
    /// it is not one JSON value. Lets a transform move a document instead of cloning it.
    pub fn take_value(&mut self) -> Option<Value> {
        match self.take_reading() {
            Reading::Json(v) => {
                *self = Body::default();
                Some(v)
            }
            Reading::Framed(f) if f.json => {
                *self = Body::default();
                Some(f.value)
            }
            other => {
                // Not JSON: remember what it reads as, as a read would.
                self.parsed = OnceCell::with_value(other);
                None
            }
        }
    }

    /// Keeps only the bytes, serialising the value first if need be (into `out`), and frees
    /// the parsed JSON.
    pub fn keep_bytes_only(&mut self, out: &mut OutputSlab) {
        let Some(parsed) = self.parsed.take() else {
            return;
        };
        if self.raw.get().is_none() {
            let bytes = match &parsed {
                Reading::Json(v) => out.serialize(v),
                Reading::Framed(f) => f.to_bytes(),
                Reading::NotJson => Bytes::new(),
            };
            self.raw = OnceCell::with_value(bytes);
        }
    }

    /// Appends the bytes to `out`: the bytes held, or the value written there (without
    /// keeping a copy: the body is about to go).
    pub fn append_bytes_to(&self, out: &mut Vec<u8>) {
        match (self.raw.get(), self.parsed.get()) {
            (Some(b), _) => out.extend_from_slice(b),
            (None, Some(Reading::Json(v))) => crate::json::write_json(out, v),
            (None, Some(Reading::Framed(f))) => f.write_to(out),
            _ => {}
        }
    }

    /// Whether it holds parsed JSON (tests of who parses and frees what).
    #[cfg(test)]
    pub(crate) fn holds_value(&self) -> bool {
        matches!(
            self.parsed.get(),
            Some(Reading::Json(_) | Reading::Framed(_))
        )
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

/// The error of a write into data that is not JSON.
fn not_json() -> TransformError {
    TransformError::NotJson("cannot set a key: the data is not JSON".into())
}

/// The error of a member added to, or an element appended to, data cut short of its
/// closing bracket. SJSON puts the member before the last `}` there is: with none, the new
/// member stands in place of the whole record (`{"id":1` with `b` added is `,"b":2}`, the
/// same for every record, so a lock keyed on the data would take each record after the
/// first for a redelivery of it and drop it); with one inside a value, the member goes
/// into that value. Refused, so the record fails where it can be seen.
fn cut_short_add(path: &Path) -> TransformError {
    TransformError::Failed(format!(
        "cannot add {:?}: the data ends before its closing bracket, and SJSON would put the \
         key in place of the record or inside one of its values (set keys it has, or fix \
         the data, instead)",
        path.as_str()
    ))
}

/// The error of a framed document gone between two lines that hold it (a bug).
fn lost_framed() -> TransformError {
    TransformError::Failed(
        "the message lost its parsed JSON while it was written into (a bug in sluice)".into(),
    )
}

/// The data SJSON's adding `v` at `path` to the framed `f` gives (a member added to its
/// object, an element appended to its array): the text from the value on, up to its last
/// `}` (for an object; for an array, to its end, white space trimmed and a last `]` taken
/// off), a comma when the value has members, the new member or element, and the bracket.
/// What comes after that last `}` goes, and so does the head, as SJSON's `Parse` skips it.
fn added_text(f: &Framed, path: &Path, v: Value) -> Result<Vec<u8>, TransformError> {
    let object = matches!(f.value, Value::Object(_));
    // The member or element as SJSON builds it: set into an empty object or array.
    let mut built = if object {
        Value::Object(crate::json::Map::new())
    } else {
        Value::Array(crate::json::Array::new())
    };
    path.set(&mut built, v)?;
    let mut member = Vec::new();
    crate::json::write_json(&mut member, &built);
    let member = &member[1..member.len() - 1];

    let mut text = Vec::new();
    f.write_value_and_tail(&mut text);
    // SJSON's comma: the first byte after the opening bracket, past any of 32 or less.
    let comma = text[1..]
        .iter()
        .find(|&&b| b > b' ')
        .is_some_and(|&b| b != b'}' && b != b']');
    let end = if object {
        (1..text.len())
            .rev()
            .find(|&i| text[i] == b'}')
            .unwrap_or(0)
    } else {
        let trimmed = text.len() - text.iter().rev().take_while(|&&b| b <= b' ').count();
        if text[..trimmed].ends_with(b"]") {
            trimmed - 1
        } else {
            trimmed
        }
    };
    text.truncate(end);
    if comma {
        text.push(b',');
    }
    text.extend_from_slice(member);
    text.push(if object { b'}' } else { b']' });
    Ok(text)
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
        let doc = self.body(key.target).document()?;
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
        let doc = self.body(key.target).document()?;
        key.path.multi_values(doc)
    }

    /// Sets the value at `key`, creating intermediate objects. `@this` replaces the document.
    ///
    /// As Substation's `SetValue` does, a string that holds a JSON object or array (its
    /// first character `{` or `[`, the whole text valid JSON) is set as that object or
    /// array, so `{"a":"{\"b\":1}"}` copied from `a` to `a` becomes `{"a":{"b":1}}`.
    pub fn set(&mut self, key: &Key, mut v: Value) -> Result<(), TransformError> {
        crate::value::sjson_type(&mut v);
        self.set_as_is(key, v)
    }

    /// [`Message::set`] without `SetValue`'s typing: a string that holds a JSON object or
    /// array stays a string. What `object_to_string` writes for an object: Substation 2.8
    /// hands `SetValue` the object's text in quotes, which it takes off and sets as a string.
    pub fn set_as_is(&mut self, key: &Key, v: Value) -> Result<(), TransformError> {
        if self.inner.ctrl {
            return Ok(());
        }
        let body = self.body_mut(key.target);
        if key.path.is_this() {
            body.set_value(v);
            return Ok(());
        }
        body.set_at(&key.path, v)
    }

    /// Deletes the value at `key`; a missing key is not an error.
    pub fn delete(&mut self, key: &Key) -> Result<(), TransformError> {
        if self.inner.ctrl {
            return Ok(());
        }
        let body = self.body_mut(key.target);
        if key.path.is_this() {
            if body.document().is_some() {
                body.set_value(Value::Null);
            }
            return Ok(());
        }
        body.delete_at(&key.path)?;
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

    /// GJSON reads a path in the first object or array of data that holds more, or that
    /// is cut short of its closing bracket; what is not read as a document stays not JSON.
    /// (Expected values: what `gjson.GetBytes` gives for the data and path.)
    #[test]
    fn documents_framed_by_other_bytes_read_as_gjson_reads_them() {
        let cases: &[(&[u8], &str, Option<Value>)] = &[
            (b"{\"a\":1} x", "a", Some(json!(1))),
            (b"{\"a\":1}}", "a", Some(json!(1))),
            (b"{\"a\":1}{\"a\":2}", "a", Some(json!(1))),
            (b"{\"a\":1}\n{\"b\":2}", "b", None),
            (b"{\"a\":{\"b\":[1,2]}} x", "a.b.1", Some(json!(2))),
            (b"[1,2] x", "1", Some(json!(2))),
            (b"[1,2] x", "#", Some(json!(2))),
            (b" {\"a\":1} ", "a", Some(json!(1))),
            (b"{\"a\":1} \xff\xfe", "a", Some(json!(1))),
            (b"{\"a\":\"x\"", "a", Some(json!("x"))),
            (b"{\"a\":{\"b\":1} ", "a.b", Some(json!(1))),
            (b"[1,2", "0", Some(json!(1))),
            // Not read: a scalar first, bytes before the value, an invalid value, more
            // than the top's bracket missing, a member cut short.
            (b"1 {\"a\":1}", "a", None),
            (b"x {\"a\":1}", "a", None),
            (b"{\"a\":01} x", "a", None),
            (b"{\"a\":{\"b\":1", "a.b", None),
            (b"{\"a\":1,", "a", None),
            (b"{\"a\":\"x", "a", None),
        ];
        for (data, key, want) in cases {
            let m = Message::new(Bytes::copy_from_slice(data));
            let got = m.get(&Key::parse(key).unwrap()).map(Cow::into_owned);
            assert_eq!(&got, want, "{} at {key}", String::from_utf8_lossy(data));
            // It is not one JSON value, whatever a path reads in it.
            let one_value = serde_json::from_slice::<serde_json::Value>(data).is_ok();
            assert_eq!(m.data_value().is_some(), one_value);
            assert_eq!(&m.data()[..], *data, "unchanged bytes are kept");
        }
    }

    /// Writes into such data edit its text as SJSON does: a value at a key (or index) the
    /// value has is set or deleted in place, the bytes around it kept; a key added goes
    /// before the data's last `}` (an element appended, at its end), so that without one
    /// after the value it is added to the value and the bytes around go. (Expected: what
    /// `sjson.SetBytes` / `sjson.DeleteBytes` give, one call after another.)
    #[test]
    fn writes_into_framed_documents_edit_the_text_as_sjson_does() {
        enum Op {
            Set(&'static str, Value),
            Del(&'static str),
        }
        use Op::{Del, Set};
        let cases: Vec<(&[u8], Vec<Op>, &[u8])> = vec![
            (b"{\"a\":1} x", vec![Set("a", json!(2))], b"{\"a\":2} x"),
            (
                b"{\"a\":1} x",
                vec![Set("b", json!(2))],
                b"{\"a\":1,\"b\":2}",
            ),
            (
                b"{\"a\":1} x",
                vec![Set("b.c", json!(1))],
                b"{\"a\":1,\"b\":{\"c\":1}}",
            ),
            (
                b"{\"a\":{}} x",
                vec![Set("a.b", json!(1))],
                b"{\"a\":{\"b\":1}} x",
            ),
            (
                b"{\"a\":1} x",
                vec![Set("a.b", json!(1))],
                b"{\"a\":{\"b\":1}} x",
            ),
            (b"{\"a\":1}}", vec![Set("a", json!(2))], b"{\"a\":2}}"),
            (
                b"{\"a\":1}}",
                vec![Set("b", json!(2))],
                b"{\"a\":1},\"b\":2}",
            ),
            // The key added after the value is not read back, so it is added again.
            (
                b"{\"a\":1}}",
                vec![Set("b", json!(2)), Set("b", json!(3)), Set("a", json!(0))],
                b"{\"a\":0},\"b\":2,\"b\":3}",
            ),
            (b"{} }", vec![Set("b", json!(2))], b"{} \"b\":2}"),
            (
                b"{\"a\":1} {\"c\":3} x",
                vec![Set("b", json!(2))],
                b"{\"a\":1} {\"c\":3,\"b\":2}",
            ),
            (b"{\"a\":1,\"b\":2} x", vec![Del("a")], b"{\"b\":2} x"),
            (b"{\"a\":1} x", vec![Del("z")], b"{\"a\":1} x"),
            (b" {\"a\":1}\n", vec![Set("a", json!(2))], b" {\"a\":2}\n"),
            (
                b" {\"a\":1}\n",
                vec![Set("b", json!(2))],
                b"{\"a\":1,\"b\":2}",
            ),
            (b"[1,2] x", vec![Set("0", json!(5))], b"[5,2] x"),
            (b"[1,2] x", vec![Set("-1", json!(3))], b"[1,2] x,3]"),
            (b"[1]]", vec![Set("-1", json!(2))], b"[1],2]"),
            (b"[] x", vec![Set("-1", json!(1))], b"[] x1]"),
            (b"[1,2] ", vec![Set("-1", json!(3))], b"[1,2,3]"),
            (b"[1,2] x", vec![Set("3", json!(7))], b"[1,2,null,7]"),
            // Cut short: set in place without the bracket (adding is refused: below).
            (b"{\"a\":1 ", vec![Set("a", json!(2))], b"{\"a\":2 "),
            (
                b"{\"a\":\"{\\\"b\\\":\\\"c\\\"}\"",
                vec![Set("a", json!({"b": "c"}))],
                b"{\"a\":{\"b\":\"c\"}",
            ),
            (b"[1,2", vec![Set("0", json!(5))], b"[5,2"),
        ];
        for (data, ops, want) in cases {
            let mut m = Message::new(Bytes::copy_from_slice(data));
            for op in ops {
                match op {
                    Set(k, v) => m.set(&Key::parse(k).unwrap(), v).unwrap(),
                    Del(k) => m.delete(&Key::parse(k).unwrap()).unwrap(),
                }
            }
            assert_eq!(
                String::from_utf8_lossy(m.data()),
                String::from_utf8_lossy(want),
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }

    /// A key added to data cut short of its closing bracket is refused (SJSON would put it
    /// in place of the record, or inside one of its values), whatever the key; a value the
    /// data has is still set in place, and data that is whole takes the key.
    #[test]
    fn adding_to_data_cut_short_is_refused() {
        let refused: [(&[u8], &str); 6] = [
            (b"{\"a\":1", "b"),
            (b"{\"id\":1,\"tags\":[1,2]", "seen"),
            (b"{\"a\":\"{\\\"b\\\":\\\"c\\\"}\"", "b"),
            (b"{\"a\":{\"b\":1}", "c"),
            (b"[1,2", "-1"),
            (b"[1,[2]", "-1"),
        ];
        for (data, key) in refused {
            let mut m = Message::new(Bytes::copy_from_slice(data));
            let err = m.set(&Key::parse(key).unwrap(), json!(true)).unwrap_err();
            assert!(
                err.to_string().contains("ends before its closing bracket"),
                "{}: {err}",
                String::from_utf8_lossy(data)
            );
            assert_eq!(&m.data()[..], data, "the data is left as it was");
        }
        let mut m = Message::new(&b"{\"a\":1"[..]);
        m.set(&Key::parse("a").unwrap(), json!(2)).unwrap();
        assert_eq!(&m.data()[..], b"{\"a\":2");
        let mut m = Message::new(&b"{\"a\":1}"[..]);
        m.set(&Key::parse("b").unwrap(), json!(2)).unwrap();
        assert_eq!(&m.data()[..], b"{\"a\":1,\"b\":2}");
    }

    /// Data that is no document stays refused for writes; one that is JSON with white space
    /// around it is one JSON value to those that take data as JSON.
    #[test]
    fn framing_leaves_what_is_json_and_what_is_not() {
        let mut m = Message::new(&b"1 x"[..]);
        assert!(m.set(&Key::parse("a").unwrap(), json!(1)).is_err());
        let mut m = Message::new(&b"{\"a\":1} x"[..]);
        assert!(m.data_value().is_none());
        assert!(m.data_body().is_framed());
        assert!(m.take_data_value().is_none());
        assert_eq!(&m.data()[..], b"{\"a\":1} x");
        let mut m = Message::new(&b" {\"a\":1}\n"[..]);
        assert_eq!(m.data_value(), Some(&json!({"a": 1})));
        assert_eq!(m.take_data_value(), Some(json!({"a": 1})));
    }

    /// Framing costs a body no room: what its bytes read as is the size of a value.
    #[test]
    fn a_reading_is_the_size_of_a_value() {
        assert_eq!(std::mem::size_of::<Reading>(), std::mem::size_of::<Value>());
    }

    #[test]
    fn ctrl_ignores_writes() {
        let mut m = Message::ctrl();
        m.set_data(&b"x"[..]);
        assert!(m.data().is_empty());
        assert!(m.is_ctrl());
    }
}
