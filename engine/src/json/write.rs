//! JSON text written directly, without serde's per-value dispatch: as it goes out of a
//! pipeline (objects and arrays parsed and unchanged as their text) or compact.
//!
//! Written through [`Out`], a cursor into the output's spare capacity: each object member
//! makes room once for its key and a scalar value (a string value makes room for itself),
//! and everything in that room is stored with no capacity check and no length update;
//! short keys and strings are copied in words, checked for escapes as they go, and numbers
//! are written where they go. (Pushed byte by byte and piece by piece onto the `Vec`, the
//! checks, the length kept in memory and a `memcpy` call per key were most of the time.)

use super::{Array, Map, Value};

/// JSON text of `v`, appended to `out`, as it goes out of a pipeline: an object or array
/// parsed from text is written as that text (its spacing and number forms kept), with the
/// changes made since spliced in as Substation's SJSON makes them (`splice.rs`); everything
/// else compact, the same bytes as `serde_json::to_writer`.
pub fn write_json(out: &mut Vec<u8>, v: &Value) {
    let mut out = Out::new(out);
    out.room(SCALAR_ROOM + 1);
    value(&mut out, v, true);
}

/// Compact JSON text of `v`, appended to `out`, whatever text it was parsed from (GJSON's
/// `@ugly`): the same bytes as `serde_json::to_writer`, written directly (no serializer
/// dispatch per value; runs of plain characters are copied at once).
pub fn write_compact(out: &mut Vec<u8>, v: &Value) {
    let mut out = Out::new(out);
    out.room(SCALAR_ROOM + 1);
    value(&mut out, v, false);
}

/// [`write_json`] of an array.
pub(super) fn write_array(out: &mut Vec<u8>, a: &Array) {
    array(&mut Out::new(out), a, true)
}

/// [`write_json`] of an object.
pub(super) fn write_map(out: &mut Vec<u8>, m: &Map) {
    object(&mut Out::new(out), m, true)
}

/// `s` as a JSON string.
pub(super) fn write_str(out: &mut Vec<u8>, s: &str) {
    string(&mut Out::new(out), s.as_bytes())
}

/// The most bytes a value other than a string, an array or an object takes: `false`, or a
/// number (20 digits and a sign for an integer, 24 bytes at most for a float, as `zmij`
/// writes it).
const SCALAR_ROOM: usize = 24;

/// The bytes being appended to a `Vec`: written from `at` on into its spare capacity, up to
/// `cap`, and made part of it (its length set) when done, or before the `Vec` is handed to
/// code that pushes onto it.
///
/// Invariant: `base` and `cap` are the `Vec`'s pointer and capacity, its length is at most
/// `at`, `at <= cap`, and the bytes below `at` are initialised. Room asked for with
/// [`Out::room`] stays: the capacity of a `Vec` only grows, so every place below the
/// furthest end asked for (`promised`, followed in debug builds, where every write checks
/// it) can be written without a check.
struct Out<'a> {
    vec: &'a mut Vec<u8>,
    base: *mut u8,
    at: usize,
    cap: usize,
    /// The furthest end of the room asked for (debug builds: writes check they are in it).
    #[cfg(debug_assertions)]
    promised: usize,
}

