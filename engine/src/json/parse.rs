//! JSON text to [`Value`], keeping the text of each object.
//!
//! Substation works on the JSON text itself (GJSON reads it, SJSON splices into it), so an
//! object nobody changed keeps its spacing and number forms on the way out, and
//! `object_to_string` of it is its text as written. serde_json's reader gives no positions,
//! so this reader is ours: it accepts exactly what `serde_json::from_slice` accepts (the
//! tests compare the two on edge cases and on generated documents, and a fuzz target does
//! the same), builds the same values, and records each object's text as a slice of the
//! input [`Bytes`] (no copy: a reference count).
//!
//! Most of an event is never looked at: a pipeline reads and writes a few keys and passes
//! the rest on. So a document's top object is built, but the objects and arrays inside it
//! are only checked (as strictly as they would be read) and kept as their text, [`Unread`];
//! one is read whole on first use (a path into it, an iteration, a comparison), so that no
//! byte is passed over more than once before it is read. One nobody read is written out as
//! the text it came as, never having been built or freed.

use std::borrow::Cow;
use std::sync::OnceLock;

use bytes::Bytes;
use compact_str::CompactString;
use smallvec::SmallVec;
use thin_vec::ThinVec;

use super::map::ObjectBuilder;
use super::scan::plain_run;
use super::splice::{Element, Member, State};
use super::{Array, Map, Number, Value};

/// How deep arrays and objects may nest: serde_json's limit, so the two accept the same
/// documents, and a document cannot exhaust the stack.
const MAX_DEPTH: usize = 128;

thread_local! {
    /// How many members the last object read on this thread at each depth (1 to 8, the
    /// deeper ones sharing the last) had, plus one (0: none read yet). Events of one source
    /// repeat their shape, so the next object's entries are allocated once at their size,
    /// and become the object's without a copy.
    static LAST_OBJECT_LEN: std::cell::Cell<[u8; 8]> = const { std::cell::Cell::new([0; 8]) };

    /// The keys of the last object read at the top (depth 1) on this thread, in order, with
    /// their tags: its first [`INDEX_FROM`](super::INDEX_FROM) keys, or fewer where one was
    /// written with an escape or is too long to be inline. Only an object whose keys were
    /// distinct leaves them. Events of one source repeat their keys, so the next object's
    /// key is first compared with the one in its place: when the text is that key and its
    /// closing quote, the key is a copy of it and its tag is known, and while every key so
    /// far was the known one in its place, the key cannot be a duplicate.
    static LAST_KEYS: std::cell::Cell<Vec<KnownKey>> =
        const { std::cell::Cell::new(Vec::new()) };
}

/// A key of the last top object read (see [`LAST_KEYS`]), with its text as the reader
/// compares it with the text at a key: the key and its closing quote, as one or two words.
struct KnownKey {
    tag: u64,
    key: CompactString,
    /// The key's length (kept apart: a `CompactString`'s is decoded from its last byte).
    len: usize,
    /// The first eight bytes of the key and its quote (zeros past them when fewer).
    head: u64,
    /// When the key and its quote are eight bytes or fewer, the mask of their bytes in a
    /// word; when more, up to sixteen, their last eight bytes; past sixteen, unused.
    tail: u64,
}

impl KnownKey {
    fn new(tag: u64, key: CompactString) -> KnownKey {
        let mut quoted = [0u8; 16];
        let n = key.len() + 1;
        let (head, tail) = match quoted.get_mut(..n) {
            Some(q) => {
                q[..n - 1].copy_from_slice(key.as_bytes());
                q[n - 1] = b'"';
                let word = |at: usize| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&quoted[at..at + 8]);
                    u64::from_le_bytes(w)
                };
                if n <= 8 {
                    (word(0), u64::MAX >> (8 * (8 - n)))
                } else {
                    (word(0), word(n - 8))
                }
            }
            None => (0, 0),
        };
        KnownKey {
            tag,
            len: key.len(),
            key,
            head,
            tail,
        }
    }
}

/// The place of `depth` (1 for the top) in [`LAST_OBJECT_LEN`].
fn depth_place(depth: usize) -> usize {
    depth.saturating_sub(1).min(7)
}

/// How many members to make room for in an object read at `depth` (1 for the top).
fn object_room(depth: usize) -> usize {
    match LAST_OBJECT_LEN.with(|l| l.get()[depth_place(depth)]) {
        // None read yet at this depth: a few.
        0 => 8,
        n => n as usize - 1,
    }
}

