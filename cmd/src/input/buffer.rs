//! Finding lines in what is read, without copying them ([`ReadBuffer`]).

use std::io::{self, Read};

use bytes::BytesMut;
use sluice_engine::input::BufferedLines;

/// Bytes read at a time: a read buffer's size (one that a longer line needs is larger).
pub(super) const BLOCK: usize = 1 << 20;

/// A line found by [`ReadBuffer::next_line`].
#[derive(Debug, PartialEq)]
pub(super) struct Line {
    /// Its text without its end (`\n` or `\r\n`; a last line without `\n` loses a
    /// final `\r`), in the read buffer.
    pub(super) text: std::ops::Range<usize>,
    /// How many bytes were read for it, its end included.
    pub(super) read: usize,
    /// Whether it ended with `\n` (else the input ended, or the bound was reached).
    pub(super) ended: bool,
}

/// Reads a stream into buffers of [`BLOCK`] bytes and finds its lines in them, without
/// copying them: a batch carries the part of a buffer its lines lie in (split off the
/// buffer, which reads on into its rest), and each line is copied out on the worker that
/// makes its message ([`BufferedLines`]). Only a line cut by the end of a buffer is copied
/// here, into the next buffer.
pub(super) struct ReadBuffer<R> {
    source: R,
    /// The size of a new buffer ([`BLOCK`], but for tests).
    block: usize,
    /// Zero-filled to its length once; `filled` bytes of it are read.
    buf: BytesMut,
    filled: usize,
    /// Where the next line starts.
    pub(super) next: usize,
    ended: bool,
}

impl<R: Read> ReadBuffer<R> {
    pub(super) fn new(source: R, block: usize) -> ReadBuffer<R> {
        ReadBuffer {
            source,
            block: block.max(1),
            buf: BytesMut::new(),
            filled: 0,
            next: 0,
            ended: false,
        }
    }

    /// The next line, its range relative to the buffer's start. At most `bound` bytes are
    /// taken when no newline comes. When the line is cut by the end of the buffer, the
    /// lines before it go to `batch` ([`BufferedLines::seal`]) and the line moves to a new
    /// buffer. `None` at the end of input.
    pub(super) fn next_line(
        &mut self,
        bound: usize,
        batch: &mut BufferedLines,
    ) -> io::Result<Option<Line>> {
        let mut searched = self.next;
        loop {
            let window = self.filled.min(self.next.saturating_add(bound));
            if let Some(i) = memchr::memchr(b'\n', &self.buf[searched..window]) {
                let end = searched + i;
                return Ok(Some(self.take(end + 1, true)));
            }
            searched = window;
            if window - self.next >= bound {
                return Ok(Some(self.take(window, false)));
            }
            if self.ended {
                return Ok((self.filled > self.next).then(|| self.take(self.filled, false)));
            }
            if self.filled == self.buf.len() {
                searched -= self.next;
                self.renew(batch);
            }
            match self.source.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.ended = true,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The line from `next` to `to` (its end included when `ended`).
    fn take(&mut self, to: usize, ended: bool) -> Line {
        let start = self.next;
        self.next = to;
        let mut end = to - usize::from(ended);
        if end > start && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        Line {
            text: start..end,
            read: to - start,
            ended,
        }
    }

    /// Moves the unfinished line to a new buffer (of [`BLOCK`] bytes, or twice the line's
    /// so far), giving the lines before it to `batch`.
    fn renew(&mut self, batch: &mut BufferedLines) {
        let partial = self.filled - self.next;
        let mut fresh = BytesMut::zeroed(self.block.max(partial.saturating_mul(2)));
        fresh[..partial].copy_from_slice(&self.buf[self.next..self.filled]);
        let mut old = std::mem::replace(&mut self.buf, fresh);
        old.truncate(self.next);
        batch.seal(old.freeze());
        self.filled = partial;
        self.next = 0;
    }

    /// Gives `batch` the part of the buffer before `at`, where its lines lie; the buffer
    /// reads on into the rest, and its places move back by `at`.
    pub(super) fn seal(&mut self, batch: &mut BufferedLines, at: usize) {
        batch.seal(self.buf.split_to(at).freeze());
        self.filled -= at;
        self.next -= at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::ack::FailureWatch;
    use std::sync::Arc;

    struct Ignore;
    impl FailureWatch for Ignore {
        fn failed(&self, _: u64, _: &str) {}
    }

    #[test]
    fn a_line_longer_than_a_buffer_moves_to_one_twice_its_size_so_far() {
        let mut reader = ReadBuffer::new(&b"0123456789abcdef\nx\n"[..], 4);
        let mut batch = BufferedLines::new(1, Arc::new(Ignore));
        let line = reader.next_line(100, &mut batch).unwrap().unwrap();
        assert_eq!((line.text, line.read, line.ended), (0..16, 17, true));
        // 4, then 8 (4 read so far), then 16 (8), then 32 (16): each move copies the
        // line's bytes so far once.
        assert_eq!(reader.buf.len(), 32);
        assert!(batch.is_empty());
    }
}