impl<'a> Out<'a> {
    #[inline]
    fn new(vec: &'a mut Vec<u8>) -> Out<'a> {
        let at = vec.len();
        Out {
            base: vec.as_mut_ptr(),
            cap: vec.capacity(),
            vec,
            at,
            #[cfg(debug_assertions)]
            promised: at,
        }
    }

    /// Makes room for `n` more bytes from `at`.
    #[inline(always)]
    fn room(&mut self, n: usize) {
        if self.cap - self.at < n {
            self.grow(n);
        }
        #[cfg(debug_assertions)]
        {
            self.promised = self.promised.max(self.at + n);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        self.commit();
        self.vec.reserve(n);
        self.base = self.vec.as_mut_ptr();
        self.cap = self.vec.capacity();
    }

    /// Sets the `Vec`'s length to what was written.
    #[inline]
    fn commit(&mut self) {
        // SAFETY: `at <= cap`, and the bytes below `at` are initialised (the invariant).
        unsafe { self.vec.set_len(self.at) }
    }

    /// Hands the `Vec`, with what was written so far, to `f`, which appends to it.
    #[inline(never)]
    fn with_vec<R>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        self.commit();
        let r = f(self.vec);
        self.at = self.vec.len();
        self.base = self.vec.as_mut_ptr();
        self.cap = self.vec.capacity();
        #[cfg(debug_assertions)]
        {
            self.promised = self.promised.max(self.at);
        }
        r
    }

    /// The place `k` bytes from `at`, checked in debug builds to be in the room asked for.
    #[inline(always)]
    #[cfg_attr(not(debug_assertions), allow(unused_variables))]
    fn end_of(&self, k: usize) -> *mut u8 {
        #[cfg(debug_assertions)]
        assert!(
            self.at + k <= self.promised,
            "written past the room asked for"
        );
        // SAFETY: `at + k <= promised <= cap` (the room asked for, see `Out`), so the place
        // is inside (or one past) the `Vec`'s allocation.
        unsafe { self.base.add(self.at) }
    }

    /// Appends `b`, in the room asked for.
    #[inline(always)]
    fn put(&mut self, b: u8) {
        let p = self.end_of(1);
        // SAFETY: `end_of(1)` checked that one byte at `at` is in the room asked for.
        unsafe { p.write(b) };
        self.at += 1;
    }

    /// Appends `N` bytes, in the room asked for (one store).
    #[inline(always)]
    fn put_n<const N: usize>(&mut self, bytes: [u8; N]) {
        let p = self.end_of(N);
        // SAFETY: `end_of(N)` checked that `N` bytes at `at` are in the room asked for.
        unsafe { p.cast::<[u8; N]>().write_unaligned(bytes) };
        self.at += N;
    }

    /// Replaces the last byte written (a comma) with `b`.
    #[inline(always)]
    fn replace_last(&mut self, b: u8) {
        debug_assert!(self.at > 0);
        // SAFETY: the caller wrote a byte just before; it is below `at`, in the allocation.
        unsafe { self.base.add(self.at - 1).write(b) };
    }

    /// Appends `bytes`, making room for them and one more byte.
    #[inline]
    fn slice(&mut self, bytes: &[u8]) {
        self.room(bytes.len() + 1);
        let p = self.end_of(bytes.len());
        // SAFETY: `end_of` checked the room for `bytes.len()` bytes at `at`; `bytes` is
        // not in the `Vec`'s allocation, which `Out` borrows mutably.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
        self.at += bytes.len();
    }

    /// Appends the first `n` of the 8 `bytes` (stored all, in the room asked for: the ones
    /// past `n` are written over by what follows, or left past the end).
    #[inline(always)]
    fn put_word(&mut self, bytes: [u8; 8], n: usize) {
        debug_assert!(n <= 8);
        let p = self.end_of(8);
        // SAFETY: `end_of(8)` checked that 8 bytes at `at` are in the room asked for.
        unsafe { p.cast::<[u8; 8]>().write_unaligned(bytes) };
        self.at += n;
    }

    /// Appends `bytes` (at most [`SCALAR_ROOM`] of them), in the room asked for, copied in
    /// words (see [`copy_checked`]).
    #[inline(always)]
    fn short(&mut self, bytes: &[u8]) {
        let p = self.end_of(bytes.len());
        // SAFETY: `end_of` checked the room for `bytes.len()` bytes at `at`, and `bytes`
        // is not in the `Vec`'s allocation, which `Out` borrows mutably.
        unsafe { copy_checked(bytes, p) };
        self.at += bytes.len();
    }

    /// Appends `n`'s decimal digits, in the room asked for (20 bytes at most).
    #[inline(always)]
    fn u64(&mut self, n: u64) {
        let len = decimal_len(n);
        let p = self.end_of(len);
        // SAFETY: `end_of` checked the room for the `len` digits at `at`.
        unsafe { put_digits(p, len, n) };
        self.at += len;
    }
}

impl Drop for Out<'_> {
    fn drop(&mut self) {
        self.commit();
    }
}

/// Writes `v`, with room for a scalar and one more byte asked for; leaves room for one more
/// byte after it.
fn value(out: &mut Out, v: &Value, keep_text: bool) {
    element(out, v, keep_text)
}