/// Notes that an object read at `depth` had `len` members (up to the size from which
/// objects are indexed, and copied into the index's map anyway).
fn remember_object_len(depth: usize, len: usize) {
    LAST_OBJECT_LEN.with(|l| {
        let mut lens = l.get();
        lens[depth_place(depth)] = len.min(super::INDEX_FROM + 1) as u8 + 1;
        l.set(lens);
    });
}

/// What a key given twice in one object reads as (JSON leaves it to the reader).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DuplicateKeys {
    /// The first value: what GJSON reads, and so Substation. Messages are read this way.
    First,
    /// The last value, in the first key's place: what serde_json reads.
    Last,
}

/// The JSON value `src` holds (JSON white space around it allowed), or `None` when it is
/// not one JSON value; a key given twice reads as its first value, as GJSON reads it. Each
/// object and array keeps its text (see [`Map::text`](super::Map::text)).
pub fn from_bytes(src: &Bytes) -> Option<Value> {
    from_bytes_with(src, DuplicateKeys::First)
}

/// [`from_bytes`], with a key given twice read as `duplicates` says.
pub fn from_bytes_with(src: &Bytes, duplicates: DuplicateKeys) -> Option<Value> {
    read(src, 0, 1, duplicates == DuplicateKeys::First)
}

/// [`from_bytes_with`] building every object and array at once, none left [`Unread`]:
/// what a document reads as, for comparing the two readings (tests, the fuzz target).
#[doc(hidden)]
pub fn from_slice_all_read(b: &[u8], duplicates: DuplicateKeys) -> Option<Value> {
    let src = Bytes::copy_from_slice(b);
    read(&src, 0, usize::MAX, duplicates == DuplicateKeys::First)
}

/// The one value in `src` (white space around it allowed), read inside `depth` containers,
/// its objects and arrays built down to depth `built_to` and left [`Unread`] below.
fn read(src: &Bytes, depth: usize, built_to: usize, keep_first: bool) -> Option<Value> {
    // Checked once as a whole: invalid UTF-8 is not JSON wherever it is (outside strings
    // every byte must be ASCII), and strings are then slices of valid text.
    let text = std::str::from_utf8(src).ok()?;
    let mut p = Reader {
        text,
        src,
        i: 0,
        depth,
        built_to,
        keep_first,
    };
    let v = p.value().ok()?;
    p.skip_space();
    (p.i == text.len()).then_some(v)
}

/// An object or array the reader checked but did not build: its text (held by the value
/// it stands for) is read on first use, as it would have been read in its place. The
/// reading is kept here, so that a value read through a shared reference stays read; a
/// change takes it out and makes it the value's own.
#[derive(Clone)]
pub(super) struct Unread<T> {
    read: OnceLock<T>,
    /// How many objects and arrays enclose it, itself included (1: the top).
    depth: u8,
    keep_first: bool,
}

impl<T> Unread<T> {
    fn new(depth: usize, keep_first: bool) -> Unread<T> {
        Unread {
            read: OnceLock::new(),
            // Under `MAX_DEPTH`, which the reader checked.
            depth: depth.min(MAX_DEPTH) as u8,
            keep_first,
        }
    }

    /// The value `text` reads as here, read now if it was not yet.
    pub(super) fn get(&self, text: &Bytes, of: fn(Value) -> Option<T>) -> &T
    where
        T: Default,
    {
        self.read
            .get_or_init(|| Unread::read_text_as(text, self.depth, self.keep_first, of))
    }

    /// The value `text` reads as here, taken out.
    pub(super) fn take(self, text: &Bytes, of: fn(Value) -> Option<T>) -> T
    where
        T: Default,
    {
        match self.read.into_inner() {
            Some(v) => v,
            None => Unread::read_text_as(text, self.depth, self.keep_first, of),
        }
    }

    /// Whether it has been read (tests).
    #[cfg(test)]
    pub(super) fn is_read(&self) -> bool {
        self.read.get().is_some()
    }

