//! The local input adapter: reads stdin or files, one message per line.
//!
//! Reading happens on its own thread and hands the pipeline batches of messages, bounded in
//! lines and in bytes, through a bounded channel; what is read and not yet through the
//! pipeline is bounded in bytes too ([`ReadAhead`]), so memory stays flat however long the
//! input and its lines are. Each line is copied out of the read buffer into an allocation
//! of its own size.
//! Compressed input (gzip, bzip2, Zstandard, framed Snappy) is detected by its magic bytes
//! and decompressed (`sluice_cmd::compression`); a truncated stream is an error naming the
//! file and the format. A line longer than the limit is an error naming the file and line.
//!
//! Every line's message carries an acknowledgement token naming its place ([`LineReport`]),
//! so that a line whose messages were not all delivered (one that failed on its own, such as
//! a message without a lock key, or everything unfinished when the run failed) is named at
//! the end, by file and line, instead of disappearing. The tokens of a batch's lines share
//! one [`AckGroup`]: one allocation per batch, not a tracker per line.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sluice_engine::Message;
use sluice_engine::ack::{AckGroup, FailureWatch};
use sluice_engine::driver::ReadAhead;
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

const CHUNK: usize = 256 * 1024;

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
    tx: &mpsc::Sender<Vec<Message>>,
) -> Result<(), InputError> {
    for (source_index, src) in sources.iter().enumerate() {
        let name = src.name();
        let mut lines = Lines::new(&name, source_index, report);
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
        if !split_lines(stream, &mut lines, opts, read_ahead, tx)? {
            return Ok(());
        }
    }
    Ok(())
}

/// Who hears of the fate of the lines being split: the source's watch, and the group of
/// the batch being built (its lines' tokens share it, and it goes with the batch).
struct Lines {
    watch: Arc<SourceWatch>,
    group: Option<Arc<AckGroup>>,
}

impl Lines {
    fn new(source: &str, source_index: usize, report: &Arc<LineReport>) -> Lines {
        Lines {
            watch: Arc::new(SourceWatch {
                source: source.into(),
                source_index,
                report: report.clone(),
            }),
            group: None,
        }
    }

    fn message(&mut self, line: u64, data: Vec<u8>) -> Message {
        let token = match self.group.as_ref().and_then(|g| g.token(line)) {
            Some(t) => t,
            None => {
                let group = AckGroup::new(line, self.watch.clone());
                let t = group.token(line).expect("a group's first place is in it");
                self.group = Some(group);
                t
            }
        };
        let mut m = Message::new(Bytes::from(data));
        m.add_ack(token);
        m
    }

    /// The batch was handed on: the next line starts a group of its own.
    fn batch_sent(&mut self) {
        self.group = None;
    }
}

/// The scratch buffer of lines longer than the read buffer is kept up to this capacity
/// between lines, and freed after a longer one.
const SCRATCH_KEPT: usize = 4 << 20;

/// A line read by [`next_line`].
#[derive(Debug, PartialEq)]
struct Line {
    /// Its text without its end (`\n` or `\r\n`; a last line without `\n` loses a
    /// final `\r`), in an allocation of exactly its size: `Bytes` takes such a `Vec` as
    /// it is, and the worker that first shares the text (the parser, for an object's text)
    /// makes the shared count. A `Vec` with room to spare gets that count here, on the
    /// input's thread, and every message's first read then waits for a cache line from
    /// the other core, and its free goes back across threads.
    text: Vec<u8>,
    /// How many bytes were read for it, its end included.
    read: usize,
    /// Whether it ended with `\n` (else the input ended, or the bound was reached).
    ended: bool,
}

impl Line {
    /// The line `raw` (as read, its end included), copied without its end.
    fn of(raw: &[u8]) -> Line {
        let ended = raw.last() == Some(&b'\n');
        let mut keep = raw.len() - usize::from(ended);
        if keep > 0 && raw[keep - 1] == b'\r' {
            keep -= 1;
        }
        Line {
            text: raw[..keep].to_vec(),
            read: raw.len(),
            ended,
        }
    }
}