/// [`value`], inlined where an object's members and an array's elements are written: one
/// match on all six kinds. (Strings, arrays and objects matched first and the scalars in a
/// second match, the variant was decoded and compared up to eight times a value.)
#[inline(always)]
fn element(out: &mut Out, v: &Value, keep_text: bool) {
    match v {
        Value::String(s) => string(out, s.as_bytes()),
        Value::Number(n) => number(out, n),
        Value::Object(m) => object(out, m, keep_text),
        Value::Array(a) => array(out, a, keep_text),
        Value::Bool(true) => out.put_n(*b"true"),
        Value::Bool(false) => out.put_n(*b"false"),
        Value::Null => out.put_n(*b"null"),
    }
}

/// Writes `n` as serde_json does, in the room asked for ([`SCALAR_ROOM`]).
#[inline(always)]
fn number(out: &mut Out, n: &serde_json::Number) {
    if let Some(i) = n.as_u64() {
        out.u64(i);
    } else if let Some(i) = n.as_i64() {
        out.put(b'-');
        out.u64(i.unsigned_abs());
    } else {
        float(out, n);
    }
}

#[inline(never)]
fn float(out: &mut Out, n: &serde_json::Number) {
    if let Some(f) = n.as_f64() {
        // A float, finite (as serde_json's numbers are), in the text serde_json writes
        // for one (24 bytes at most).
        out.short(zmij::Buffer::new().format_finite(f).as_bytes());
    } else {
        // serde_json has no other kind of number; were there one, its `Display` text
        // would be right.
        let text = n.to_string();
        out.slice(text.as_bytes());
    }
}

fn array(out: &mut Out, a: &Array, keep_text: bool) {
    if keep_text && let Some(text) = a.source() {
        if !text.changed {
            return out.slice(&text.bytes);
        }
        if out.with_vec(|v| super::splice::write_spliced_array(v, a, text)) {
            return out.room(1);
        }
    }
    out.room(2);
    out.put(b'[');
    let mut any = false;
    for x in a.iter() {
        out.room(SCALAR_ROOM + 1);
        element(out, x, keep_text);
        out.put(b',');
        any = true;
    }
    close(out, any, b']');
}

/// Closes an array or object: the last comma written, if `any` value was, becomes
/// `bracket`. Leaves room for one more byte.
#[inline(always)]
fn close(out: &mut Out, any: bool, bracket: u8) {
    out.room(2);
    if any {
        out.replace_last(bracket);
    } else {
        out.put(bracket);
    }
}

fn object(out: &mut Out, m: &Map, keep_text: bool) {
    if keep_text && let Some(text) = m.source() {
        match &text.members {
            _ if !text.changed => return out.slice(&text.bytes),
            Some(members)
                if out.with_vec(|v| super::splice::write_spliced(v, m, &text.bytes, members)) =>
            {
                return out.room(1);
            }
            _ => {}
        }
    }
    out.room(2);
    out.put(b'{');
    let mut any = false;
    for e in &m.read().entries {
        if e.tag >> 56 < 8 {
            // The key, quoted (written as a word), its colon, a scalar value and the comma.
            out.room(8 + 3 + SCALAR_ROOM);
            short_key(out, e.tag, &e.key);
        } else {
            let k = e.key.as_bytes();
            // The key, quoted, its colon, a scalar value and the comma after it.
            out.room(k.len() + 4 + SCALAR_ROOM);
            key(out, k);
        }
        element(out, &e.value, keep_text);
        out.put(b',');
        any = true;
    }
    close(out, any, b'}');
}

/// Writes a key of at most seven bytes quoted and its colon, in the room asked for (eight
/// bytes and two), from its tag (`map::tag`: the length in the top byte, the bytes below
/// it, zero past the key): the opening quote and the key go as one word, and the key's
/// bytes are checked for escapes in that word, none of them read from the key itself (a
/// key's bytes are found by decoding its representation, and copied and checked by length:
/// most of the time of writing a short key).
#[inline(always)]
fn short_key(out: &mut Out, tag: u64, k: &compact_str::CompactString) {
    debug_assert_eq!(tag, super::map::tag(k.as_bytes()));
    let len = (tag >> 56) as usize;
    let bytes = tag & 0x00ff_ffff_ffff_ffff;
    // The bytes past the key (zero, to be escaped) are left out: a byte's mark in
    // `escapes_in` is exact but for bytes above one to escape, so one among the key's
    // bytes is marked exactly when one of them is to be escaped.
    let key_bytes = (1u64 << (8 * len)) - 1;
    if escapes_in(bytes) & key_bytes == 0 {
        out.put_word(((bytes << 8) | u64::from(b'"')).to_le_bytes(), 1 + len);
        out.put_n(*b"\":");
    } else {
        key(out, k.as_bytes());
    }
}