    fn read_text_as(text: &Bytes, depth: u8, keep_first: bool, of: fn(Value) -> Option<T>) -> T
    where
        T: Default,
    {
        let depth = usize::from(depth);
        // Read whole: were the containers inside it left unread in turn, a path down a
        // chain of them would pass over the bytes below each once per level.
        let value = read(text, depth.saturating_sub(1), usize::MAX, keep_first).and_then(of);
        // The reader checked this text as it reads it (`skip_value` accepts exactly what
        // `value` does, which the tests and the `json_unread` fuzz target hold it to), so
        // it reads; the empty value is for a broken build, not for any input.
        debug_assert!(
            value.is_some(),
            "text the reader passed as JSON does not read"
        );
        value.unwrap_or_default()
    }
}

/// [`from_bytes`] of a slice; the text is copied once, so that objects can keep theirs.
pub fn from_slice(b: &[u8]) -> Option<Value> {
    from_bytes(&Bytes::copy_from_slice(b))
}

/// [`from_bytes_with`] of a slice.
pub fn from_slice_with(b: &[u8], duplicates: DuplicateKeys) -> Option<Value> {
    from_bytes_with(&Bytes::copy_from_slice(b), duplicates)
}

/// Not JSON (where is not kept: callers say what was not JSON).
struct Invalid;

type Parsed<T> = Result<T, Invalid>;

struct Reader<'a> {
    /// The input, checked to be UTF-8.
    text: &'a str,
    src: &'a Bytes,
    i: usize,
    depth: usize,
    /// Objects and arrays at depths past this are checked and left [`Unread`].
    built_to: usize,
    /// A key given twice keeps its first value (GJSON's reading) instead of its last.
    keep_first: bool,
}