/// Reads the next line: lines within the read buffer are copied out of it, longer ones
/// gathered in `scratch` first (a line grown in place would hold up to twice its size, and
/// every doubling is fresh memory). At most `bound` bytes are read when no newline comes.
/// `None` at the end of input.
fn next_line(
    reader: &mut impl BufRead,
    scratch: &mut Vec<u8>,
    bound: usize,
) -> io::Result<Option<Line>> {
    scratch.clear();
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((!scratch.is_empty()).then(|| take_scratch(scratch)));
        }
        let window = &buf[..buf.len().min(bound - scratch.len())];
        if let Some(i) = memchr::memchr(b'\n', window) {
            let line = if scratch.is_empty() {
                Line::of(&window[..=i])
            } else {
                scratch.extend_from_slice(&window[..=i]);
                take_scratch(scratch)
            };
            reader.consume(i + 1);
            return Ok(Some(line));
        }
        let n = window.len();
        scratch.extend_from_slice(window);
        reader.consume(n);
        if scratch.len() >= bound {
            return Ok(Some(take_scratch(scratch)));
        }
    }
}

/// The line in `scratch`; `scratch` is left empty (and freed when it grew past
/// [`SCRATCH_KEPT`]).
fn take_scratch(scratch: &mut Vec<u8>) -> Line {
    let line = Line::of(scratch);
    if scratch.capacity() > SCRATCH_KEPT {
        *scratch = Vec::new();
    } else {
        scratch.clear();
    }
    line
}

/// Splits a stream into line messages; `false` when the receiver went away or the driver
/// stopped.
///
/// A batch is handed on when it holds `batch_messages` lines, or before a line would take
/// it past `batch_bytes` (a longer line goes alone), and whenever `read_ahead` is full, so
/// that the driver can release what it counts; then the reader waits on it.
fn split_lines(
    r: impl Read,
    lines: &mut Lines,
    opts: ReadOptions,
    read_ahead: &ReadAhead,
    tx: &mpsc::Sender<Vec<Message>>,
) -> Result<bool, InputError> {
    let name = lines.watch.source.clone();
    let name = &*name;
    let mut reader = BufReader::with_capacity(CHUNK, r);
    let mut scratch = Vec::new();
    let mut batch = Vec::with_capacity(opts.batch_messages.min(1024));
    let mut batch_bytes = 0usize;
    let mut line_no: u64 = 0;
    // Read at most the limit plus a CRLF, so a huge line is never held whole.
    let bound = opts.max_line_bytes.saturating_add(2);
    loop {
        if read_ahead.is_full() && !batch.is_empty() {
            batch_bytes = 0;
            if !send(tx, &mut batch, opts, lines) {
                return Ok(false);
            }
        }
        if !read_ahead.wait() {
            return Ok(false);
        }
        let Some(Line {
            text: line,
            read,
            ended,
        }) = next_line(&mut reader, &mut scratch, bound).map_err(|error| InputError::Io {
            source_name: name.to_string(),
            error,
        })?
        else {
            break;
        };
        line_no += 1;
        sluice_cmd::memory::message_read(read);
        if line.len() > opts.max_line_bytes || (!ended && read == bound) {
            return Err(InputError::LineTooLong {
                source_name: name.to_string(),
                line: line_no,
                limit: opts.max_line_bytes,
            });
        }
        if !batch.is_empty() && batch_bytes + line.len() > opts.batch_bytes {
            batch_bytes = 0;
            if !send(tx, &mut batch, opts, lines) {
                return Ok(false);
            }
        }
        read_ahead.add(line.len());
        batch_bytes += line.len();
        batch.push(lines.message(line_no, line));
        if batch.len() >= opts.batch_messages || batch_bytes >= opts.batch_bytes {
            batch_bytes = 0;
            if !send(tx, &mut batch, opts, lines) {
                return Ok(false);
            }
        }
    }
    if !batch.is_empty() {
        return Ok(send(tx, &mut batch, opts, lines));
    }
    Ok(true)
}