/// Writes `k` quoted and its colon, in the room asked for (its length and three bytes).
#[inline(always)]
fn key(out: &mut Out, k: &[u8]) {
    out.put(b'"');
    let p = out.end_of(k.len());
    // SAFETY: `end_of` checked the room for `k.len()` bytes at `at`, and `k` is not in the
    // `Vec`'s allocation, which `Out` borrows mutably.
    if unsafe { copy_checked(k, p) } {
        out.at += k.len();
        out.put_n(*b"\":");
    } else {
        out.at -= 1;
        out.with_vec(|v| write_escaped(v, k));
        // Its colon, a scalar value and the comma after it.
        out.room(SCALAR_ROOM + 2);
        out.put(b':');
    }
}

/// Writes `s` as a JSON string, making room for it; leaves room for one more byte.
#[inline(always)]
fn string(out: &mut Out, s: &[u8]) {
    out.room(s.len() + 3);
    out.put(b'"');
    let p = out.end_of(s.len());
    // SAFETY: `end_of` checked the room for `s.len()` bytes at `at`, and `s` is not in the
    // `Vec`'s allocation, which `Out` borrows mutably.
    if unsafe { copy_checked(s, p) } {
        out.at += s.len();
        out.put(b'"');
    } else {
        // What was copied is overwritten.
        out.at -= 1;
        out.with_vec(|v| write_escaped(v, s));
        out.room(1);
    }
}

/// Copies `src` to `dst` in pieces read straight from `src` (16 bytes and the last 16,
/// overlapping, or 8 and the last 8, or 4 and the last 4, or the first, middle and last
/// bytes), and says whether it holds nothing to escape, checked 16 bytes at a time on the
/// pieces read. (A piece loaded from a staging buffer written piece by piece stalls until
/// the pieces are stored, so the pieces are read where the bytes are.) Longer than 32
/// bytes, it is checked in pieces and copied at once.
///
/// # Safety
/// `dst` is valid for writing `src.len()` bytes, and does not overlap `src`.
#[inline(always)]
unsafe fn copy_checked(src: &[u8], dst: *mut u8) -> bool {
    let n = src.len();
    // SAFETY (every write below): each writes inside `dst..dst + n`: 16 bytes at an offset
    // at most `n - 16`, 8 at most `n - 8`, 4 at most `n - 4`, a byte below `n`.
    if n > 32 {
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n) };
        return plain(src);
    }
    if let (Some(&lo), Some(&hi)) = (src.first_chunk::<16>(), src.last_chunk::<16>()) {
        unsafe {
            dst.cast::<[u8; 16]>().write_unaligned(lo);
            dst.add(n - 16).cast::<[u8; 16]>().write_unaligned(hi);
        }
        return !escapes16(lo) && !escapes16(hi);
    }
    let (a, b) = if let (Some(&a), Some(&b)) = (src.first_chunk::<8>(), src.last_chunk::<8>()) {
        unsafe {
            dst.cast::<[u8; 8]>().write_unaligned(a);
            dst.add(n - 8).cast::<[u8; 8]>().write_unaligned(b);
        }
        (u64::from_le_bytes(a), u64::from_le_bytes(b))
    } else if let (Some(&lo), Some(&hi)) = (src.first_chunk::<4>(), src.last_chunk::<4>()) {
        unsafe {
            dst.cast::<[u8; 4]>().write_unaligned(lo);
            dst.add(n - 4).cast::<[u8; 4]>().write_unaligned(hi);
        }
        let w = u64::from(u32::from_le_bytes(lo)) | u64::from(u32::from_le_bytes(hi)) << 32;
        (w, w)
    } else if let (Some(&a), Some(&b), Some(&c)) = (src.first(), src.get(n / 2), src.last()) {
        // One to three bytes: the first, the middle and the last cover them.
        unsafe {
            dst.write(a);
            dst.add(n / 2).write(b);
            dst.add(n - 1).write(c);
        }
        let w = u64::from_le_bytes(*b"aaaaa\0\0\0") << 24
            | u64::from(a)
            | u64::from(b) << 8
            | u64::from(c) << 16;
        (w, w)
    } else {
        return true;
    };
    !escapes_in_words(a, b)
}