impl<'a> Reader<'a> {
    #[inline]
    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.as_bytes().get(self.i) {
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.i).copied()
    }

    fn value(&mut self) -> Parsed<Value> {
        self.skip_space();
        match self.peek().ok_or(Invalid)? {
            b'{' if self.depth < self.built_to => self.object(),
            b'[' if self.depth < self.built_to => self.array(),
            b'{' => {
                let (text, depth) = self.skipped()?;
                Ok(Value::Object(Map::unread(
                    text,
                    Unread::new(depth, self.keep_first),
                )))
            }
            b'[' => {
                let (text, depth) = self.skipped()?;
                Ok(Value::Array(Array::unread(
                    text,
                    Unread::new(depth, self.keep_first),
                )))
            }
            b'"' => self.string_value(),
            b't' => self.word(b"true", Value::Bool(true)),
            b'f' => self.word(b"false", Value::Bool(false)),
            b'n' => self.word(b"null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Invalid),
        }
    }

    /// A member's value at `i` (after white space): strings and numbers, most members'
    /// values, read here rather than through [`Reader::value`]'s call.
    #[inline(always)]
    fn member_value(&mut self) -> Parsed<Value> {
        match self.peek() {
            Some(b'"') => self.string_value(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.value(),
        }
    }

    /// The string at `"` as a value: one with no escapes copied straight from the input.
    #[inline(always)]
    fn string_value(&mut self) -> Parsed<Value> {
        let b = self.text.as_bytes();
        let start = self.i + 1;
        let end = plain_run(b, start);
        if b.get(end) == Some(&b'"') {
            self.i = end + 1;
            // SAFETY: `text` is a `str`; `start` is just past a quote and `end` is at one
            // (`plain_run` returns a place within `b`, at or after `start`), so both are
            // within it and on character boundaries (a quote is ASCII, never inside a
            // character's encoding).
            let s = unsafe { self.text.get_unchecked(start..end) };
            return Ok(Value::String(CompactString::from(s)));
        }
        self.escaped_string_value()
    }

    /// [`Reader::string_value`] of a string with an escape (or not a string).
    #[inline(never)]
    fn escaped_string_value(&mut self) -> Parsed<Value> {
        Ok(Value::String(CompactString::from(self.string()?)))
    }

    /// The object or array at `i`, checked and passed over: its text, and its depth.
    fn skipped(&mut self) -> Parsed<(Bytes, usize)> {
        let start = self.i;
        let depth = self.depth + 1;
        self.skip_value()?;
        Ok((self.src.slice(start..self.i), depth))
    }

    /// Past the value at `i` (after any white space), building nothing: it accepts exactly
    /// what [`Reader::value`] accepts, so that a value left unread reads when it is used.
    fn skip_value(&mut self) -> Parsed<()> {
        self.skip_space();
        match self.peek().ok_or(Invalid)? {
            b'{' => self.skip_object(),
            b'[' => self.skip_array(),
            b'"' => self.skip_string(),
            b't' => self.skip_word(b"true"),
            b'f' => self.skip_word(b"false"),
            b'n' => self.skip_word(b"null"),
            b'-' | b'0'..=b'9' => self.skip_number(),
            _ => Err(Invalid),
        }
    }

    fn skip_word(&mut self, w: &[u8]) -> Parsed<()> {
        self.word(w, Value::Null).map(drop)
    }

    /// [`Reader::object`], building nothing.
    fn skip_object(&mut self) -> Parsed<()> {
        self.enter()?;
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.i += 1;
        } else {
            loop {
                self.skip_space();
                if self.peek() != Some(b'"') {
                    return Err(Invalid);
                }
                self.skip_string()?;
                self.skip_space();
                if self.peek() != Some(b':') {
                    return Err(Invalid);
                }
                self.i += 1;
                self.skip_value()?;
                if self.after_element(b'}')? {
                    break;
                }
            }
            self.i += 1;
        }
        self.depth -= 1;
        Ok(())
    }

    /// [`Reader::array`], building nothing.
    fn skip_array(&mut self) -> Parsed<()> {
        self.enter()?;
        self.skip_space();
        if self.peek() == Some(b']') {
            self.i += 1;
        } else {
            loop {
                self.skip_value()?;
                if self.after_element(b']')? {
                    break;
                }
            }
            self.i += 1;
        }
        self.depth -= 1;
        Ok(())
    }

    /// [`Reader::string`], building nothing: the same escapes and control bytes refused.
    #[inline]
    fn skip_string(&mut self) -> Parsed<()> {
        let b = self.text.as_bytes();
        let i = plain_run(b, self.i + 1);
        if b.get(i) == Some(&b'"') {
            self.i = i + 1;
            return Ok(());
        }
        self.skip_string_from(i)
    }

    /// [`Reader::skip_string`] from `i`, where its plain run stopped short of the quote.
    #[inline(never)]
    fn skip_string_from(&mut self, mut i: usize) -> Parsed<()> {
        let b = self.text.as_bytes();
        loop {
            match b.get(i) {
                Some(b'"') => {
                    self.i = i + 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    i += 1;
                    match b.get(i).ok_or(Invalid)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 1,
                        b'u' => {
                            unicode_escape(b, &mut i)?;
                        }
                        _ => return Err(Invalid),
                    }
                }
                // A control byte, or the end.
                _ => return Err(Invalid),
            }
            i = plain_run(b, i);
        }
    }

    /// [`Reader::number`], building nothing. A number is refused only for its form or for
    /// being out of `f64`'s range, which only an exponent or an integer part of over 300
    /// digits can take it past: only those are converted to tell.
    fn skip_number(&mut self) -> Parsed<()> {
        let start = self.i;
        let form = number_form(self.text.as_bytes(), start)?;
        self.i = form.end;
        if form.exponent || form.int_end - form.int_start > 300 {
            let f: f64 = self.text[start..form.end].parse().map_err(|_| Invalid)?;
            if !f.is_finite() {
                return Err(Invalid);
            }
        }
        Ok(())
    }

    fn word(&mut self, w: &[u8], v: Value) -> Parsed<Value> {
        if self.text.as_bytes()[self.i..].starts_with(w) {
            self.i += w.len();
            Ok(v)
        } else {
            Err(Invalid)
        }
    }

    fn enter(&mut self) -> Parsed<()> {
        self.depth += 1;
        if self.depth >= MAX_DEPTH {
            return Err(Invalid);
        }
        self.i += 1;
        Ok(())
    }

    fn array(&mut self) -> Parsed<Value> {
        let start = self.i;
        self.enter()?;
        let mut out = ThinVec::new();
        // Where each element is, for splicing changes in later (`splice.rs`).
        let mut elements: SmallVec<[Element; 16]> = SmallVec::new();
        self.skip_space();
        if self.peek() == Some(b']') {
            self.i += 1;
        } else {
            loop {
                self.skip_space();
                let element_start = self.i - start;
                out.push(self.value()?);
                elements.push(Element::new(element_start, self.i - start));
                if self.after_element(b']')? {
                    break;
                }
            }
            self.i += 1;
        }
        self.depth -= 1;
        if u32::try_from(self.i - start).is_err() {
            return Ok(Value::Array(out.into_iter().collect()));
        }
        Ok(Value::Array(Array::with_text(
            out,
            self.src.slice(start..self.i),
            elements.into_vec(),
        )))
    }

    /// After an element of an array or object: past a comma, `false`; at `close`, `true`.
    fn after_element(&mut self, close: u8) -> Parsed<bool> {
        self.skip_space();
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                Ok(false)
            }
            Some(c) if c == close => Ok(true),
            _ => Err(Invalid),
        }
    }

    fn object(&mut self) -> Parsed<Value> {
        let start = self.i;
        self.enter()?;
        let top = self.depth == 1;
        let room = object_room(self.depth);
        let mut object = ObjectBuilder::new(self.keep_first, room);
        // Where each member is, for splicing changes in later (`splice.rs`). GJSON matches
        // a key written with an escape by its value, so SJSON edits it as any other.
        let mut members: Vec<Member> = Vec::with_capacity(room);
        // The last top object's keys (see `LAST_KEYS`), and whether each of this one's keys
        // so far was one of those, in their order (some may be missing: they are distinct).
        let mut known = if top {
            LAST_KEYS.with(std::cell::Cell::take)
        } else {
            Vec::new()
        };
        let mut all_known = true;
        // Where in `known` the next key is looked for first.
        let mut next_known = 0;
        let mut any_escaped = false;
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.i += 1;
        } else {
            loop {
                self.skip_space();
                if self.peek() != Some(b'"') {
                    return Err(Invalid);
                }
                let key_start = self.i - start;
                let (key, known_tag, escaped) = match self.known_key(&known, next_known) {
                    Some(at) => {
                        next_known = at + 1;
                        let k = &known[at];
                        self.i += k.len + 2;
                        (k.key.clone(), Some(k.tag), false)
                    }
                    None => {
                        all_known = false;
                        match self.string()? {
                            Cow::Borrowed(k) => (CompactString::from(k), None, false),
                            Cow::Owned(k) => (CompactString::from(k), None, true),
                        }
                    }
                };
                any_escaped |= escaped;
                self.skip_space();
                if self.peek() != Some(b':') {
                    return Err(Invalid);
                }
                self.i += 1;
                self.skip_space();
                let value_start = self.i - start;
                let value = self.member_value()?;
                let mut member = Member::new(key_start, value_start, self.i - start, escaped);
                match known_tag {
                    Some(tag) if all_known => object.push_distinct(tag, key, value),
                    _ => {
                        if !object.push(key, value) {
                            member.state = State::Shadowed;
                        }
                    }
                }
                members.push(member);
                if self.after_element(b'}')? {
                    break;
                }
            }
            self.i += 1;
        }
        remember_object_len(self.depth, members.len());
        self.depth -= 1;
        let mut m = object.finish();
        if top {
            if !all_known && !any_escaped && members.len() == m.len() {
                // A new shape: its keys are the ones to expect next.
                known.clear();
                known.extend(
                    m.entries
                        .iter()
                        .take(super::INDEX_FROM)
                        .take_while(|e| !e.key.is_heap_allocated())
                        .map(|e| KnownKey::new(e.tag, e.key.clone())),
                );
            }
            LAST_KEYS.with(|k| k.set(known));
        }
        // A key given twice is one entry, its later members shadowed; read last-wins (as
        // serde_json, not GJSON), SJSON's edits of such text are not followed.
        let members = ((self.keep_first || members.len() == m.len())
            && u32::try_from(self.i - start).is_ok())
        .then_some(members);
        m.set_text(self.src.slice(start..self.i), members);
        Ok(Value::Object(m))
    }

    /// Where in `known` (the last top object's keys) the key at `"` is, looked for from
    /// `from` on over the next few: events of one source share most keys, in order, with
    /// some left out (an `errorCode` only on a failed call, say).
    #[inline]
    fn known_key(&self, known: &[KnownKey], from: usize) -> Option<usize> {
        match known.get(from) {
            Some(k) if self.key_is(k) => Some(from),
            Some(_) => self.known_key_further(known, from + 1),
            None => None,
        }
    }

    /// [`Reader::known_key`] past its first place, over the next few.
    #[inline(never)]
    fn known_key_further(&self, known: &[KnownKey], from: usize) -> Option<usize> {
        const LOOK_AHEAD: usize = 3;
        let to = known.len().min(from + LOOK_AHEAD);
        (from..to).find(|&at| self.key_is(&known[at]))
    }

    /// Whether the text at `"` is the string `k.key` as it is, closing quote and all.
    /// The key holds no quote, backslash or control byte (it was read without escapes), so
    /// such text is a string with no escapes, and its value is the key. Compared a word at
    /// a time where the key and its quote fit two words and the text has those at hand.
    #[inline]
    fn key_is(&self, k: &KnownKey) -> bool {
        let b = self.text.as_bytes();
        let from = self.i + 1;
        let n = k.len + 1;
        let word = |at: usize| {
            b.get(at..at + 8)
                .and_then(<[u8]>::first_chunk::<8>)
                .map(|w| u64::from_le_bytes(*w))
        };
        if n <= 8 {
            if let Some(w) = word(from) {
                return w & k.tail == k.head;
            }
        } else if n <= 16
            && let (Some(head), Some(tail)) = (word(from), word(from + n - 8))
        {
            return head == k.head && tail == k.tail;
        }
        self.key_is_slowly(&k.key)
    }

    /// [`Reader::key_is`] byte by byte.
    #[inline(never)]
    fn key_is_slowly(&self, key: &str) -> bool {
        let from = self.i + 1;
        let n = key.len();
        match self.text.as_bytes().get(from..from + n + 1) {
            Some(text) => text[n] == b'"' && &text[..n] == key.as_bytes(),
            None => false,
        }
    }

    /// A string at `"`, unescaped: borrowed from the input when it has no escapes.
    fn string(&mut self) -> Parsed<Cow<'a, str>> {
        self.i += 1;
        let start = self.i;
        let b = self.text.as_bytes();
        let mut i = plain_run(b, start);
        match b.get(i) {
            Some(b'"') => {
                self.i = i + 1;
                // Both ends are ASCII (a quote), so on character boundaries.
                return Ok(Cow::Borrowed(&self.text[start..i]));
            }
            Some(b'\\') => {}
            _ => return Err(Invalid),
        }
        // Escapes: the string is built.
        let mut out = String::with_capacity(i - start + 16);
        out.push_str(&self.text[start..i]);
        loop {
            match b.get(i) {
                Some(b'"') => break,
                Some(b'\\') => {
                    i += 1;
                    let c = match b.get(i).ok_or(Invalid)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            out.push(unicode_escape(b, &mut i)?);
                            continue;
                        }
                        _ => return Err(Invalid),
                    };
                    out.push(c);
                    i += 1;
                }
                Some(_) => {
                    let run = i;
                    i = plain_run(b, i);
                    if i == run {
                        // A control byte: JSON strings may not hold them raw.
                        return Err(Invalid);
                    }
                    out.push_str(&self.text[run..i]);
                }
                None => return Err(Invalid),
            }
        }
        self.i = i + 1;
        Ok(Cow::Owned(out))
    }

    /// A number, as serde_json reads it: integers that fit `u64` (or, negative, `i64`)
    /// exactly, anything else as the nearest `f64` (out of range is not JSON); `-0` is the
    /// float `-0.0`. Its digits are converted as they are scanned: an integer of up to 19
    /// digits, and most floats short enough (see [`exact_float`]), need no second pass.
    #[inline]
    fn number(&mut self) -> Parsed<Value> {
        let b = self.text.as_bytes();
        let start = self.i;
        let negative = b.get(start) == Some(&b'-');
        let int_start = start + usize::from(negative);
        let mut i = int_start;
        // The digits so far as one integer: exact while there are at most 19 of them
        // (10^19 - 1 < 2^64); wrapping past that, when it is not used.
        let mut digits = 0u64;
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digit_run(b, i, &mut digits),
            _ => return Err(Invalid),
        }
        let int_len = i - int_start;
        if let Some(b'.' | b'e' | b'E') = b.get(i) {
            return self.float(start, i, negative, int_len, digits);
        }
        self.i = i;
        let n = if int_len <= 19 {
            Some(digits)
        } else {
            integer(&b[int_start..i])
        };
        if let Some(n) = n {
            if !negative {
                return Ok(Value::Number(n.into()));
            }
            let neg = (n as i64).wrapping_neg();
            // `-0`, and magnitudes past `i64`, are floats (as serde_json has them).
            if neg < 0 {
                return Ok(Value::Number(neg.into()));
            }
        }
        self.float_text(start, i)
    }

    /// [`Reader::number`] from its fraction or exponent at `i` on: a float, whose integer
    /// part had `int_len` digits, `digits` as an integer so far.
    fn float(
        &mut self,
        start: usize,
        mut i: usize,
        negative: bool,
        int_len: usize,
        mut digits: u64,
    ) -> Parsed<Value> {
        let b = self.text.as_bytes();
        let mut fraction_len = 0;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let fraction_start = i;
            i = digit_run(b, i, &mut digits);
            fraction_len = i - fraction_start;
            if fraction_len == 0 {
                return Err(Invalid);
            }
        }
        // The exponent as written, held to a bound past which no float is exact anyway.
        let mut exponent = 0i64;
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            let exponent_negative = b.get(i) == Some(&b'-');
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let exponent_start = i;
            while let Some(&d) = b.get(i)
                && d.is_ascii_digit()
            {
                if exponent < 1 << 20 {
                    exponent = exponent * 10 + i64::from(d - b'0');
                }
                i += 1;
            }
            if i == exponent_start {
                return Err(Invalid);
            }
            if exponent_negative {
                exponent = -exponent;
            }
        }
        self.i = i;
        if int_len + fraction_len <= 19 {
            // At most 19 digits: `digits` is exact. The value is digits * 10^power.
            let power = i64::try_from(fraction_len).map_or(i64::MIN, |f| exponent - f);
            if let Some(f) = exact_float(digits, power) {
                let f = if negative { -f } else { f };
                return Number::from_f64(f).map(Value::Number).ok_or(Invalid);
            }
        }
        self.float_text(start, i)
    }

    /// The number `text[start..end]` (as JSON writes one) read as the nearest `f64`, or not
    /// JSON when it is out of range.
    #[inline(never)]
    fn float_text(&self, start: usize, end: usize) -> Parsed<Value> {
        let f: f64 = self.text[start..end].parse().map_err(|_| Invalid)?;
        Number::from_f64(f)
            .filter(|_| f.is_finite())
            .map(Value::Number)
            .ok_or(Invalid)
    }
}

