//! The local input adapter: reads stdin or files, one message per line.
//!
//! Reading happens on its own thread and hands the pipeline batches of messages, bounded in
//! lines and in bytes, through a bounded channel; what is read and not yet through the
//! pipeline is bounded in bytes too ([`ReadAhead`]), so memory stays flat however long the
//! input and its lines are. Lines are not copied here: a batch carries the part of the
//! read buffer they lie in, and each is copied into an allocation of its own size on the
//! worker that makes its message ([`BufferedLines`]), so this thread's work per line is
//! finding its end.
//! Compressed input (gzip, bzip2, Zstandard, framed Snappy) is detected by its magic bytes
//! and decompressed (`sluice_cmd::compression`); a truncated stream is an error naming the
//! file and the format. A line longer than the limit is an error naming the file and line.
//!
//! Every line's message carries an acknowledgement token naming its place ([`LineReport`]),
//! so that a line whose messages were not all delivered (one that failed on its own, such as
//! a message without a lock key, or everything unfinished when the run failed) is named at
//! the end, by file and line, instead of disappearing. The tokens of a batch's lines share
//! one [`sluice_engine::ack::AckGroup`]: one allocation per batch, not a tracker per line.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use sluice_engine::ack::FailureWatch;
use sluice_engine::driver::ReadAhead;
use sluice_engine::input::{BufferedLines, InputBatch};
use tokio::sync::mpsc;

/// Where lines come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Standard input.
    Stdin,
    /// A file.
    File(PathBuf),
}

impl Source {
    fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".to_string(),
            Source::File(p) => p.display().to_string(),
        }
    }
}

/// How input is cut into batches.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Messages per batch handed to the pipeline.
    pub batch_messages: usize,
    /// Bytes of lines per batch: a batch is handed on before a line would take it past
    /// this, whatever its count (a longer line goes alone).
    pub batch_bytes: usize,
    /// Longest line accepted, in bytes.
    pub max_line_bytes: usize,
}

/// An input problem, with where it happened.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be opened or read.
    #[error("{source_name}: {error}")]
    Io {
        /// The file.
        source_name: String,
        /// What failed.
        error: io::Error,
    },
    /// A line is longer than the limit.
    #[error("{source_name}:{line}: line is longer than {limit} bytes (raise --max-line-bytes)")]
    LineTooLong {
        /// The file.
        source_name: String,
        /// The line number.
        line: u64,
        /// The limit.
        limit: usize,
    },
}

/// A line whose messages were not all delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undelivered {
    /// The file (or `<stdin>`).
    pub source: Arc<str>,
    /// Its position among the inputs.
    pub source_index: usize,
    /// The line number, from 1.
    pub line: u64,
    /// Why, as the transform that failed it said.
    pub reason: String,
}

/// The lines that were not delivered, told by the tokens of every line as they are failed
/// (through each source's [`SourceWatch`], which only records, so memory grows with the
/// failures, not with the input).
#[derive(Default)]
pub struct LineReport {
    failed: Mutex<Vec<Undelivered>>,
}

/// The watch of every line of one source: a line's token holds its number, this the rest
/// of its place.
struct SourceWatch {
    source: Arc<str>,
    /// The source's position in the argument list (for ordering the report).
    source_index: usize,
    report: Arc<LineReport>,
}

impl FailureWatch for SourceWatch {
    fn failed(&self, line: u64, reason: &str) {
        self.report
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Undelivered {
                source: self.source.clone(),
                source_index: self.source_index,
                line,
                reason: reason.to_string(),
            });
    }
}

impl LineReport {
    /// The undelivered lines so far, in input order, each once with the first reason it
    /// was failed for (a line whose copies failed, or that failed twice, is told more than
    /// once).
    pub fn undelivered(&self) -> Vec<Undelivered> {
        let mut v = self
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // Stable: the first reason told stays first among a line's.
        v.sort_by_key(|u| (u.source_index, u.line));
        v.dedup_by_key(|u| (u.source_index, u.line));
        v
    }
}