/// Whether any of the 16 bytes of the words `a` and `b` must be escaped.
#[inline(always)]
fn escapes_in_words(a: u64, b: u64) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::_mm_set_epi64x;
        // SAFETY: SSE2 is part of x86_64.
        escapes_in_vector(unsafe { _mm_set_epi64x(b as i64, a as i64) })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        escapes_in(a) | escapes_in(b) != 0
    }
}

/// Whether any of the 16 bytes of `v` must be escaped.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn escapes_in_vector(v: std::arch::x86_64::__m128i) -> bool {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86_64.
    unsafe {
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // A byte below 0x20 is the one left zero by taking 0x1f off, saturating.
        let control = _mm_cmpeq_epi8(_mm_subs_epu8(v, _mm_set1_epi8(0x1f)), _mm_setzero_si128());
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) != 0
    }
}

/// Whether any of the 16 bytes must be escaped (a control character, `"` or `\\`).
#[inline(always)]
fn escapes16(x: [u8; 16]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of x86_64; the load reads the 16 bytes of `x`.
        escapes_in_vector(unsafe { std::arch::x86_64::_mm_loadu_si128(x.as_ptr().cast()) })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let word = |w: Option<&[u8; 8]>| w.map_or(0, |w| u64::from_le_bytes(*w));
        escapes_in(word(x.first_chunk::<8>())) | escapes_in(word(x.last_chunk::<8>())) != 0
    }
}

/// How many decimal digits `n` has: its bit length times log10(2) (as 1233/4096, rounded
/// down) is the count of digits or one less, told apart by one comparison with a power of
/// ten. (`checked_ilog10` took ~25 instructions, two multiplications among them.)
#[inline(always)]
fn decimal_len(n: u64) -> usize {
    let bits = u64::BITS - (n | 1).leading_zeros();
    let t = ((bits * 1233) >> 12) as usize;
    // `t` is at most 19 (64 bits); the mask only spares the bounds check.
    t + usize::from(n >= DIGITS_FROM[t & 31])
}

/// The least number of `i + 1` digits, at `i` (0 at 0, so that 0 has one digit; past 19,
/// more than any `u64`, never read).
const DIGITS_FROM: [u64; 32] = {
    let mut t = [u64::MAX; 32];
    t[0] = 0;
    let mut p = 10u64;
    let mut i = 1;
    while i < 20 {
        t[i] = p;
        p = p.wrapping_mul(10);
        i += 1;
    }
    t
};

/// The two digits of every number below 100.
const PAIRS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// Writes the `len` decimal digits of `n` at `dst`, two at a time from the last.
///
/// # Safety
/// `len` is [`decimal_len`]`(n)`, and `dst` is valid for writing `len` bytes.
#[inline(always)]
unsafe fn put_digits(dst: *mut u8, len: usize, mut n: u64) {
    debug_assert_eq!(len, decimal_len(n));
    let mut end = len;
    // SAFETY (every write): `n` has `end` digits left, so `end >= 2` while `n >= 10`, and
    // `end >= 1` always: each write is inside `dst..dst + len`.
    while n >= 100 {
        end -= 2;
        unsafe {
            dst.add(end)
                .cast::<[u8; 2]>()
                .write_unaligned(PAIRS[(n % 100) as usize])
        };
        n /= 100;
    }
    if n >= 10 {
        unsafe { dst.cast::<[u8; 2]>().write_unaligned(PAIRS[n as usize]) };
    } else {
        unsafe { dst.write(b'0' + n as u8) };
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

/// Whether `bytes` hold nothing to escape: 16 at a time, the last 16 overlapping the ones
/// before (byte by byte when fewer).
#[inline]
fn plain(bytes: &[u8]) -> bool {
    let Some(&last) = bytes.last_chunk::<16>() else {
        return bytes.iter().all(|&b| ESCAPE[b as usize] == 0);
    };
    let (pieces, _) = bytes[..bytes.len() - 1].as_chunks::<16>();
    pieces.iter().all(|&p| !escapes16(p)) && !escapes16(last)
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

#[cfg(test)]
mod tests;
