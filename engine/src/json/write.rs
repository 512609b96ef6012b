//! JSON text written directly, without serde's per-value dispatch: as it goes out of a
//! pipeline (objects and arrays parsed and unchanged as their text) or compact.

use super::{Array, Map, Value};

/// JSON text of `v`, appended to `out`, as it goes out of a pipeline: an object or array
/// parsed from text is written as that text (its spacing and number forms kept), with the
/// changes made since spliced in as Substation's SJSON makes them (`splice.rs`); everything
/// else compact, the same bytes as `serde_json::to_writer`.
pub fn write_json(out: &mut Vec<u8>, v: &Value) {
    write(out, v, true)
}

/// Compact JSON text of `v`, appended to `out`, whatever text it was parsed from (GJSON's
/// `@ugly`): the same bytes as `serde_json::to_writer`, written directly (no serializer
/// dispatch per value; runs of plain characters are copied at once).
pub fn write_compact(out: &mut Vec<u8>, v: &Value) {
    write(out, v, false)
}

fn write(out: &mut Vec<u8>, v: &Value, keep_text: bool) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if let Some(i) = n.as_u64() {
                out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
            } else if let Some(i) = n.as_i64() {
                out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
            } else if let Some(f) = n.as_f64() {
                // A float, finite (as serde_json's numbers are), in the text serde_json
                // writes for one.
                out.extend_from_slice(zmij::Buffer::new().format_finite(f).as_bytes());
            } else {
                // serde_json has no other kind of number; were there one, its `Display`
                // text would be right.
                push_display(out, n);
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(a) => array(out, a, keep_text),
        Value::Object(m) => object(out, m, keep_text),
    }
}

/// [`write_json`] of an array.
pub(super) fn write_array(out: &mut Vec<u8>, a: &Array) {
    array(out, a, true)
}

/// [`write_json`] of an object.
pub(super) fn write_map(out: &mut Vec<u8>, m: &Map) {
    object(out, m, true)
}

fn array(out: &mut Vec<u8>, a: &Array, keep_text: bool) {
    if keep_text && let Some(text) = a.source() {
        if !text.changed {
            return out.extend_from_slice(&text.bytes);
        }
        if super::splice::write_spliced_array(out, a, text) {
            return;
        }
    }
    out.push(b'[');
    for (i, x) in a.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, x, keep_text);
    }
    out.push(b']');
}

fn object(out: &mut Vec<u8>, m: &Map, keep_text: bool) {
    if keep_text && let Some(text) = m.source() {
        match &text.members {
            _ if !text.changed => return out.extend_from_slice(&text.bytes),
            Some(members) if super::splice::write_spliced(out, m, &text.bytes, members) => {
                return;
            }
            _ => {}
        }
    }
    out.push(b'{');
    for (i, (k, x)) in m.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, k);
        out.push(b':');
        write(out, x, keep_text);
    }
    out.push(b'}');
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
pub(super) fn word_needs_escape(w: u64) -> bool {
    escapes_in(w) != 0
}

/// Non-zero when any of the 8 bytes of `w` must be escaped; the results of several words
/// can be or-ed and tested once.
#[inline]
pub(super) fn escapes_in(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    let q = w ^ (ONES * b'"' as u64);
    let quote = q.wrapping_sub(ONES) & !q;
    let b = w ^ (ONES * b'\\' as u64);
    let backslash = b.wrapping_sub(ONES) & !b;
    (control | quote | backslash) & HIGHS
}

/// Appends `v`'s `Display` text to `out`. The sink cannot fail, and a `Display` impl fails
/// only when its sink does, so formatting has no error to report.
fn push_display(out: &mut Vec<u8>, v: &impl std::fmt::Display) {
    struct Sink<'a>(&'a mut Vec<u8>);
    impl std::fmt::Write for Sink<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.extend_from_slice(s.as_bytes());
            Ok(())
        }
    }
    let _ = std::fmt::Write::write_fmt(&mut Sink(out), format_args!("{v}"));
}

/// Whether `bytes` hold nothing to escape, read in words straight from where they are (a
/// word loaded from a staging buffer written piece by piece stalls until the pieces are
/// stored: that was most of this function's time): eight bytes at a time with the last word
/// overlapping, or two overlapping halves, or up to three bytes padded with a plain one.
#[inline]
fn plain(bytes: &[u8]) -> bool {
    if let Some(&last) = bytes.last_chunk::<8>() {
        // The whole words that end before the last byte, then the last eight bytes.
        let (words, _) = bytes[..bytes.len() - 1].as_chunks::<8>();
        for &w in words {
            if escapes_in(u64::from_le_bytes(w)) != 0 {
                return false;
            }
        }
        return escapes_in(u64::from_le_bytes(last)) == 0;
    }
    let w = if let (Some(&lo), Some(&hi)) = (bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
        u64::from(u32::from_le_bytes(lo)) | u64::from(u32::from_le_bytes(hi)) << 32
    } else {
        bytes
            .iter()
            .enumerate()
            .fold(u64::from_le_bytes(*b"aaaaaaaa"), |w, (i, &b)| {
                w & !(0xff << (8 * i)) | u64::from(b) << (8 * i)
            })
    };
    escapes_in(w) == 0
}

/// `s` as a JSON string. Most keys and values have nothing to escape: quote, text and
/// quote, inlined where it is called (called, the function saved and restored registers for
/// its escaping loop on every string, a fifth of its instructions); the rest is
/// [`write_escaped`].
#[inline(always)]
pub(super) fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if plain(bytes) {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
    } else {
        write_escaped(out, bytes);
    }
}

/// [`write_str`] of a string with something to escape.
#[inline(never)]
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Skip eight plain bytes at a time.
        if let Some(&w) = bytes.get(i..i + 8).and_then(<[u8]>::first_chunk::<8>)
            && !word_needs_escape(u64::from_le_bytes(w))
        {
            i += 8;
            continue;
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