/// Reads every source in order and sends batches of messages until done or the receiver
/// goes away. Runs on a blocking thread. What is read counts against `read_ahead` until the
/// driver releases it ([`sluice_engine::driver::drive_bounded`]).
pub fn read_all(
    sources: &[Source],
    opts: ReadOptions,
    report: &Arc<LineReport>,
    read_ahead: &ReadAhead,
    tx: &mpsc::Sender<InputBatch>,
) -> Result<(), InputError> {
    for (source_index, src) in sources.iter().enumerate() {
        let name = src.name();
        let lines = Lines::new(&name, source_index, report, opts.batch_messages);
        let io_err = |error: io::Error| InputError::Io {
            source_name: name.clone(),
            error,
        };
        let raw: Box<dyn Read> = match src {
            Source::Stdin => Box::new(io::stdin().lock()),
            Source::File(p) => Box::new(File::open(p).map_err(io_err)?),
        };
        let reader = BufReader::with_capacity(64 * 1024, raw);
        let (_, stream) = sluice_cmd::compression::decompressing(reader).map_err(io_err)?;
        if !split_lines(stream, &lines, opts, read_ahead, tx)? {
            return Ok(());
        }
    }
    Ok(())
}

/// Where a source's lines go: batches of [`BufferedLines`] whose failures its watch hears.
struct Lines {
    watch: Arc<SourceWatch>,
    /// Room made for lines in a new batch (`--batch-messages`, up to 1024).
    room: usize,
}

impl Lines {
    fn new(
        source: &str,
        source_index: usize,
        report: &Arc<LineReport>,
        batch_messages: usize,
    ) -> Lines {
        Lines {
            watch: Arc::new(SourceWatch {
                source: source.into(),
                source_index,
                report: report.clone(),
            }),
            room: batch_messages.min(1024),
        }
    }

    /// An empty batch whose first line is number `first`.
    fn batch(&self, first: u64) -> BufferedLines {
        BufferedLines::with_capacity(first, self.watch.clone(), self.room)
    }
}

/// Bytes read at a time: a read buffer's size (one that a longer line needs is larger).
const BLOCK: usize = 1 << 20;

/// A line found by [`ReadBuffer::next_line`].
#[derive(Debug, PartialEq)]
struct Line {
    /// Its text without its end (`\n` or `\r\n`; a last line without `\n` loses a
    /// final `\r`), in the read buffer.
    text: std::ops::Range<usize>,
    /// How many bytes were read for it, its end included.
    read: usize,
    /// Whether it ended with `\n` (else the input ended, or the bound was reached).
    ended: bool,
}

/// Reads a stream into buffers of [`BLOCK`] bytes and finds its lines in them, without
/// copying them: a batch carries the part of a buffer its lines lie in (split off the
/// buffer, which reads on into its rest), and each line is copied out on the worker that
/// makes its message ([`BufferedLines`]). Only a line cut by the end of a buffer is copied
/// here, into the next buffer.
struct ReadBuffer<R> {
    source: R,
    /// The size of a new buffer ([`BLOCK`], but for tests).
    block: usize,
    /// Zero-filled to its length once; `filled` bytes of it are read.
    buf: BytesMut,
    filled: usize,
    /// Where the next line starts.
    next: usize,
    ended: bool,
}