/// Past the run of decimal digits at `b[i..]` (none or more), each taken into `digits`
/// (`digits * 10 + digit`, wrapping: exact while it holds at most 19 digits). Eight bytes
/// at a time while the text has them, then byte by byte.
#[inline(always)]
fn digit_run(b: &[u8], mut i: usize, digits: &mut u64) -> usize {
    while let Some(word) = b.get(i..i + 8).and_then(<[u8]>::first_chunk::<8>) {
        let (value, n) = eight_digits(u64::from_le_bytes(*word));
        *digits = digits.wrapping_mul(POWERS_OF_TEN[n]).wrapping_add(value);
        i += n;
        if n < 8 {
            return i;
        }
    }
    while let Some(&d) = b.get(i)
        && d.is_ascii_digit()
    {
        *digits = digits.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
        i += 1;
    }
    i
}

/// 10^0 to 10^8.
const POWERS_OF_TEN: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The decimal digits that eight bytes (read little-endian: the first byte lowest) begin
/// with: their value, and how many (0 to 8).
#[inline(always)]
fn eight_digits(word: u64) -> (u64, usize) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // Each byte less '0': a digit's is its value. A byte below '0' borrows from the next,
    // but only bytes after it (past the first non-digit) are changed by that.
    let d = word.wrapping_sub(ONES * u64::from(b'0'));
    // A byte's top bit is set when it is below '0' (wrapped past 0x80) or above '9'
    // (0x76 takes 10 and more to 0x80 or past; a carry out of it again only reaches
    // bytes after it). A digit's stays clear (9 + 0x76 = 0x7f).
    let stops = (d | d.wrapping_add(ONES * 0x76)) & (ONES * 0x80);
    let n = (stops.trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // The digits moved to the top bytes, zeros below them: the number written on eight
    // digits with leading zeros, the first (most significant) in the lowest byte. Each
    // step makes pairs of lanes one lane of twice the width: the lower lane (more
    // significant) times its scale, plus the upper.
    let v = d << (8 * (8 - n));
    let v = (v.wrapping_mul(10).wrapping_add(v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = (v.wrapping_mul(100).wrapping_add(v >> 16)) & 0x0000_ffff_0000_ffff;
    let v = (v.wrapping_mul(10_000).wrapping_add(v >> 32)) & 0xffff_ffff;
    (v, n)
}

/// The powers of ten an `f64` holds exactly (5^22 < 2^53).
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// `digits * 10^power` as the nearest `f64`, when one multiplication or division gives it:
/// `digits` at most 2^53 (an `f64` holds it exactly) and `power` within ±22 (so does it
/// 10^power). Both operands exact, the one correctly rounded IEEE operation rounds the
/// exact value, as Rust's own reader does (it takes this same path for these); `None`
/// for any other, which is read from its text.
#[inline]
fn exact_float(digits: u64, power: i64) -> Option<f64> {
    if digits > 1 << 53 {
        return None;
    }
    // Exact: at most 2^53.
    let m = digits as f64;
    match usize::try_from(power) {
        Ok(p) => EXACT_POWERS_OF_TEN.get(p).map(|t| m * t),
        Err(_) => EXACT_POWERS_OF_TEN
            .get(usize::try_from(power.unsigned_abs()).ok()?)
            .map(|t| m / t),
    }
}

/// Where a number's parts are, for [`Reader::skip_number`] to check.
struct NumberForm {
    /// Past its last byte.
    end: usize,
    /// Its integer part's digits.
    int_start: usize,
    int_end: usize,
    /// Whether it has an exponent.
    exponent: bool,
}

/// The number at `b[start]` (a `-` or a digit), as JSON writes one, or not a number.
#[inline]
fn number_form(b: &[u8], start: usize) -> Parsed<NumberForm> {
    let mut i = start;
    if b[i] == b'-' {
        i += 1;
    }
    let int_start = i;
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
        }
        _ => return Err(Invalid),
    }
    let int_end = i;
    if b.get(i) == Some(&b'.') {
        i = digits(b, i + 1)?;
    }
    let exponent = matches!(b.get(i), Some(b'e' | b'E'));
    if exponent {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        i = digits(b, i)?;
    }
    Ok(NumberForm {
        end: i,
        int_start,
        int_end,
        exponent,
    })
}

