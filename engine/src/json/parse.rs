//! JSON text to [`Value`], keeping the text of each object.
//!
//! Substation works on the JSON text itself (GJSON reads it, SJSON splices into it), so an
//! object nobody changed keeps its spacing and number forms on the way out, and
//! `object_to_string` of it is its text as written. serde_json's reader gives no positions,
//! so this reader is ours: it accepts exactly what `serde_json::from_slice` accepts (the
//! tests compare the two on edge cases and on generated documents, and a fuzz target does
//! the same), builds the same values, and records each object's text as a slice of the
//! input [`Bytes`] (no copy: a reference count).

use std::borrow::Cow;

use bytes::Bytes;
use compact_str::CompactString;
use smallvec::SmallVec;
use thin_vec::ThinVec;

use super::map::ObjectBuilder;
use super::splice::{Element, Member, State};
use super::write::escapes_in;
use super::{Array, Number, Value};

/// How deep arrays and objects may nest: serde_json's limit, so the two accept the same
/// documents, and a document cannot exhaust the stack.
const MAX_DEPTH: usize = 128;

thread_local! {
    /// How many members the last object read on this thread at each depth (1 to 8, the
    /// deeper ones sharing the last) had, plus one (0: none read yet). Events of one source
    /// repeat their shape, so the next object's entries are allocated once at their size,
    /// and become the object's without a copy.
    static LAST_OBJECT_LEN: std::cell::Cell<[u8; 8]> = const { std::cell::Cell::new([0; 8]) };
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
    // Checked once as a whole: invalid UTF-8 is not JSON wherever it is (outside strings
    // every byte must be ASCII), and strings are then slices of valid text.
    let text = std::str::from_utf8(src).ok()?;
    let mut p = Reader {
        text,
        src,
        i: 0,
        depth: 0,
        keep_first: duplicates == DuplicateKeys::First,
    };
    let v = p.value().ok()?;
    p.skip_space();
    (p.i == text.len()).then_some(v)
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
    /// A key given twice keeps its first value (GJSON's reading) instead of its last.
    keep_first: bool,
}