impl<R: Read> ReadBuffer<R> {
    fn new(source: R, block: usize) -> ReadBuffer<R> {
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
    fn next_line(&mut self, bound: usize, batch: &mut BufferedLines) -> io::Result<Option<Line>> {
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
    fn seal(&mut self, batch: &mut BufferedLines, at: usize) {
        batch.seal(self.buf.split_to(at).freeze());
        self.filled -= at;
        self.next -= at;
    }
}

/// Splits a stream into lines and hands them on in batches; `false` when the receiver
/// went away or the driver stopped.
///
/// A batch is handed on when it holds `batch_messages` lines, or before a line would take
/// it past `batch_bytes` (a longer line goes alone), and whenever `read_ahead` is full, so
/// that the driver can release what it counts; then the reader waits on it.
fn split_lines(
    r: impl Read,
    lines: &Lines,
    opts: ReadOptions,
    read_ahead: &ReadAhead,
    tx: &mpsc::Sender<InputBatch>,
) -> Result<bool, InputError> {
    split_buffered(ReadBuffer::new(r, BLOCK), lines, opts, read_ahead, tx)
}

/// [`split_lines`] from `reader`.
fn split_buffered(
    mut reader: ReadBuffer<impl Read>,
    lines: &Lines,
    opts: ReadOptions,
    read_ahead: &ReadAhead,
    tx: &mpsc::Sender<InputBatch>,
) -> Result<bool, InputError> {
    let name = lines.watch.source.clone();
    let name = &*name;
    let mut batch = lines.batch(1);
    let mut line_no: u64 = 0;
    // Read at most the limit plus a CRLF, so a huge line is never held whole.
    let bound = opts.max_line_bytes.saturating_add(2);
    loop {
        if read_ahead.is_full()
            && !batch.is_empty()
            && !send(tx, &mut batch, &mut reader, lines, None)
        {
            return Ok(false);
        }
        if !read_ahead.wait() {
            abandon(&mut batch, &mut reader, lines);
            return Ok(false);
        }
        let Some(Line {
            mut text,
            read,
            ended,
        }) = reader
            .next_line(bound, &mut batch)
            .map_err(|error| InputError::Io {
                source_name: name.to_string(),
                error,
            })?
        else {
            break;
        };
        line_no += 1;
        sluice_cmd::memory::message_read(read);
        if text.len() > opts.max_line_bytes || (!ended && read == bound) {
            return Err(InputError::LineTooLong {
                source_name: name.to_string(),
                line: line_no,
                limit: opts.max_line_bytes,
            });
        }
        if !batch.is_empty() && batch.bytes() + text.len() > opts.batch_bytes {
            // The batch ends before this line, which moves with the buffer's rest.
            if !send(tx, &mut batch, &mut reader, lines, Some(text.start)) {
                return Ok(false);
            }
            text = 0..text.len();
        }
        read_ahead.add(text.len());
        batch.push(text);
        if (batch.len() >= opts.batch_messages || batch.bytes() >= opts.batch_bytes)
            && !send(tx, &mut batch, &mut reader, lines, None)
        {
            return Ok(false);
        }
    }
    if !batch.is_empty() {
        return Ok(send(tx, &mut batch, &mut reader, lines, None));
    }
    Ok(true)
}

/// Hands on `batch`, its lines' part of the read buffer up to `at` (else to where the
/// next line starts), and starts the next batch; `false` when the receiver went away.
fn send(
    tx: &mpsc::Sender<InputBatch>,
    batch: &mut BufferedLines,
    reader: &mut ReadBuffer<impl Read>,
    lines: &Lines,
    at: Option<usize>,
) -> bool {
    match tx.blocking_send(take_read(batch, reader, lines, at)) {
        Ok(()) => true,
        Err(mpsc::error::SendError(unsent)) => {
            unsent.fail(STOPPED);
            false
        }
    }
}

/// Why lines read and never handed to the pipeline were not delivered: it stopped (after an
/// error, which the run reports) before it took them.
const STOPPED: &str = "not processed: the pipeline stopped at an error";

/// Fails the lines of `batch` (read, not handed on) when the pipeline stopped, so that they
/// are named as not delivered with the lines it had taken.
fn abandon(batch: &mut BufferedLines, reader: &mut ReadBuffer<impl Read>, lines: &Lines) {
    if !batch.is_empty() {
        take_read(batch, reader, lines, None).fail(STOPPED);
    }
}

/// Takes `batch` with its lines' part of the read buffer up to `at` (else to where the
/// next line starts), leaving the next batch in its place.
fn take_read(
    batch: &mut BufferedLines,
    reader: &mut ReadBuffer<impl Read>,
    lines: &Lines,
    at: Option<usize>,
) -> InputBatch {
    reader.seal(batch, at.unwrap_or(reader.next));
    std::mem::replace(batch, lines.batch(batch.next_line())).into()
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn unbounded() -> ReadAhead {
        ReadAhead::new(usize::MAX)
    }

    fn lines(name: &str) -> Lines {
        Lines::new(name, 0, &Arc::default(), 1024)
    }

    fn collect(data: &[u8], opts: ReadOptions) -> Result<Vec<String>, InputError> {
        collect_in(data, opts, BLOCK)
    }

    /// The lines read from `data` with read buffers of `block` bytes.
    fn collect_in(data: &[u8], opts: ReadOptions, block: usize) -> Result<Vec<String>, InputError> {
        let (tx, mut rx) = mpsc::channel(1024);
        let reader = ReadBuffer::new(data, block);
        split_buffered(reader, &lines("test"), opts, &unbounded(), &tx)?;
        drop(tx);
        let mut out = Vec::new();
        while let Ok(b) = rx.try_recv() {
            out.extend(
                b.into_messages()
                    .iter()
                    .map(|m| String::from_utf8_lossy(m.data()).into_owned()),
            );
        }
        Ok(out)
    }

    const OPTS: ReadOptions = ReadOptions {
        batch_messages: 2,
        batch_bytes: 1 << 20,
        max_line_bytes: 16,
    };

    /// The sizes of the batches `data` is cut into.
    fn batch_sizes(data: &[u8], opts: ReadOptions) -> Vec<usize> {
        let (tx, mut rx) = mpsc::channel(1024);
        split_lines(data, &lines("test"), opts, &unbounded(), &tx).unwrap();
        drop(tx);
        let mut out = Vec::new();
        while let Ok(b) = rx.try_recv() {
            out.push(b.len());
        }
        out
    }

    #[test]
    fn a_batch_closes_at_its_count_or_before_its_bytes() {
        let opts = |batch_messages, batch_bytes| ReadOptions {
            batch_messages,
            batch_bytes,
            max_line_bytes: 1 << 20,
        };
        let ten_lines_of_100: Vec<u8> = (0..10)
            .flat_map(|_| {
                let mut l = vec![b'x'; 100];
                l.push(b'\n');
                l
            })
            .collect();
        // (messages, bytes) -> batch sizes: a batch never holds more than its bytes, unless
        // one line is longer (it then goes alone).
        let table: &[(usize, usize, &[usize])] = &[
            (4, 1 << 20, &[4, 4, 2]),
            (1024, 250, &[2, 2, 2, 2, 2]),
            (1024, 300, &[3, 3, 3, 1]),
            (1024, 100, &[1; 10]),
            (1024, 99, &[1; 10]),
            (1, 250, &[1; 10]),
            (1024, 1 << 20, &[10]),
        ];
        for &(messages, bytes, want) in table {
            assert_eq!(
                batch_sizes(&ten_lines_of_100, opts(messages, bytes)),
                want,
                "{messages} messages, {bytes} bytes"
            );
        }
    }

    #[test]
    fn lines_are_the_same_whatever_the_read_buffers_and_batches() {
        // Lines within a buffer, cut by its end, longer than it, at the end, and batches
        // closed by count and by bytes (before a line, which moves with the buffer's rest).
        let long = "y".repeat(100);
        let input = format!("ab\n{long}\nc\r\n\n\r\nlast\r");
        let want = ["ab", long.as_str(), "c", "", "", "last"];
        for block in [1, 2, 3, 7, 8, 64, 101, 102, BLOCK] {
            for (messages, bytes) in [(1, 1 << 20), (2, 1 << 20), (1024, 3), (1024, 1 << 20)] {
                let opts = ReadOptions {
                    batch_messages: messages,
                    batch_bytes: bytes,
                    max_line_bytes: 1000,
                };
                assert_eq!(
                    collect_in(input.as_bytes(), opts, block).unwrap(),
                    want,
                    "block {block}, {messages} messages, {bytes} bytes"
                );
            }
        }
        // A `\r` within a line stays.
        assert_eq!(collect_in(b"a\rb\r", OPTS, 2).unwrap(), ["a\rb"]);
        // A line of exactly the limit, with its CRLF, across buffers; one byte more is an
        // error, even when its buffer holds less than the bound.
        let at_limit = format!("{}\r\n", "z".repeat(16));
        assert_eq!(
            collect_in(at_limit.as_bytes(), OPTS, 5).unwrap(),
            ["z".repeat(16)]
        );
        let over = format!("ok\n{}\r\n", "z".repeat(17));
        for block in [5, 64] {
            let e = collect_in(over.as_bytes(), OPTS, block).unwrap_err();
            assert!(e.to_string().starts_with("test:2: line is longer"), "{e}");
        }
    }

    /// A source that gives at most `most` bytes a read, and is interrupted before every
    /// other read (as a pipe read by a signalled process is).
    struct Trickle<'a> {
        data: &'a [u8],
        most: usize,
        interrupt: bool,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(self.most).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn short_and_interrupted_reads_give_the_same_lines() {
        let input = b"first\nsecond line\r\n\nthird\nlast";
        for most in [1, 2, 5, 64] {
            for block in [4, 16, BLOCK] {
                let (tx, mut rx) = mpsc::channel(1024);
                let source = Trickle {
                    data: input,
                    most,
                    interrupt: false,
                };
                let opts = ReadOptions {
                    batch_messages: 2,
                    batch_bytes: 1 << 20,
                    max_line_bytes: 100,
                };
                let reader = ReadBuffer::new(source, block);
                assert!(split_buffered(reader, &lines("test"), opts, &unbounded(), &tx).unwrap());
                drop(tx);
                let mut got = Vec::new();
                while let Ok(b) = rx.try_recv() {
                    for m in b.into_messages() {
                        got.push(String::from_utf8(m.data().to_vec()).unwrap());
                    }
                }
                assert_eq!(
                    got,
                    ["first", "second line", "", "third", "last"],
                    "{most} bytes a read, buffers of {block}"
                );
            }
        }
    }

    #[test]
    fn a_line_longer_than_a_buffer_moves_to_one_twice_its_size_so_far() {
        let mut reader = ReadBuffer::new(&b"0123456789abcdef\nx\n"[..], 4);
        let mut batch = lines("test").batch(1);
        let line = reader.next_line(100, &mut batch).unwrap().unwrap();
        assert_eq!((line.text, line.read, line.ended), (0..16, 17, true));
        // 4, then 8 (4 read so far), then 16 (8), then 32 (16): each move copies the
        // line's bytes so far once.
        assert_eq!(reader.buf.len(), 32);
        assert!(batch.is_empty());
    }

    #[test]
    fn a_full_read_ahead_hands_on_the_batch_being_built_and_waits() {
        let read_ahead = Arc::new(ReadAhead::new(250));
        let (tx, mut rx) = mpsc::channel(16);
        let ten_lines_of_100: Vec<u8> = (0..10)
            .flat_map(|_| {
                let mut l = vec![b'x'; 100];
                l.push(b'\n');
                l
            })
            .collect();
        let ra = read_ahead.clone();
        let reader = std::thread::spawn(move || {
            let opts = ReadOptions {
                batch_messages: 1024,
                batch_bytes: 1 << 20,
                max_line_bytes: 1 << 20,
            };
            split_lines(&ten_lines_of_100[..], &lines("test"), opts, &ra, &tx)
        });
        let mut sizes = Vec::new();
        while let Some(batch) = rx.blocking_recv() {
            // The limit, plus the line read when it was not reached yet.
            assert!(read_ahead.held() <= 249 + 100, "{}", read_ahead.held());
            sizes.push(batch.len());
            read_ahead.release(batch.data_bytes());
        }
        assert!(reader.join().unwrap().unwrap());
        assert_eq!(sizes, vec![3, 3, 3, 1]);
        // A closed bound stops the reader.
        read_ahead.close();
        let (tx, _rx) = mpsc::channel(16);
        assert!(!split_lines(&b"a\n"[..], &lines("test"), OPTS, &read_ahead, &tx).unwrap());
    }

    /// Lines read that the pipeline never took (it stopped) are named as not delivered:
    /// a batch the driver no longer receives, and one in hand when the bound closes.
    #[test]
    fn lines_read_after_the_pipeline_stopped_are_named_not_delivered() {
        let named = |report: &LineReport| -> Vec<(u64, String)> {
            report
                .undelivered()
                .into_iter()
                .map(|u| (u.line, u.reason))
                .collect()
        };
        let report = Arc::new(LineReport::default());
        let (tx, rx) = mpsc::channel(16);
        drop(rx);
        let opts = ReadOptions {
            batch_messages: 2,
            ..OPTS
        };
        let read = split_lines(
            &b"a\nb\nc\n"[..],
            &Lines::new("in", 0, &report, 2),
            opts,
            &unbounded(),
            &tx,
        );
        assert!(!read.unwrap(), "stops");
        assert_eq!(
            named(&report),
            [(1, STOPPED.to_string()), (2, STOPPED.to_string())],
            "the batch it could not hand on (line 3 was never read)"
        );

        /// Closes the bound once its data is read.
        struct ClosesBound<'a>(&'a [u8], &'a ReadAhead);
        impl Read for ClosesBound<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.read(buf)?;
                self.1.close();
                Ok(n)
            }
        }
        let report = Arc::new(LineReport::default());
        let bound = unbounded();
        let (tx, _rx) = mpsc::channel(16);
        let reader = ReadBuffer::new(ClosesBound(b"a\nb\n", &bound), BLOCK);
        let read = split_buffered(reader, &Lines::new("in", 0, &report, 2), OPTS, &bound, &tx);
        assert!(!read.unwrap(), "stops");
        assert_eq!(
            named(&report),
            [(1, STOPPED.to_string())],
            "the line in hand"
        );
    }

