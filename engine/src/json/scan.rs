//! Where a string's plain run ends: the first quote, backslash or control byte, the bytes
//! that end a JSON string's plain text when it is read and that must be escaped when it is
//! written. Most of what a reader passes over is string text, and most of a document's
//! strings are passed over unread (`parse.rs`), so this is the reader's inner loop: sixteen
//! bytes a step with SSE2 (part of every x86-64 processor), eight elsewhere.

use super::write::escapes_in;

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

/// Where the run of plain string bytes from `i` ends: at a quote, a backslash, a control
/// byte or the end of `b`.
#[inline]
pub(super) fn plain_run(b: &[u8], i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    return sixteen_at_a_time(b, i);
    #[cfg(not(target_arch = "x86_64"))]
    eight_at_a_time(b, i)
}

/// [`plain_run`] sixteen bytes a step, the last part shorter than a block (only the end of
/// a document: `b` is all of it) eight at a time.
#[cfg(target_arch = "x86_64")]
#[inline]
fn sixteen_at_a_time(b: &[u8], mut i: usize) -> usize {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of x86-64 itself (every x86-64 processor has it, and the
    // compiler assumes it on this target), so its instructions can run; each load reads a
    // block of sixteen bytes of `b` that `get` found there, and needs no alignment.
    unsafe {
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        let last_control = _mm_set1_epi8(0x1f);
        while let Some(block) = b.get(i..i + 16).and_then(<[u8]>::first_chunk::<16>) {
            let x = _mm_loadu_si128(block.as_ptr().cast());
            // A control byte is one the unsigned minimum with 0x1f leaves as it is.
            let stops = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                _mm_cmpeq_epi8(_mm_min_epu8(x, last_control), x),
            );
            let mask = _mm_movemask_epi8(stops) as u32;
            if mask != 0 {
                return i + mask.trailing_zeros() as usize;
            }
            i += 16;
        }
    }
    eight_at_a_time(b, i)
}

/// [`plain_run`] eight bytes a step while it can, the stop within a word found from the
/// lowest byte its mask flags (the mask is exact up to the first stop), then byte by byte.
#[cfg_attr(target_arch = "x86_64", cold, inline(never))]
#[cfg_attr(not(target_arch = "x86_64"), inline)]
fn eight_at_a_time(b: &[u8], mut i: usize) -> usize {
    while let Some(word) = b.get(i..i + 8).and_then(<[u8]>::first_chunk::<8>) {
        let stops = escapes_in(u64::from_le_bytes(*word));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte by byte, the definition.
    fn plain_run_slowly(b: &[u8], i: usize) -> usize {
        (i..b.len())
            .find(|&j| STRING_STOP[b[j] as usize])
            .unwrap_or(b.len())
    }

    #[test]
    fn a_run_ends_at_the_first_stop_wherever_it_is_table() {
        // Every stop byte (and bytes next to them that are not stops) at every place of
        // the first three blocks, from every start, with a second stop after it.
        let stops = [b'"', b'\\', 0x00, 0x01, 0x1f];
        let plain = [b'a', 0x20, 0x21, b'[', b']', 0x7f, 0x80, 0xc3, 0xff];
        for &stop in &stops {
            for &fill in &plain {
                for at in 0..48 {
                    let mut b = vec![fill; 60];
                    b[at] = stop;
                    b[(at + 5).min(59)] = b'"';
                    for start in 0..=at {
                        assert_eq!(
                            plain_run(&b, start),
                            plain_run_slowly(&b, start),
                            "stop {stop:#x} at {at} from {start} in {fill:#x}"
                        );
                    }
                }
            }
        }
        for len in 0..40 {
            let b = vec![b'x'; len];
            for start in 0..=len {
                assert_eq!(
                    plain_run(&b, start),
                    len,
                    "no stop, {len} bytes from {start}"
                );
            }
        }
        // Every byte value alone in a block.
        for v in 0..=255u8 {
            let mut b = vec![b'x'; 40];
            b[17] = v;
            assert_eq!(plain_run(&b, 0), plain_run_slowly(&b, 0), "byte {v:#x}");
        }
    }
}