/// Past the one or more decimal digits at `i` (a fraction's or an exponent's).
fn digits(b: &[u8], start: usize) -> Parsed<usize> {
    let mut i = start;
    while let Some(b'0'..=b'9') = b.get(i) {
        i += 1;
    }
    if i == start { Err(Invalid) } else { Ok(i) }
}

/// Decimal digits as a `u64`, or `None` when they overflow it.
fn integer(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// A `\u` escape and its four hex digits at `b[*i] == b'u'` (with its low half when it is a
/// surrogate pair), moving `i`
/// past it. A lone surrogate is not JSON to serde_json, so it is not here either.
fn unicode_escape(b: &[u8], i: &mut usize) -> Parsed<char> {
    let hi = hex4(b, *i + 1)?;
    *i += 5;
    let code = match hi {
        0xD800..=0xDBFF => {
            if b.get(*i) != Some(&b'\\') || b.get(*i + 1) != Some(&b'u') {
                return Err(Invalid);
            }
            let lo = hex4(b, *i + 2)?;
            if !(0xDC00..=0xDFFF).contains(&lo) {
                return Err(Invalid);
            }
            *i += 6;
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        }
        0xDC00..=0xDFFF => return Err(Invalid),
        _ => hi,
    };
    char::from_u32(code).ok_or(Invalid)
}

fn hex4(b: &[u8], at: usize) -> Parsed<u32> {
    let digits = b.get(at..at + 4).ok_or(Invalid)?;
    digits.iter().try_fold(0u32, |n, &d| {
        let v = (d as char).to_digit(16).ok_or(Invalid)?;
        Ok(n << 4 | v)
    })
}

/// The JSON value `src` begins with (after JSON white space), whatever bytes follow it, and
/// where it starts and ends: GJSON reads a path in the first value of data that holds more
/// (`{"a":1} x`). Read as [`from_bytes`] reads a value; the bytes after it need not be text.
pub fn leading_value(src: &Bytes) -> Option<(Value, usize, usize)> {
    let text = match std::str::from_utf8(src) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&src[..e.valid_up_to()]).ok()?,
    };
    let mut p = Reader {
        text,
        src,
        i: 0,
        depth: 0,
        built_to: 1,
        keep_first: true,
    };
    p.skip_space();
    let start = p.i;
    let v = p.value().ok()?;
    Some((v, start, p.i))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod unread_tests;