    #[test]
    fn lines_table() {
        let cases: &[(&[u8], &[&str])] = &[
            (b"a\nb\nc\n", &["a", "b", "c"]),
            (b"a\nb", &["a", "b"]),
            (b"a\r\nb\r\n", &["a", "b"]),
            (b"\n\n", &["", ""]),
            (b"", &[]),
            (b"\xff\xfe\n", &["\u{fffd}\u{fffd}"]),
        ];
        for (input, want) in cases {
            assert_eq!(collect(input, OPTS).unwrap(), *want, "{input:?}");
        }
    }

    #[test]
    fn long_lines_are_errors_with_their_line_number() {
        let e = collect(b"ok\n0123456789abcdefXYZ\n", OPTS).unwrap_err();
        assert_eq!(
            e.to_string(),
            "test:2: line is longer than 16 bytes (raise --max-line-bytes)"
        );
        let e = collect(b"0123456789abcdefXYZ", OPTS).unwrap_err();
        assert!(e.to_string().starts_with("test:1:"), "{e}");
    }

    #[test]
    fn lines_whose_messages_fail_are_reported_with_their_place() {
        let (tx, mut rx) = mpsc::channel(16);
        let report: Arc<LineReport> = Arc::default();
        let l = Lines::new("in.jsonl", 1, &report, OPTS.batch_messages);
        split_lines(&b"a\nb\nc\n"[..], &l, OPTS, &unbounded(), &tx).unwrap();
        drop(tx);
        let mut msgs = Vec::new();
        while let Ok(b) = rx.try_recv() {
            msgs.extend(b.into_messages());
        }
        // Two batches of two lines and one (OPTS), so two groups; line 3 is failed on a
        // copy, then again, and is named once with the first reason.
        let copy = msgs[2].clone();
        copy.fail_acks("throttled");
        msgs[2].fail_acks("refused");
        msgs[1].fail_acks("no key");
        drop((msgs, copy));
        let at = |line, reason: &str| Undelivered {
            source: "in.jsonl".into(),
            source_index: 1,
            line,
            reason: reason.into(),
        };
        assert_eq!(
            report.undelivered(),
            vec![at(2, "no key"), at(3, "throttled")]
        );
    }

    #[test]
    fn gzip_files_are_detected_and_truncation_reported() {
        let dir = std::env::temp_dir().join(format!("sluice-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"x\ny\n").unwrap();
        let gz = enc.finish().unwrap();
        let good = dir.join("good.gz");
        std::fs::write(&good, &gz).unwrap();
        let bad = dir.join("bad.gz");
        std::fs::write(&bad, &gz[..gz.len() - 6]).unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let report = Arc::default();
        read_all(&[Source::File(good)], OPTS, &report, &unbounded(), &tx).unwrap();
        let b = rx.try_recv().unwrap().into_messages();
        assert_eq!(
            b.iter().map(|m| &m.data()[..]).collect::<Vec<_>>(),
            vec![b"x", b"y"]
        );
        let e = read_all(
            &[Source::File(bad.clone())],
            OPTS,
            &report,
            &unbounded(),
            &tx,
        )
        .unwrap_err();
        assert!(e.to_string().contains("bad.gz"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