/// For each byte: whether a string's plain run ends at it (`"`, `\` or a control byte).
const STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

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
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => Ok(Value::String(CompactString::from(self.string()?))),
            b't' => self.word(b"true", Value::Bool(true)),
            b'f' => self.word(b"false", Value::Bool(false)),
            b'n' => self.word(b"null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Invalid),
        }
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
        let room = object_room(self.depth);
        let mut object = ObjectBuilder::new(self.keep_first, room);
        // Where each member is, for splicing changes in later (`splice.rs`). GJSON matches
        // a key written with an escape by its value, so SJSON edits it as any other.
        let mut members: Vec<Member> = Vec::with_capacity(room);
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
                let (key, escaped) = match self.string()? {
                    Cow::Borrowed(k) => (CompactString::from(k), false),
                    Cow::Owned(k) => (CompactString::from(k), true),
                };
                self.skip_space();
                if self.peek() != Some(b':') {
                    return Err(Invalid);
                }
                self.i += 1;
                self.skip_space();
                let value_start = self.i - start;
                let value = self.value()?;
                let mut member = Member::new(key_start, value_start, self.i - start, escaped);
                if !object.push(key, value) {
                    member.state = State::Shadowed;
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
        // A key given twice is one entry, its later members shadowed; read last-wins (as
        // serde_json, not GJSON), SJSON's edits of such text are not followed.
        let members = ((self.keep_first || members.len() == m.len())
            && u32::try_from(self.i - start).is_ok())
        .then_some(members);
        m.set_text(self.src.slice(start..self.i), members);
        Ok(Value::Object(m))
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
    /// float `-0.0`.
    fn number(&mut self) -> Parsed<Value> {
        let b = self.text.as_bytes();
        let start = self.i;
        let mut i = start;
        let negative = b[i] == b'-';
        if negative {
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
        let mut float = false;
        if b.get(i) == Some(&b'.') {
            i = digits(b, i + 1)?;
            float = true;
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            i = digits(b, i)?;
            float = true;
        }
        self.i = i;
        if !float && let Some(n) = integer(&b[int_start..int_end]) {
            if !negative {
                return Ok(Value::Number(n.into()));
            }
            let neg = (n as i64).wrapping_neg();
            // `-0`, and magnitudes past `i64`, are floats (as serde_json has them).
            if neg < 0 {
                return Ok(Value::Number(neg.into()));
            }
        }
        let f: f64 = self.text[start..i].parse().map_err(|_| Invalid)?;
        Number::from_f64(f)
            .filter(|_| f.is_finite())
            .map(Value::Number)
            .ok_or(Invalid)
    }
}

/// Where the run of plain string bytes from `i` ends: at a quote, a backslash, a control
/// byte or the end; eight bytes at a time while it can, the stop within a word found from
/// the lowest byte its mask flags (the mask is exact up to the first stop).
#[inline]
fn plain_run(b: &[u8], mut i: usize) -> usize {
    while let Some(word) = b.get(i..i + 8) {
        let stops = escapes_in(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        if stops != 0 {
            return i + (stops.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && !STRING_STOP[b[i] as usize] {
        i += 1;
    }
    i
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::tests::{Rng, first_wins};
    use crate::json::{Map, write_compact, write_json};

    /// serde_json's reading of `text`, the oracle.
    fn serde(text: &[u8]) -> Option<Value> {
        serde_json::from_slice(text).ok()
    }

    fn compact(v: &Value) -> String {
        let mut out = Vec::new();
        write_compact(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    /// Same acceptance, same value, same number types (written compact, `1` and `1.0`
    /// differ).
    fn agree(text: &[u8]) {
        let ours = from_slice_with(text, DuplicateKeys::Last);
        let theirs = serde(text);
        assert_eq!(
            ours.as_ref().map(compact),
            theirs.as_ref().map(compact),
            "{:?}",
            String::from_utf8_lossy(text)
        );
        assert_eq!(ours, theirs, "{:?}", String::from_utf8_lossy(text));
    }

    #[test]
    fn reads_what_serde_json_reads_table() {
        let cases: &[&[u8]] = &[
            b"",
            b" ",
            b"null",
            b" null ",
            b"nul",
            b"nulll",
            b"true",
            b"false",
            b"tru",
            b"0",
            b"-0",
            b"-",
            b"01",
            b"-01",
            b"1.",
            b".5",
            b"1.5",
            b"-1.5e3",
            b"1E5",
            b"1e+5",
            b"1e-5",
            b"1e",
            b"1e+",
            b"0.0",
            b"-0.0",
            b"1.50",
            b"123456789",
            b"18446744073709551615",
            b"18446744073709551616",
            b"-9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999999",
            b"1e308",
            b"1e309",
            b"-1e309",
            b"1e-400",
            b"-1e-400",
            b"0e99999999999999999999",
            b"1e99999999999999999999",
            b"4.9406564584124654e-324",
            b"2.2250738585072011e-308",
            b"0.1",
            b"1.7976931348623157e308",
            b"\"\"",
            b"\"a\"",
            b"\"a",
            b"a\"",
            b"\"\\\"\"",
            b"\"\\\\\"",
            b"\"\\/\"",
            b"\"\\b\\f\\n\\r\\t\"",
            b"\"\\x\"",
            b"\"\\u0041\"",
            b"\"\\u00e9\"",
            b"\"\\u00E9x\"",
            b"\"\\ud83d\\ude00\"",
            b"\"\\ud83d\"",
            b"\"\\ude00\"",
            b"\"\\ud83dx\"",
            b"\"\\ud83d\\u0041\"",
            b"\"\\u12\"",
            b"\"\\u12g4\"",
            b"\"\x01\"",
            b"\"a\tb\"",
            b"\"\x7f\"",
            "\"é\"".as_bytes(),
            b"\"\xff\"",
            b"\"\xc3\"",
            b"\"a\\n\xc3\xa9\"",
            b"\"\\n\xff\"",
            b"[]",
            b"[ ]",
            b"[1,2]",
            b"[1,]",
            b"[,1]",
            b"[1 2]",
            b"[",
            b"]",
            b"{}",
            b"{ }",
            b"{\"a\":1}",
            b"{\"a\" : 1 , \"b\" : [ 1 , { } ] }",
            b"{\"a\":1,}",
            b"{,}",
            b"{\"a\"}",
            b"{\"a\":}",
            b"{a:1}",
            b"{\"a\":1 \"b\":2}",
            b"{\"a\":1,\"a\":2}",
            b"{\"a\":1,\"b\":2,\"a\":3}",
            b"{\"\\u0061\":1,\"a\":2}",
            b"{1:1}",
            b"\t\r\n {\"a\":1}\n",
            b"{\"a\":1}x",
            b"{\"a\":1} {}",
            b"\x0c1",
            b"\x0b1",
            b"1 2",
            b"NaN",
            b"Infinity",
            b"-Infinity",
            b"+1",
            b"[1]]",
            b"{\"a\":{}}}",
            b"\xef\xbb\xbf{}",
            b"\"\\u0000\"",
            b"[true,false,null]",
            b"[tru]",
        ];
        for c in cases {
            agree(c);
        }
        // Nesting up to serde_json's limit and past it.
        for n in [1usize, 100, 126, 127, 128, 129, 1000] {
            agree(format!("{}{}", "[".repeat(n), "]".repeat(n)).as_bytes());
            let objects = format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
            agree(objects.as_bytes());
        }
        // A large object, with a duplicate past the point where it is indexed.
        let mut large: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        large.push("\"k3\":\"again\"".into());
        agree(format!("{{{}}}", large.join(",")).as_bytes());
    }

    const SPACE: &[&str] = &["", "", "", " ", "  ", "\n", "\t", "\r\n  "];
    const SCALARS: &[&str] = &[
        "0",
        "-0",
        "1",
        "-1",
        "1.5",
        "1.50",
        "1e3",
        "-2.5E-3",
        "123456789012345678901",
        "9223372036854775807",
        "-9223372036854775808",
        "0.1",
        "true",
        "false",
        "null",
        "\"\"",
        "\"a b\"",
        "\"\\u00e9\\n\"",
        "\"é\"",
        "\"\\ud83d\\ude00\"",
        "\"\\\"q\\\"\"",
        "\"\\/\"",
    ];
    const KEYS: &[&str] = &["a", "b", "ab", "abcdefgh", "abcdefgX", "", "é", "a\\u0062"];

    /// `open`, up to `most - 1` elements each written by `element` (with random white
    /// space around the commas), `close`.
    fn container(
        r: &mut Rng,
        out: &mut String,
        (open, close, most): (char, char, usize),
        mut element: impl FnMut(&mut Rng, &mut String),
    ) {
        out.push(open);
        for i in 0..r.below(most) {
            out.push_str(r.pick(SPACE));
            if i > 0 {
                out.push(',');
                out.push_str(r.pick(SPACE));
            }
            element(r, out);
        }
        out.push_str(r.pick(SPACE));
        out.push(close);
    }

    fn document(r: &mut Rng, depth: usize, out: &mut String) {
        match if depth > 4 { 2 } else { r.below(3) } {
            0 => container(r, out, ('{', '}', 5), |r, out| {
                out.push('"');
                out.push_str(r.pick(KEYS));
                out.push('"');
                out.push_str(r.pick(SPACE));
                out.push(':');
                out.push_str(r.pick(SPACE));
                document(r, depth + 1, out);
            }),
            1 => container(r, out, ('[', ']', 4), |r, out| document(r, depth + 1, out)),
            _ => out.push_str(r.pick(SCALARS)),
        }
    }

    #[test]
    fn a_string_stops_where_its_first_quote_escape_or_control_byte_is() {
        // Each stop at every place of the first three words (a word is read at once and the
        // stop found from its mask), after plain ASCII, after UTF-8, and followed by a
        // second stop in the same word: read as serde_json reads it.
        let stops: &[&str] = &["\"", "\\n", "\\u00e9", "\u{1}", "\u{1f}", "\"\""];
        for prefix_of in ["a", "é"] {
            for n in 0..24 {
                let prefix = prefix_of.repeat(n);
                for stop in stops {
                    for after in ["", "b\"", "\\t\"", "\""] {
                        let text = format!("\"{prefix}{stop}{after}");
                        agree(text.as_bytes());
                        agree(format!("[{text},1]").as_bytes());
                        agree(format!("{{{text}:{text}}}").as_bytes());
                    }
                }
            }
        }
    }

    #[test]
    fn generated_documents_and_their_mutations_read_as_serde_json_reads_them() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        const NOISE: &[u8] = b"{}[],:\" \\0-1e.tnu\x01\xc3";
        for _ in 0..3000 {
            let mut text = String::new();
            document(&mut r, 0, &mut text);
            agree(text.as_bytes());
            // Read as messages are, a key given twice is its first value (GJSON's reading).
            let first = from_slice(text.as_bytes());
            let oracle = first_wins(text.as_bytes());
            assert!(
                first.as_ref().map(compact) == oracle.as_ref().map(|j| j.to_string())
                    && first
                        .as_ref()
                        .zip(oracle.as_ref())
                        .is_none_or(|(v, j)| v == j),
                "{text}: {first:?} is not {oracle:?}"
            );
            // Each parsed object's text is its own JSON text.
            if let Some(v) = from_slice(text.as_bytes()) {
                let mut out = Vec::new();
                write_json(&mut out, &v);
                assert_eq!(from_slice(&out), Some(v), "{text}");
            }
            // Mutations: a byte removed, replaced or inserted, mostly invalid.
            let mut bytes = text.into_bytes();
            for _ in 0..3 {
                let at = r.below(bytes.len() + 1);
                match r.below(3) {
                    0 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    1 if at < bytes.len() => bytes[at] = NOISE[r.below(NOISE.len())],
                    _ => bytes.insert(at, NOISE[r.below(NOISE.len())]),
                }
                agree(&bytes);
            }
        }
    }

    #[test]
    fn objects_keep_their_text_until_they_change() {
        let text = b"{ \"a\" : { \"b\" : [ 1.50 , 2 ] } , \"c\" : {\"d\": 1e3} }";
        let v = from_slice(text).unwrap();
        let written = |v: &Value| {
            let mut out = Vec::new();
            write_json(&mut out, v);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(written(&v), std::str::from_utf8(text).unwrap());
        assert_eq!(written(&v["a"]), "{ \"b\" : [ 1.50 , 2 ] }");
        assert_eq!(compact(&v), r#"{"a":{"b":[1.5,2]},"c":{"d":1000.0}}"#);
        // A change inside `a` is spliced into the text of `a` and of the root (`splice.rs`).
        let mut changed = v.clone();
        let Value::Object(root) = &mut changed else {
            unreachable!()
        };
        let Some(Value::Object(a)) = root.get_mut("a") else {
            unreachable!()
        };
        a.insert("x", Value::Null);
        assert_eq!(
            written(&changed),
            r#"{ "a" : { "b" : [ 1.50 , 2 ] ,"x":null} , "c" : {"d": 1e3} }"#
        );
        // Every way to change an object drops its text.
        type Change = fn(&mut Map);
        let changes: &[(&str, Change)] = &[
            ("insert", |m| {
                m.insert("z", Value::Null);
            }),
            ("get_mut", |m| {
                m.get_mut("a");
            }),
            ("remove", |m| {
                m.remove("a");
            }),
            ("entry", |m| {
                m.entry("a");
            }),
            ("get_or_insert_null", |m| {
                m.get_or_insert_null(&"a".into());
            }),
            ("iter_mut", |m| {
                let _ = m.iter_mut();
            }),
            ("values_mut", |m| {
                let _ = m.values_mut();
            }),
            ("sort_keys", Map::sort_keys),
            ("retain", |m| m.retain(|_, _| true)),
            ("clear", Map::clear),
            ("extend", |m| m.extend([("q", Value::Null)])),
            ("forget_text", Map::forget_text),
        ];
        for (name, change) in changes {
            let Some(Value::Object(mut m)) = from_slice(text) else {
                unreachable!()
            };
            assert!(m.text().is_some());
            change(&mut m);
            assert!(m.text().is_none(), "{name}");
        }
        // Read-only use keeps it, and so does a copy.
        let Some(Value::Object(m)) = from_slice(text) else {
            unreachable!()
        };
        let _ = (
            m.get("a"),
            m.iter().count(),
            m.keys().count(),
            m.contains_key("c"),
        );
        assert_eq!(m.clone().text(), m.text());
    }

    #[test]
    fn large_objects_keep_their_text_and_index() {
        let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\" : {i}")).collect();
        let text = format!("{{ {} }}", keys.join(" , "));
        let Some(Value::Object(mut m)) = from_slice(text.as_bytes()) else {
            unreachable!()
        };
        assert!(m.has_index());
        assert_eq!(m.text().map(|t| &t[..]), Some(text.as_bytes()));
        assert_eq!(m.get("k33"), Some(&Value::from(33)));
        m.insert("k40", Value::from(40));
        assert!(m.text().is_none());
        assert!(m.has_index());
        assert_eq!(m.get("k40"), Some(&Value::from(40)));
    }
}