fn send(
    tx: &mpsc::Sender<Vec<Message>>,
    batch: &mut Vec<Message>,
    opts: ReadOptions,
    lines: &mut Lines,
) -> bool {
    lines.batch_sent();
    let full = std::mem::replace(batch, Vec::with_capacity(opts.batch_messages.min(1024)));
    tx.blocking_send(full).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn unbounded() -> ReadAhead {
        ReadAhead::new(usize::MAX)
    }

    fn lines(name: &str) -> Lines {
        Lines::new(name, 0, &Arc::default())
    }

    fn collect(data: &[u8], opts: ReadOptions) -> Result<Vec<String>, InputError> {
        let (tx, mut rx) = mpsc::channel(1024);
        split_lines(data, &mut lines("test"), opts, &unbounded(), &tx)?;
        drop(tx);
        let mut out = Vec::new();
        while let Ok(b) = rx.try_recv() {
            out.extend(
                b.into_iter()
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
        split_lines(data, &mut lines("test"), opts, &unbounded(), &tx).unwrap();
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
    fn lines_are_read_into_allocations_of_their_own_size_across_buffer_refills() {
        // A read buffer of 8 bytes: lines within it, across refills, and at the end.
        let long = "y".repeat(100);
        let input = format!("ab\n{long}\nc\r\n\nlast");
        let mut reader = BufReader::with_capacity(8, input.as_bytes());
        let mut scratch = Vec::new();
        let mut got = Vec::new();
        while let Some(line) = next_line(&mut reader, &mut scratch, 1000).unwrap() {
            // Exactly its size without its end: `Bytes` takes it without a shared count.
            assert_eq!(line.text.capacity(), line.text.len(), "{line:?}");
            got.push((String::from_utf8(line.text).unwrap(), line.read, line.ended));
        }
        assert_eq!(
            got,
            vec![
                ("ab".to_string(), 3, true),
                (long.clone(), 101, true),
                ("c".into(), 3, true),
                ("".into(), 1, true),
                ("last".into(), 4, false)
            ]
        );
        // A last line without `\n` loses a final `\r`; a `\r` within a line stays.
        let mut reader = BufReader::with_capacity(8, &b"a\rb\r"[..]);
        let last = next_line(&mut reader, &mut scratch, 1000).unwrap().unwrap();
        assert_eq!(
            (last.text, last.read, last.ended),
            (b"a\rb".to_vec(), 4, false)
        );
        // No newline within the bound: the bound's worth, then the rest.
        let mut reader = BufReader::with_capacity(8, &b"0123456789abcdef\n"[..]);
        assert_eq!(
            next_line(&mut reader, &mut scratch, 10).unwrap().unwrap(),
            Line {
                text: b"0123456789".to_vec(),
                read: 10,
                ended: false
            }
        );
        // A scratch buffer grown by a huge line is not kept.
        let huge = vec![b'z'; SCRATCH_KEPT + 10];
        let mut reader = BufReader::with_capacity(1 << 16, &huge[..]);
        let line = next_line(&mut reader, &mut scratch, usize::MAX)
            .unwrap()
            .unwrap();
        assert_eq!(line.text.len(), huge.len());
        assert_eq!(line.text.capacity(), huge.len());
        assert_eq!(scratch.capacity(), 0);
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
            split_lines(&ten_lines_of_100[..], &mut lines("test"), opts, &ra, &tx)
        });
        let mut sizes = Vec::new();
        while let Some(batch) = rx.blocking_recv() {
            // The limit, plus the line read when it was not reached yet.
            assert!(read_ahead.held() <= 249 + 100, "{}", read_ahead.held());
            sizes.push(batch.len());
            read_ahead.release(sluice_engine::driver::batch_bytes(&batch));
        }
        assert!(reader.join().unwrap().unwrap());
        assert_eq!(sizes, vec![3, 3, 3, 1]);
        // A closed bound stops the reader.
        read_ahead.close();
        let (tx, _rx) = mpsc::channel(16);
        assert!(!split_lines(&b"a\n"[..], &mut lines("test"), OPTS, &read_ahead, &tx).unwrap());
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
        let mut l = Lines::new("in.jsonl", 1, &report);
        split_lines(&b"a\nb\nc\n"[..], &mut l, OPTS, &unbounded(), &tx).unwrap();
        drop(tx);
        let mut msgs = Vec::new();
        while let Ok(b) = rx.try_recv() {
            msgs.extend(b);
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
        let b = rx.try_recv().unwrap();
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
